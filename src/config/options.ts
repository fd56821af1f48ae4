/**
 * The two shapes of configuration: `Options`, what a program gives `postgres()` (public, with its
 * docs), and `ResolvedOptions`, what resolve.ts makes of it with the URL, the environment and
 * the defaults. Where each setting comes from is keywords.ts; the order of the sources is
 * resolve.ts.
 */
import type { FieldMap, Notification } from "../protocol/backend.ts";
import type { SslMode, SslNegotiation, UserSocket } from "../connection/transport/transport.ts";
import type { PasswordSource } from "../connection/startup.ts";
import type { AuthPolicy } from "../connection/authentication.ts";
import type { TlsSettings } from "./tls.ts";
import type { PostgresType } from "../query/custom_types.ts";
import type { Transform } from "../query/transform.ts";
import type { Notice } from "../errors.ts";
import type { TelemetryOptions } from "../telemetry/otel.ts";
import type { EmbeddedServer } from "../connection/transport/embedded.ts";
import type { HostTarget, LoadBalanceHosts, TargetSessionAttrs } from "../connection/hosts.ts";

/**
 * TLS settings: a mode (`true` is `require`, `false` is `disable`), or postgres.js's object of
 * node:tls options. The object's `mode` is pgpipe's; without one it verifies the server fully
 * (`verify-full`, as node:tls does for postgres.js) unless `rejectUnauthorized` is false
 * (`require`). PEM values may be strings or bytes. Any other key is refused.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres({
 *   host: "db.example.com",
 *   ssl: {
 *     ca: Deno.env.get("DB_CA"),
 *     cert: Deno.env.get("DB_CLIENT_CERT"),
 *     key: Deno.env.get("DB_CLIENT_KEY"),
 *   },
 * });
 * ```
 */
export type SslOption = boolean | SslMode | SslObjectOption;

/**
 * The `ssl` option as an object (postgres.js passes it to node:tls; pgpipe honours these keys).
 *
 * @example
 * ```ts
 * import postgres, { type SslObjectOption } from "jsr:@pgpipe/pgpipe";
 * const ssl: SslObjectOption = { mode: "verify-ca", ca: Deno.env.get("DB_CA") };
 * const sql = postgres({ host: "10.0.0.5", ssl });
 * ```
 */
export interface SslObjectOption {
  /** The sslmode (pgpipe's own key); see {@link SslOption} for the default. */
  mode?: SslMode;
  /** CA certificates to trust (PEM), instead of `sslrootcert`. */
  ca?: string | Uint8Array | (string | Uint8Array)[];
  /** The client certificate (PEM), as `sslcert`. */
  cert?: string | Uint8Array;
  /** The client certificate's private key (PEM), as `sslkey`. */
  key?: string | Uint8Array;
  /** The private key's passphrase, as `sslpassword`. */
  passphrase?: string;
  /** false: do not verify the server (`require`); true: verify it (`verify-full`). */
  rejectUnauthorized?: boolean;
  /** The name to verify the server's certificate against and send as SNI, instead of the host. */
  servername?: string;
  /** The lowest TLS version, as `ssl_min_protocol_version` (`TLSv1.2`, `TLSv1.3`). */
  minVersion?: string;
  /** The highest TLS version, as `ssl_max_protocol_version`. */
  maxVersion?: string;
}

/**
 * What the `socket` option's function is called with: the configuration (in
 * postgres.js's shape: every host and port as arrays) and `target`, the host
 * this connection is for.
 *
 * @example
 * ```ts
 * import postgres, { type SocketOptions } from "jsr:@pgpipe/pgpipe";
 * const sql = postgres({
 *   socket: (o: SocketOptions) => Deno.connect({ hostname: o.target.host, port: o.target.port }),
 * });
 * ```
 */
export interface SocketOptions {
  /** Every configured host (a socket directory too), in order. */
  host: string[];
  /** The port of each host. */
  port: number[];
  /** The unix socket file, when the first host is a socket directory. */
  path?: string;
  /** Database. */
  database: string;
  /** User. */
  user: string;
  /** The sslmode in force (TLS runs over the returned socket only for `require` and `verify-*`). */
  ssl: SslMode;
  /** The host and port this connection is for (several hosts are tried in turn). */
  target: { host: string; port: number };
}

/**
 * The `socket` option (postgres.js): returns an already-connected socket, or
 * a promise of one, that a connection then uses instead of opening its own.
 * Called for every new connection and for every cancel request.
 *
 * @example
 * ```ts
 * import * as net from "node:net";
 * import postgres, { type SocketFunction } from "jsr:@pgpipe/pgpipe";
 * const socket: SocketFunction = ({ target }) =>
 *   new Promise((resolve, reject) => {
 *     const s = net.connect(target.port, target.host);
 *     s.once("connect", () => resolve(s));
 *     s.once("error", reject);
 *   });
 * const sql = postgres({ socket });
 * ```
 */
export type SocketFunction = (options: SocketOptions) => UserSocket | Promise<UserSocket>;

/**
 * Options for {@link postgres}. Names follow postgres.js.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres({ host: "db.internal", database: "app", ssl: "verify-full", max: 1 });
 * ```
 */
export interface Options {
  /**
   * Host name, IP, or unix socket directory (starts with `/`). Several hosts
   * (an array, or a comma-separated string; each may end in `:port`) are
   * tried in order, see `target_session_attrs`. Default: `PGHOST` or localhost.
   */
  host?: string | string[];
  /** Port, or one port per host (a single port applies to every host). Default: `PGPORT` or 5432. */
  port?: number | number[];
  /**
   * What kind of server a new connection must reach, as in libpq: `any`,
   * `read-write`, `read-only`, `primary`, `standby` or `prefer-standby`
   * (a standby if one is up, else any). A server that does not match is
   * skipped for the next host. Default: `PGTARGETSESSIONATTRS` or `any`.
   */
  target_session_attrs?:
    | "any"
    | "read-write"
    | "read-only"
    | "primary"
    | "standby"
    | "prefer-standby";
  /**
   * `random`: each new connection tries the hosts in a random order, which
   * spreads connections over them (libpq 16). Default: `PGLOADBALANCEHOSTS` or `disable`.
   */
  load_balance_hosts?: "disable" | "random";
  /**
   * The newest protocol version to ask for, as libpq 18: `3.0`, or `3.2` (`latest`), in which
   * PostgreSQL 18 gives each connection a 32-byte cancel key instead of 4 bytes; an older server
   * answers that it speaks 3.0 and the connection goes on with it. Default:
   * `PGMAXPROTOCOLVERSION` or `3.0`, because some poolers and proxies close a connection that
   * asks for 3.2 instead of answering.
   *
   * @example
   * ```ts
   * import postgres from "jsr:@pgpipe/pgpipe";
   * const sql = postgres("postgres://app@db.internal/app", { max_protocol_version: "3.2" });
   * ```
   */
  max_protocol_version?: "3.0" | "3.2" | "latest";
  /** Unix socket directory (alternative to a `/`-host). */
  path?: string;
  /** Database. Default: `PGDATABASE` or the user name. */
  database?: string;
  /** Alias of `database`. */
  db?: string;
  /** User. Default: `PGUSER`, then `USER`, then "postgres". */
  user?: string;
  /** Alias of `user`. */
  username?: string;
  /** Password, or a (sync or async) function returning it. Default: `PGPASSWORD`. */
  password?: PasswordSource;
  /** Alias of `password`. */
  pass?: PasswordSource;
  /** TLS: `true` means `require`, `false` means `disable`. Default: `PGSSLMODE` or `prefer`. */
  ssl?: SslOption;
  /**
   * libpq's `sslnegotiation`: `direct` starts TLS at once, with ALPN `postgresql`, one round
   * trip sooner (PostgreSQL 17+; needs `ssl` `require`, `verify-ca` or `verify-full`, and
   * never falls back to plain). Default: `PGSSLNEGOTIATION` or `postgres` (an SSLRequest first).
   */
  sslnegotiation?: SslNegotiation;
  /**
   * libpq's `sslrootcert`: a file of CA certificates, their PEM text, or `system` (the default
   * roots). The `ssl` option's `ca` wins over it. Default: `PGSSLROOTCERT`, else
   * `~/.postgresql/root.crt` when it exists.
   */
  sslrootcert?: string;
  /**
   * libpq's `sslcert`: the client certificate, a file or its PEM text (also `ssl.cert`). As in
   * libpq, a file that does not exist means no certificate (the server may not ask for one).
   * Default: `PGSSLCERT`, else `~/.postgresql/postgresql.crt` when it exists.
   */
  sslcert?: string;
  /**
   * libpq's `sslkey`: the client certificate's private key, a file (no access for group or
   * others) or its PEM text; PKCS#1, SEC1 or PKCS#8, encrypted or not (also `ssl.key`). Read
   * only when there is a certificate. Default: `PGSSLKEY`, else `~/.postgresql/postgresql.key`.
   */
  sslkey?: string;
  /** libpq's `sslpassword`: the passphrase of an encrypted `sslkey` (also `ssl.passphrase`). */
  sslpassword?: string;
  /**
   * libpq's `sslcertmode`: `allow` sends the client certificate when there is one; `disable`
   * never does. (`require` is refused: no TLS path says whether the server asked for one.)
   * Default: `PGSSLCERTMODE` or `allow`.
   */
  sslcertmode?: "disable" | "allow";
  /** libpq's `sslsni`: 0 or false sends no server name (SNI). Default: `PGSSLSNI` or 1. */
  sslsni?: boolean | 0 | 1;
  /** The lowest TLS version: `TLSv1.2` or `TLSv1.3` (`TLSv1`, `TLSv1.1` mean 1.2). Default `TLSv1.2`. */
  ssl_min_protocol_version?: "TLSv1" | "TLSv1.1" | "TLSv1.2" | "TLSv1.3";
  /** The highest TLS version: `TLSv1.2` or `TLSv1.3`. Default: none (1.3). */
  ssl_max_protocol_version?: "TLSv1.2" | "TLSv1.3";
  /**
   * libpq's `channel_binding`: `prefer` binds SCRAM to the TLS connection
   * (SCRAM-SHA-256-PLUS) when it can; `require` refuses any authentication that is not bound,
   * so a server that is not the one you meant never gets a password or proof; `disable`.
   * Default: `PGCHANNELBINDING` or `prefer`.
   */
  channel_binding?: "disable" | "prefer" | "require";
  /**
   * libpq's `require_auth`: the methods the server may ask for (`password`, `md5`,
   * `scram-sha-256`, `gss`, `sspi`, `oauth`, `none`), comma-separated, or those it may not
   * (`!md5,!password`). A server asking for another gets nothing: AUTH_REFUSED.
   * Default: `PGREQUIREAUTH`, else any.
   */
  require_auth?: string;
  /**
   * libpq's `scram_client_key` and `scram_server_key` (base64): SCRAM proves the client and
   * checks the server with these keys instead of deriving them from a password.
   */
  scram_client_key?: string;
  /** See `scram_client_key`. */
  scram_server_key?: string;
  /**
   * libpq's `hostaddr`: numeric addresses, one per host, to connect to without looking the host
   * names up; TLS still verifies (and the password file matches) the host name.
   * Default: `PGHOSTADDR`.
   */
  hostaddr?: string | string[];
  /** A section of the connection service file to read settings from. Default: `PGSERVICE`. */
  service?: string;
  /** The service file. Default: `PGSERVICEFILE`, else `~/.pg_service.conf`. */
  servicefile?: string;
  /** The password file. Default: `PGPASSFILE`, else `~/.pgpass`. */
  passfile?: string;
  /** libpq's `options`: command-line options for the server (`-c search_path=app`). Default: `PGOPTIONS`. */
  options?: string;
  /** UTF8 (or `auto`): the only encoding pgpipe reads and writes. Default: `PGCLIENTENCODING`. */
  client_encoding?: string;
  /** The application_name when none is given. */
  fallback_application_name?: string;
  /** TCP keep-alive probes: true/1 (the default) or false/0. */
  keepalives?: boolean | 0 | 1;
  /** Seconds of silence before the first keep-alive probe (0: the system's default). */
  keepalives_idle?: number;
  /** libpq's `gssencmode`: `disable` or `prefer` (pgpipe has no GSSAPI; `require` is refused). */
  gssencmode?: "disable" | "prefer";
  /** libpq's `krbsrvname` (no effect: pgpipe has no GSSAPI). */
  krbsrvname?: string;
  /** libpq's `gsslib` (no effect: pgpipe has no GSSAPI). */
  gsslib?: "gssapi" | "sspi";
  /** libpq's `gssdelegation` (no effect: pgpipe has no GSSAPI). */
  gssdelegation?: boolean | 0 | 1;
  /**
   * The oldest protocol version the server may answer with: `3.0`, or `3.2` (`latest`), which
   * refuses a server before 18. Default: `PGMINPROTOCOLVERSION` or `3.0`.
   */
  min_protocol_version?: "3.0" | "3.2" | "latest";
  /** Most connections; each pipelines, and a query goes to the least busy. Default 10. */
  max?: number;
  /** Seconds a connection may stay idle before it is closed (0: never). Default 0. */
  idle_timeout?: number;
  /** Seconds a connection lives before it is replaced when idle. Default: random 30 to 60 minutes. */
  max_lifetime?: number;
  /**
   * Ask the server (once per client) for the array types of user-defined
   * types, so arrays of enums and custom types decode into arrays. Default true.
   */
  fetch_types?: boolean;
  /**
   * `true`, or a function called with each query as it is sent (connection id,
   * text, parameters, parameter types). Either way every query then records its
   * whole stack, so its error's stack ends with the frames that wrote it, and
   * the error's `query`, `parameters`, `args` and `types` are enumerable (they
   * are always there, but hidden from logs without `debug`). Default false.
   */
  debug?: boolean | DebugHook;
  /**
   * Seconds a running query may go without any answer from the server: then
   * it is cancelled, and if the server stays silent as long again the
   * connection is destroyed (QUERY_TIMEOUT). 0: no limit. Default 0.
   */
  query_timeout?: number;
  /** Most queries waiting locally for a connection; more reject with QUEUE_FULL. Default 100000. */
  max_queue?: number;
  /**
   * Seconds allowed to connect and authenticate (0: no limit). A number, a
   * numeric string, or an object with `valueOf()`, which is read at each
   * connection attempt. Default: `PGCONNECT_TIMEOUT` or 30.
   */
  connect_timeout?: number | string | { valueOf(): number } | null;
  /**
   * Returns an already-connected socket (a `node:net` Socket or a `Deno.Conn`)
   * for each new connection instead of opening one; see {@link SocketFunction}.
   * TLS runs over it only when `ssl` requires it (`require`, `verify-ca`,
   * `verify-full`); `prefer` and `allow` stay plain.
   */
  socket?: SocketFunction;
  /** Use named, cached prepared statements (false: the unnamed statement, for PgBouncer). Default true. */
  prepare?: boolean;
  /** @deprecated postgres.js's old name: `no_prepare: true` is `prepare: false`. */
  no_prepare?: boolean;
  /**
   * Give queries that ask for the unnamed statement (`sql.unsafe(text, args)`, `{ prepare:
   * false }`: how Drizzle's and Kysely's postgres.js drivers send every query) a named, cached
   * statement like tagged queries get, so the server parses and plans each text once per
   * connection instead of at every run. Default false. No effect with `prepare: false` (a
   * transaction-mode pooler); when a named statement vanishes or its name is taken (such a
   * pooler moving the session), it turns itself off for the client. `sql.unsafe` without
   * arguments still uses the simple protocol.
   */
  force_prepare?: boolean;
  /** Most requests in flight on one connection; more wait locally. Default 1000. */
  max_pipeline?: number;
  /** Most bytes of requests in flight on one connection; more wait locally. Default 16 MiB. */
  max_pipeline_bytes?: number;
  /** Most prepared statements cached per connection (LRU). Default 1000. */
  max_statements?: number;
  /** Return int8 (bigint) columns as BigInt instead of string. Default false. */
  bigint?: boolean;
  /**
   * Result and helper transforms (postgres.js): `column`, `value`, `row` hooks
   * (a function, or `{ from?, to? }`), `undefined` (sent instead of undefined
   * values), or a preset such as `postgres.camel`.
   */
  transform?: Transform;
  /**
   * Custom types by name (postgres.js): `{ to, from, serialize, parse }`; each
   * also becomes `sql.typed.<name>(value)`. `{ bigint: postgres.BigInt }`
   * returns int8 as `bigint`.
   */
  types?: Record<string, PostgresType>;
  /** Reported to the server as application_name. Default: `PGAPPNAME` or "pgpipe". */
  application_name?: string;
  /**
   * Extra startup parameters (e.g. `{ search_path: "app", statement_timeout: 5000 }`); numbers
   * and booleans are sent as their text.
   */
  connection?: Record<string, string | number | boolean>;
  /** Called for each notice from the server. Default: `console.log` of the notice. */
  onnotice?: (notice: Notice) => void;
  /** Called when the server reports a parameter change. */
  onparameter?: (name: string, value: string) => void;
  /** Called for each LISTEN notification. */
  onnotify?: (notification: Notification) => void;
  /**
   * The publications `sql.subscribe()` streams changes from: one name, or
   * several separated by commas (unquoted names are lower-cased, as in SQL;
   * `"Quoted"` ones are kept). Default `alltables`.
   */
  publications?: string;
  /**
   * OpenTelemetry spans and metrics (see docs/observability.md).
   * Default: on when Deno's telemetry is (`OTEL_DENO=true`, Deno Deploy), with
   * Deno's providers; `false`: off; an object: other providers, or no query text.
   */
  telemetry?: TelemetryOptions | false;
  /**
   * postgres.js's TCP keepalive delay: accepted and ignored (probes are on unless `keepalives` is
   * 0; libpq's `keepalives_idle` sets their delay).
   */
  keep_alive?: number | null;
  /** postgres.js's reconnect delay: accepted and ignored (pgpipe backs off with jitter itself). */
  backoff?: boolean | ((attempt: number) => number);
  /** postgres.js's hook for a closed connection: accepted and ignored. */
  onclose?: (connectionId: number) => void;
  /**
   * A server inside this process instead of a host: what `pglite()` from
   * `jsr:@pgpipe/pgpipe/pglite` returns. One session, so one connection (`max` 1) that
   * `sql.listen` shares; a URL, `host`, `port`, `path`, `socket`, TLS, `max` over 1 and
   * `query_timeout` are refused, and `sql.subscribe` rejects (see {@link EmbeddedServer}).
   */
  embedded?: EmbeddedServer;
}

/**
 * The `debug` option: sees each query as it is sent.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres({ debug: (conn, query, params) => console.log(conn, query, params) });
 * ```
 */
export type DebugHook = (
  connection: number,
  query: string,
  parameters: readonly unknown[],
  types: readonly number[],
) => void;

/** Options after URL, environment and defaults are applied. */
export interface ResolvedOptions {
  /** The first host (`hosts[0]`). */
  host: string;
  port: number;
  database: string;
  user: string;
  /** The first host's password. */
  password: PasswordSource;
  /** The password as given (options, URL or environment; not .pgpass), shown as `sql.options.pass`. */
  pass: PasswordSource;
  /**
   * Set when a user-supplied value's own `toString` threw while the options
   * were read: the client then rejects every query with it.
   */
  failure?: Error;
  /** The user's `socket` function as given (checked); the client binds it to these options. */
  socket?: SocketFunction;
  /** Every host, in the order given. */
  hosts: HostTarget[];
  targetSessionAttrs: TargetSessionAttrs;
  loadBalanceHosts: LoadBalanceHosts;
  /** The protocol minor version to ask for (0 or 2), from `max_protocol_version`. */
  protocolMinor: number;
  /** The lowest protocol minor version the server may answer with, `min_protocol_version`. */
  protocolMinMinor: number;
  sslmode: SslMode;
  ca?: string[];
  sslnegotiation: SslNegotiation;
  /** The rest of the TLS settings (client certificate, SNI, versions). */
  tls: TlsSettings;
  /** What the server may authenticate the client with. */
  auth: AuthPolicy;
  /** TCP keep-alive: on or off, and the idle time before the first probe (ms; absent: the system's). */
  keepalive: { enabled: boolean; idleMs?: number };
  max: number;
  idleTimeout: number;
  maxLifetime: number;
  fetchTypes: boolean;
  /** The `debug` function, if one was given. */
  debug?: DebugHook;
  /** `debug` was set (true or a function): whole stacks, enumerable query details. */
  debugStacks: boolean;
  queryTimeout: number;
  maxQueue: number;
  /** Milliseconds; a function when the option is an object read at each attempt (it may throw). */
  connectTimeout: number | (() => number);
  prepare: boolean;
  /** The `force_prepare` option (it means something only with `prepare` on: StatementPolicy). */
  forcePrepare: boolean;
  maxPipeline: number;
  maxPipelineBytes: number;
  maxStatements: number;
  bigint: boolean;
  /** The `transform` option as given: the client compiles it (query/settings.ts), which checks it. */
  transform?: Transform;
  /** The `types` option as given: the client compiles it (query/settings.ts), which checks it. */
  types?: Record<string, PostgresType>;
  params: Record<string, string>;
  onnotice: (notice: FieldMap) => void;
  onparameter?: (name: string, value: string) => void;
  onnotify?: (notification: Notification) => void;
  /** The `publications` option as given (it goes into START_REPLICATION). */
  publications: string;
  /** The publication names it lists, as the server reads them. */
  publicationNames: string[];
  /** The `telemetry` option as given (checked). */
  telemetry?: TelemetryOptions | false;
  /** The server inside this process, when the `embedded` option named one (see embedded.ts). */
  embedded?: EmbeddedServer;
}
