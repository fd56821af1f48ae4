// deno-lint-ignore-file no-import-prefix -- the ORM is a bench-only npm import, pinned here
// What the live `sql.options.parsers` cost a workload with no ORM: pgpipe untouched against
// pgpipe after `drizzle(sql)` installed its entries (and, with PGPIPE_BENCH_AGAINST=<another
// checkout's mod.ts>, against that tree), on one connection, in rounds with the starting client
// rotated (bench/shared/stacks.ts); each case checks its answers.
import assert from "node:assert/strict";
import { drizzle } from "npm:drizzle-orm@0.45.4/postgres-js";
// drizzle-orm/postgres-js loads postgres.js (bench/shared/orm_app.ts says why); it never connects.
import "npm:postgres@3.4.9";
import postgres from "../../mod.ts";
import { ask } from "../shared/ask.ts";
import { localPostmaster } from "../shared/cpu.ts";
import { isQuick, plainBenchUrl } from "../shared/env.ts";
import { fmt, Report } from "../shared/report.ts";
import { type Case, clientOf, CPU_NOTE, type Factory, type Group } from "../shared/stacks.ts";
import { groupTable, medianMs, runGroup, type Sql, type Stack } from "../shared/stacks.ts";

/** Rounds of each case (more than the orm suite's: the differences are small). */
const ROUNDS = isQuick() ? 5 : 60;
const UNTOUCHED = "pgpipe, tables untouched";
const INSTALLED = "pgpipe, Drizzle's entries installed";
const AGAINST = "other checkout (PGPIPE_BENCH_AGAINST)";
const log = (s: string) => console.log(`parsers: ${s}`);
const pgpipe = postgres as unknown as Factory;
const against = Deno.env.get("PGPIPE_BENCH_AGAINST");

const PIPELINED = 1_000;
const ROWS = 10_000;

const parserCases: Case<Sql>[] = [
  {
    name: `${fmt(PIPELINED)} concurrent select $1::int`,
    queries: PIPELINED,
    async run(sql, _round, t) {
      t.start();
      const rows = await Promise.all(
        Array.from({ length: PIPELINED }, (_, i) => sql`select ${i}::int as x`),
      );
      t.end();
      rows.forEach(([row], i) => assert.equal(row.x, i));
    },
  },
  {
    name: `${fmt(ROWS)} rows of int4, text, float8, bool`,
    queries: 1,
    async run(sql, _round, t) {
      t.start();
      const rows = await sql`select i, 'name ' || i as t, i * 0.5::float8 as f, i % 2 = 0 as b
        from generate_series(1, ${ROWS}::int) i`;
      t.end();
      assert.deepEqual(rows[ROWS - 1], { i: ROWS, t: `name ${ROWS}`, f: ROWS / 2, b: true });
    },
  },
];

function pgpipeWith(name: string, factory: Factory, install: boolean): Stack<Sql> {
  return {
    name,
    open(max) {
      const sql = clientOf(factory, max);
      if (install) drizzle(sql as any); // installs Drizzle's parsers and serializers
      return Promise.resolve({ c: sql, close: () => sql.end() });
    },
  };
}

/** The other checkout's postgres(), given PGPIPE_BENCH_AGAINST. */
const other: Factory | undefined = against === undefined
  ? undefined
  : (await import(new URL(against, `file://${Deno.cwd()}/`).href)).default;
const parsers: Group<Sql> = {
  title: "The live parser tables on a workload without an ORM (one connection)",
  stacks: [
    pgpipeWith(UNTOUCHED, pgpipe, false),
    pgpipeWith(INSTALLED, pgpipe, true),
    ...(other ? [pgpipeWith(AGAINST, other, false)] : []),
  ],
  cases: parserCases,
  pools: [1],
  rounds: ROUNDS,
};

const postmaster = await ask(plainBenchUrl(), "select pg_backend_pid()", localPostmaster);
const report = new Report("parsers");
const parserResults = await runGroup(parsers, postmaster, log);
groupTable(report, parsers, parserResults, UNTOUCHED, "untouched over it");
for (const k of parsers.cases) {
  const base = medianMs(parserResults, 1, UNTOUCHED, k.name);
  const ms = (stack: string) => medianMs(parserResults, 1, stack, k.name);
  const extra = (label: string, against: string, over: number) =>
    report.measure(`live parser tables, ${label}: ${k.name}`, against, 100 * over, "%");
  extra("Drizzle's entries installed, extra time", UNTOUCHED, ms(INSTALLED) / base - 1);
  if (against !== undefined) {
    extra("untouched, extra time over the other checkout", AGAINST, base / ms(AGAINST) - 1);
  }
}
report.note(
  CPU_NOTE,
  `The parser table case: "${INSTALLED}" ran drizzle(sql) on a fresh pgpipe client ` +
    `(its date/time parsers and json serializers), then the same tagged-template queries ` +
    `as the untouched client, whose columns Drizzle's entries do not cover.` +
    (against === undefined
      ? " PGPIPE_BENCH_AGAINST=<another checkout's mod.ts> adds that tree's row."
      : ` "${AGAINST}": the tree whose mod.ts that variable names.`),
  `The machine is shared: compare ratios within one run.`,
);
await report.emit();
