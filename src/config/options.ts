/**
 * Options, connection URL and environment, resolved into what connections need.
 *
 * Precedence, as in libpq and postgres.js: explicit options, then the URL,
 * then `PG*` environment variables, then defaults.
 */
import type { FieldMap, Notification } from "../protocol/backend.ts";
import {
  socketPath,
  type SslMode,
  type SslNegotiation,
  type UserSocket,
} from "../connection/transport/transport.ts";
import { thrownText } from "../connection/transport/socket_errors.ts";
import type { PasswordSource } from "../connection/startup.ts";
import { readPgpass } from "./pgpass.ts";
import { type CustomTypes, customTypes, type PostgresType } from "../query/custom_types.ts";
import { normalizeTransform, type Transform, type Transforms } from "../query/transform.ts";
import { type Notice, noticeOf } from "../errors.ts";
import type { TelemetryOptions } from "../telemetry/otel.ts";

/**
 * TLS settings: a mode, or a mode with trusted CA certificates.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres({ host: "db.example.com", ssl: { mode: "verify-full", ca: Deno.env.get("DB_CA") } });
 * ```
 */
export type SslOption = boolean | SslMode | { mode?: SslMode; ca?: string | string[] };

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
  /** Extra startup parameters (e.g. `{ search_path: "app" }`). */
  connection?: Record<string, string>;
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
   * OpenTelemetry spans and metrics (see the README's Observability section).
   * Default: on when Deno's telemetry is (`OTEL_DENO=true`, Deno Deploy), with
   * Deno's providers; `false`: off; an object: other providers, or no query text.
   */
  telemetry?: TelemetryOptions | false;
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

/** Values of the `target_session_attrs` option. */
export type TargetSessionAttrs = NonNullable<Options["target_session_attrs"]>;
/** Values of the `load_balance_hosts` option. */
export type LoadBalanceHosts = NonNullable<Options["load_balance_hosts"]>;

/** One server to try, with the password for it (the password file is per host). */
export interface HostTarget {
  host: string;
  port: number;
  password: PasswordSource;
}

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
  /** The user's `socket` function, bound to these options (see Endpoint.socket). */
  socket?: (target: { host: string; port: number }) => unknown;
  /** Every host, in the order given. */
  hosts: HostTarget[];
  targetSessionAttrs: TargetSessionAttrs;
  loadBalanceHosts: LoadBalanceHosts;
  /** The protocol minor version to ask for (0 or 2), from `max_protocol_version`. */
  protocolMinor: number;
  sslmode: SslMode;
  ca?: string[];
  sslnegotiation: SslNegotiation;
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
  maxPipeline: number;
  maxPipelineBytes: number;
  maxStatements: number;
  bigint: boolean;
  transform: Transforms;
  types: CustomTypes;
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
}

/** `max_protocol_version`'s values and the minor version each asks for. */
const PROTOCOL_MINORS: Readonly<Record<string, number>> = { "3.0": 0, "3.2": 2, latest: 2 };

const TARGET_SESSION_ATTRS: readonly TargetSessionAttrs[] = [
  "any",
  "read-write",
  "read-only",
  "primary",
  "standby",
  "prefer-standby",
];

const SSL_MODES: readonly SslMode[] = [
  "disable",
  "allow",
  "prefer",
  "require",
  "verify-ca",
  "verify-full",
];

/** Reads an environment variable; without `--allow-env` it is simply unset. */
function env(name: string): string | undefined {
  try {
    return Deno.env.get(name);
  } catch {
    return undefined;
  }
}

function decode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    throw new TypeError(`invalid percent-encoding in connection URL: ${s}`);
  }
}

/** One entry of a host list: either part may be missing (then a default applies). */
interface HostEntry {
  host?: string;
  port?: number;
}

interface ParsedUrl {
  /** The first host of the URL. */
  host?: string;
  /** The first host's port. */
  port?: number;
  /** Every `host:port` of the URL, in order (empty when the URL names none). */
  hosts: HostEntry[];
  user?: string;
  password?: string;
  database?: string;
  query: Map<string, string>;
}

/**
 * Parses `postgres://user:pass@host:port/db?key=value` (also `postgresql://`);
 * several hosts are separated by commas: `postgres://a:5432,b:5433/db`.
 */
export function parseUrl(url: string): ParsedUrl {
  const match = /^postgres(?:ql)?:\/\/([^/?#]*)([^?#]*)(?:\?([^#]*))?/.exec(url);
  if (!match) throw new TypeError("connection URL must start with postgres:// or postgresql://");
  const [, authority, path, search] = match;
  const out: ParsedUrl = { hosts: [], query: new Map() };
  let hosts = authority;
  const at = authority.lastIndexOf("@");
  if (at !== -1) {
    const userinfo = authority.slice(0, at);
    hosts = authority.slice(at + 1);
    const colon = userinfo.indexOf(":");
    out.user = decode(colon === -1 ? userinfo : userinfo.slice(0, colon));
    if (colon !== -1) out.password = decode(userinfo.slice(colon + 1));
  }
  if (hosts !== "") {
    out.hosts = hosts.split(",").map((entry) => parseHostPort(entry, true));
    out.host = out.hosts[0].host;
    out.port = out.hosts[0].port;
  }
  if (path.length > 1) out.database = decode(path.slice(1));
  if (search) {
    for (const pair of search.split("&")) {
      if (pair === "") continue;
      const eq = pair.indexOf("=");
      const key = decode(eq === -1 ? pair : pair.slice(0, eq));
      out.query.set(key, eq === -1 ? "" : decode(pair.slice(eq + 1).replace(/\+/g, " ")));
    }
  }
  return out;
}

/**
 * One `host[:port]` entry: `[v6]:port` in brackets; a socket directory (`/...`)
 * or an unbracketed IPv6 address carries no port. `encoded`: URL text.
 */
function parseHostPort(entry: string, encoded: boolean): HostEntry {
  const text = encoded ? entry : entry.trim();
  const unwrap = (s: string) => encoded ? decode(s) : s;
  const out: HostEntry = {};
  let host = text;
  if (text.startsWith("[")) {
    const close = text.indexOf("]");
    if (close === -1) throw new TypeError(`invalid host: ${entry}`);
    host = text.slice(1, close);
    const rest = text.slice(close + 1);
    if (rest.startsWith(":") && rest.length > 1) out.port = parsePort(rest.slice(1));
    else if (rest !== "" && rest !== ":") throw new TypeError(`invalid host: ${entry}`);
  } else if (!unwrap(text).startsWith("/")) {
    const colon = text.indexOf(":");
    if (colon !== -1 && colon === text.lastIndexOf(":")) {
      host = text.slice(0, colon);
      if (colon < text.length - 1) out.port = parsePort(text.slice(colon + 1));
    }
  }
  if (host !== "") out.host = unwrap(host);
  return out;
}

/** A comma-separated list of ports (an empty entry means the default). */
function parsePortList(text: string): (number | undefined)[] {
  return text.split(",").map((p) => p.trim() === "" ? undefined : parsePort(p.trim()));
}

/** A comma-separated list of host names (libpq's `host` keyword and `PGHOST`: no ports). */
function plainHosts(text: string): HostEntry[] {
  return text.split(",").map((h) => h.trim() === "" ? {} : { host: h.trim() });
}

/** The hosts of the `host` option: a string (comma-separated) or an array; `:port` allowed. */
function optionHosts(value: string | string[]): HostEntry[] {
  const list = Array.isArray(value) ? value : value.split(",");
  if (list.length === 0) throw new TypeError("the host option is an empty list");
  return list.map((h) => parseHostPort(h, false));
}

/** The port for host `i` of `n` from a list: one port for all, or one per host. */
function pickPort(
  list: readonly (number | undefined)[],
  i: number,
  n: number,
  what: string,
): number | undefined {
  if (list.length === 1) return list[0];
  if (list.length === n) return list[i];
  throw new TypeError(
    `${what} gives ${list.length} ports for ${n} hosts: give one, or one per host`,
  );
}

function parsePort(text: string): number {
  const port = Number(text);
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new TypeError(`invalid port: ${text}`);
  }
  return port;
}

function parseSsl(value: SslOption | string | undefined): { mode?: SslMode; ca?: string[] } {
  if (value === undefined) return {};
  if (value === true) return { mode: "require" };
  if (value === false) return { mode: "disable" };
  if (typeof value === "string") {
    if (!SSL_MODES.includes(value as SslMode)) {
      throw new TypeError(`invalid sslmode "${value}": use one of ${SSL_MODES.join(", ")}`);
    }
    return { mode: value as SslMode };
  }
  const ca = value.ca === undefined ? undefined : Array.isArray(value.ca) ? value.ca : [value.ca];
  return { mode: value.mode ?? (ca ? "verify-full" : "require"), ca };
}

/**
 * The names in a comma-separated publication list, read the way the server
 * reads `publication_names`: blanks around names are ignored, unquoted names
 * are lower-cased, and `"quoted"` names keep their case (`""` is a quote).
 */
export function parsePublications(text: string): string[] {
  const names: string[] = [];
  const blank = (c: string) => c === " " || c === "\t" || c === "\n" || c === "\r";
  let i = 0;
  for (;;) {
    while (i < text.length && blank(text[i])) i++;
    let name = "";
    if (text[i] === '"') {
      for (i++;; i++) {
        if (i >= text.length) throw new TypeError(`publications: unterminated quote in ${text}`);
        if (text[i] === '"') {
          if (text[i + 1] !== '"') break;
          i++;
        }
        name += text[i];
      }
      i++;
    } else {
      const from = i;
      while (i < text.length && text[i] !== "," && !blank(text[i])) i++;
      name = text.slice(from, i).replace(/[A-Z]/g, (c) => c.toLowerCase());
    }
    if (name === "") throw new TypeError(`publications: an empty name in "${text}"`);
    names.push(name);
    while (i < text.length && blank(text[i])) i++;
    if (i === text.length) return names;
    if (text[i] !== ",") throw new TypeError(`publications: expected a comma in "${text}"`);
    i++;
  }
}

/** Hands the user's `onnotice` (or console.log, postgres.js's default) the notice object. */
function noticeHook(onnotice: ((notice: Notice) => void) | undefined): (fields: FieldMap) => void {
  const hook = onnotice ?? ((notice: Notice) => console.log(notice));
  return (fields) => hook(noticeOf(fields));
}

/** URL query keys that configure the driver rather than being startup parameters. */
const DRIVER_KEYS = new Set([
  "query_timeout",
  "idle_timeout",
  "max_lifetime",
  "fetch_types",
  "sslmode",
  "sslrootcert",
  "sslnegotiation",
  "host",
  "port",
  "user",
  "password",
  "dbname",
  "connect_timeout",
  "application_name",
  "prepare",
  "max",
  "max_pipeline",
  "target_session_attrs",
  "load_balance_hosts",
  "max_protocol_version",
  "publications",
]);

/**
 * The hosts to try and their ports. Hosts come from the first of: `path`,
 * `host`, the URL's `?host=`, the URL's authority, `PGHOST`, localhost. A
 * port list (`port` option, `?port=`) applies over every host; else a host's
 * own `:port`, then the URL's ports, `PGPORT`, 5432. A list holds one port
 * for all hosts or one per host.
 */
function resolveHosts(
  options: Options,
  parsed: ParsedUrl,
  co: Coercion,
): { host: string; port: number }[] {
  const q = parsed.query;
  const urlHosts = parsed.hosts.some((h) => h.host !== undefined) ? parsed.hosts : undefined;
  const pgHost = env("PGHOST");
  const path = co.optional(options.path);
  const host = options.host === undefined || options.host === null
    ? undefined
    : Array.isArray(options.host)
    ? options.host.map((h) => co.text(h))
    : co.text(options.host);
  const entries: HostEntry[] = path !== undefined
    ? [{ host: path }]
    : host !== undefined
    ? optionHosts(host)
    : q.get("host")
    ? plainHosts(q.get("host")!)
    : urlHosts ?? (pgHost ? plainHosts(pgHost) : [{}]);
  const n = entries.length;
  const explicit: (number | undefined)[] | undefined = options.port !== undefined
    ? (Array.isArray(options.port) ? options.port : [options.port])
    : q.get("port")
    ? parsePortList(q.get("port")!)
    : undefined;
  // The URL's ports also serve hosts given elsewhere (options.host with a URL's port).
  const urlPorts = entries !== urlHosts && parsed.hosts.some((h) => h.port !== undefined) &&
      (parsed.hosts.length === 1 || parsed.hosts.length === n)
    ? parsed.hosts.map((h) => h.port)
    : undefined;
  const pgPort = env("PGPORT");
  const envPorts = pgPort ? parsePortList(pgPort) : undefined;
  return entries.map((entry, i) => {
    let port = explicit !== undefined ? pickPort(explicit, i, n, "the port option") : undefined;
    port ??= entry.port;
    if (port === undefined && urlPorts !== undefined) port = pickPort(urlPorts, i, n, "the URL");
    if (port === undefined && envPorts !== undefined) port = pickPort(envPorts, i, n, "PGPORT");
    if (port !== undefined && !(Number.isInteger(port) && port >= 1 && port <= 65535)) {
      throw new TypeError(`invalid port: ${port}`);
    }
    return { host: entry.host ?? "localhost", port: port ?? 5432 };
  });
}

/**
 * Turns user-supplied option values into strings. A value whose own
 * `toString` throws does not make `postgres()` throw: the first such error is
 * kept as `failure`, and the client rejects every query with it (postgres.js
 * reads these values only when it connects, so that is where its users see
 * such an error). Null and undefined mean "not given".
 */
class Coercion {
  failure: Error | undefined;

  text(value: unknown): string {
    if (typeof value === "string") return value;
    try {
      return String(value);
    } catch (e) {
      this.failure ??= e instanceof Error ? e : new Error(thrownText(e), { cause: e });
      return "";
    }
  }

  optional(value: unknown): string | undefined {
    return value === undefined || value === null ? undefined : this.text(value);
  }
}

/**
 * The connect timeout in ms: numbers and numeric strings are checked now (a
 * bad one throws a TypeError from `postgres()`); an object is converted with
 * `Number()` at each attempt (postgres.js reads it there), never here.
 */
function connectTimeout(option: Options["connect_timeout"], text: string | undefined) {
  const check = (seconds: number, shown: unknown): number => {
    if (!(seconds >= 0)) {
      throw new TypeError(
        `invalid connect_timeout: ${thrownText(shown)} (use a number of seconds, 0 for none)`,
      );
    }
    return seconds * 1000;
  };
  if (option === undefined) return text ? check(Number(text), text) : 30_000;
  if (option === null) return 0;
  if (typeof option === "number") return check(option, option);
  if (typeof option === "string") {
    return check(option.trim() === "" ? NaN : Number(option), JSON.stringify(option));
  }
  if (typeof option === "object" || typeof option === "function") {
    return (): number => {
      const seconds = Number(option); // the user's valueOf, at each attempt
      return check(seconds, seconds);
    };
  }
  throw new TypeError(`invalid connect_timeout: a ${typeof option} (use a number of seconds)`);
}

/** Applies options, URL, environment and defaults. */
export function resolveOptions(url: string | undefined, options: Options = {}): ResolvedOptions {
  const parsed: ParsedUrl = url === undefined ? { hosts: [], query: new Map() } : parseUrl(url);
  const q = parsed.query;
  const co = new Coercion();
  const entries = resolveHosts(options, parsed, co);
  const user = co.optional(options.user ?? options.username) ?? q.get("user") ?? parsed.user ??
    env("PGUSER") ?? env("USER") ?? "postgres";
  const database = co.optional(options.database ?? options.db) ?? q.get("dbname") ??
    parsed.database ?? env("PGDATABASE") ?? user;
  const option = options.password ?? options.pass;
  const given: PasswordSource = (typeof option === "function" ? option : co.optional(option)) ??
    q.get("password") ?? parsed.password ?? env("PGPASSWORD");
  const hosts: HostTarget[] = entries.map(({ host, port }) => ({
    host,
    port,
    // Read only if the server asks for a password, as libpq does; per host, as libpq does.
    password: given ?? (() => readPgpass({ host, port, database, user }) as Promise<string>),
  }));
  const target = options.target_session_attrs ?? q.get("target_session_attrs") ??
    env("PGTARGETSESSIONATTRS") ?? "any";
  if (!TARGET_SESSION_ATTRS.includes(target as TargetSessionAttrs)) {
    throw new TypeError(
      `invalid target_session_attrs "${target}": use one of ${TARGET_SESSION_ATTRS.join(", ")}`,
    );
  }
  const balance = options.load_balance_hosts ?? q.get("load_balance_hosts") ??
    env("PGLOADBALANCEHOSTS") ?? "disable";
  if (balance !== "disable" && balance !== "random") {
    throw new TypeError(`invalid load_balance_hosts "${balance}": use disable or random`);
  }
  const protocol = options.max_protocol_version ?? q.get("max_protocol_version") ??
    env("PGMAXPROTOCOLVERSION") ?? "3.0";
  const protocolMinor = typeof protocol === "string" && Object.hasOwn(PROTOCOL_MINORS, protocol)
    ? PROTOCOL_MINORS[protocol]
    : undefined;
  if (protocolMinor === undefined) {
    throw new TypeError(`invalid max_protocol_version "${protocol}": use 3.0, 3.2 or latest`);
  }
  const ssl = parseSsl(options.ssl ?? q.get("sslmode") ?? env("PGSSLMODE"));
  const rootCert = q.get("sslrootcert") ?? env("PGSSLROOTCERT");
  // As libpq: no file is read for a connection that never encrypts, and `system` means the
  // default roots (which the native TLS path trusts anyway).
  if (
    rootCert !== undefined && rootCert !== "system" && ssl.ca === undefined &&
    ssl.mode !== "disable"
  ) {
    try {
      ssl.ca = [Deno.readTextFileSync(rootCert)];
    } catch (e) {
      const hint = e instanceof Deno.errors.NotCapable ? ` (grant --allow-read=${rootCert})` : "";
      throw new TypeError(`cannot read sslrootcert ${rootCert}: ${(e as Error).message}${hint}`);
    }
  }
  const timeoutMs = connectTimeout(
    options.connect_timeout,
    q.get("connect_timeout") ?? env("PGCONNECT_TIMEOUT"),
  );

  const params: Record<string, string> = {
    user,
    database,
    application_name: co.optional(options.application_name) ?? q.get("application_name") ??
      env("PGAPPNAME") ?? "pgpipe",
    client_encoding: "UTF8",
    DateStyle: "ISO, MDY",
  };
  for (const [key, value] of q) if (!DRIVER_KEYS.has(key)) params[key] = value;
  for (const [key, value] of Object.entries(options.connection ?? {})) {
    const text = co.optional(value);
    if (text !== undefined) params[key] = text;
  }
  if (options.socket !== undefined && typeof options.socket !== "function") {
    throw new TypeError("the socket option must be a function returning a connected socket");
  }

  const max = options.max ?? Number(q.get("max") ?? 10);
  if (!(Number.isInteger(max) && max >= 1)) throw new TypeError("max must be a positive integer");
  const idleTimeout = options.idle_timeout ?? Number(q.get("idle_timeout") ?? 0);
  // postgres.js's default: 30 to 60 minutes, random so connections do not all retire at once.
  const maxLifetime = options.max_lifetime ??
    Number(q.get("max_lifetime") ?? 60 * (30 + Math.random() * 30));
  if (!(idleTimeout >= 0) || !(maxLifetime >= 0)) {
    throw new TypeError("idle_timeout and max_lifetime must be numbers of seconds (0: none)");
  }
  const publications = options.publications ?? q.get("publications") ?? "alltables";
  if (typeof publications !== "string") {
    throw new TypeError("publications must be a string of comma-separated names");
  }
  const publicationNames = parsePublications(publications);
  if (
    options.debug !== undefined && typeof options.debug !== "boolean" &&
    typeof options.debug !== "function"
  ) {
    throw new TypeError(`debug must be true, false or a function; got ${typeof options.debug}`);
  }
  const telemetry = options.telemetry;
  if (
    telemetry !== undefined && telemetry !== false &&
    (typeof telemetry !== "object" || telemetry === null)
  ) {
    throw new TypeError(
      `telemetry must be false or an object; got ${telemetry === null ? "null" : typeof telemetry}`,
    );
  }
  const maxPipeline = options.max_pipeline ?? Number(q.get("max_pipeline") ?? 1000);
  if (!(Number.isInteger(maxPipeline) && maxPipeline >= 1)) {
    throw new TypeError("max_pipeline must be a positive integer");
  }
  const sslmode = ssl.mode ?? "prefer";
  const negotiation = options.sslnegotiation ?? q.get("sslnegotiation") ??
    env("PGSSLNEGOTIATION") ?? "postgres";
  if (negotiation !== "postgres" && negotiation !== "direct") {
    throw new TypeError(`invalid sslnegotiation "${negotiation}": use postgres or direct`);
  }
  if (negotiation === "direct" && !/^(require|verify-ca|verify-full)$/.test(sslmode)) {
    // libpq's rule: direct TLS never falls back to plain, so a mode that allows plain is refused.
    throw new TypeError(
      `sslnegotiation=direct needs sslmode require, verify-ca or verify-full, not ${sslmode}`,
    );
  }
  const userSocket = options.socket;
  const first = hosts[0];
  const socketInfo = {
    host: hosts.map((h) => h.host),
    port: hosts.map((h) => h.port),
    ...(first.host.startsWith("/") ? { path: socketPath(first.host, first.port) } : {}),
    database,
    user,
    ssl: sslmode,
  };
  return {
    host: first.host,
    port: first.port,
    database,
    user,
    password: first.password,
    pass: given,
    ...(co.failure !== undefined ? { failure: co.failure } : {}),
    ...(userSocket !== undefined
      ? {
        socket: (target: { host: string; port: number }) => userSocket({ ...socketInfo, target }),
      }
      : {}),
    hosts,
    targetSessionAttrs: target as TargetSessionAttrs,
    loadBalanceHosts: balance,
    protocolMinor,
    sslmode,
    ca: ssl.ca,
    sslnegotiation: negotiation,
    max,
    idleTimeout: idleTimeout * 1000,
    maxLifetime: maxLifetime * 1000,
    fetchTypes: options.fetch_types ?? q.get("fetch_types") !== "false",
    debug: typeof options.debug === "function" ? options.debug : undefined,
    debugStacks: options.debug !== undefined && options.debug !== false,
    queryTimeout: (options.query_timeout ?? Number(q.get("query_timeout") ?? 0)) * 1000,
    maxQueue: options.max_queue ?? 100_000,
    connectTimeout: timeoutMs,
    prepare: options.prepare ??
      (options.no_prepare === true ? false : q.get("prepare") !== "false"),
    maxPipeline,
    maxPipelineBytes: options.max_pipeline_bytes ?? 16 * 1024 * 1024,
    maxStatements: options.max_statements ?? 1000,
    bigint: options.bigint ?? false,
    transform: normalizeTransform(options.transform),
    types: customTypes(options.types),
    params,
    onnotice: noticeHook(options.onnotice),
    onparameter: options.onparameter,
    onnotify: options.onnotify,
    publications,
    publicationNames,
    telemetry,
  };
}
