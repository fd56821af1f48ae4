/**
 * Which keyword a `sql(...)` helper follows decides what it expands to. As in
 * postgres.js it is the last of the helper keywords in the text before it
 * (so `insert into users ${sql(row)}` is an insert, `update t set ${...}` an
 * update), matched case-insensitively as whole words. Unlike postgres.js,
 * comments and quoted strings or identifiers are skipped, so a keyword inside
 * them cannot mislead it.
 */

/** The keywords a helper expands after; `(` is a column list, like `select`. */
export type HelperKeyword =
  | "insert"
  | "update"
  | "select"
  | "returning"
  | "as"
  | "("
  | "values"
  | "in";

// Comments, string literals, quoted identifiers and dollar-quoted bodies.
const NOISE =
  /--[^\n]*|\/\*[\s\S]*?\*\/|'(?:[^']|'')*'|"(?:[^"]|"")*"|\$([A-Za-z_]\w*)?\$[\s\S]*?\$\1\$/g;

// Whole words; a parenthesis only when it stands apart (`(${sql(columns)})`, `( ${...}`).
const KEYWORD =
  /(?<![\w$])(?:insert|update|select|returning|as|values|in)(?![\w$])|(?<![^\s(])\((?![^\s(])/gi;

/**
 * `text` with its comments, string literals, quoted identifiers and dollar-quoted bodies each
 * turned into one space: what is left are the words the server reads as SQL.
 */
export function withoutNoise(text: string): string {
  return text.replace(NOISE, " ");
}

/** The last helper keyword in `before`, lower-cased, or null when there is none. */
export function lastKeyword(before: string): HelperKeyword | null {
  const text = withoutNoise(before);
  KEYWORD.lastIndex = 0;
  let last: string | null = null;
  for (let m = KEYWORD.exec(text); m !== null; m = KEYWORD.exec(text)) last = m[0];
  return last === null ? null : last.toLowerCase() as HelperKeyword;
}
