/**
 * The connection URL: `postgres://user:password@host:port,host2:port2/database?keyword=value`
 * (also `postgresql://`). Its query holds libpq keywords (keywords.ts), postgres.js's own, and
 * anything else, which is a server setting sent at startup.
 */
import { type HostEntry, parseHostPort } from "./host_list.ts";

/** A URL taken apart (percent-decoded). */
export interface ParsedUrl {
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
 * Percent-decodes a part of the URL. The error quotes the part, or, for the password and the
 * query's values (`?sslpassword=`, `?sslkey=` with a key's text), only says which it is.
 */
function decode(s: string, secret?: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    throw new TypeError(
      `invalid percent-encoding in connection URL: ${secret ?? s}` +
        (secret ? " (encode a % in it as %25)" : ""),
    );
  }
}

/**
 * Parses `postgres://user:pass@host:port/db?key=value` (also `postgresql://`);
 * several hosts are separated by commas: `postgres://a:5432,b:5433/db`.
 */
export function parseUrl(url: string): ParsedUrl {
  const match = /^postgres(?:ql)?:\/\/([^/?#]*)([^?#]*)(?:\?([^#]*))?/.exec(url);
  if (!match) {
    throw new TypeError(
      "connection URL must start with postgres:// or postgresql:// " +
        "(or be libpq's keyword=value string)",
    );
  }
  const [, authority, path, search] = match;
  const out: ParsedUrl = { hosts: [], query: new Map() };
  let hosts = authority;
  const at = authority.lastIndexOf("@");
  if (at !== -1) {
    const userinfo = authority.slice(0, at);
    hosts = authority.slice(at + 1);
    const colon = userinfo.indexOf(":");
    out.user = decode(colon === -1 ? userinfo : userinfo.slice(0, colon));
    if (colon !== -1) out.password = decode(userinfo.slice(colon + 1), "the password");
  }
  if (hosts !== "") {
    out.hosts = hosts.split(",").map((entry) => parseHostPort(entry, decode));
    out.host = out.hosts[0].host;
    out.port = out.hosts[0].port;
  }
  if (path.length > 1) out.database = decode(path.slice(1));
  if (search) {
    for (const pair of search.split("&")) {
      if (pair === "") continue;
      const eq = pair.indexOf("=");
      const key = decode(eq === -1 ? pair : pair.slice(0, eq));
      const value = eq === -1 ? "" : pair.slice(eq + 1).replace(/\+/g, " ");
      out.query.set(key, decode(value, `the value of ${key}`));
    }
  }
  return out;
}

/**
 * A keyword's text in the URL: its query parameter (`?user=`), else the part of the URL that
 * names it (`user`, `password`, `dbname`). The authority's host and port lists are read by
 * resolve.ts's `resolveHosts`.
 */
export function urlText(url: ParsedUrl, keyword: string): string | undefined {
  const given = url.query.get(keyword);
  if (given !== undefined) return given;
  switch (keyword) {
    case "user":
      return url.user;
    case "password":
      return url.password;
    case "dbname":
      return url.database;
  }
  return undefined;
}
