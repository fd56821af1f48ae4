// deno-lint-ignore-file no-import-prefix -- npm packages are test-only imports, pinned here
/**
 * Drizzle ORM over pgpipe: one program written for postgres.js (test/orm/drizzle_program.ts,
 * covering drizzle-orm/postgres-js 0.45's surface) runs over postgres.js 3.4.9 through Drizzle's
 * postgres-js driver, and over pgpipe through that driver and through pgpipe's own
 * (`@pgpipe/pgpipe/drizzle`), against the same server; every step must give the same outcome, to
 * the types of the values. pgpipe's driver also runs in a process of its own where postgres.js
 * cannot even be resolved, to show that it never loads it.
 */
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import {
  DefaultLogger,
  entityKind,
  is,
  type Logger,
  sql as drizzleSql,
} from "npm:drizzle-orm@0.45.4";
import { PgDatabase, pgTable, serial, text } from "npm:drizzle-orm@0.45.4/pg-core";
import { drizzle as ormDrizzle, PostgresJsDatabase } from "npm:drizzle-orm@0.45.4/postgres-js";
import { migrate as ormMigrate } from "npm:drizzle-orm@0.45.4/postgres-js/migrator";
import postgresJs, { type Sql as PostgresJsSql } from "npm:postgres@3.4.9";
import postgres, { type Options, type Sql } from "../mod.ts";
import { drizzle } from "../drizzle.ts";
import { migrate } from "../drizzle_migrator.ts";
import { pglite } from "../pglite.ts";
import { type DrizzleDriver, drizzleProgram, type Outcome } from "./orm/drizzle_program.ts";
import { taggedSteps } from "./orm/outcome_codec.ts";
import { databaseUrl } from "./harness/env.ts";
import { serverVersion } from "./harness/util.ts";
import { quiet } from "./harness/connect.ts";

const url = databaseUrl();
const ROOT = fileURLToPath(new URL("../", import.meta.url));

/** Drizzle's postgres-js driver: it takes any client with postgres.js's API. */
const drizzleOrm = { drizzle: ormDrizzle, migrate: ormMigrate } as unknown as DrizzleDriver;

/** The steps of a run that failed, and why (the program expects none to fail). */
function failures(run: Record<string, Outcome>): string[] {
  return Object.entries(run).filter(([, o]) => "error" in o).map(([name, o]) =>
    `${name}: ${JSON.stringify((o as { error: unknown }).error)}`
  );
}

/** The program's outcomes over postgres.js, run once for every variant below. */
let reference: Promise<Record<string, Outcome>> | undefined;
function expected(): Promise<Record<string, Outcome>> {
  return reference ??= (async () => {
    const sql = postgresJs(url, quiet);
    try {
      return withTypedCompletion(await drizzleProgram(sql, drizzleOrm)) as Record<
        string,
        Outcome
      >;
    } finally {
      await sql.end();
    }
  })();
}

/**
 * postgres.js's outcomes with the completion details pgpipe gives where postgres.js's values
 * contradict its own types (README, "Migrating from postgres.js"): a statement without rows sent
 * on the simple protocol gives `columns` [] where postgres.js leaves none. Applies to the results the program records with `plain()`; everything else is as it is.
 */
function withTypedCompletion(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withTypedCompletion);
  if (value === null || typeof value !== "object" || value.constructor !== Object) return value;
  const entries = Object.entries(value).map(([k, v]) => [k, withTypedCompletion(v)]);
  const out = Object.fromEntries(entries);
  const keys = Object.keys(out).sort().join();
  if (keys === "columns,command,count,rows" && typeof out.command === "string") {
    if (out.columns === undefined) out.columns = [];
  }
  return out;
}

/** The steps whose outcomes differ between `actual` and `want`, with how they differ. */
function differences(actual: Record<string, unknown>, want: Record<string, unknown>): string[] {
  assert.deepEqual(Object.keys(actual), Object.keys(want));
  const out: string[] = [];
  for (const step of Object.keys(want)) {
    try {
      assert.deepStrictEqual(actual[step], want[step]);
    } catch (e) {
      out.push(`${step}:\n${(e as Error).message}`);
    }
  }
  return out;
}

/** pgpipe's options in each run: the defaults, and the settings an ORM user may pick. */
const variants: [string, Options][] = [
  ["the defaults", {}],
  ["force_prepare", { force_prepare: true }],
  ["prepare: false (a transaction-mode pooler)", { prepare: false }],
  ["max: 1 (every query pipelined on one connection)", { max: 1 }],
];

for (const [name, options] of variants) {
  Deno.test(`drizzle: a program written for postgres.js gives its results over pgpipe, ${name}`, async () => {
    const want = await expected();
    assert.deepEqual(failures(want), [], "the program runs cleanly over postgres.js");
    const sql = postgres(url, { ...quiet, ...options });
    let actual: Record<string, Outcome>;
    try {
      actual = await drizzleProgram(sql, drizzleOrm);
    } finally {
      await sql.end();
    }
    const diff = differences(actual, want);
    assert.equal(diff.length, 0, diff.join("\n\n"));
  });
}

/**
 * An outcome without what differs between PostgreSQL versions: the server's source locations
 * (`routine`, `file`, `line` of errors), and, in `dropped`, other fields of errors.
 */
function withoutSource(value: unknown, dropped: string[] = []): unknown {
  if (Array.isArray(value)) return value.map((v) => withoutSource(v, dropped));
  if (value === null || typeof value !== "object" || value.constructor !== Object) return value;
  const skip = ["routine", "file", "line", ...dropped];
  return Object.fromEntries(
    Object.entries(value).filter(([k]) => !skip.includes(k))
      .map(([k, v]) => [k, withoutSource(v, dropped)]),
  );
}

// PGlite is PostgreSQL 18 whatever the server is: its errors name other C routines, and before 14
// a server gives no `where` ("unnamed portal parameter $1 = ...") for a parameter it cannot read.
Deno.test("drizzle: the program over postgres(pglite()), PostgreSQL in this process, gives postgres.js's results on the server", async () => {
  const want = await expected();
  assert.deepEqual(failures(want), [], "the program runs cleanly over postgres.js");
  const server = postgres(url, quiet);
  const dropped = await serverVersion(server).finally(() => server.end()) < 140000 ? ["where"] : [];
  const sql = postgres(pglite(undefined, quiet));
  let actual: Record<string, Outcome>;
  try {
    actual = await drizzleProgram(sql, { drizzle, migrate } as unknown as DrizzleDriver);
  } finally {
    await sql.end();
  }
  const diff = differences(
    withoutSource(actual, dropped) as Record<string, unknown>,
    withoutSource(want, dropped) as Record<string, unknown>,
  );
  assert.equal(diff.length, 0, diff.join("\n\n"));
});

/** Runs a script in a Deno process of its own from the repository root: its exit and output. */
async function child(script: string, args: string[] = []) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", script, ...args],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decode = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: decode(out.stdout), stderr: decode(out.stderr) };
}

for (const [name, options] of [variants[0], variants[1]]) {
  Deno.test(`drizzle: @pgpipe/pgpipe/drizzle runs the program without postgres.js, ${name}`, async () => {
    const want = await expected();
    assert.deepEqual(failures(want), [], "the program runs cleanly over postgres.js");
    const run = await child("test/orm/drizzle_subpath_run.ts", [url, JSON.stringify(options)]);
    assert.equal(run.code, 0, run.stderr);
    const diff = differences(JSON.parse(run.stdout), taggedSteps(want));
    assert.equal(diff.length, 0, diff.join("\n\n"));
  });
}

Deno.test("drizzle: in such a process, Drizzle's own postgres-js driver cannot load (the check above can fail)", async () => {
  const probe = await Deno.makeTempFile({ suffix: "_probe.ts" });
  try {
    await Deno.writeTextFile(probe, 'await import("npm:drizzle-orm@0.45.4/postgres-js");\n');
    const run = await child(probe);
    assert.notEqual(run.code, 0);
    assert.match(run.stderr, /Could not find package 'postgres'/);
  } finally {
    await Deno.remove(probe);
  }
});

/** A table for the call-form tests (never created: the tests build or run plain SQL). */
const notes = pgTable("notes", { id: serial("id").primaryKey(), noteText: text() });

/** What Drizzle's driver does to a client, as seen on the client: which entries it replaced. */
function setupOf(client: { options: { parsers: object; serializers: object } }) {
  const returnsItsInput = (f: unknown) => {
    try {
      return typeof f === "function" && f("x") === "x";
    } catch {
      return false; // a parser of its own (json, ...) refuses "x"
    }
  };
  const identity = (table: object) =>
    Object.entries(table).filter(([, f]) => returnsItsInput(f)).map(([oid]) => oid).sort();
  return {
    parsers: identity(client.options.parsers),
    serializers: identity(client.options.serializers),
  };
}

Deno.test("drizzle: drizzle() sets a client up as Drizzle's driver does, and returns its kind of database", async () => {
  await using ours = postgres(url, quiet);
  await using theirs = postgres(url, quiet);
  const before = setupOf(ours);
  const db = drizzle(ours);
  const reference = ormDrizzle(theirs as unknown as PostgresJsSql);
  assert.deepEqual(setupOf(ours), setupOf(theirs));
  assert.notDeepEqual(setupOf(ours), before, "the setup changed something");
  assert.equal(db.$client, ours);
  assert.ok(is(db, PgDatabase) && is(db, PostgresJsDatabase));
  assert.equal(
    (db.constructor as unknown as Record<symbol, unknown>)[entityKind],
    "PostgresJsDatabase",
  );
  assert.deepStrictEqual(db.$cache, reference.$cache); // undefined without a cache, as Drizzle's
  const [row] = await db.execute<{ at: string }>(drizzleSql`select '2024-01-02'::date as at`);
  assert.equal(row.at, "2024-01-02", "dates reach Drizzle as the server's text");

  // drizzle.mock(): no client, the same setup on a stand-in for one.
  const mock = drizzle.mock({ schema: { notes } });
  const ormMock = ormDrizzle.mock({ schema: { notes } });
  assert.deepEqual(setupOf(mock.$client as never), setupOf(ormMock.$client as never));
  assert.deepEqual(mock.select().from(notes).toSQL(), ormMock.select().from(notes).toSQL());
  assert.ok(is(mock, PostgresJsDatabase) && mock.query.notes !== undefined);
});

Deno.test("drizzle: drizzle(url), drizzle({ connection }) and drizzle({ client }) make or take a pgpipe client", async () => {
  const { hostname, port, username, pathname } = new URL(url);
  const withSchema = drizzle(url, { schema: { notes } });
  const made = [
    drizzle(url),
    withSchema,
    drizzle({ connection: url }),
    drizzle({ connection: { url, max: 2 }, casing: "snake_case" }),
    drizzle({
      connection: {
        host: hostname,
        port: Number(port),
        user: username,
        database: pathname.slice(1),
      },
    }),
  ];
  try {
    for (const db of made) {
      const client: Sql = db.$client;
      assert.equal(typeof client.begin, "function", "a pgpipe client");
      assert.equal(setupOf(client).parsers.includes("1184"), true, "set up for Drizzle");
      const [{ one }] = await db.execute<{ one: number }>(drizzleSql`select 1::int as one`);
      assert.equal(one, 1);
    }
    assert.equal(made[3].$client.options.max, 2, "connection options reach the client");
    assert.equal(withSchema.query.notes !== undefined, true, "the schema reaches db.query");
    // casing: snake_case column names for camelCase keys, as Drizzle's driver gives them.
    assert.match(made[3].select().from(notes).toSQL().sql, /"note_text"/);
    assert.match(made[0].select().from(notes).toSQL().sql, /"noteText"/);
  } finally {
    await Promise.all(made.map((db) => db.$client.end()));
  }

  await using sql = postgres(url, quiet);
  const logged: string[] = [];
  const logger: Logger = { logQuery: (query) => logged.push(query) };
  const db = drizzle({ client: sql, schema: { notes }, logger });
  assert.equal(db.$client, sql);
  await db.execute(drizzleSql`select 2 as two`);
  assert.deepEqual(logged, ["select 2 as two"]);
  const withDefaultLogger = drizzle(sql, { logger: true });
  const session = (withDefaultLogger as unknown as { session: { logger: unknown } }).session;
  assert.ok(session.logger instanceof DefaultLogger);
});

/** Keeps this thread busy for `ms`: nothing else of this process runs meanwhile. */
function spin(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end) { /* busy */ }
}

/**
 * 100 statements built in one Promise.all, then a busy step in that same tick (a thenable in
 * the list, called after the builders): when did the server run the first, against when did the
 * tick end?
 */
async function firstRunDuringBuild(db: ReturnType<typeof drizzle>): Promise<boolean> {
  const pad = "x".repeat(200);
  let tickEnded = 0;
  const busy = {
    then(resolve: (v: null) => void) {
      spin(500);
      tickEnded = Date.now();
      resolve(null);
    },
  };
  const results = await Promise.all([
    ...Array.from(
      { length: 100 },
      () => db.execute<{ at: Date }>(drizzleSql`select clock_timestamp() as at, ${pad} as pad`),
    ),
    busy,
  ]);
  const first = results[0] as unknown as { at: string }[];
  assert.equal(results.length, 101);
  return new Date(first[0].at).getTime() < tickEnded;
}

Deno.test("drizzle: @pgpipe/pgpipe/drizzle sends each statement as Drizzle builds it; Drizzle's own driver, only once awaited", async () => {
  await using ours = postgres(url, { max: 1, ...quiet });
  await using theirs = postgres(url, { max: 1, ...quiet });
  await ours`select 1`;
  await theirs`select 1`;
  // pgpipe's entry: the server starts while the tick that builds the batch still runs.
  assert.equal(await firstRunDuringBuild(drizzle(ours)), true);
  // Drizzle's postgres-js driver awaits each lazy query after the last builder: nothing is
  // sent before the tick ends (the check above can fail).
  const reference = ormDrizzle(theirs as unknown as PostgresJsSql) as unknown as ReturnType<
    typeof drizzle
  >;
  assert.equal(await firstRunDuringBuild(reference), false);
});

/** A catalog every database has, as a Drizzle table. */
const namespaces = pgTable("pg_namespace", { name: text("nspname") });

Deno.test("drizzle: @pgpipe/pgpipe/drizzle prepares Drizzle's statements as the client's prepare option says", async () => {
  /** The named statements this session holds whose text is the one Drizzle built. */
  const prepared = async (client: Sql, text: string) => {
    const rows = await client`
      select count(*)::int as n from pg_prepared_statements where statement = ${text}`;
    return rows[0].n as number;
  };
  const probe = (db: ReturnType<typeof drizzle>) =>
    db.select({ one: drizzleSql<number>`1` }).from(namespaces).limit(1);
  for (const [prepare, want] of [[true, 1], [false, 0]] as const) {
    await using client = postgres(url, { max: 1, prepare, ...quiet });
    const db = drizzle(client);
    await probe(db);
    assert.equal(await prepared(client, probe(db).toSQL().sql), want, `prepare: ${prepare}`);
  }
  // Drizzle's own driver asks for the unnamed statement: nothing is kept (the check can fail).
  await using theirs = postgres(url, { max: 1, ...quiet });
  const reference = ormDrizzle(theirs as unknown as PostgresJsSql);
  await reference.select({ one: drizzleSql<number>`1` }).from(namespaces).limit(1);
  const text =
    reference.select({ one: drizzleSql<number>`1` }).from(namespaces).limit(1).toSQL().sql;
  assert.equal(await prepared(theirs, text), 0);
});
