/**
 * libpq's other connection string: `host=db.example.com port=5432 dbname=app sslmode=verify-ca`,
 * `keyword = value` pairs separated by whitespace, a value in single quotes when it holds spaces
 * (`password='a b'`), backslash escaping the next character. Providers hand these out (Cloud
 * SQL's and Azure's psql examples), so `postgres()` takes one wherever it takes a URL. Every
 * keyword must be one pgpipe knows (keywords.ts): libpq refuses an unknown one too.
 */
import type { ParsedUrl } from "./url.ts";

/** Whether `text` is a keyword/value connection string rather than a URL. */
export function isConninfo(text: string): boolean {
  // Letters spelled in both cases: a process's first case-insensitive regex costs ~0.2 ms.
  return !/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(text.trimStart()) && /^\s*[A-Za-z_]+\s*=/.test(text);
}

/** Reads one value starting at `at`: quoted, or up to the next whitespace. */
function value(text: string, at: number, keyword: string): { value: string; end: number } {
  let out = "";
  if (text[at] === "'") {
    for (let i = at + 1; i < text.length; i++) {
      const c = text[i];
      if (c === "\\" && i + 1 < text.length) out += text[++i];
      else if (c === "'") return { value: out, end: i + 1 };
      else out += c;
    }
    throw new TypeError(`unterminated quoted value of "${keyword}" in the connection string`);
  }
  let i = at;
  for (; i < text.length && !/\s/.test(text[i]); i++) {
    if (text[i] === "\\" && i + 1 < text.length) i++;
    out += text[i];
  }
  return { value: out, end: i };
}

/** Keywords whose values are secrets (a key's text, too). */
const SECRETS = new Set([
  "password",
  "sslpassword",
  "sslkey",
  "scram_client_key",
  "scram_server_key",
  "oauth_client_secret",
]);

/**
 * What an error calls a keyword that is not one. Right after a secret's value it is most likely
 * the rest of that value (unquoted, it ended at a space), so it is not quoted.
 */
function named(keyword: string, previous: string | undefined): string {
  return previous !== undefined && SECRETS.has(previous)
    ? `the word after ${previous}'s value (quote a value that holds spaces: '...')`
    : `"${keyword}"`;
}

/**
 * Parses a keyword/value connection string into the shape of a parsed URL: every pair lands in
 * `query`, where the URL's own `?host=`, `?port=`, `?user=`, `?password=` and `?dbname=` are
 * read from too. `isKeyword` decides which keywords exist.
 */
export function parseConninfo(text: string, isKeyword: (key: string) => boolean): ParsedUrl {
  const query = new Map<string, string>();
  let at = 0;
  let previous: string | undefined;
  for (;;) {
    while (at < text.length && /\s/.test(text[at])) at++;
    if (at >= text.length) break;
    const start = at;
    while (at < text.length && text[at] !== "=" && !/\s/.test(text[at])) at++;
    const keyword = text.slice(start, at);
    while (at < text.length && /\s/.test(text[at])) at++;
    if (text[at] !== "=") {
      throw new TypeError(`missing "=" after ${named(keyword, previous)} in the connection string`);
    }
    at++;
    // libpq skips whitespace after "=" too, so `key= value` is key=value.
    while (at < text.length && /\s/.test(text[at])) at++;
    const read = value(text, at, keyword);
    at = read.end;
    if (!isKeyword(keyword)) {
      throw new TypeError(
        `invalid connection option ${named(keyword, previous)} in the connection string`,
      );
    }
    query.set(keyword, read.value);
    previous = keyword;
  }
  return { hosts: [], query };
}
