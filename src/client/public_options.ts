/**
 * `sql.options`: the resolved options shown back in postgres.js's shape.
 */
import type { Options, ResolvedOptions } from "../config/options.ts";
import type { PostgresType } from "../query/custom_types.ts";
import type { QueryConfig } from "../query/settings.ts";
import type { ParserTable, SerializerTable, TypeHandlers } from "../query/type_handlers.ts";
import type { PasswordSource } from "../connection/startup.ts";
import { socketPath } from "../connection/transport/transport.ts";
import type { StatementPolicy } from "../connection/statement_policy.ts";

/**
 * Options shown back on `sql.options`, in postgres.js's shape: every host and
 * port as arrays, `path` for a unix socket, `pass` for the password. The
 * password is there (as `pass`, and `password`) but not enumerable, so
 * logging the options does not print it.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres("postgres://ada:secret@db1,db2:5433/app");
 * console.log(sql.options.host, sql.options.port); // ["db1", "db2"] [5432, 5433]
 * console.log(sql.options.pass); // "secret" (not shown by console.log(sql.options))
 * ```
 */
export interface PublicOptions {
  /** Every host (or socket directory), in the order given. */
  host: string[];
  /** The port of each host. */
  port: number[];
  /** The unix socket file, when the first host is a socket directory. */
  path?: string;
  /** Database. */
  database: string;
  /** User. */
  user: string;
  /** The password as given (options, URL or environment); not enumerable. */
  readonly pass?: PasswordSource;
  /** The same as `pass`; not enumerable. */
  readonly password?: PasswordSource;
  /** The sslmode in force (postgres.js's `ssl`). */
  ssl: string;
  /** The same as `ssl` (pgpipe's name). */
  sslmode: string;
  /** `postgres` (an SSLRequest first) or `direct` (TLS at once, PostgreSQL 17+). */
  sslnegotiation: string;
  /** Most connections. */
  max: number;
  /** Seconds an idle connection is kept (0: for ever). */
  idle_timeout: number;
  /** Seconds allowed to connect, or the object given, read at each attempt. */
  connect_timeout: number | { valueOf(): number };
  /** Seconds a connection lives before it is replaced (0: for ever). */
  max_lifetime: number;
  /** Most requests in flight per connection. */
  max_pipeline: number;
  /** Whether named prepared statements are used. */
  prepare: boolean;
  /** Whether `force_prepare` is in force (it turns itself off behind a pooler that moves sessions). */
  readonly force_prepare: boolean;
  /** Whether array types are fetched as each connection opens. */
  fetch_types: boolean;
  /** Whether `debug` is on (a hook or whole stacks). */
  debug: boolean;
  /** The `target_session_attrs` in force. */
  target_session_attrs: string;
  /** The publications `sql.subscribe` streams (the option as given, default `alltables`). */
  publications: string;
  /** The startup parameters sent to the server (application_name, any `connection` values). */
  connection: Record<string, string>;
  /** The server's parameters: the same object as `sql.parameters`. */
  parameters: Readonly<Record<string, string>>;
  /** The `types` option as given (`{}` without it). */
  types: Record<string, PostgresType>;
  /**
   * The result parser of each type OID, live as in postgres.js: pgpipe's own (postgres.js's
   * default OIDs, every built-in array type, `int8` with `bigint`), the `types` option's, and
   * the array types `fetch_types` finds. A parser set, replaced or deleted here applies to every
   * query from then on, on every connection; a column whose type has a parser of the program's
   * is read as text and the parser gets the server's text as it is (a deleted one: the text is
   * the value). Assigning an object replaces the table's contents.
   *
   * @example
   * ```ts
   * import postgres from "jsr:@pgpipe/pgpipe";
   * const sql = postgres();
   * sql.options.parsers[1184] = (text: string) => text; // timestamptz as the server's text
   * const [{ t }] = await sql`select now() as t`; // "2026-01-02 03:04:05.123456+00"
   * ```
   */
  parsers: ParserTable;
  /**
   * The parameter serializer of each type OID, live as `parsers`: one of the program's applies
   * to each value whose type pgpipe infers as that OID (a plain string: `text`, 25; a plain
   * number or object: 0), returning the text sent.
   *
   * @example
   * ```ts
   * import postgres from "jsr:@pgpipe/pgpipe";
   * const sql = postgres();
   * sql.options.serializers[1184] = (d: Date) => d.toISOString().replace("Z", "+00:00");
   * await sql`select ${new Date()}::timestamptz as t`;
   * ```
   */
  serializers: SerializerTable;
}

/** The options `sql.options` shows as the caller gave them. */
export type ShownAsGiven = Pick<Options, "connect_timeout" | "types">;

/** Where the client connects, in postgres.js's view: every host and port as arrays. */
function whereShown(resolved: ResolvedOptions) {
  const first = resolved.hosts[0];
  return {
    host: resolved.hosts.map((h) => h.host),
    port: resolved.hosts.map((h) => h.port),
    ...(first.host.startsWith("/") ? { path: socketPath(first.host, first.port) } : {}),
    database: resolved.database,
    user: resolved.user,
    ssl: resolved.sslmode,
  };
}

/**
 * The user's `socket` function, called for each target with that same view of the configuration
 * (postgres.js's), or undefined when none was given.
 */
export function boundSocket(
  resolved: ResolvedOptions,
): ((target: { host: string; port: number }) => unknown) | undefined {
  const userSocket = resolved.socket;
  if (userSocket === undefined) return undefined;
  const info = whereShown(resolved);
  return (target) => userSocket({ ...info, target });
}

/**
 * The options shown on `sql.options`: `given` is what the caller passed for `connect_timeout` (an
 * object is shown as given) and `types`; `parameters` is the pool's live server parameters;
 * `config` holds the live handler tables; `statements` is the policy whose
 * `force_prepare` state `sql.options.force_prepare` shows.
 */
export function publicOptions(
  resolved: ResolvedOptions,
  given: ShownAsGiven | undefined,
  parameters: Readonly<Record<string, string>>,
  config: QueryConfig,
  statements: StatementPolicy,
): PublicOptions {
  const handlers: TypeHandlers = config.handlers!;
  const shown: PublicOptions = {
    ...whereShown(resolved),
    sslmode: resolved.sslmode,
    sslnegotiation: resolved.sslnegotiation,
    max: resolved.max,
    idle_timeout: resolved.idleTimeout / 1000,
    // An object given is shown as it is, not read: postgres.js reads it at each attempt.
    connect_timeout: typeof resolved.connectTimeout === "number"
      ? resolved.connectTimeout / 1000
      : given?.connect_timeout as { valueOf(): number },
    max_lifetime: resolved.maxLifetime / 1000,
    max_pipeline: resolved.maxPipeline,
    prepare: statements.prepare,
    fetch_types: resolved.fetchTypes,
    debug: resolved.debugStacks,
    target_session_attrs: resolved.targetSessionAttrs,
    publications: resolved.publications,
    connection: { ...resolved.params },
    parameters,
    types: given?.types ?? {},
  } as PublicOptions;
  Object.defineProperties(shown, {
    pass: { value: resolved.pass, enumerable: false },
    password: { value: resolved.pass, enumerable: false },
    force_prepare: { get: () => statements.forcing, enumerable: true },
    // Live tables (see type_handlers.ts); assigning an object replaces a table's contents.
    parsers: {
      get: () => handlers.parsers,
      set: (v: unknown) => handlers.replace("parsers", v),
      enumerable: true,
    },
    serializers: {
      get: () => handlers.serializers,
      set: (v: unknown) => handlers.replace("serializers", v),
      enumerable: true,
    },
  });
  return shown;
}
