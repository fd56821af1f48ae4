// One interface over pgpipe and its peers, so every suite runs the very same workload on each.
// Peers are loaded by dynamic import with a non-literal specifier: a peer that cannot be fetched
// (JSR is unreachable on some machines) is skipped at run time instead of breaking `deno check`.
// Run directly (`deno run -A --no-lock bench/peers/drivers.ts`) it prints which drivers load, as JSON:
// bench/run.ts probes in a child process so its own process never writes a deno.lock.
import postgres from "../../mod.ts";
import { benchCa, isTls } from "../shared/env.ts";
import {
  DENO_POSTGRES,
  DENO_POSTGRES_COPY_ENV,
  denoPostgresCopy,
  PGLUE,
  POSTGRES_JS,
} from "./specifiers.ts";

export { DENO_POSTGRES, PGLUE, POSTGRES_JS };

/** Statements run inside a transaction (which the adapter always rolls back). */
export interface Tx {
  /** Creates the temp table `bench_insert (a text, b boolean, c integer)`. */
  createInsertTable(): Promise<void>;
  /** Inserts one row with three parameters. */
  insertRow(a: string, b: boolean, c: number): Promise<void>;
  /** `select count(*) from bench_insert`, as seen inside the transaction. */
  countInserted(): Promise<number>;
  /** `select $1::int` inside the transaction; resolves to the value the server sent back. */
  selectInt(x: number): Promise<number>;
}

/** An open client of one driver. */
export interface Adapter {
  /** `select * from pg_type`; resolves to the number of rows received. */
  selectPgType(): Promise<number>;
  /**
   * TYPED_ROWS_SQL with `rows` as its parameter; resolves to the rows received after checking
   * the last one decoded to the right JavaScript types and values.
   */
  selectTyped(rows: number): Promise<number>;
  /** `select $1::int`; resolves to the value the server sent back. */
  selectInt(x: number): Promise<number>;
  /** `select 1` (no parameter, the smallest query); resolves to the value the server sent back. */
  selectOne(): Promise<number>;
  /** Runs fn in a transaction on one session, then rolls it back (also when fn throws). */
  rolledBack(fn: (tx: Tx) => Promise<void>): Promise<void>;
  /** Closes every connection of this client. */
  close(): Promise<void>;
}

/** How to connect: the bench always wants plain TCP and a known number of connections. */
export interface ConnectOptions {
  /** Connections behind the client (default 1). */
  connections?: number;
  /** application_name, so a suite can count this client's backends in pg_stat_activity. */
  applicationName?: string;
}

/** A driver the suites can run. */
export interface Driver {
  /** Display name (also the key in PGPIPE_BENCH_DRIVERS). */
  name: string;
  /** What was loaded (file or package specifier), for the report. */
  source: string;
  /** The module specifier it was loaded from, for probes that import it in a fresh process. */
  specifier: string;
  /**
   * Whether it sends a query while others are unanswered. deno-postgres does not (a client
   * queues its queries and sends the next once the last is answered): the pipelining tables
   * say so instead of timing a queue.
   */
  pipelines: boolean;
  /** Opens a client and runs one warm-up query, so suites never time connection set-up. */
  connect(url: string, options?: ConnectOptions): Promise<Adapter>;
}

/** A peer that could not be loaded, and why. */
export interface Skipped {
  name: string;
  source: string;
  reason: string;
}

/**
 * Rows of the everyday column types that binary results speed up (int4, timestamptz, float8,
 * bool, date), as the two halves of a template around the row count: every driver's tag gets the
 * very same strings object, and drivers without a tag get the `$1` text.
 */
const TYPED_ROWS_PARTS = [
  "select i, timestamptz '2020-01-01 00:00:00+00' + i * interval '1 second' as ts, " +
  "i * 0.5::float8 as f, i % 2 = 0 as b, date '2020-01-01' + i % 1000 as d " +
  "from generate_series(1, ",
  "::int) i",
];
const TYPED_ROWS_TEMPLATE = Object.assign([...TYPED_ROWS_PARTS], {
  raw: [...TYPED_ROWS_PARTS],
}) as unknown as TemplateStringsArray;
/** The same query with a `$1` placeholder. */
export const TYPED_ROWS_SQL = TYPED_ROWS_PARTS.join("$1");

/** Checks the last row of TYPED_ROWS_SQL (as an array of its five values) for `rows` rows. */
export function checkTypedRow(driver: string, rows: number, last: unknown[]): void {
  const [i, ts, f, b, d] = last;
  const ok = i === rows && ts instanceof Date &&
    ts.getTime() === Date.UTC(2020, 0, 1) + rows * 1000 && f === rows * 0.5 &&
    b === (rows % 2 === 0) && d instanceof Date;
  check(ok, `${driver} typed row ${rows}: ${JSON.stringify(last)}`);
}

function check(ok: boolean, what: string): void {
  if (!ok) throw new Error(`wrong answer: ${what}`);
}

/** Thrown from postgres.js's sql.begin callback to make it roll back. */
class Rollback extends Error {}

// ------------------------------------------- pgpipe and postgres.js (the same API)

// The slice of the postgres.js API the bench uses. pgpipe implements the same API, so one adapter
// serves both: the very same calls, transactions included, run on each driver.
type PgJsResult = Record<string, unknown>[] & { count: number };
interface PgJsSql {
  (strings: TemplateStringsArray, ...values: unknown[]): PromiseLike<PgJsResult>;
  begin(fn: (sql: PgJsSql) => Promise<unknown>): Promise<unknown>;
  end(options?: { timeout?: number }): Promise<void>;
}
type PgJsFactory = (url: string, options: Record<string, unknown>) => PgJsSql;

/**
 * The `ssl` option the bench gives: none over plain TCP (the URL says sslmode=disable), and in a
 * TLS variant `require`, encrypting without verifying, as a new user's `sslmode=require` does.
 */
const benchSsl = (): unknown => isTls() ? "require" : false;

function postgresJsApi(
  name: string,
  source: string,
  specifier: string,
  factory: PgJsFactory,
  ssl: () => unknown = benchSsl,
): Driver {
  return {
    name,
    source,
    specifier,
    pipelines: true,
    async connect(url, options = {}) {
      if (name === PGPIPE_NATIVE) await settleNative(url, ssl());
      const sql = factory(url, {
        max: options.connections ?? 1,
        ssl: ssl(),
        onnotice: () => {},
        connection: options.applicationName
          ? { application_name: options.applicationName }
          : undefined,
      });
      const warm = await sql`select 1::int as x`;
      check(warm[0].x === 1, `${name} warm-up returned ${warm[0].x}`);
      if (name === PGPIPE_NATIVE) {
        const path = (warm as unknown as { state?: { tls?: unknown } }).state?.tls;
        check(path === "native", `${name} connected on ${String(path)}, not native TLS`);
      }
      const wrap = (t: PgJsSql): Tx => ({
        async createInsertTable() {
          await t`create temp table bench_insert (a text, b boolean, c integer)`;
        },
        async insertRow(a, b, c) {
          await t`insert into bench_insert (a, b, c) values (${a}, ${b}, ${c})`;
        },
        async countInserted() {
          const [{ n }] = await t`select count(*)::int as n from bench_insert`;
          return n as number;
        },
        async selectInt(v) {
          const [{ x }] = await t`select ${v}::int as x`;
          return x as number;
        },
      });
      return {
        async selectPgType() {
          return (await sql`select * from pg_type`).length;
        },
        async selectTyped(rows) {
          const result = await sql(TYPED_ROWS_TEMPLATE, rows);
          checkTypedRow(name, rows, Object.values(result[result.length - 1]));
          return result.length;
        },
        async selectInt(v) {
          const [{ x }] = await sql`select ${v}::int as x`;
          return x as number;
        },
        async selectOne() {
          const [row] = await sql`select 1`;
          return Object.values(row)[0] as number;
        },
        async rolledBack(fn) {
          // sql.begin pins the transaction to one connection; throwing from the callback is how
          // it is told to roll back.
          try {
            await sql.begin(async (t) => {
              await fn(wrap(t));
              throw new Rollback();
            });
          } catch (e) {
            if (!(e instanceof Rollback)) throw e;
          }
        },
        close: () => sql.end({ timeout: 5 }),
      };
    },
  };
}

const pgpipe = postgresJsApi(
  "pgpipe",
  "mod.ts (this repository)",
  new URL("../../mod.ts", import.meta.url).href,
  postgres as unknown as PgJsFactory,
);

/** The URLs whose first connection settleNative made. */
const settled = new Set<string>();

/**
 * A process's first connection to a server takes node:tls (its start is a round trip shorter on
 * PostgreSQL 17 and older), later ones native TLS: so before the first native client of a URL,
 * one throwaway connection takes that first turn.
 */
export async function settleNative(url: string, ssl: unknown): Promise<void> {
  if (settled.has(url)) return;
  const sql = postgres(url, { max: 1, ssl: ssl as "require", onnotice: () => {} });
  await sql`select 1`;
  await sql.end({ timeout: 5 });
  settled.add(url);
}

/** In a TLS variant: pgpipe given the server's CA, so it verifies and runs on Deno's native TLS. */
export const PGPIPE_NATIVE = "pgpipe (CA: native TLS)";
const pgpipeNative = postgresJsApi(
  PGPIPE_NATIVE,
  'mod.ts (this repository), ssl: { mode: "require", ca }',
  new URL("../../mod.ts", import.meta.url).href,
  postgres as unknown as PgJsFactory,
  () => ({ mode: "require", ca: benchCa() }),
);

function postgresJs(factory: PgJsFactory): Driver {
  return postgresJsApi("postgres.js", POSTGRES_JS, POSTGRES_JS, factory);
}

// ---------------------------------------------------------------- deno-postgres

// The slice of deno-postgres's Client the bench uses.
interface DpClient {
  connect(): Promise<void>;
  queryArray(text: string, args?: unknown[]): Promise<{ rows: unknown[][] }>;
  end(): Promise<void>;
}
type DpClientClass = new (url: string) => DpClient;

function withApplicationName(url: string, name: string | undefined): string {
  if (!name) return url;
  const u = new URL(url);
  u.searchParams.set("application_name", name);
  return u.toString();
}

function denoPostgres(Client: DpClientClass, specifier: string): Driver {
  return {
    name: "deno-postgres",
    source: specifier === DENO_POSTGRES
      ? DENO_POSTGRES
      : `${new URL(specifier).pathname} (${DENO_POSTGRES_COPY_ENV}, a copy of ${DENO_POSTGRES})`,
    specifier,
    pipelines: false,
    async connect(url, options = {}) {
      // A deno-postgres Client is one connection; several are used round-robin.
      const clients: DpClient[] = [];
      try {
        for (let i = 0; i < (options.connections ?? 1); i++) {
          const c = new Client(withApplicationName(url, options.applicationName));
          await c.connect();
          clients.push(c);
        }
      } catch (e) {
        await Promise.allSettled(clients.map((c) => c.end()));
        throw e;
      }
      let turn = 0;
      const next = () => clients[turn++ % clients.length];
      const [[x]] = (await next().queryArray("select 1::int")).rows;
      check(x === 1, `deno-postgres warm-up returned ${x}`);
      const tx = (c: DpClient): Tx => ({
        async createInsertTable() {
          await c.queryArray("create temp table bench_insert (a text, b boolean, c integer)");
        },
        async insertRow(a, b, v) {
          await c.queryArray("insert into bench_insert (a, b, c) values ($1, $2, $3)", [
            a,
            b,
            v,
          ]);
        },
        async countInserted() {
          const [[n]] = (await c.queryArray("select count(*)::int from bench_insert")).rows;
          return n as number;
        },
        async selectInt(v) {
          const [[x]] = (await c.queryArray("select $1::int", [v])).rows;
          return x as number;
        },
      });
      return {
        async selectPgType() {
          return (await next().queryArray("select * from pg_type")).rows.length;
        },
        async selectTyped(rows) {
          const result = (await next().queryArray(TYPED_ROWS_SQL, [rows])).rows;
          // deno-postgres leaves float8 as its text (a string), by design: compare its number.
          const [i, ts, f, b, d] = result[result.length - 1];
          checkTypedRow("deno-postgres", rows, [i, ts, Number(f), b, d]);
          return result.length;
        },
        async selectInt(v) {
          const [[x]] = (await next().queryArray("select $1::int", [v])).rows;
          return x as number;
        },
        async selectOne() {
          const [[x]] = (await next().queryArray("select 1")).rows;
          return x as number;
        },
        async rolledBack(fn) {
          const c = clients[0];
          await c.queryArray("begin");
          try {
            await fn(tx(c));
          } finally {
            await c.queryArray("rollback");
          }
        },
        async close() {
          await Promise.allSettled(clients.map((c) => c.end()));
        },
      };
    },
  };
}

// ---------------------------------------------------------------- pglue

// The slice of pglue's API the bench uses (its README and bench.ts): one Wire is one connection.
type PgRow = Record<string, unknown>;
interface PgWire {
  query(s: TemplateStringsArray, ...xs: unknown[]): PromiseLike<PgRow[]>;
  begin(): Promise<{ rollback(): Promise<unknown> }>;
  close(): void;
}
type PgConnect = (url: string) => Promise<PgWire>;

function pglue(connectWire: PgConnect): Driver {
  return {
    name: "pglue",
    source: PGLUE,
    specifier: PGLUE,
    pipelines: true,
    async connect(url, options = {}) {
      const wires: PgWire[] = [];
      try {
        for (let i = 0; i < (options.connections ?? 1); i++) {
          wires.push(await connectWire(withApplicationName(url, options.applicationName)));
        }
      } catch (e) {
        for (const w of wires) w.close();
        throw e;
      }
      let turn = 0;
      const next = () => wires[turn++ % wires.length];
      const [{ x }] = await next().query`select 1::int as x`;
      check(x === 1, `pglue warm-up returned ${x}`);
      const tx = (w: PgWire): Tx => ({
        async createInsertTable() {
          await w.query`create temp table bench_insert (a text, b boolean, c integer)`;
        },
        async insertRow(a, b, c) {
          await w.query`insert into bench_insert (a, b, c) values (${a}, ${b}, ${c})`;
        },
        async countInserted() {
          const [{ n }] = await w.query`select count(*)::int as n from bench_insert`;
          return n as number;
        },
        async selectInt(v) {
          const [{ x }] = await w.query`select ${v}::int as x`;
          return x as number;
        },
      });
      return {
        async selectPgType() {
          return (await next().query`select * from pg_type`).length;
        },
        async selectTyped(rows) {
          const result = await next().query(TYPED_ROWS_TEMPLATE, rows);
          const { i, ts, f, b, d } = result[result.length - 1];
          checkTypedRow("pglue", rows, [i, ts, f, b, d]);
          return result.length;
        },
        async selectInt(v) {
          const [{ x }] = await next().query`select ${v}::int as x`;
          return x as number;
        },
        async selectOne() {
          const [row] = await next().query`select 1`;
          return Object.values(row)[0] as number;
        },
        async rolledBack(fn) {
          const w = wires[0];
          const t = await w.begin();
          try {
            await fn(tx(w));
          } finally {
            await t.rollback();
          }
        },
        close() {
          for (const w of wires) w.close();
          return Promise.resolve();
        },
      };
    },
  };
}

// ---------------------------------------------------------------- loading

/** Every driver the bench knows, in report order (pgpipe first: it is the baseline). */
export const DRIVER_NAMES = ["pgpipe", "postgres.js", "deno-postgres", "pglue"] as const;

// Dynamic import through a variable: not analysed ahead of time, so a failure is catchable.
const load = (specifier: string): Promise<Record<string, unknown>> => import(specifier);

async function loadPeer(name: string): Promise<Driver> {
  if (name === "postgres.js") {
    const mod = await load(POSTGRES_JS);
    return postgresJs(mod.default as PgJsFactory);
  }
  if (name === "deno-postgres") {
    // The local copy first, then JSR; when neither loads, one error says why for each.
    const sources = denoPostgresSources();
    const failures: string[] = [];
    for (const specifier of sources) {
      try {
        const mod = await load(specifier);
        if (typeof mod.Client !== "function") throw new Error("it exports no Client");
        return denoPostgres(mod.Client as DpClientClass, specifier);
      } catch (e) {
        const reason = (e as Error).message.split("\n")[0];
        failures.push(sources.length > 1 ? `${specifier}: ${reason}` : reason);
      }
    }
    throw new Error(failures.join("; "));
  }
  if (name === "pglue") {
    const mod = await load(PGLUE);
    const connect = (mod.connect ?? (mod.default as { connect?: unknown })?.connect) as PgConnect;
    if (typeof connect !== "function") throw new Error("pglue exports no connect()");
    return pglue(connect);
  }
  throw new Error(`unknown driver ${name}`);
}

/** Where deno-postgres is tried from, in order: the local copy if one is named, then JSR. */
function denoPostgresSources(): string[] {
  const copy = denoPostgresCopy();
  return copy ? [copy, DENO_POSTGRES] : [DENO_POSTGRES];
}

/** Where each peer is loaded from (for its skip line). */
function sourceOf(name: string): string {
  if (name === "deno-postgres") {
    const copy = denoPostgresCopy();
    return copy
      ? `neither ${new URL(copy).pathname} (${DENO_POSTGRES_COPY_ENV}) nor ${DENO_POSTGRES}`
      : DENO_POSTGRES;
  }
  return name === "postgres.js" ? POSTGRES_JS : PGLUE;
}

/** The bench's one line for a peer that did not load. */
export function skipLine(s: Skipped): string {
  const hint = s.source.includes("jsr:")
    ? ` (JSR unreachable?${
      s.name === "deno-postgres" && !s.source.startsWith("neither")
        ? ` ${DENO_POSTGRES_COPY_ENV}=<path to a copy's mod.ts> loads a local copy`
        : ""
    })`
    : s.source.startsWith("https:")
    ? " (host unreachable?)"
    : "";
  const failed = s.source.startsWith("neither") ? "could be loaded" : "could not be loaded";
  return `skipped ${s.name}: ${s.source} ${failed}${hint}: ${s.reason}`;
}

/**
 * Loads the named drivers (default: all). A peer that fails to load is returned in `skipped`;
 * pgpipe is imported statically and always loads.
 */
export async function loadDrivers(
  names: readonly string[] = DRIVER_NAMES,
): Promise<{ drivers: Driver[]; skipped: Skipped[] }> {
  const drivers: Driver[] = [];
  const skipped: Skipped[] = [];
  for (const name of DRIVER_NAMES) {
    if (!names.includes(name)) continue;
    if (name === "pgpipe") {
      drivers.push(pgpipe);
      if (isTls() && benchCa() !== undefined) drivers.push(pgpipeNative);
      continue;
    }
    // Both verify the server's certificate whenever they encrypt: against the bench's private
    // CA they cannot take part in `sslmode=require`.
    if (isTls() && (name === "deno-postgres" || name === "pglue")) continue;
    const source = sourceOf(name);
    try {
      drivers.push(await loadPeer(name));
    } catch (e) {
      const reason = (e as Error).message.split("\n")[0];
      skipped.push({ name, source, reason });
    }
  }
  return { drivers, skipped };
}

/**
 * The drivers a suite should run: those bench/run.ts found loadable (PGPIPE_BENCH_DRIVERS), or,
 * when a suite runs on its own, every driver that loads (printing the skip lines itself).
 * A driver that run.ts found loadable but that fails here is an error, not a silent skip.
 */
export async function suiteDrivers(): Promise<Driver[]> {
  const listed = Deno.env.get("PGPIPE_BENCH_DRIVERS");
  if (listed) {
    const { drivers, skipped } = await loadDrivers(listed.split(","));
    if (skipped.length) throw new Error(skipped.map(skipLine).join("\n"));
    return drivers;
  }
  const { drivers, skipped } = await loadDrivers();
  for (const s of skipped) console.error(skipLine(s));
  return drivers;
}

if (import.meta.main) {
  const { drivers, skipped } = await loadDrivers();
  console.log(JSON.stringify({
    drivers: drivers.map((d) => ({ name: d.name, source: d.source })),
    skipped,
  }));
}

/** The row count `select * from pg_type` must return, asked once with count(*) (answers are checked against it). */
export async function pgTypeCount(url: string): Promise<number> {
  const sql = postgres(url, { max: 1, ssl: false });
  try {
    const [{ n }] = await sql`select count(*)::int as n from pg_type`;
    return n as number;
  } finally {
    await sql.end();
  }
}
