/**
 * `sql.subscribe` patterns, postgres.js's grammar:
 * `operation[:[schema.]table[=key]]`. The operation is `*` (the default),
 * `insert`, `update` or `delete`, and here also `truncate`; the schema
 * defaults to `public`; a table of `*` (or none) means every table; the key is
 * the row's replica identity values joined by commas (`update:users=1`).
 *
 * A pattern is normalised to one string, and a change is delivered to the
 * subscribers of each string it matches (see {@linkcode changeKeys}), so
 * dispatch is a few map lookups however many subscribers there are.
 */
import { QueryError } from "../errors.ts";

/** The operations a pattern may name. */
const COMMANDS = new Set(["*", "insert", "update", "delete", "truncate"]);

function invalid(pattern: string, why: string): QueryError {
  return new QueryError(
    "INVALID_SUBSCRIBE_PATTERN",
    `invalid subscribe pattern "${pattern}": ${why}`,
  );
}

/**
 * The normalised form of a pattern: `command`, `command:schema.table`,
 * `command:schema.*` or `command:schema.table=key`. Throws a QueryError
 * (`INVALID_SUBSCRIBE_PATTERN`) for anything else.
 */
export function parsePattern(pattern: unknown): string {
  if (typeof pattern !== "string") {
    throw new QueryError(
      "INVALID_SUBSCRIBE_PATTERN",
      `a subscribe pattern is a string such as "*" or "insert:users"; got ${typeof pattern}`,
    );
  }
  let command = "*";
  let target = "";
  const colon = pattern.indexOf(":");
  const head = (colon === -1 ? pattern : pattern.slice(0, colon)).toLowerCase();
  if (colon !== -1 || head === "" || COMMANDS.has(head)) {
    if (head !== "" && !COMMANDS.has(head)) {
      throw invalid(pattern, "the operation is one of *, insert, update, delete, truncate");
    }
    command = head || "*";
    target = colon === -1 ? "" : pattern.slice(colon + 1);
  } else {
    target = pattern; // a table alone, as postgres.js reads "users"
  }
  let key: string | null = null;
  const eq = target.indexOf("=");
  if (eq !== -1) {
    key = target.slice(eq + 1);
    target = target.slice(0, eq);
  }
  if (target === "" || target === "*") {
    if (key !== null) throw invalid(pattern, "a key needs a table");
    return command;
  }
  const dot = target.indexOf(".");
  const schema = dot === -1 ? "public" : target.slice(0, dot);
  const table = dot === -1 ? target : target.slice(dot + 1);
  if (schema === "" || table === "") throw invalid(pattern, "an empty schema or table name");
  if (key !== null && (table === "*" || command === "truncate")) {
    throw invalid(pattern, table === "*" ? "a key needs a table" : "a truncate has no row key");
  }
  return `${command}:${schema}.${table}` + (key === null ? "" : `=${key}`);
}

/**
 * Every normalised pattern a change matches. `key` is the row's replica
 * identity values joined by commas, or null when the table has no key
 * columns. Only patterns naming `truncate` see truncates: `*` means
 * insert, update and delete, as in postgres.js.
 */
export function changeKeys(
  command: string,
  schema: string,
  table: string,
  key: string | null,
): string[] {
  const path = `${schema}.${table}`;
  const out: string[] = [];
  for (const c of command === "truncate" ? ["truncate"] : ["*", command]) {
    out.push(c, `${c}:${schema}.*`, `${c}:${path}`);
    if (key !== null) out.push(`${c}:${path}=${key}`);
  }
  return out;
}
