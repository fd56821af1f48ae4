/**
 * The syntax of host and port lists, in every form they are given: the URL's authority
 * (`a:5433,[::1]:5434`), the `host` option (an array, or a comma-separated string, each entry with
 * an optional `:port`), libpq's `host` keyword and `PGHOST` (names only), and port lists
 * (`port`, `?port=`, `PGPORT`). Which list wins is resolve.ts's `resolveHosts`.
 */

/** One entry of a host list: either part may be missing (then a default applies). */
export interface HostEntry {
  host?: string;
  port?: number;
}

/**
 * One `host[:port]` entry: `[v6]:port` in brackets; a socket directory (`/...`)
 * or an unbracketed IPv6 address carries no port. With `decode`, the entry is
 * URL text whose host is percent-decoded by it; without, it is trimmed.
 */
export function parseHostPort(entry: string, decode?: (text: string) => string): HostEntry {
  const text = decode ? entry : entry.trim();
  const unwrap = (s: string) => decode ? decode(s) : s;
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
export function parsePortList(text: string): (number | undefined)[] {
  return text.split(",").map((p) => p.trim() === "" ? undefined : parsePort(p.trim()));
}

/** A comma-separated list of host names (libpq's `host` keyword and `PGHOST`: no ports). */
export function plainHosts(text: string): HostEntry[] {
  return text.split(",").map((h) => h.trim() === "" ? {} : { host: h.trim() });
}

/** The hosts of the `host` option: a string (comma-separated) or an array; `:port` allowed. */
export function optionHosts(value: string | string[]): HostEntry[] {
  const list = Array.isArray(value) ? value : value.split(",");
  if (list.length === 0) throw new TypeError("the host option is an empty list");
  return list.map((h) => parseHostPort(h));
}

/** The port for host `i` of `n` from a list: one port for all, or one per host. */
export function pickPort(
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

/** A port number's text. */
function parsePort(text: string): number {
  const port = Number(text);
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new TypeError(`invalid port: ${text}`);
  }
  return port;
}

/** Checks a port given as a number (the `port` option's). */
export function checkPort(port: number): number {
  if (!(Number.isInteger(port) && port >= 1 && port <= 65535)) {
    throw new TypeError(`invalid port: ${port}`);
  }
  return port;
}
