// One interface over pgpipe and its peers, so every suite runs the very same workload on each:
// a driver only says how to run a tagged template, a rolled-back transaction and an end; the
// statements and their checks are written once (`adapter`). Peers are loaded by dynamic import
// with a non-literal specifier: a peer that cannot be fetched (JSR is unreachable on some
// machines) is skipped with one line instead of breaking `deno check`. Run directly
// (`deno run -A --no-lock bench/peers/drivers.ts`) it prints which drivers load, as JSON:
// bench/run.ts asks in a child process so its own process never writes a deno.lock.
import postgres from "../../mod.ts";
import { benchCa, isTls, via } from "../shared/env.ts";
import { DENO_POSTGRES, DENO_POSTGRES_COPY_ENV, denoPostgresCopy } from "./specifiers.ts";
import { PGLUE, POSTGRES_JS } from "./specifiers.ts";

/**
 * An open client of one driver, its statements written once (`adapter`), resolving to the rows
 * received or the value the server sent back: `selectTyped` reads rows of everyday column types
 * (int4, timestamptz, float8, bool, date) and checks the last; the insert statements use the temp
 * table `bench_insert (a text, b boolean, c integer)`.
 */
export interface Adapter extends AsyncDisposable {
  selectInt(x: number): Promise<number>;
  /** `select 1`: no parameter, the smallest query. */
  selectOne(): Promise<number>;
  selectPgType(): Promise<number>;
  selectTyped(rows: number): Promise<number>;
  createInsertTable(): Promise<void>;
  insertRow(a: string, b: boolean, c: number): Promise<void>;
  countInserted(): Promise<number>;
  /** Runs fn in a transaction on one session, then rolls it back (also when fn throws). */
  rolledBack(fn: (tx: Tx) => Promise<void>): Promise<void>;
  close(): Promise<void>;
}
/** The statements inside a rolled-back transaction. */
export type Tx = Omit<Adapter, "rolledBack" | "close" | typeof Symbol.asyncDispose>;

/** How many connections (default 1), and an application_name to count this client's backends by. */
export type ConnectOptions = { connections?: number; applicationName?: string };

/** A driver the suites can run. */
export interface Driver {
  /** Display name (also the key in PGPIPE_BENCH_DRIVERS). */
  name: string;
  /** What was loaded, for the report: a path in this repository or a package specifier. */
  source: string;
  /** The module specifier it was loaded from, for probes that import it in a fresh process. */
  specifier: string;
  /**
   * Whether it sends a query while others are unanswered: deno-postgres does not (a client queues
   * its queries), and the pipelining tables say so instead of timing a queue.
   */
  pipelines: boolean;
  /** Opens a client and runs one warm-up query, so suites never time connection set-up. */
  connect(url: string, options?: ConnectOptions): Promise<Adapter>;
}

/** A peer that could not be loaded, and why. */
export type Skipped = { name: string; source: string; reason: string };

/** Where a workload's timed part starts and ends: deno bench's `b`, or a stacks.ts Meter. */
export type Timer = { start(): void; end(): void };

/** `n` `select * from pg_type` at once, timed; each answer must have `types` rows. */
export async function selectMany(a: Adapter, name: string, n: number, types: number, t: Timer) {
  t.start();
  const counts = await Promise.all(Array.from({ length: n }, () => a.selectPgType()));
  t.end();
  const wrong = counts.find((c) => c !== types);
  check(wrong === undefined, `${name}: select * from pg_type gave ${wrong} rows, not ${types}`);
}

/** `n` inserts at once in a transaction (begin, create, count and rollback not timed). */
export async function insertMany(a: Adapter, name: string, n: number, t: Timer) {
  await a.rolledBack(async (tx) => {
    await tx.createInsertTable();
    t.start();
    const row = (k: number) => tx.insertRow(`row ${k}`, k % 2 === 0, k);
    await Promise.all(Array.from({ length: n }, (_, k) => row(k)));
    t.end();
    const count = await tx.countInserted();
    check(count === n, `${name}: ${n} inserts left ${count} rows`);
  });
}

/** Runs a tagged template; resolves to the rows, as objects or as arrays of values. */
type Run = (strings: TemplateStringsArray, ...values: unknown[]) => PromiseLike<readonly unknown[]>;

/** What a driver gives the adapter: a tag, a rolled-back transaction on one connection, an end. */
type Session = {
  run: Run;
  inTx(fn: (run: Run) => Promise<void>): Promise<void>;
  close(): Promise<void>;
};

/** A template's strings, kept as one object: every driver gets the very same one each time. */
const tpl = (strings: TemplateStringsArray, ..._: unknown[]) => strings;
const Q = {
  warm: tpl`select 1::int as x`,
  create: tpl`create temp table bench_insert (a text, b boolean, c integer)`,
  insert: tpl`insert into bench_insert (a, b, c) values (${0}, ${0}, ${0})`,
  count: tpl`select count(*)::int as n from bench_insert`,
  int: tpl`select ${0}::int as x`,
  pgType: tpl`select * from pg_type`,
  one: tpl`select 1`,
  /** Rows of the everyday column types that binary results speed up. */
  typed:
    tpl`select i, timestamptz '2020-01-01 00:00:00+00' + i * interval '1 second' as ts, i * 0.5::float8 as f, i % 2 = 0 as b, date '2020-01-01' + i % 1000 as d from generate_series(1, ${0}::int) i`,
};

/** A row's values in column order. */
const values = (row: unknown): unknown[] => Array.isArray(row) ? row : Object.values(row as object);
const first = (rows: readonly unknown[]) => values(rows[0])[0] as number;

const check = (ok: boolean, what: string) => {
  if (!ok) throw new Error(`wrong answer: ${what}`);
};

/** The adapter over a driver's session: the same statements and checks for every driver. */
async function adapter(name: string, s: Session, float8AsText: boolean): Promise<Adapter> {
  const warm = first(await s.run(Q.warm));
  check(warm === 1, `${name} warm-up returned ${warm}`);
  const tx = (run: Run): Tx => ({
    createInsertTable: async () => void await run(Q.create),
    insertRow: async (a, b, c) => void await run(Q.insert, a, b, c),
    countInserted: async () => first(await run(Q.count)),
    selectInt: async (x) => first(await run(Q.int, x)),
    selectOne: async () => first(await run(Q.one)),
    selectPgType: async () => (await run(Q.pgType)).length,
    async selectTyped(rows) {
      const result = await run(Q.typed, rows);
      const [i, ts, f, b, d] = values(result[result.length - 1]);
      // deno-postgres leaves float8 as its text (a string), by design: its number is compared.
      const ok = i === rows && ts instanceof Date &&
        ts.getTime() === Date.UTC(2020, 0, 1) + rows * 1000 &&
        (float8AsText ? Number(f) : f) === rows * 0.5 && b === (rows % 2 === 0) &&
        d instanceof Date;
      check(ok, `${name} typed row ${rows}: ${JSON.stringify([i, ts, f, b, d])}`);
      return result.length;
    },
  });
  const rolledBack = (fn: (tx: Tx) => Promise<void>) => s.inTx((run) => fn(tx(run)));
  return { ...tx(s.run), rolledBack, close: s.close, [Symbol.asyncDispose]: s.close };
}

// ------------------------------------------- pgpipe and postgres.js (the same API)

// The slice of the postgres.js API the bench uses. pgpipe implements the same API, so one
// session serves both: the very same calls, transactions included, run on each driver.
interface PgJsSql {
  (strings: TemplateStringsArray, ...values: unknown[]): PromiseLike<Record<string, unknown>[]>;
  begin(fn: (sql: PgJsSql) => Promise<unknown>): Promise<unknown>;
  end(options?: { timeout?: number }): Promise<void>;
}
type PgJsFactory = (url: string, options: Record<string, unknown>) => PgJsSql;

/** Thrown from postgres.js's sql.begin callback to make it roll back. */
class Rollback extends Error {}

/** In a TLS variant: pgpipe given the server's CA, so it verifies and runs on Deno's native TLS. */
export const PGPIPE_NATIVE = "pgpipe (CA: native TLS)";

/**
 * A driver of the postgres.js API: `ssl` none over plain TCP (sslmode=disable), in a TLS variant
 * `require`, unverified as a new user's `sslmode=require`, or for PGPIPE_NATIVE the CA.
 */
function postgresJsApi(name: string, source: string, specifier: string, make: PgJsFactory): Driver {
  const native = name === PGPIPE_NATIVE;
  const ssl = () => native ? { mode: "require", ca: benchCa() } : isTls() ? "require" : false;
  return { name, source, specifier, pipelines: true, connect };
  async function connect(url: string, options: ConnectOptions = {}): Promise<Adapter> {
    if (native) await settleNative(url, ssl());
    const { connections: max = 1, applicationName: app } = options;
    const connection = app && { application_name: app };
    const sql = make(url, { max, ssl: ssl(), onnotice: () => {}, connection });
    if (native) {
      const path = ((await sql`select 1`) as { state?: { tls?: unknown } }).state?.tls;
      check(path === "native", `${name} connected on ${String(path)}, not native TLS`);
    }
    // sql.begin pins the transaction to one connection; throwing from the callback rolls it back.
    const inTx = async (fn: (run: Run) => Promise<void>) => {
      await sql.begin(async (t) => {
        await fn(t);
        throw new Rollback();
      }).catch((e) => {
        if (!(e instanceof Rollback)) throw e;
      });
    };
    return adapter(name, { run: sql, inTx, close: () => sql.end({ timeout: 5 }) }, false);
  }
}

const MOD = new URL("../../mod.ts", import.meta.url).href;
const pgpipeApi = postgres as unknown as PgJsFactory;
const pgpipe = postgresJsApi("pgpipe", "mod.ts (this repository)", MOD, pgpipeApi);
const pgpipeNative = postgresJsApi(PGPIPE_NATIVE, "mod.ts, given the CA", MOD, pgpipeApi);

const settled = new Set<string>();
/**
 * A process's first connection to a server takes node:tls (a round trip shorter on PostgreSQL 17
 * and older), later ones native TLS: a throwaway connection takes that first turn.
 */
export async function settleNative(url: string, ssl: unknown): Promise<void> {
  if (settled.has(url)) return;
  const sql = postgres(url, { max: 1, ssl: ssl as "require", onnotice: () => {} });
  await sql`select 1`;
  await sql.end({ timeout: 5 });
  settled.add(url);
}

// --------------------------------------------------- deno-postgres and pglue

/** How to use a driver whose client is one connection (several are used in turn). */
interface OneConnection<C> {
  open(url: string): Promise<C>;
  on(c: C): Run;
  /** Begins a transaction; resolves to what rolls it back. */
  begin(c: C): Promise<() => Promise<unknown>>;
  close(c: C): unknown;
}

/** A Driver over one-connection clients: a transaction runs on the first connection. */
function oneConnection<C>(meta: Omit<Driver, "connect">, c: OneConnection<C>, f8 = false) {
  return {
    ...meta,
    async connect(url: string, options: ConnectOptions = {}) {
      const name = options.applicationName;
      const named = name ? via(url, 0, { application_name: name }) : url;
      const all: C[] = [];
      const close = async () =>
        void await Promise.allSettled(all.map(async (x) => await c.close(x)));
      try {
        for (let i = 0; i < (options.connections ?? 1); i++) all.push(await c.open(named));
      } catch (e) {
        await close();
        throw e;
      }
      let turn = 0;
      return adapter(meta.name, {
        run: (strings, ...v) => c.on(all[turn++ % all.length])(strings, ...v),
        async inTx(fn) {
          const rollback = await c.begin(all[0]);
          try {
            await fn(c.on(all[0]));
          } finally {
            await rollback();
          }
        },
        close,
      }, f8);
    },
  };
}

// The slice of deno-postgres's Client the bench uses.
interface DpClient {
  connect(): Promise<void>;
  queryArray(text: string, args?: unknown[]): Promise<{ rows: unknown[][] }>;
  end(): Promise<void>;
}

/** A template's text with $1, $2... (computed once per template). */
const texts = new WeakMap<TemplateStringsArray, string>();
const textOf = (s: TemplateStringsArray) =>
  texts.get(s) ?? texts.set(s, s.reduce((t, part, i) => `${t}$${i}${part}`)).get(s)!;

// The slice of pglue's API the bench uses (its README and bench.ts): one Wire is one connection.
interface PgWire {
  query(s: TemplateStringsArray, ...xs: unknown[]): PromiseLike<Record<string, unknown>[]>;
  begin(): Promise<{ rollback(): Promise<unknown> }>;
  close(): void;
}

// ---------------------------------------------------------------- loading

/** Every driver the bench knows, in report order (pgpipe first: it is the baseline). */
const DRIVER_NAMES = ["pgpipe", "postgres.js", "deno-postgres", "pglue"];

/** How the report names a specifier: the local copy by its variable, never by its path. */
const COPY = `${DENO_POSTGRES} (a local copy, ${DENO_POSTGRES_COPY_ENV})`;
const named = (specifier: string) => specifier === denoPostgresCopy() ? COPY : specifier;

/** Each peer: where it may load from, in order, and how its module becomes a Driver. */
const PEERS: Record<string, { from(): string[]; make(mod: any, specifier: string): Driver }> = {
  "postgres.js": {
    from: () => [POSTGRES_JS],
    make: (mod) => postgresJsApi("postgres.js", POSTGRES_JS, POSTGRES_JS, mod.default),
  },
  // One query at a time per client; it leaves float8 as text.
  "deno-postgres": {
    from: () => [denoPostgresCopy(), DENO_POSTGRES].filter((s): s is string => s !== undefined),
    make(mod, specifier) {
      const Client: new (url: string) => DpClient = mod.Client;
      if (typeof Client !== "function") throw new Error("it exports no Client");
      const meta = { name: "deno-postgres", source: named(specifier), specifier, pipelines: false };
      return oneConnection<DpClient>(meta, {
        async open(url) {
          const c = new Client(url);
          await c.connect();
          return c;
        },
        on: (c) => (s, ...v) => c.queryArray(textOf(s), v).then((r) => r.rows),
        begin: async (c) => {
          await c.queryArray("begin");
          return () => c.queryArray("rollback");
        },
        close: (c) => c.end(),
      }, true);
    },
  },
  pglue: {
    from: () => [PGLUE],
    make(mod) {
      const connect: (url: string) => Promise<PgWire> = mod.connect ?? mod.default?.connect;
      if (typeof connect !== "function") throw new Error("pglue exports no connect()");
      const meta = { name: "pglue", source: PGLUE, specifier: PGLUE, pipelines: true };
      return oneConnection<PgWire>(meta, {
        open: connect,
        on: (w) => (s, ...v) => w.query(s, ...v),
        begin: async (w) => {
          const t = await w.begin();
          return () => t.rollback();
        },
        close: (w) => w.close(),
      });
    },
  },
};

/** Loads a peer from its first source that loads; else one error that says why for each. */
async function loadPeer(name: string): Promise<Driver> {
  const failures: string[] = [];
  for (const specifier of PEERS[name].from()) {
    try {
      // Through a variable: not analysed ahead of time, so a failure is catchable.
      return PEERS[name].make(await import(specifier), specifier);
    } catch (e) {
      const reason = (e as Error).message.split("\n")[0].replaceAll(specifier, named(specifier));
      failures.push(PEERS[name].from().length > 1 ? `${named(specifier)}: ${reason}` : reason);
    }
  }
  throw new Error(failures.join("; "));
}

/** The bench's one line for a peer that did not load. */
export function skipLine(s: Skipped): string {
  const copy = s.name === "deno-postgres" && !s.source.includes(DENO_POSTGRES_COPY_ENV)
    ? ` ${DENO_POSTGRES_COPY_ENV}=<path to a copy's mod.ts> loads a local copy`
    : "";
  const hint = s.source.includes("jsr:")
    ? ` (JSR unreachable?${copy})`
    : s.source.startsWith("https:")
    ? " (host unreachable?)"
    : "";
  return `skipped ${s.name}: ${s.source} could not be loaded${hint}: ${s.reason}`;
}

/** The row of another checkout's pgpipe (PGPIPE_BENCH_AGAINST=<its mod.ts>). */
const PGPIPE_AGAINST = "pgpipe (other checkout)";

/**
 * Another checkout's pgpipe beside this one, so a change's rows show old and new in one run, under
 * the same server and noise: PGPIPE_BENCH_AGAINST names that tree's mod.ts (a worktree of the
 * commit before the change). Unset: none.
 */
async function otherCheckout(): Promise<Driver[]> {
  const path = Deno.env.get("PGPIPE_BENCH_AGAINST");
  if (!path) return [];
  const specifier = new URL(path, `file://${Deno.cwd()}/`).href;
  const mod = await import(specifier);
  return [postgresJsApi(PGPIPE_AGAINST, "PGPIPE_BENCH_AGAINST", specifier, mod.default)];
}

/** Loads the named drivers (default: all); a peer that fails is `skipped`; pgpipe always loads. */
export async function loadDrivers(names: readonly string[] = DRIVER_NAMES) {
  const drivers: Driver[] = [];
  const skipped: Skipped[] = [];
  for (const name of DRIVER_NAMES.filter((n) => names.includes(n))) {
    if (name === "pgpipe") {
      drivers.push(pgpipe);
      if (isTls() && benchCa() !== undefined) drivers.push(pgpipeNative);
      continue;
    }
    // Both verify the server's certificate whenever they encrypt: against the bench's private
    // CA they cannot take part in `sslmode=require`.
    if (isTls() && (name === "deno-postgres" || name === "pglue")) continue;
    try {
      drivers.push(await loadPeer(name));
    } catch (e) {
      const source = PEERS[name].from().map(named).join(" or ");
      skipped.push({ name, source, reason: (e as Error).message });
    }
  }
  return { drivers, skipped };
}

/**
 * The drivers a suite runs (of those named `only`): those bench/run.ts found loadable
 * (PGPIPE_BENCH_DRIVERS), failing here an error, or run on its own every one that loads; with
 * `against`, PGPIPE_BENCH_AGAINST's checkout right after this one's pgpipe.
 */
export async function suiteDrivers(only?: string[], { against = false } = {}): Promise<Driver[]> {
  const listed = Deno.env.get("PGPIPE_BENCH_DRIVERS");
  const { drivers, skipped } = await loadDrivers(listed?.split(","));
  if (listed && skipped.length) throw new Error(skipped.map(skipLine).join("\n"));
  for (const s of skipped) console.error(skipLine(s));
  // In-process suites that run any driver by its adapter may add another checkout's row.
  if (against) drivers.splice(1, 0, ...await otherCheckout());
  return only ? drivers.filter((d) => only.includes(d.name)) : drivers;
}

if (import.meta.main) {
  const { drivers, skipped } = await loadDrivers();
  const loaded = drivers.map(({ name, source }) => ({ name, source }));
  console.log(JSON.stringify({ drivers: loaded, skipped: skipped.map(skipLine) }));
}
