/**
 * The connection keywords: every setting a connection URL's query can give, with where else it
 * comes from and how its value is read. One row per keyword, named as libpq names it (that name
 * is also its URL query key); resolve.ts reads each from the first source that gives it.
 *
 * A URL query key that is not a keyword here is a server setting, sent at startup (postgres.js's
 * rule). To add a keyword: a row in KEYWORDS (a parser beside the others if none fits), its field
 * in `Options` with its docs and what connections need of it in `ResolvedOptions` (options.ts),
 * and the line of `resolveOptions` (resolve.ts) that hands it on.
 */
import { type SslNegotiation, thrownText } from "../connection/transport/transport.ts";
import type { PasswordSource } from "../connection/startup.ts";
import type { Coercion } from "./coercion.ts";
import type { LoadBalanceHosts, Options, SslOption, TargetSessionAttrs } from "./options.ts";
import { parsePublications } from "./publications.ts";
import { parseSsl } from "./tls.ts";

/** One keyword: where each source names it, and how its value is read. */
export interface Keyword<T> {
  /**
   * Where the options object gives it: a field's name, or a function for aliases and
   * postgres.js's quirks (undefined and null: not given). Absent: the options object does not.
   */
  readonly option?: keyof Options | ((options: Options) => unknown);
  /** The environment variables that give it, the first set wins. Absent: none does. */
  readonly env?: readonly string[];
  /** Its text when no source gives it, read by `parse` like a given text. Absent: undefined. */
  readonly default?: string | (() => string);
  /** Reads a given value, or throws a TypeError that names the keyword. */
  readonly parse: (value: unknown, given: Given) => T;
}

/** What a keyword's `parse` is told besides the value. */
export interface Given {
  /** The keyword's name, for error messages. */
  readonly keyword: string;
  /**
   * The value is text: from the URL, the environment or the default. Otherwise it is the
   * options object's own value, of any type.
   */
  readonly text: boolean;
  /** Turns an options object's value into a string without throwing (see Coercion). */
  readonly coercion: Coercion;
}

// ---------------------------------------------------------------------------------------------
// How values are read

/** A string: the options object's other values are converted (see Coercion). */
function text(value: unknown, given: Given): string {
  return given.coercion.text(value);
}

/** A password, or the options object's function that returns one. */
function password(value: unknown, given: Given): PasswordSource {
  return typeof value === "function" ? value as PasswordSource : given.coercion.text(value);
}

/** One of `values`, exactly. */
function oneOf<const T extends string>(values: readonly T[]): (value: unknown, given: Given) => T {
  const choices = values.length > 3
    ? `one of ${values.join(", ")}`
    : `${values.slice(0, -1).join(", ")} or ${values[values.length - 1]}`;
  return (value, given) => {
    if (values.includes(value as T)) return value as T;
    throw new TypeError(`invalid ${given.keyword} "${value}": use ${choices}`);
  };
}

/** A number: text is converted, the options object's value is taken as it is. */
function numeric(value: unknown, given: Given): number {
  return given.text ? Number(value) : value as number;
}

/** An integer of at least 1. */
function positiveInteger(value: unknown, given: Given): number {
  const n = numeric(value, given);
  if (!(Number.isInteger(n) && n >= 1)) {
    throw new TypeError(`${given.keyword} must be a positive integer`);
  }
  return n;
}

/** A pool lifetime in seconds (0: none), as milliseconds. */
function lifetime(value: unknown, given: Given): number {
  const seconds = numeric(value, given);
  if (!(seconds >= 0)) {
    throw new TypeError("idle_timeout and max_lifetime must be numbers of seconds (0: none)");
  }
  return Number(seconds) * 1000;
}

/** Seconds, as milliseconds. */
function milliseconds(value: unknown, given: Given): number {
  return numeric(value, given) * 1000;
}

/** postgres.js's flags: text is true unless it is `false`; an option is taken as it is. */
function flag(value: unknown, given: Given): boolean {
  return given.text ? value !== "false" : value as boolean;
}

/** postgres.js's connect_timeout default (libpq's is none). */
const CONNECT_TIMEOUT = "30";

/**
 * The connect timeout in ms: numbers and numeric strings are checked now (a
 * bad one throws a TypeError from `postgres()`); an object is converted with
 * `Number()` at each attempt (postgres.js reads it there), never here. An
 * empty text is the default.
 */
function connectTimeout(value: unknown, given: Given): number | (() => number) {
  const check = (seconds: number, shown: unknown): number => {
    if (!(seconds >= 0)) {
      throw new TypeError(
        `invalid connect_timeout: ${thrownText(shown)} (use a number of seconds, 0 for none)`,
      );
    }
    return seconds * 1000;
  };
  if (given.text) {
    const text = value === "" ? CONNECT_TIMEOUT : value as string;
    return check(Number(text), text);
  }
  if (typeof value === "number") return check(value, value);
  if (typeof value === "string") {
    return check(value.trim() === "" ? NaN : Number(value), JSON.stringify(value));
  }
  if (typeof value === "object" || typeof value === "function") {
    return (): number => {
      const seconds = Number(value); // the user's valueOf, at each attempt
      return check(seconds, seconds);
    };
  }
  throw new TypeError(`invalid connect_timeout: a ${typeof value} (use a number of seconds)`);
}

/** `max_protocol_version`'s values and the minor version each asks for. */
const PROTOCOL_MINORS = { "3.0": 0, "3.2": 2, latest: 2 } as const;
const protocolVersion = oneOf(Object.keys(PROTOCOL_MINORS) as (keyof typeof PROTOCOL_MINORS)[]);

/** The publication list as given, and the names it holds. */
function publications(value: unknown): { list: string; names: string[] } {
  if (typeof value !== "string") {
    throw new TypeError("publications must be a string of comma-separated names");
  }
  return { list: value, names: parsePublications(value) };
}

// ---------------------------------------------------------------------------------------------
// The keywords

/**
 * `host` and `port`: lists whose entries pair up across sources (a host's own `:port`, one port
 * list for every host), so resolve.ts's `resolveHosts` reads them together instead of as rows of
 * KEYWORDS. They come from the `path`, `host` and `port` options, the URL's `?host=` and
 * `?port=`, the URL's authority, these variables, then these defaults.
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
  application_name: {
    option: "application_name",
    env: ["PGAPPNAME"],
    default: "pgpipe",
    parse: text,
  },
  target_session_attrs: {
    option: "target_session_attrs",
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
    option: "load_balance_hosts",
    env: ["PGLOADBALANCEHOSTS"],
    default: "disable",
    parse: oneOf<LoadBalanceHosts>(["disable", "random"]),
  },
  /** Read as the protocol minor version it asks for (0 or 2). */
  max_protocol_version: {
    option: "max_protocol_version",
    env: ["PGMAXPROTOCOLVERSION"],
    default: "3.0",
    parse: (value, given) => PROTOCOL_MINORS[protocolVersion(value, given)],
  },
  /** The `ssl` option also takes a boolean, or a mode with CA certificates. */
  sslmode: {
    option: "ssl",
    env: ["PGSSLMODE"],
    default: "prefer",
    parse: (value) => parseSsl(value as SslOption),
  },
  /** A file of CA certificates (the `ssl` option's `ca` gives them instead); `system`: the defaults. */
  sslrootcert: { env: ["PGSSLROOTCERT"], parse: text },
  sslnegotiation: {
    option: "sslnegotiation",
    env: ["PGSSLNEGOTIATION"],
    default: "postgres",
    parse: oneOf<SslNegotiation>(["postgres", "direct"]),
  },
  /** Milliseconds; a function when the option is an object read at each attempt. */
  connect_timeout: {
    option: (o) => o.connect_timeout === null ? 0 : o.connect_timeout,
    env: ["PGCONNECT_TIMEOUT"],
    default: CONNECT_TIMEOUT,
    parse: connectTimeout,
  },

  // postgres.js's own (times are read as milliseconds)
  max: { option: "max", default: "10", parse: positiveInteger },
  max_pipeline: { option: "max_pipeline", default: "1000", parse: positiveInteger },
  idle_timeout: { option: "idle_timeout", default: "0", parse: lifetime },
  /** Random, 30 to 60 minutes, so connections do not all retire at once. */
  max_lifetime: {
    option: "max_lifetime",
    default: () => String(60 * (30 + Math.random() * 30)),
    parse: lifetime,
  },
  query_timeout: { option: "query_timeout", default: "0", parse: milliseconds },
  fetch_types: { option: "fetch_types", default: "true", parse: flag },
  prepare: {
    option: (o) => o.prepare ?? (o.no_prepare === true ? false : undefined),
    default: "true",
    parse: flag,
  },
  force_prepare: { option: "force_prepare", default: "false", parse: flag },
  publications: { option: "publications", default: "alltables", parse: publications },
} satisfies Record<string, Keyword<unknown>>;

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
