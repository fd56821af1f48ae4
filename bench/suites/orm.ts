// deno-lint-ignore-file no-import-prefix -- the ORMs are bench-only npm imports, pinned here
// What an ORM's statements cost over pgpipe and over postgres.js. The same Drizzle program
// (drizzle-orm/postgres-js) runs over postgres.js, over pgpipe, over pgpipe with
// `force_prepare` and through pgpipe's own Drizzle entry: 50 concurrent selects through the
// query builder, one relational findMany with two nested levels, 200 concurrent inserts; beside
// them the parts of each case (Drizzle alone over a client answering from memory, each driver
// alone with Drizzle's statements). Kysely runs through kysely-postgres-js over postgres.js and
// over pgpipe, and on pgpipe's own dialect: 100 concurrent selects, 200 concurrent inserts. Each
// stack runs with one connection (the case, where the targets apply) and with
// postgres.js's default pool of 10, in rounds with the starting stack rotated
// (bench/shared/stacks.ts); each case checks its answers. The same Drizzle handler under load
// is the orm_http suite.
import assert from "node:assert/strict";
import { and, eq, gte, lt } from "npm:drizzle-orm@0.45.4";
import { drizzle } from "npm:drizzle-orm@0.45.4/postgres-js";
import { Kysely } from "npm:kysely@^0.28.19";
import { PostgresJSDialect } from "npm:kysely-postgres-js@3.0.0";
import postgres from "../../mod.ts";
import { PgpipeDialect } from "../../kysely.ts";
import { drizzle as pgpipeDrizzle } from "../../drizzle.ts";
import { POSTGRES_JS } from "../peers/specifiers.ts";
import { ask } from "../shared/ask.ts";
import { localPostmaster } from "../shared/cpu.ts";
import { benchUrl, isQuick, plainBenchUrl, sslOf } from "../shared/env.ts";
import { AUTHORS, COMMENTS, type Db, DROP_SQL, inserts, type KyselyDb } from "../shared/orm_app.ts";
import { POSTS, schema, SEED_SQL, USERS, users, USERS_TABLE } from "../shared/orm_app.ts";
import { fmt, formatRatio, Report } from "../shared/report.ts";
import { type Case, clientOf, CPU_NOTE, type Factory, type Group } from "../shared/stacks.ts";
import { groupTable, medianMs, Meter, type Results } from "../shared/stacks.ts";
import { runGroup, type Sql, type Stack, WARMUP } from "../shared/stacks.ts";
import { rotated, Samples } from "../shared/stats.ts";

const url = benchUrl();
/** Rounds of each case (the figures are medians of 30). */
const ROUNDS = isQuick() ? 5 : 30;
/** The pool sizes: one connection (the case), and postgres.js's default. */
const POOLS = [1, 10];
const PG = "postgres.js";
const PGPIPE = "pgpipe";
const FORCED = "pgpipe, force_prepare";
const SUBPATH = "pgpipe, @pgpipe/pgpipe/drizzle";
const KPJS_PG = "kysely-postgres-js + postgres.js";
const KPJS_PGPIPE = "kysely-postgres-js + pgpipe";
const DIALECT = "pgpipe's dialect";
const log = (s: string) => console.log(`orm: ${s}`);

const postgresJs = (await import(POSTGRES_JS)).default as Factory;
const pgpipe = postgres as unknown as Factory;

// ------------------------------------------------------------------ Drizzle

const SELECTS = 50;
const KYSELY_SELECTS = 100;
const INSERTS = 200;
const FIND_USERS = 10;
let batches = 0;

/** `n` user ids for a round, different in every round (the same statement text each time). */
const idsFor = (round: number, n: number) =>
  Array.from({ length: n }, (_, i) => 1 + ((round + 100) * n + i) % USERS);

const admin = postgres(url, { max: 1, ssl: sslOf(url), onnotice: () => {} });

/** Checks a batch's inserts all landed. */
async function checkBatch(batch: number, n: number, who: string) {
  const [{ n: count }] = await admin`select count(*)::int as n from bench_orm_inserts
    where batch = ${batch}`;
  assert.equal(count, n, `${who}: ${n} inserts left ${count} rows`);
}

const insertRow = (batch: number, i: number) => ({
  batch,
  name: `row ${i}`,
  active: i % 2 === 0,
  createdAt: new Date(Date.UTC(2024, 0, 1, 0, 0, i)),
  data: { i, tags: ["a", "b"] },
});

/** The Drizzle queries of the cases, built the same way for the stacks and for the parts. */
const selectUser = (db: Db, id: number) => db.select().from(users).where(eq(users.id, id));
const findUsers = (db: Db, from: number) =>
  db.query.users.findMany({
    where: and(gte(users.id, from), lt(users.id, from + FIND_USERS)),
    orderBy: users.id,
    with: { posts: { with: { comments: true } } },
  });
const insertOne = (db: Db, batch: number, i: number) =>
  db.insert(inserts).values(insertRow(batch, i));
const firstOfTen = (round: number) => 1 + ((round + 100) * FIND_USERS) % (AUTHORS - FIND_USERS);

/** A Drizzle case, and its queries (for what Drizzle alone costs). */
interface DrizzleCase extends Case<Db> {
  workload(db: Db, round: number): (PromiseLike<unknown> & { toSQL(): unknown })[];
}

const drizzleCases: DrizzleCase[] = [
  {
    name: `${SELECTS} concurrent selects`,
    queries: SELECTS,
    workload: (db, round) => idsFor(round, SELECTS).map((id) => selectUser(db, id)),
    async run(db, round, t) {
      const ids = idsFor(round, SELECTS);
      t.start();
      const rows = await Promise.all(ids.map((id) => selectUser(db, id)));
      t.end();
      rows.forEach(([row], i) => {
        assert.equal(row.id, ids[i]);
        assert.ok(row.createdAt instanceof Date && typeof row.data === "object");
      });
    },
  },
  {
    name: "relational findMany, two nested levels",
    queries: 1,
    workload: (db, round) => [findUsers(db, firstOfTen(round))],
    async run(db, round, t) {
      const from = firstOfTen(round);
      t.start();
      const found = await findUsers(db, from);
      t.end();
      assert.equal(found.length, FIND_USERS);
      for (const [i, u] of found.entries()) {
        assert.equal(u.id, from + i);
        assert.equal(u.posts.length, POSTS);
        for (const p of u.posts) {
          assert.equal(p.authorId, u.id);
          assert.ok(p.publishedAt instanceof Date);
          assert.equal(p.comments.length, COMMENTS);
        }
      }
    },
  },
  {
    name: `${INSERTS} concurrent inserts`,
    queries: INSERTS,
    workload: (db, round) => Array.from({ length: INSERTS }, (_, i) => insertOne(db, round, i)),
    async run(db, _round, t) {
      const batch = ++batches;
      t.start();
      await Promise.all(Array.from({ length: INSERTS }, (_, i) => insertOne(db, batch, i)));
      t.end();
      await checkBatch(batch, INSERTS, "Drizzle");
    },
  },
];

/**
 * A client that answers Drizzle at once from memory, as a driver would after its parsers (with
 * Drizzle's entries: timestamptz as the server's text): a select by id gets that user's row
 * made up from its parameter, an insert a count, any other query the answer `recorded` holds
 * for its text (the relational query's, read once from the server).
 */
function answeringClient(recorded: Map<string, unknown[][]>) {
  const row = (id: number) => [
    id,
    `User ${id}`,
    `user${id}@example.com`,
    "2024-01-01 00:07:13+00",
    true,
    "12.30",
    { plan: "pro", logins: id % 97, tags: ["t1", "t2"] },
  ];
  const unsafe = (text: string, params: unknown[]) => {
    const rows = text.startsWith("insert")
      ? Object.assign([], { count: 1, command: "INSERT" })
      : recorded.get(text) ?? [row(params[0] as number)];
    return Object.assign(Promise.resolve(rows), { values: () => Promise.resolve(rows) });
  };
  return Object.assign(() => {}, { options: { parsers: {}, serializers: {} }, unsafe });
}

/** A part of a Drizzle case timed on its own: Drizzle alone, or a driver alone. */
interface Part {
  name: string;
  run(k: DrizzleCase, round: number, t: Meter): Promise<unknown>;
}
const ALONE = "Drizzle alone";
const aloneName = (driver: string) => `${driver} alone`;

/**
 * The parts of each Drizzle case, on one connection, in rotated rounds: Drizzle alone (the
 * case's queries through Drizzle over answeringClient: building the SQL and parameters,
 * Drizzle's execute path, mapping the rows back; no driver, no I/O), and each driver alone
 * (the same statements, built by Drizzle beforehand, sent straight to `sql.unsafe(text,
 * params, { prepare: false })` as Drizzle sends them, on a client with Drizzle's entries
 * installed). Median ms by `part/case`.
 */
async function drizzleParts(): Promise<Map<string, number>> {
  const drivers = ([[PGPIPE, pgpipe], [PG, postgresJs]] as const).map(([name, factory]) => {
    const sql = clientOf(factory, 1) as Sql & { unsafe: any };
    return { name, sql, db: drizzle(sql as any, { schema }) };
  });
  try {
    // The relational query's answer as pgpipe gives it to Drizzle, for answeringClient.
    const recorded = new Map<string, unknown[][]>();
    for (const q of drizzleCases.flatMap((k) => k.workload(drivers[0].db, 0))) {
      const { sql: text, params } = q.toSQL() as { sql: string; params: unknown[] };
      if (!/^(insert|select "id")/.test(text)) {
        recorded.set(text, await drivers[0].sql.unsafe(text, params).values());
      }
    }
    const stub = drizzle(answeringClient(recorded) as any, { schema });
    const parts: Part[] = [
      {
        name: ALONE,
        async run(k, round, t) {
          t.start();
          await Promise.all(k.workload(stub, round));
          t.end();
        },
      },
      ...drivers.map(({ name, sql, db }): Part => ({
        name: aloneName(name),
        async run(k, round, t) {
          // Negative batches: the stacks' inserts count theirs from 1.
          const built = k.workload(db, -1 - round).map((q) =>
            q.toSQL() as { sql: string; params: unknown[] }
          );
          t.start();
          await Promise.all(built.map(({ sql: text, params }) => {
            const q = sql.unsafe(text, params, { prepare: false });
            return text.startsWith("insert") ? q : q.values();
          }));
          t.end();
        },
      })),
    ];
    const samples = new Samples();
    for (let i = 0; i < WARMUP; i++) {
      for (const p of parts) {
        for (const k of drizzleCases) await p.run(k, 1000 + i, new Meter(undefined));
      }
    }
    await rotated(ROUNDS, parts, async (p, round) => {
      for (const k of drizzleCases) {
        const t = new Meter(undefined);
        await p.run(k, round, t);
        samples.add(`${p.name}/${k.name}`, t.sample!.ms);
      }
    });
    return new Map([...samples.keys()].map((key) => [key, samples.median(key)]));
  } finally {
    await Promise.allSettled(drivers.map((d) => d.sql.end()));
  }
}

/** Drizzle over a client of `factory`. */
function drizzleOn(name: string, factory: Factory, options = {}, make = drizzle): Stack<Db> {
  return {
    name,
    open(max) {
      const sql = clientOf(factory, max, options);
      return Promise.resolve({ c: make(sql as any, { schema }) as Db, close: () => sql.end() });
    },
  };
}

const drizzleGroup: Group<Db> = {
  title: "Drizzle (drizzle-orm/postgres-js 0.45.4)",
  stacks: [
    drizzleOn(PG, postgresJs),
    drizzleOn(PGPIPE, pgpipe),
    drizzleOn(FORCED, pgpipe, { force_prepare: true }),
    // pgpipe's own entry: Drizzle's postgres-js session over pgpipe, without postgres.js.
    drizzleOn(SUBPATH, pgpipe, {}, pgpipeDrizzle as unknown as typeof drizzle),
  ],
  cases: drizzleCases,
  pools: POOLS,
  rounds: ROUNDS,
};

// ------------------------------------------------------------------ Kysely

type K = Kysely<KyselyDb>;

const kyselyCases: Case<K>[] = [
  {
    name: `${KYSELY_SELECTS} concurrent selects`,
    queries: KYSELY_SELECTS,
    async run(db, round, t) {
      const ids = idsFor(round, KYSELY_SELECTS);
      t.start();
      const rows = await Promise.all(
        ids.map((id) => db.selectFrom(USERS_TABLE).selectAll().where("id", "=", id).execute()),
      );
      t.end();
      rows.forEach(([row], i) => {
        assert.equal(row.id, ids[i]);
        assert.ok(row.created_at instanceof Date && typeof row.data === "object");
      });
    },
  },
  {
    name: `${INSERTS} concurrent inserts`,
    queries: INSERTS,
    async run(db, _round, t) {
      const batch = ++batches;
      t.start();
      await Promise.all(Array.from({ length: INSERTS }, (_, i) => {
        const { createdAt, ...row } = insertRow(batch, i);
        return db.insertInto("bench_orm_inserts").values({ ...row, created_at: createdAt })
          .execute();
      }));
      t.end();
      await checkBatch(batch, INSERTS, "Kysely");
    },
  },
];

function kyselyOn(name: string, dialect: (sql: Sql) => unknown, factory: Factory): Stack<K> {
  return {
    name,
    open(max) {
      const db = new Kysely<KyselyDb>({ dialect: dialect(clientOf(factory, max)) as any });
      return Promise.resolve({ c: db, close: () => db.destroy() });
    },
  };
}

const kyselyGroup: Group<K> = {
  title: "Kysely 0.28",
  stacks: [
    kyselyOn(KPJS_PG, (sql) => new PostgresJSDialect({ postgres: sql as any }), postgresJs),
    kyselyOn(KPJS_PGPIPE, (sql) => new PostgresJSDialect({ postgres: sql as any }), pgpipe),
    kyselyOn(DIALECT, (sql) => new PgpipeDialect({ postgres: sql as any }), pgpipe),
  ],
  cases: kyselyCases,
  pools: POOLS,
  rounds: ROUNDS,
};

// ------------------------------------------------------------------ the suite

/** The parts of each Drizzle case beside the stacks on one connection. */
function partsTable(report: Report, parts: Map<string, number>, r: Results): void {
  const rows = drizzleCases.map((k) => {
    const [alone, pipeAlone, pgAlone] = [ALONE, aloneName(PGPIPE), aloneName(PG)].map((name) =>
      parts.get(`${name}/${k.name}`)!
    );
    const [pg, pipe] = [PG, PGPIPE].map((s) => medianMs(r, 1, s, k.name));
    const ms = [alone, pipeAlone, pipe, pgAlone, pg].map((x) => fmt(x, 2));
    return [k.name, ...ms, formatRatio(pg / alone), formatRatio(pg / (alone + pipeAlone))];
  });
  report.table(
    `The parts of each Drizzle case, one connection (ms, medians of ${ROUNDS} rotated rounds): ` +
      "Drizzle alone, each driver alone with Drizzle's statements, and the stacks",
    "case | Drizzle alone | pgpipe alone | Drizzle over pgpipe | postgres.js alone | Drizzle over postgres.js | postgres.js stack over Drizzle alone | over Drizzle alone + pgpipe alone",
    rows,
  );
  report.note(
    "The parts: Drizzle alone runs each case's queries through Drizzle over a stub client that " +
      "answers at once from memory as a driver would (building the SQL and parameters, " +
      "Drizzle's execute path, mapping the rows back; the relational query's answer read once " +
      "from the server): no driver under Drizzle finishes a case sooner. A driver alone sends " +
      "the same statements, built by Drizzle beforehand, straight to sql.unsafe(text, params, " +
      "{ prepare: false }), as Drizzle does: the driver and the server's work (unnamed " +
      "statements, parsed and planned at every run). Everything a tick issues leaves in one " +
      "write once the tick ends, and Drizzle builds every query of a Promise.all in that tick, " +
      "so the server starts once Drizzle has built them all: the two parts add up rather than " +
      "overlap, and the last column is the speed-up that sum allows.",
  );
}

const postmaster = await ask(plainBenchUrl(), "select pg_backend_pid()", localPostmaster);
const report = new Report("orm");
try {
  for (const q of SEED_SQL) await admin.unsafe(q);
  const drizzleResults = await runGroup(drizzleGroup, postmaster, log);
  const prefix: Record<string, string> = {
    [FORCED]: "Drizzle with force_prepare",
    [SUBPATH]: "Drizzle via @pgpipe/pgpipe/drizzle",
  };
  const label = (s: string) => prefix[s] ?? "Drizzle";
  groupTable(report, drizzleGroup, drizzleResults, PG, "vs postgres.js", label);
  partsTable(report, await drizzleParts(), drizzleResults);

  const kyselyResults = await runGroup(kyselyGroup, postmaster, log);
  groupTable(report, kyselyGroup, kyselyResults, KPJS_PG, `vs ${KPJS_PG}`, (s) => `Kysely, ${s}`);
  await admin`truncate bench_orm_inserts`;
  report.note(
    `Stacks: Drizzle ${PG} is drizzle-orm/postgres-js over ${POSTGRES_JS}; "${FORCED}" the ` +
      `same over pgpipe with force_prepare: true; "${SUBPATH}" is pgpipe's own Drizzle entry ` +
      `(Drizzle's postgres-js session over pgpipe, no postgres.js: statements prepared as the ` +
      `client's prepare option says, each sent as Drizzle builds it). Kysely's stacks: ` +
      `kysely-postgres-js 3.0.0 over each client (it reserves a connection per query), and ` +
      `pgpipe's own dialect ` +
      `(@pgpipe/pgpipe/kysely, statements prepared as the client's prepare option says).`,
    `Pool: each stack with max 1 (one connection, the case the targets name) and max 10 ` +
      `(postgres.js's default pool, which spreads concurrent queries over connections). ` +
      `Inserts run outside a transaction, each its own commit (fsync off on the bench's ` +
      `server); each batch is counted afterwards.`,
    `The data: ${fmt(USERS)} users (int, text, timestamptz, bool, numeric, jsonb: the HTTP ` +
      `suite's table); the first ${fmt(AUTHORS)} have ${POSTS} posts of ${COMMENTS} comments ` +
      `each; findMany reads ${FIND_USERS} users with their posts and comments (one query).`,
    CPU_NOTE,
    `The machine is shared: compare ratios within one run.`,
  );
} finally {
  for (const q of DROP_SQL) await admin.unsafe(q).catch(() => {});
  await admin.end();
}
await report.emit();
