/**
 * How keyword values are read (keywords.ts says which reader each keyword uses). A value is text
 * when it comes from the URL, a service file, the environment or a default; from the options
 * object it may be of any type. Every reader either returns the value in the form connections
 * need or throws a TypeError that names the keyword, so a bad value fails `postgres()`; none
 * quotes a secret it was given.
 */
import { thrownText } from "../errors.ts";
import type { Coercion } from "./coercion.ts";

/** What a keyword's reader is told besides the value. */
export interface Given {
  /** The keyword's name, for error messages. */
  readonly keyword: string;
  /**
   * The value is text: from the URL, a service file, the environment or the default. Otherwise
   * it is the options object's own value, of any type.
   */
  readonly text: boolean;
  /** Turns an options object's value into a string without throwing (see Coercion). */
  readonly coercion: Coercion;
}

/** A reader of one keyword's values. */
export type Reader<T> = (value: unknown, given: Given) => T;

/** How a value is quoted in an error message: strings as JSON, anything else by its type. */
export function shown(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  return value === null ? "null" : `a ${typeof value}`;
}

/** A string: the options object's other values are converted (see Coercion). */
export function text(value: unknown, given: Given): string {
  return given.coercion.text(value);
}

/** One of `values`, exactly. */
export function oneOf<const T extends string>(values: readonly T[]): Reader<T> {
  const choices = values.length > 3
    ? `one of ${values.join(", ")}`
    : `${values.slice(0, -1).join(", ")} or ${values[values.length - 1]}`;
  return (value, given) => {
    if (values.includes(value as T)) return value as T;
    throw new TypeError(`invalid ${given.keyword} ${shown(value)}: use ${choices}`);
  };
}

/**
 * A number, from text or from the options object: a number, or a string holding one (numbers
 * read the same whichever source gives them). Anything else is NaN, which the callers refuse.
 */
function numberOf(value: unknown): number {
  if (typeof value === "number") return value;
  if (typeof value === "string") return value.trim() === "" ? NaN : Number(value);
  return NaN;
}

/** An integer of at least 1. */
export function positiveInteger(value: unknown, given: Given): number {
  const n = numberOf(value);
  if (!(Number.isInteger(n) && n >= 1)) {
    throw new TypeError(`${given.keyword} must be a positive integer; got ${shown(value)}`);
  }
  return n;
}

/** An integer of at least 0. */
export function count(value: unknown, given: Given): number {
  const n = numberOf(value);
  if (!(Number.isInteger(n) && n >= 0)) {
    throw new TypeError(`${given.keyword} must be an integer of 0 or more; got ${shown(value)}`);
  }
  return n;
}

/**
 * The longest time a timer can hold, in seconds: setTimeout takes at most 2^31 - 1 ms and fires
 * at once past it, and the pool spreads lifetimes by up to 10%. 20 days.
 */
const MAX_SECONDS = 20 * 24 * 60 * 60;

/** Refuses `seconds` unless it is a number of seconds a timer can hold; `shownAs` quotes it. */
function checkSeconds(seconds: number, shownAs: string, keyword: string): number {
  if (!(seconds >= 0 && seconds <= MAX_SECONDS)) {
    throw new TypeError(
      `invalid ${keyword}: ${shownAs} (use a number of seconds, 0 for none, at most ${MAX_SECONDS})`,
    );
  }
  return seconds;
}

/** A time in seconds (fractions allowed; 0: none), as milliseconds. */
export function seconds(value: unknown, given: Given): number {
  return checkSeconds(numberOf(value), shown(value), given.keyword) * 1000;
}

/** postgres.js's flags: text is true unless it is `false`; a boolean is taken as it is. */
export function flag(value: unknown, given: Given): boolean {
  if (typeof value === "boolean") return value;
  if (typeof value === "string") return value !== "false";
  throw new TypeError(`${given.keyword} must be true or false; got ${shown(value)}`);
}

/** libpq's switches (`keepalives`, `sslsni`, ...): `1` or `0`; a boolean or 0/1 as an option. */
export function libpqSwitch(value: unknown, given: Given): boolean {
  if (typeof value === "boolean") return value;
  if (value === 1 || value === "1") return true;
  if (value === 0 || value === "0") return false;
  throw new TypeError(`invalid ${given.keyword} ${shown(value)}: use 1 or 0`);
}

/**
 * A keyword pgpipe cannot honour: a value `harmless` accepts (libpq's default, or one that asks
 * for nothing missing) is taken, anything else refused with `why`. A secret's value is not quoted.
 */
export function unsupported(
  why: string,
  harmless: (text: string) => boolean = (t) => t === "",
  options: { secret?: boolean } = {},
): Reader<string> {
  return (value, given) => {
    const t = given.coercion.text(value);
    if (harmless(t)) return t;
    const what = options.secret ? given.keyword : `${given.keyword}=${t}`;
    throw new TypeError(`${what} is not supported: ${why}`);
  };
}

/** `connect_timeout`'s default (postgres.js's; libpq's is none). */
export const CONNECT_TIMEOUT = "30";

/**
 * The connect timeout in ms: numbers and numeric strings are checked now (a bad one throws a
 * TypeError from `postgres()`); an object is converted with `Number()` at each attempt
 * (postgres.js reads it there), never here. An empty text is the default.
 */
export function connectTimeout(value: unknown, given: Given): number | (() => number) {
  const check = (s: number, shownAs: unknown) =>
    checkSeconds(s, thrownText(shownAs), "connect_timeout") * 1000;
  if (given.text) {
    const t = value === "" ? CONNECT_TIMEOUT : value as string;
    return check(numberOf(t), t);
  }
  if (typeof value === "number") return check(value, value);
  if (typeof value === "string") return check(numberOf(value), JSON.stringify(value));
  if (typeof value === "object" || typeof value === "function") {
    return (): number => {
      const s = Number(value); // the user's valueOf, at each attempt
      return check(s, s);
    };
  }
  throw new TypeError(`invalid connect_timeout: a ${typeof value} (use a number of seconds)`);
}

/** `min_protocol_version` and `max_protocol_version`'s values and the minor version each names. */
const PROTOCOL_MINORS = { "3.0": 0, "3.2": 2, latest: 2 } as const;
const protocolName = oneOf(Object.keys(PROTOCOL_MINORS) as (keyof typeof PROTOCOL_MINORS)[]);

/** A protocol version, as its minor version (0 or 2). */
export function protocolVersion(value: unknown, given: Given): number {
  return PROTOCOL_MINORS[protocolName(value, given)];
}

/** TLS protocol versions, as libpq names them (`ssl_min_protocol_version`, ...). */
export const TLS_VERSIONS = ["TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"] as const;
/** One of {@link TLS_VERSIONS}. */
export type TlsVersion = typeof TLS_VERSIONS[number];

/** libpq's names of UTF-8, the one client encoding pgpipe reads and writes; `auto` means it too. */
const UTF8_NAMES = /^(utf-?8|unicode|auto)$/i;

/** `client_encoding`: UTF-8 only (pgpipe's text codecs are UTF-8). */
export function clientEncoding(value: unknown, given: Given): "UTF8" {
  const t = given.coercion.text(value);
  if (UTF8_NAMES.test(t)) return "UTF8";
  throw new TypeError(
    `client_encoding=${t} is not supported: pgpipe reads and writes text as UTF-8 only (use UTF8)`,
  );
}

/** A SCRAM key in base64 (libpq's `scram_client_key`, `scram_server_key`): 32 bytes. */
export function scramKey(value: unknown, given: Given): Uint8Array {
  const t = given.coercion.text(value);
  let bytes: Uint8Array | undefined;
  try {
    bytes = Uint8Array.from(atob(t), (c) => c.charCodeAt(0));
  } catch {
    // not base64: refused below
  }
  if (bytes?.length !== 32) {
    throw new TypeError(`${given.keyword} must be a 32-byte SCRAM-SHA-256 key in base64`);
  }
  return bytes;
}

/** `hostaddr`: numeric addresses, comma-separated, one per host (an empty one: look the host up). */
export function addressList(value: unknown, given: Given): string[] {
  const list = Array.isArray(value) ? value.map((v) => given.coercion.text(v)) : given.coercion
    .text(value).split(",");
  return list.map((entry) => {
    const address = entry.trim();
    const bare = address.replace(/^\[(.*)\]$/, "$1");
    if (bare !== "" && !/^[0-9.]+$/.test(bare) && !/^[0-9a-fA-F:.]*:[0-9a-fA-F:.]*$/.test(bare)) {
      throw new TypeError(`invalid hostaddr ${JSON.stringify(address)}: give a numeric IP address`);
    }
    return bare;
  });
}
