// deno-lint-ignore-file no-import-prefix -- the ORMs are bench-only npm imports, pinned here
// Suite 10: Drizzle and Kysely over pgpipe and over postgres.js. The same Drizzle program
// (drizzle-orm/postgres-js) runs over postgres.js, over pgpipe and over pgpipe with
// `force_prepare`: 50 concurrent selects through the query builder, one relational findMany
// with two nested levels, 200 concurrent inserts; and a Deno.serve handler answering 100 rows
// as JSON under load (wrk). Kysely runs through kysely-postgres-js over postgres.js and over
// pgpipe, and on pgpipe's own dialect: 100 concurrent selects, 200 concurrent inserts. Each
// stack runs with one connection (the case, where the targets apply) and with
// postgres.js's default pool of 10. Last, what the live `sql.options.parsers` cost a workload
// with no ORM: pgpipe untouched against pgpipe after `drizzle(sql)` installed its entries (and,
// with PGPIPE_BENCH_AGAINST=<another checkout's mod.ts>, against that tree). Every timed case
// runs in rounds with the starting stack rotated, checks its answers, and reports medians with
// the CPU it cost this process and the server.
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
import { cpuMs, localPostmaster, serverCpuMs } from "../shared/cpu.ts";
import { benchUrl, isQuick, plainBenchUrl, sslOf } from "../shared/env.ts";
import { chooseLoadTool, describeTool, type LoadTool, runLoad } from "../shared/loadgen.ts";
import {
  AUTHORS,
  COMMENTS,
  type Db,
  DROP_SQL,
  inserts,
  type KyselyDb,
  PAGE,
  POSTS,
  schema,
  SEED_SQL,
  USERS,
  users,
  USERS_TABLE,
} from "../shared/orm_app.ts";
import { denoArgs } from "../shared/probe.ts";
import { fmt, formatRatio, Report } from "../shared/report.ts";
import { startServer } from "../shared/server.ts";
import { percentile, rotated, Samples } from "../shared/stats.ts";

const quick = isQuick();
const url = benchUrl();
const ssl = sslOf(url);
/** Rounds of the ORM cases (the figures are medians of 30), and of the parser case. */
const ROUNDS = quick ? 5 : 30;
const PARSER_ROUNDS = quick ? 5 : 60;
const WARMUP = quick ? 3 : 10;
/** The pool sizes: one connection (the case), and postgres.js's default. */
const POOLS = [1, 10];
const HTTP_ROUNDS = quick ? 1 : 3;
const HTTP_WARMUP_SECONDS = quick ? 1 : 3;
const HTTP_SECONDS = quick ? 2 : 8;
const LOAD_CONNECTIONS = 50;
const PG = "postgres.js";
const PGPIPE = "pgpipe";
const FORCED = "pgpipe, force_prepare";
const SUBPATH = "pgpipe, @pgpipe/pgpipe/drizzle";
const KPJS_PG = "kysely-postgres-js + postgres.js";
const KPJS_PGPIPE = "kysely-postgres-js + pgpipe";
const DIALECT = "pgpipe's dialect";
const UNTOUCHED = "pgpipe, tables untouched";
const INSTALLED = "pgpipe, Drizzle's entries installed";
const AGAINST = "other checkout (PGPIPE_BENCH_AGAINST)";
const log = (s: string) => console.log(`orm: ${s}`);

/** The slice of the postgres.js API both clients give the suite. */
interface Sql {
  (strings: TemplateStringsArray, ...values: unknown[]): PromiseLike<Record<string, unknown>[]>;
  end(options?: { timeout?: number }): Promise<void>;
}
type Factory = (url: string, options: Record<string, unknown>) => Sql;

const postgresJs = (await import(POSTGRES_JS)).default as Factory;
const pgpipe = postgres as unknown as Factory;
const against = Deno.env.get("PGPIPE_BENCH_AGAINST");
const client = (factory: Factory, max: number, options: Record<string, unknown> = {}) =>
  factory(url, { max, ssl, onnotice: () => {}, ...options });

// ------------------------------------------------------------------ measuring

/** One timed run: wall ms, and CPU ms of this process and of the server's processes. */
interface Sample {
  ms: number;
  clientMs: number;
  serverMs: number;
}

/** Where a case's timed part starts and ends; reads the CPU on both sides around it. */
class Meter {
  #t0 = 0;
  #c0 = 0;
  #s0 = 0;
  sample: Sample | undefined;
  constructor(readonly postmaster: number | undefined) {}
  #server = () => this.postmaster === undefined ? NaN : serverCpuMs(this.postmaster);
  start(): void {
    this.#s0 = this.#server();
    this.#c0 = cpuMs() ?? NaN;
    this.#t0 = performance.now();
  }
  end(): void {
    const ms = performance.now() - this.#t0;
    const clientMs = (cpuMs() ?? NaN) - this.#c0;
    this.sample = { ms, clientMs, serverMs: this.#server() - this.#s0 };
  }
}

/** A workload: its name, the queries one run sends, and one run (timed between t.start/end). */
interface Case<C> {
  name: string;
  queries: number;
  run(c: C, round: number, t: Meter): Promise<void>;
}

/** A way to run the cases: its name, and how to open it with a pool of `max`. */
interface Stack<C> {
  name: string;
  open(max: number): Promise<{ c: C; close(): Promise<unknown> }>;
}

/** Stacks compared on the same cases, with each pool size. */
interface Group<C> {
  title: string;
  stacks: Stack<C>[];
  cases: Case<C>[];
  pools: number[];
  rounds: number;
}

/** Samples by `pool/stack/case`. */
type Results = Map<string, Sample[]>;
const key = (pool: number, stack: string, kase: string) => `${pool}/${stack}/${kase}`;

/** Opens every stack of a group per pool, warms each case up, then runs rotated rounds. */
async function runGroup<C>(g: Group<C>, postmaster: number | undefined): Promise<Results> {
  const results: Results = new Map();
  for (const pool of g.pools) {
    const open = [];
    try {
      for (const s of g.stacks) open.push({ name: s.name, ...(await s.open(pool)) });
      for (const o of open) {
        for (const k of g.cases) {
          for (let i = 0; i < WARMUP; i++) await k.run(o.c, -1 - i, new Meter(undefined));
        }
      }
      await rotated(g.rounds, open, async (o, round) => {
        for (const k of g.cases) {
          const t = new Meter(postmaster);
          await k.run(o.c, round, t);
          const at = key(pool, o.name, k.name);
          results.set(at, [...results.get(at) ?? [], t.sample!]);
        }
      });
    } finally {
      await Promise.allSettled(open.map((o) => o.close()));
    }
    log(`${g.title}, pool ${pool}: ${g.rounds} rounds done`);
  }
  return results;
}

const pick = (xs: Sample[], f: (s: Sample) => number, p = 50) => percentile(xs.map(f), p);
const conns = (pool: number) => `${pool} connection${pool === 1 ? "" : "s"}`;

/**
 * A group's table: per case and pool, each stack's median ms and middle half, its speed-up
 * over `peer` (peer's ms / its ms), and CPU µs per query on each side.
 */
function groupTable<C>(report: Report, g: Group<C>, r: Results, peer: string, vs: string) {
  const rows: string[][] = [];
  for (const k of g.cases) {
    for (const pool of g.pools) {
      const base = pick(r.get(key(pool, peer, k.name))!, (s) => s.ms);
      for (const s of g.stacks) {
        const xs = r.get(key(pool, s.name, k.name))!;
        const ms = pick(xs, (x) => x.ms);
        const us = (f: (s: Sample) => number) => fmt((pick(xs, f) * 1000) / k.queries, 1);
        rows.push([
          k.name,
          String(pool),
          s.name,
          fmt(ms, 2),
          `${fmt(pick(xs, (x) => x.ms, 25), 2)}-${fmt(pick(xs, (x) => x.ms, 75), 2)}`,
          s.name === peer ? "1.00x" : formatRatio(base / ms),
          us((x) => x.clientMs),
          us((x) => x.serverMs),
        ]);
      }
    }
  }
  report.table(
    `${g.title} (median of ${g.rounds} rotated rounds)`,
    `case | pool | stack | ms | middle half | ${vs} | client CPU µs/query | server CPU µs/query`,
    rows,
  );
}

/** The median ms of a stack on a case. */
const medianMs = (r: Results, pool: number, stack: string, kase: string) =>
  pick(r.get(key(pool, stack, kase))!, (s) => s.ms);

// ------------------------------------------------------------------ Drizzle

const SELECTS = 50;
const KYSELY_SELECTS = 100;
const INSERTS = 200;
const FIND_USERS = 10;
let batches = 0;

/** `n` user ids for a round, different in every round (the same statement text each time). */
const idsFor = (round: number, n: number) =>
  Array.from({ length: n }, (_, i) => 1 + ((round + 100) * n + i) % USERS);

const admin = postgres(url, { max: 1, ssl, onnotice: () => {} });

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
  const drivers = [{ name: PGPIPE, factory: pgpipe }, { name: PG, factory: postgresJs }].map(
    (d) => {
      const sql = client(d.factory, 1) as Sql & { unsafe: any };
      return { ...d, sql, db: drizzle(sql as any, { schema }) };
    },
  );
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
      const sql = client(factory, max, options);
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
      const db = new Kysely<KyselyDb>({ dialect: dialect(client(factory, max)) as any });
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

// ------------------------------------------------ the live parser tables, no ORM

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
      const sql = client(factory, max);
      if (install) drizzle(sql as any); // installs Drizzle's parsers and serializers
      return Promise.resolve({ c: sql, close: () => sql.end() });
    },
  };
}

const parserGroup = async (): Promise<Group<Sql>> => ({
  title: "The live parser tables on a workload without an ORM (one connection)",
  stacks: [
    pgpipeWith(UNTOUCHED, pgpipe, false),
    pgpipeWith(INSTALLED, pgpipe, true),
    ...(against === undefined ? [] : [
      pgpipeWith(
        AGAINST,
        (await import(new URL(against, `file://${Deno.cwd()}/`).href)).default,
        false,
      ),
    ]),
  ],
  cases: parserCases,
  pools: [1],
  rounds: PARSER_ROUNDS,
});

// ------------------------------------------------------------------ HTTP

/** One HTTP server variant: the driver under Drizzle, and the extra flag. */
interface HttpVariant {
  name: string;
  driver: "pgpipe" | "postgres.js";
  flag?: "force_prepare";
}
const HTTP_VARIANTS: HttpVariant[] = [
  { name: PG, driver: "postgres.js" },
  { name: PGPIPE, driver: "pgpipe" },
  { name: FORCED, driver: "pgpipe", flag: "force_prepare" },
];

/** The page after id 0 as Drizzle answers it, built by PostgreSQL from the table. */
async function expectedPage(): Promise<unknown> {
  const [{ page }] = await admin.unsafe(`
    select json_agg(json_build_object(
      'id', id, 'name', name, 'email', email,
      'createdAt', to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
      'active', active, 'score', score::text, 'data', data) order by id)::text as page
    from (select * from ${USERS_TABLE} where id > 0 order by id limit ${PAGE}) t`);
  return JSON.parse(page as string);
}

interface HttpRun {
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** CPU µs per request: the server process, and PostgreSQL's processes. */
  serverUs: number;
  postgresUs: number;
  errors: number;
}

async function measureHttp(
  tool: LoadTool,
  v: HttpVariant,
  max: number,
  expected: unknown,
  postmaster: number | undefined,
): Promise<HttpRun> {
  const args = [v.driver, max, url, ...(v.flag ? [v.flag] : [])];
  const server = await startServer(v.name, [
    Deno.execPath(),
    ...denoArgs("orm_http_server.ts", args),
  ]);
  try {
    const res = await fetch(`http://127.0.0.1:${server.port}/users?after=0`);
    const body = await res.text();
    assert.equal(res.status, 200, `${v.name}: ${body}`);
    assert.deepStrictEqual(JSON.parse(body), expected, `${v.name}: wrong answer`);
    const target = `http://127.0.0.1:${server.port}/users`;
    const opts = { connections: LOAD_CONNECTIONS, threads: 1 };
    await runLoad(tool, target, { ...opts, seconds: HTTP_WARMUP_SECONDS });
    const pg = () => postmaster === undefined ? NaN : serverCpuMs(postmaster);
    const [c0, p0] = [cpuMs(server.pid) ?? NaN, pg()];
    const load = await runLoad(tool, target, { ...opts, seconds: HTTP_SECONDS });
    const [c1, p1] = [cpuMs(server.pid) ?? NaN, pg()];
    const us = 1000 / load.requests;
    return {
      rps: load.requests / load.seconds,
      p50Ms: load.p50Ms,
      p99Ms: load.p99Ms,
      serverUs: (c1 - c0) * us,
      postgresUs: (p1 - p0) * us,
      errors: load.errors,
    };
  } finally {
    await server.stop();
  }
}

async function http(report: Report, postmaster: number | undefined): Promise<void> {
  const tool = chooseLoadTool();
  log(`HTTP load generator: ${describeTool(tool, 1)}`);
  const expected = await expectedPage();
  const runs = new Map<string, HttpRun[]>();
  for (const max of POOLS) {
    await rotated(HTTP_ROUNDS, HTTP_VARIANTS, async (v, round) => {
      const run = await measureHttp(tool, v, max, expected, postmaster);
      log(
        `HTTP ${v.name}, pool ${max}, round ${round + 1}: ${fmt(run.rps)} req/s, ` +
          `server ${fmt(run.serverUs)} µs/req, PostgreSQL ${fmt(run.postgresUs)} µs/req`,
      );
      runs.set(`${max}/${v.name}`, [...runs.get(`${max}/${v.name}`) ?? [], run]);
    });
  }
  const rows: string[][] = [];
  for (const max of POOLS) {
    const med = (name: string, f: (r: HttpRun) => number) =>
      percentile(runs.get(`${max}/${name}`)!.map(f), 50);
    const base = med(PG, (r) => r.rps);
    for (const v of HTTP_VARIANTS) {
      const rps = med(v.name, (r) => r.rps);
      if (v.name !== PG) {
        const label = v.flag ? "Drizzle HTTP with force_prepare" : "Drizzle HTTP";
        report.ratio(`${label}: req/s, ${conns(max)}`, PG, rps / base);
      }
      rows.push([
        v.name,
        String(max),
        fmt(rps),
        v.name === PG ? "1.00x" : formatRatio(rps / base),
        fmt(med(v.name, (r) => r.p50Ms), 2),
        fmt(med(v.name, (r) => r.p99Ms), 2),
        fmt(med(v.name, (r) => r.serverUs)),
        fmt(med(v.name, (r) => r.postgresUs)),
        String(runs.get(`${max}/${v.name}`)!.reduce((n, r) => n + r.errors, 0)),
      ]);
    }
  }
  report.table(
    `Drizzle under Deno.serve: GET /users (${PAGE} rows as JSON), ${LOAD_CONNECTIONS} ` +
      `keep-alive connections, ${HTTP_SECONDS} s per run, median of ${HTTP_ROUNDS} rotated ` +
      `round${HTTP_ROUNDS === 1 ? "" : "s"}`,
    "driver under Drizzle | pool | req/s | vs postgres.js | p50 ms | p99 ms | server CPU µs/req | PostgreSQL CPU µs/req | errors",
    rows,
  );
  report.note(
    `HTTP: ${describeTool(tool, 1)}, ${HTTP_WARMUP_SECONDS} s warm-up then ${HTTP_SECONDS} s ` +
      `measured, a fresh server process per run (bench/probes/orm_http_server.ts: ` +
      `db.select().from(users).where(gt(users.id, after)).orderBy(users.id).limit(${PAGE}), ` +
      `answered with Response.json); each server's first answer is checked against the page ` +
      `PostgreSQL builds. Server, load generator and PostgreSQL share the machine's ` +
      `${navigator.hardwareConcurrency} cores; CPU µs/req moves less than req/s with contention.`,
  );
}

// ------------------------------------------------------------------ the suite

/** The parts of each Drizzle case beside the stacks on one connection. */
function partsTable(report: Report, parts: Map<string, number>, r: Results): void {
  const rows = drizzleCases.map((k) => {
    const part = (name: string) => parts.get(`${name}/${k.name}`)!;
    const [pg, pipe] = [PG, PGPIPE].map((s) => medianMs(r, 1, s, k.name));
    const floor = part(ALONE) + part(aloneName(PGPIPE));
    return [
      k.name,
      fmt(part(ALONE), 2),
      fmt(part(aloneName(PGPIPE)), 2),
      fmt(pipe, 2),
      fmt(part(aloneName(PG)), 2),
      fmt(pg, 2),
      formatRatio(pg / part(ALONE)),
      formatRatio(pg / floor),
    ];
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

function ormRatios<C>(
  report: Report,
  g: Group<C>,
  r: Results,
  prefix: (stack: string) => string,
  peer: string,
) {
  for (const k of g.cases) {
    for (const pool of g.pools) {
      const base = medianMs(r, pool, peer, k.name);
      for (const s of g.stacks.filter((s) => s.name !== peer)) {
        const label = `${prefix(s.name)}: ${k.name}, ${conns(pool)}`;
        report.ratio(label, peer, base / medianMs(r, pool, s.name, k.name));
      }
    }
  }
}

async function main(): Promise<void> {
  const postmaster = await ask(plainBenchUrl(), "select pg_backend_pid()", localPostmaster);
  const report = new Report("orm");
  try {
    for (const q of SEED_SQL) await admin.unsafe(q);
    const drizzleResults = await runGroup(drizzleGroup, postmaster);
    groupTable(report, drizzleGroup, drizzleResults, PG, "vs postgres.js");
    ormRatios(
      report,
      drizzleGroup,
      drizzleResults,
      (s) =>
        s === FORCED
          ? "Drizzle with force_prepare"
          : s === SUBPATH
          ? "Drizzle via @pgpipe/pgpipe/drizzle"
          : "Drizzle",
      PG,
    );
    partsTable(report, await drizzleParts(), drizzleResults);

    const kyselyResults = await runGroup(kyselyGroup, postmaster);
    groupTable(report, kyselyGroup, kyselyResults, KPJS_PG, `vs ${KPJS_PG}`);
    ormRatios(report, kyselyGroup, kyselyResults, (s) => `Kysely, ${s}`, KPJS_PG);

    await http(report, postmaster);

    const parsers = await parserGroup();
    const parserResults = await runGroup(parsers, postmaster);
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
    await admin`truncate bench_orm_inserts`;
    report.note(
      `Stacks: Drizzle ${PG} is drizzle-orm/postgres-js over ${POSTGRES_JS}; "${FORCED}" the ` +
        `same over pgpipe with force_prepare: true; "${SUBPATH}" is pgpipe's own Drizzle entry ` +
        `(Drizzle's postgres-js session over pgpipe, no postgres.js). Kysely's stacks: ` +
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
      `Client CPU: this process, all threads; server CPU: every PostgreSQL process; both per ` +
        `query of the case, read around the timed part only.`,
      `The parser table case: "${INSTALLED}" ran drizzle(sql) on a fresh pgpipe client ` +
        `(its date/time parsers and json serializers), then the same tagged-template queries ` +
        `as the untouched client, whose columns Drizzle's entries do not cover.` +
        (against === undefined
          ? " PGPIPE_BENCH_AGAINST=<another checkout's mod.ts> adds that tree's row."
          : ` "${AGAINST}": the tree whose mod.ts that variable names.`),
      `The machine is shared: compare ratios within one run.`,
    );
  } finally {
    for (const q of DROP_SQL) await admin.unsafe(q).catch(() => {});
    await admin.end();
  }
  await report.emit();
}

await main();
