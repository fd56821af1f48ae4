// Suite: typed SQL, the describer of `@pgpipe/pgpipe/typegen` (src/typegen/describer.ts). How
// long describing N queries takes (Parse/Describe pipelined on one connection, each statement's
// parse tree read for nullability, the catalog asked once per batch), against the bench's server
// and against an in-process PGlite with the migrations applied, for N = 50, 500 and 2000: how it
// scales. The PGlite describer's start (WASM, initdb, the migrations) is timed on its own. The
// issue's goals: 500 queries under 5 s against a server, under 10 s with --migrations including
// PGlite's start. The schema is the describer test's (test/fixtures/typegen_schema).
import postgres from "../../mod.ts";
import { openDescriber } from "../../src/typegen/describer.ts";
import { readMigrations } from "../../src/typegen/migrations.ts";
import { benchUrl, isQuick } from "../shared/env.ts";
import { fmt, Report } from "../shared/report.ts";
import { median } from "../shared/stats.ts";

const MIGRATIONS = new URL("../../test/fixtures/typegen_schema/", import.meta.url).pathname;
const SIZES = [50, 500, 2000];
const rounds = isQuick() ? 2 : 7;
const starts = isQuick() ? 1 : 3;

/** N distinct queries, a mix of the shapes a program has: joins, `*`, inserts, aggregates. */
function queries(n: number): string[] {
  return Array.from({ length: n }, (_, i) =>
    [
      `select u.id, u.name, u.email, p.title, p.body, ${i} as k from tg_users u ` +
      `left join tg_posts p on p.author_id = u.id where u.id = $1 and u.name <> $2`,
      `select * from tg_everything where id = $1 limit ${i + 1}`,
      `insert into tg_posts (author_id, title, body) values ($1, $2, $3) returning id, ${i} as k`,
      `select mood, count(*) as n${i}, max(created_at) as latest from tg_users group by mood`,
    ][i % 4]);
}

// The server side: a database of the suite's own with the schema.
const admin = postgres(benchUrl(), { onnotice: () => {} });
const name = "bench_typegen";
await admin.unsafe(`drop database if exists ${name}`);
await admin.unsafe(`create database ${name}`);
const url = new URL(benchUrl());
url.pathname = `/${name}`;
const setup = postgres(url.href, { onnotice: () => {} });
for (const statement of await readMigrations(MIGRATIONS)) await setup.unsafe(statement.text);
await setup.end();

/** Median ms of describing `n` queries in one call, over `rounds` calls. */
async function describeTimes(describer: Awaited<ReturnType<typeof openDescriber>>) {
  const out = new Map<number, number>();
  for (const n of SIZES) {
    const texts = queries(n);
    await describer.describe(texts.slice(0, 20)); // warm the catalog and the JIT
    const samples: number[] = [];
    for (let r = 0; r < rounds; r++) {
      const t0 = performance.now();
      const results = await describer.describe(texts);
      samples.push(performance.now() - t0);
      if (!results.every((x) => x.ok)) throw new Error("a bench query failed to describe");
    }
    out.set(n, median(samples));
  }
  return out;
}

const serverOpen: number[] = [];
let server = new Map<number, number>();
for (let s = 0; s < starts; s++) {
  const t0 = performance.now();
  const describer = await openDescriber({ database: url.href }, {});
  serverOpen.push(performance.now() - t0);
  if (s === 0) server = await describeTimes(describer);
  await describer.close();
}

const pgliteOpen: number[] = [];
let embedded = new Map<number, number>();
for (let s = 0; s < starts; s++) {
  const t0 = performance.now();
  const describer = await openDescriber({ migrations: MIGRATIONS }, {});
  pgliteOpen.push(performance.now() - t0);
  if (s === 0) embedded = await describeTimes(describer);
  await describer.close();
}
await admin.unsafe(`drop database ${name}`);
await admin.end();

const report = new Report("typegen");
report.table(
  `Describing N queries in one call (median ms of ${rounds}); the PGlite describer has the ` +
    `migrations applied`,
  "queries | server ms | server µs per query | PGlite ms | PGlite µs per query",
  SIZES.map((n) => [
    String(n),
    fmt(server.get(n)!, 0),
    fmt((server.get(n)! * 1000) / n, 0),
    fmt(embedded.get(n)!, 0),
    fmt((embedded.get(n)! * 1000) / n, 0),
  ]),
);
const openServer = median(serverOpen);
const openPGlite = median(pgliteOpen);
report.table(
  `Opening a describer (median ms of ${starts}), and the issue's 500-query totals`,
  "source | open ms | open + 500 queries ms | goal ms",
  [
    ["server (--database)", fmt(openServer, 0), fmt(openServer + server.get(500)!, 0), "5000"],
    [
      "PGlite with migrations (--migrations)",
      fmt(openPGlite, 0),
      fmt(openPGlite + embedded.get(500)!, 0),
      "10000",
    ],
  ],
);
report.note(
  "Each query is a Parse + Describe on one connection, all of a call's sent at once; the " +
    "session logs each statement's parse tree (debug_print_parse), which the describer reads " +
    "for nullability, and asks the catalog once per call for NOT NULL columns and types.",
  "PGlite's open is its start in this process (WASM and initdb, in memory) and the two " +
    "migration files of test/fixtures/typegen_schema.",
);
await report.emit();
