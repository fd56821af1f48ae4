/**
 * pgpipe over PGlite: PostgreSQL compiled to WebAssembly, running inside this process, in
 * memory or in a folder. `postgres(pglite())` is a client like any other, so every later line
 * of a program is the same as against a server, with pgpipe's pipelining: queries issued
 * together reach PGlite in one call.
 *
 * PGlite serves one session: the client has one connection (`max` 1), and `sql.listen` shares
 * it. There is no TLS, no cancel request (a query handed to PGlite runs to its end; cancelling
 * or aborting one still waiting in the client works), no replication (`sql.subscribe`
 * rejects), no second host. COPY FROM STDIN runs once all its data has come. This module is
 * the only one that loads `npm:@electric-sql/pglite`; `jsr:@pgpipe/pgpipe` itself has no
 * dependencies.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * import { pglite } from "jsr:@pgpipe/pgpipe/pglite";
 *
 * const sql = postgres(pglite()); // in memory; pglite("./data") keeps it in a folder
 * await sql`create table users (id serial primary key, name text)`;
 * await Promise.all(["Ada", "Grace"].map((name) => sql`insert into users (name) values (${name})`));
 * console.log(await sql`select * from users`);
 * await sql.end();
 * ```
 *
 * @module
 */
import type { Options } from "./mod.ts";
import type { EmbeddedServer } from "./interfaces.ts";
import { isPGlite, PGliteServer } from "./src/pglite/server.ts";
import type { PGliteLike } from "./src/pglite/session.ts";

/**
 * A PGlite instance (`new PGlite(...)` from `npm:@electric-sql/pglite` 0.5), as much of it as
 * pgpipe uses: its raw protocol call, its readiness and its close.
 *
 * @example
 * ```ts
 * import { PGlite } from "npm:@electric-sql/pglite@0.5.16";
 * import type { PGliteInstance } from "jsr:@pgpipe/pgpipe/pglite";
 * const db: PGliteInstance = new PGlite();
 * ```
 */
export interface PGliteInstance {
  /** Resolves once the database is up. */
  readonly waitReady: Promise<void>;
  /** Whether it was closed. */
  readonly closed: boolean;
  /** Where its data lives (undefined: in memory). */
  readonly dataDir?: string;
  /** Runs wire protocol messages; hands each piece of the answer to `onRawData` as it comes. */
  execProtocolRawStream(
    message: Uint8Array,
    options: { onRawData: (data: Uint8Array) => void; syncToFs?: boolean },
  ): Promise<void>;
  /** Shuts the database down. */
  close(): Promise<void>;
}

/**
 * PGlite's own options (`PGliteOptions` of `npm:@electric-sql/pglite`), for a PGlite that
 * {@link pglite} starts: passed to `new PGlite()` as they are.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * import { pglite } from "jsr:@pgpipe/pgpipe/pglite";
 * const sql = postgres(pglite({ dataDir: "./data", relaxedDurability: true }));
 * ```
 */
export interface PGliteStartOptions {
  /** The data folder (absent: in memory). */
  dataDir?: string;
  /** The role the session runs as (PGlite's default: postgres). */
  username?: string;
  /** The database of the session (PGlite's default: postgres). */
  database?: string;
  /** PGlite's other options (`extensions`, `relaxedDurability`, `debug`, ...). */
  [option: string]: unknown;
}

/**
 * What `postgres()` takes to run over PGlite: the options given to {@link pglite}, the
 * session's user and database, and the `embedded` server.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * import { pglite, type PGliteClientOptions } from "jsr:@pgpipe/pgpipe/pglite";
 * const options: PGliteClientOptions = pglite(undefined, { transform: postgres.camel });
 * const sql = postgres(options);
 * ```
 */
export interface PGliteClientOptions extends Options {
  /** The PGlite, as the server `postgres()` connects to. */
  embedded: EmbeddedServer;
}

/**
 * The PGlite this module was tested with. Imported by a name the module graph cannot see: with
 * PGlite in the graph, Deno 2.9 resolves `drizzle-orm`'s optional peer dependency on it to a
 * copy of the package it never writes to its npm cache, and a program importing both fails to
 * load; loaded at run time, both load.
 */
const PGLITE = "npm:@electric-sql/pglite@0.5.16";

/** Starts a PGlite: loaded only now, so passing an instance never loads pgpipe's own copy. */
async function start(source: string | PGliteStartOptions | undefined): Promise<PGliteLike> {
  const { PGlite } = await import(PGLITE);
  return typeof source === "string" ? new PGlite(source) : new PGlite(source);
}

/**
 * The options that make `postgres()` a client of a PGlite:
 * - nothing: a new database in memory, started on the first query and closed by `sql.end()`;
 * - a string: a data folder (created if missing; `memory://` is in memory), likewise;
 * - PGlite's options (`{ dataDir, extensions, ... }`), likewise;
 * - a PGlite instance you made: used as it is, and left open by `sql.end()`.
 *
 * `options` are pgpipe's other options (`transform`, `types`, `onnotice`, ...). The user and
 * database default to the session's: `postgres`, or the `username` and `database` of PGlite's
 * options given here (an instance does not tell its own: for one made with others, pass them as
 * `user` and `database`, or the startup is refused as a server would refuse it); a
 * URL, `host`, `port`, `socket`, TLS, `max` over 1 and `query_timeout` are refused by
 * `postgres()`. Deno needs `--allow-read` (PGlite reads its own files), and a data folder
 * `--allow-write` too.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * import { pglite } from "jsr:@pgpipe/pgpipe/pglite";
 *
 * const sql = postgres(pglite("./data", { transform: postgres.camel }));
 * const [row] = await sql`select 1 + 1 as two`;
 * await sql.end(); // closes the PGlite it started
 * ```
 */
export function pglite(
  source?: string | PGliteStartOptions | PGliteInstance,
  options: Options = {},
): PGliteClientOptions {
  let server: PGliteServer;
  let created: PGliteStartOptions = {};
  if (isPGlite(source)) {
    const dir = source.dataDir;
    server = new PGliteServer(`pglite:${dir ?? "memory"}`, source);
  } else {
    if (source !== undefined && typeof source !== "string" && typeof source !== "object") {
      throw new TypeError(
        "pglite() takes a data folder, PGlite's options or a PGlite instance, not a " +
          typeof source,
      );
    }
    if (typeof source === "object" && source !== null) created = source;
    const dir = typeof source === "string" ? source : created.dataDir;
    server = new PGliteServer(`pglite:${dir ?? "memory"}`, () => start(source));
  }
  const user = options.user ?? options.username;
  const database = options.database ?? options.db;
  return {
    ...options,
    ...(user === undefined ? { user: created.username ?? "postgres" } : {}),
    ...(database === undefined ? { database: created.database ?? "postgres" } : {}),
    embedded: server,
  };
}
