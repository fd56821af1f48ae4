/**
 * The connection keywords: every setting a connection URL's query can give, with where else it
 * comes from and how its value is read (values.ts). One row per keyword, named as libpq names it
 * (that name is also its URL query key); resolve.ts reads each from the first source that gives
 * it. Every keyword of libpq 18 has a row: honoured with libpq's meaning, or accepted where its
 * value asks for nothing pgpipe lacks and refused otherwise, saying why. None is ever sent to the
 * server as a setting.
 *
 * A URL query key that is not a keyword here is a server setting, sent at startup (postgres.js's
 * rule). To add a keyword: a row in KEYWORDS (a reader in values.ts if none fits), its field in
 * `Options` with its docs and what connections need of it in `ResolvedOptions` (options.ts),
 * and the line of `resolveOptions` (resolve.ts) that hands it on.
 */
import type { SslNegotiation } from "../connection/transport/transport.ts";
import type { PasswordSource } from "../connection/startup.ts";
import { parseRequireAuth, type RequireAuth } from "../protocol/auth_policy.ts";
import type { LoadBalanceHosts, TargetSessionAttrs } from "../connection/hosts.ts";
import type { Options } from "./options.ts";
import { parsePublications } from "./publications.ts";
import { parseSsl, sslObject } from "./tls.ts";
import {
  addressList,
  clientEncoding,
  CONNECT_TIMEOUT,
  connectTimeout,
  count,
  flag,
  type Given,
  libpqSwitch,
  oneOf,
  positiveInteger,
  protocolVersion,
  type Reader,
  scramKey,
  seconds,
  text,
  TLS_VERSIONS,
  type TlsVersion,
  unsupported,
} from "./values.ts";

export type { Given };

/** One keyword: where each source names it, and how its value is read. */
export interface Keyword<T> {
  /**
   * Where the options object gives it: a field's name, or a function for aliases and
   * postgres.js's quirks (undefined and null: not given). Absent: the field of the keyword's own
   * name.
   */
  readonly option?: keyof Options | ((options: Options) => unknown);
  /** The environment variables that give it, the first set wins. Absent: none does. */
  readonly env?: readonly string[];
  /** Its text when no source gives it, read by `parse` like a given text. Absent: undefined. */
  readonly default?: string | (() => string);
  /** Reads a given value, or throws a TypeError that names the keyword. */
  readonly parse: Reader<T>;
}

/** A password, or the options object's function that returns one. */
function password(value: unknown, given: Given): PasswordSource {
  return typeof value === "function" ? value as PasswordSource : given.coercion.text(value);
}

/** `require_auth`: an empty one is none, as in libpq. */
function requireAuth(value: unknown, given: Given): RequireAuth | undefined {
  const t = given.coercion.text(value);
  return t === "" ? undefined : parseRequireAuth(t);
}

/** A pool lifetime in seconds (0: none), as milliseconds. */
const lifetime = seconds;

/** The publication list as given, and the names it holds. */
function publications(value: unknown): { list: string; names: string[] } {
  if (typeof value !== "string") {
    throw new TypeError("publications must be a string of comma-separated names");
  }
  return { list: value, names: parsePublications(value) };
}

const tlsVersion = oneOf<TlsVersion>(TLS_VERSIONS);

/** libpq's false values of `replication` (anything else asks for a walsender). */
const NOT_REPLICATION = /^(|0|off|false|no)$/i;

/** Why the keywords pgpipe cannot honour are refused. */
const WHY = {
  socketOption: "Deno gives no access to that socket option (the system default applies)",
  crl: "neither TLS path checks certificate revocation lists (Deno's node:tls parses a CRL " +
    "and ignores it)",
  keylog: "neither TLS path can log one connection's keys (Deno's native TLS logs every " +
    "connection of a process started with the SSLKEYLOGFILE environment variable)",
  requirepeer: "Deno cannot read a unix socket peer's credentials",
  oauth: "pgpipe has no OAuth (OAUTHBEARER) client",
  replication: "pgpipe opens replication connections itself for sql.subscribe(); a pool of " +
    "walsender connections cannot run its queries",
  compression: "TLS compression is gone from TLS 1.3 and from both TLS paths",
  gssenc: "pgpipe has no GSSAPI, so it cannot encrypt with it",
  certmode: "neither TLS path tells whether the server asked for the client certificate",
} as const;

// ---------------------------------------------------------------------------------------------
// The keywords

/**
 * `host` and `port`: lists whose entries pair up across sources (a host's own `:port`, one port
 * list for every host), so resolve.ts's `resolveHosts` reads them together instead of as rows of
 * KEYWORDS. They come from the `path`, `host` and `port` options, the URL's `?host=` and
 * `?port=`, the URL's authority, a service file, these variables, then these defaults.
 */
export const HOST_KEYWORDS = {
  host: { env: "PGHOST", default: "localhost" },
  port: { env: "PGPORT", default: 5432 },
} as const;

/**
 * Every other keyword. They are read in this order, so when two option values' `toString` throw,
 * the first one's error is the one the client keeps (see Coercion).
 */
export const KEYWORDS = {
  // libpq's keywords
  /** The service file section to read (resolve.ts reads it before any other keyword). */
  service: { env: ["PGSERVICE"], parse: text },
  /** The service file (libpq 18); else `~/.pg_service.conf`, then `$PGSYSCONFDIR/pg_service.conf`. */
  servicefile: { env: ["PGSERVICEFILE"], parse: text },
  user: {
    option: (o) => o.user ?? o.username,
    env: ["PGUSER", "USER"],
    default: "postgres",
    parse: text,
  },
  /** Without one, the database is the user's name (resolve.ts). */
  dbname: { option: (o) => o.database ?? o.db, env: ["PGDATABASE"], parse: text },
  /** Without one, the password file, read per host when the server asks (resolve.ts). */
  password: { option: (o) => o.password ?? o.pass, env: ["PGPASSWORD"], parse: password },
  /** The password file; without one, `~/.pgpass` (resolve.ts). */
  passfile: { env: ["PGPASSFILE"], parse: text },
  require_auth: { env: ["PGREQUIREAUTH"], parse: requireAuth },
  channel_binding: {
    env: ["PGCHANNELBINDING"],
    default: "prefer",
    parse: oneOf(["disable", "prefer", "require"]),
  },
  /** One numeric address per host (resolve.ts pairs them). */
  hostaddr: { env: ["PGHOSTADDR"], parse: addressList },
  /** Milliseconds; a function when the option is an object read at each attempt. */
  connect_timeout: {
    option: (o) => o.connect_timeout === null ? 0 : o.connect_timeout,
    env: ["PGCONNECT_TIMEOUT"],
    default: CONNECT_TIMEOUT,
    parse: connectTimeout,
  },
  client_encoding: { env: ["PGCLIENTENCODING"], parse: clientEncoding },
  /** Command-line options for the server, sent as the `options` startup parameter. */
  options: { env: ["PGOPTIONS"], parse: text },
  /** Without one, `fallback_application_name`, then "pgpipe" (resolve.ts). */
  application_name: { env: ["PGAPPNAME"], parse: text },
  fallback_application_name: { parse: text },
  keepalives: { default: "1", parse: libpqSwitch },
  /** Milliseconds (0: the system's default). */
  keepalives_idle: { parse: seconds },
  keepalives_interval: { parse: unsupported(WHY.socketOption, (t) => t === "" || t === "0") },
  keepalives_count: { parse: unsupported(WHY.socketOption, (t) => t === "" || t === "0") },
  tcp_user_timeout: { parse: unsupported(WHY.socketOption, (t) => t === "" || t === "0") },
  replication: { parse: unsupported(WHY.replication, (t) => NOT_REPLICATION.test(t)) },
  gssencmode: {
    env: ["PGGSSENCMODE"],
    default: "disable",
    parse: (value, given) => {
      const mode = oneOf(["disable", "prefer", "require"])(value, given);
      return unsupported(WHY.gssenc, (t) => t !== "require")(mode, given);
    },
  },
  /**
   * The `ssl` option also takes a boolean, or a mode with certificates (tls.ts). No default here:
   * it is `prefer`, or `verify-full` with `sslrootcert=system` (tls.ts, as in libpq).
   */
  sslmode: {
    option: "ssl",
    env: ["PGSSLMODE"],
    parse: parseSsl,
  },
  sslnegotiation: {
    option: "sslnegotiation",
    env: ["PGSSLNEGOTIATION"],
    default: "postgres",
    parse: oneOf<SslNegotiation>(["postgres", "direct"]),
  },
  sslcompression: {
    env: ["PGSSLCOMPRESSION"],
    default: "0",
    parse: unsupported(WHY.compression, (t) => t === "0"),
  },
  /** A file, or the certificate's PEM text (also the `ssl` option's `cert`). */
  sslcert: { option: (o) => o.sslcert ?? sslObject(o.ssl)?.cert, env: ["PGSSLCERT"], parse: text },
  /** A file, or the key's PEM text (also the `ssl` option's `key`). */
  sslkey: { option: (o) => o.sslkey ?? sslObject(o.ssl)?.key, env: ["PGSSLKEY"], parse: text },
  /** The key's passphrase (also the `ssl` option's `passphrase`). */
  sslpassword: { option: (o) => o.sslpassword ?? sslObject(o.ssl)?.passphrase, parse: text },
  sslcertmode: {
    env: ["PGSSLCERTMODE"],
    default: "allow",
    parse: (value, given) => {
      const mode = oneOf(["disable", "allow", "require"])(value, given);
      return unsupported(WHY.certmode, (t) => t !== "require")(mode, given) as
        | "disable"
        | "allow";
    },
  },
  /** A file of CA certificates, their PEM text, or `system` (the `ssl` option's `ca` gives them). */
  sslrootcert: { env: ["PGSSLROOTCERT"], parse: text },
  sslcrl: { env: ["PGSSLCRL"], parse: unsupported(WHY.crl) },
  sslcrldir: { env: ["PGSSLCRLDIR"], parse: unsupported(WHY.crl) },
  sslsni: { env: ["PGSSLSNI"], default: "1", parse: libpqSwitch },
  sslkeylogfile: { parse: unsupported(WHY.keylog) },
  requirepeer: { env: ["PGREQUIREPEER"], parse: unsupported(WHY.requirepeer) },
  /** Also the `ssl` option's `minVersion`. */
  ssl_min_protocol_version: {
    option: (o) => o.ssl_min_protocol_version ?? sslObject(o.ssl)?.minVersion,
    env: ["PGSSLMINPROTOCOLVERSION"],
    default: "TLSv1.2",
    parse: tlsVersion,
  },
  /** Also the `ssl` option's `maxVersion`. */
  ssl_max_protocol_version: {
    option: (o) => o.ssl_max_protocol_version ?? sslObject(o.ssl)?.maxVersion,
    env: ["PGSSLMAXPROTOCOLVERSION"],
    parse: tlsVersion,
  },
  /** Read as the protocol minor version it asks for (0 or 2). */
  min_protocol_version: {
    env: ["PGMINPROTOCOLVERSION"],
    default: "3.0",
    parse: protocolVersion,
  },
  /** Read as the protocol minor version it asks for (0 or 2). */
  max_protocol_version: {
    env: ["PGMAXPROTOCOLVERSION"],
    default: "3.0",
    parse: protocolVersion,
  },
  // GSSAPI's: harmless without GSSAPI (a server that asks for it gets AUTH_UNSUPPORTED).
  krbsrvname: { env: ["PGKRBSRVNAME"], parse: text },
  gsslib: { env: ["PGGSSLIB"], parse: oneOf(["gssapi", "sspi"]) },
  gssdelegation: { env: ["PGGSSDELEGATION"], default: "0", parse: libpqSwitch },
  target_session_attrs: {
    env: ["PGTARGETSESSIONATTRS"],
    default: "any",
    parse: oneOf<TargetSessionAttrs>([
      "any",
      "read-write",
      "read-only",
      "primary",
      "standby",
      "prefer-standby",
    ]),
  },
  load_balance_hosts: {
    env: ["PGLOADBALANCEHOSTS"],
    default: "disable",
    parse: oneOf<LoadBalanceHosts>(["disable", "random"]),
  },
  oauth_issuer: { parse: unsupported(WHY.oauth) },
  oauth_client_id: { parse: unsupported(WHY.oauth) },
  oauth_client_secret: { parse: unsupported(WHY.oauth, undefined, { secret: true }) },
  oauth_scope: { parse: unsupported(WHY.oauth) },
  scram_client_key: { parse: scramKey },
  scram_server_key: { parse: scramKey },

  // postgres.js's own (times are read as milliseconds)
  max: { default: "10", parse: positiveInteger },
  max_pipeline: { default: "1000", parse: positiveInteger },
  max_pipeline_bytes: { default: String(16 * 1024 * 1024), parse: positiveInteger },
  max_queue: { default: "100000", parse: count },
  max_statements: { default: "1000", parse: count },
  idle_timeout: { default: "0", parse: lifetime },
  /** Random, 30 to 60 minutes, so connections do not all retire at once. */
  max_lifetime: {
    default: () => String(60 * (30 + Math.random() * 30)),
    parse: lifetime,
  },
  query_timeout: { default: "0", parse: seconds },
  fetch_types: { default: "true", parse: flag },
  prepare: {
    option: (o) => o.prepare ?? (o.no_prepare === true ? false : undefined),
    default: "true",
    parse: flag,
  },
  force_prepare: { default: "false", parse: flag },
  bigint: { default: "false", parse: flag },
  publications: { default: "alltables", parse: publications },
} satisfies Record<string, Keyword<unknown>>;

/** libpq's own keywords, made when a service file is first read (no other client needs them). */
let libpqKeywords: ReadonlySet<string> | undefined;

/** Whether `key` is one of libpq's own keywords (a service file may give only these). */
export function isLibpqKeyword(key: string): boolean {
  if (libpqKeywords === undefined) {
    const names = Object.keys(KEYWORDS); // libpq's come first, up to postgres.js's `max`
    libpqKeywords = new Set(["host", "port", ...names.slice(0, names.indexOf("max"))]);
  }
  return libpqKeywords.has(key);
}

/** Each keyword's value once read: undefined only for those without a default. */
export type Settings = {
  [K in keyof typeof KEYWORDS]: (typeof KEYWORDS)[K] extends { default: unknown }
    ? ReturnType<(typeof KEYWORDS)[K]["parse"]>
    : ReturnType<(typeof KEYWORDS)[K]["parse"]> | undefined;
};

/** Whether a URL query key is a keyword (else it is a server setting, sent at startup). */
export function isKeyword(key: string): boolean {
  return Object.hasOwn(KEYWORDS, key) || Object.hasOwn(HOST_KEYWORDS, key);
}
