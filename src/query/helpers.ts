/**
 * `sql(objectOrRows, ...columns)` helpers: dynamic inserts, updates, column
 * lists, value lists and `in` lists, expanded when the query is compiled,
 * after the keyword before them (see keyword.ts). Values always become
 * parameters (or inline fragments); names are escaped identifiers.
 */
import { QueryError } from "../errors.ts";
import { escapeIdentifier, notTagged } from "./identifier.ts";
import { type HelperKeyword, lastKeyword } from "./keyword.ts";

/**
 * A helper made by `sql(value, ...columns)`; what it expands to depends on the
 * keyword before it in the query.
 *
 * | before | `sql(...)` | expands to |
 * | --- | --- | --- |
 * | `insert into t` | object or array of objects | `("a","b") values ($1,$2),($3,$4)` |
 * | `update t set` | object | `"a" = $1, "b" = $2` |
 * | `select`, `returning` | column names | `"a","b"` |
 * | `select`, `returning` | object | `$1 as "a",$2 as "b"` |
 * | `values` | array, array of arrays, object | `($1,$2),($3,$4)` |
 * | `in` | array of values | `($1,$2,$3)`; empty: `(null)` |
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * const users = [{ name: "Ada", age: 36 }, { name: "Alan", age: 41 }];
 * await sql`insert into users ${sql(users, "name", "age")}`;
 * await sql`update users set ${sql({ age: 37 })} where name = ${"Ada"}`;
 * await sql`select ${sql(["name", "age"])} from users where age in ${sql([36, 37])}`;
 * ```
 */
export class Helper {
  /** The object, rows, values or names given. */
  readonly first: unknown;
  /** The column names given after it (flattened). */
  readonly columns: readonly unknown[];

  /** Made by `sql(value, ...columns)`; not meant to be called directly. */
  constructor(first: unknown, columns: readonly unknown[]) {
    this.first = first;
    this.columns = columns;
  }

  /** A helper is not a query: awaiting it throws `NOT_TAGGED_CALL`. */
  then(): never {
    return notTagged();
  }

  /** Throws `NOT_TAGGED_CALL`, as `then` does. */
  catch(): never {
    return notTagged();
  }

  /** Throws `NOT_TAGGED_CALL`, as `then` does. */
  finally(): never {
    return notTagged();
  }
}

/** Where a helper writes: the query text so far, and a way to add a value. */
export interface HelperTarget {
  /** The SQL text so far (the helper appends to it). */
  text: string;
  /** Appends a value: a fragment inline, anything else as the next parameter. */
  value(value: unknown): void;
}

function invalid(message: string): QueryError {
  return new QueryError("INVALID_HELPER", message);
}

function isRecord(x: unknown): x is Record<string, unknown> {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

/** Expands `helper` into `t`, after the keyword found in `t.text`. */
export function buildHelper(
  helper: Helper,
  t: HelperTarget,
  columnTo: ((name: string) => string) | undefined,
): void {
  const keyword = lastKeyword(t.text);
  const name = (x: unknown) =>
    escapeIdentifier(columnTo !== undefined && typeof x === "string" ? columnTo(x) : x);
  const { first, columns } = helper;
  switch (keyword) {
    case "insert":
      return insert(first, columns, t, name);
    case "update":
      return update(first, columns, t, name);
    case "values":
    case "in":
      return values(first, columns, t, keyword);
    default:
      return select(first, columns, t, name, keyword);
  }
}

/** The columns to use: those given, else the keys of the first row. */
function columnsOf(row: unknown, given: readonly unknown[], what: string): readonly unknown[] {
  if (!isRecord(row)) throw invalid(`${what} needs an object (or an array of objects)`);
  const columns = given.length > 0 ? given : Object.keys(row);
  if (columns.length === 0) throw invalid(`${what} needs at least one column`);
  return columns;
}

function rowsText(
  rows: readonly unknown[],
  columns: readonly (string | number)[],
  t: HelperTarget,
): void {
  for (let r = 0; r < rows.length; r++) {
    const row = rows[r];
    if (typeof row !== "object" || row === null) {
      throw invalid(`row ${r} is ${row === null ? "null" : typeof row}, not an object or array`);
    }
    t.text += r === 0 ? "(" : ",(";
    for (let c = 0; c < columns.length; c++) {
      if (c > 0) t.text += ",";
      t.value((row as Record<string | number, unknown>)[columns[c]]); // missing: undefined
    }
    t.text += ")";
  }
}

function insert(
  first: unknown,
  given: readonly unknown[],
  t: HelperTarget,
  name: (x: unknown) => string,
): void {
  const rows = Array.isArray(first) ? first : [first];
  if (rows.length === 0) throw invalid("insert needs at least one row");
  const columns = columnsOf(rows[0], given, "insert");
  t.text += "(" + columns.map(name).join(",") + ") values ";
  rowsText(rows, columns as string[], t);
}

function update(
  first: unknown,
  given: readonly unknown[],
  t: HelperTarget,
  name: (x: unknown) => string,
): void {
  const columns = columnsOf(first, given, "update");
  const row = first as Record<string, unknown>;
  for (let i = 0; i < columns.length; i++) {
    t.text += (i === 0 ? "" : ", ") + name(columns[i]) + " = ";
    t.value(row[columns[i] as string]);
  }
}

function values(
  first: unknown,
  given: readonly unknown[],
  t: HelperTarget,
  keyword: "values" | "in",
): void {
  if (Array.isArray(first)) {
    if (first.length === 0) {
      if (keyword === "values") throw invalid("values needs at least one value");
      t.text += "(null)"; // valid SQL that matches no row (as in postgres.js)
      return;
    }
    if (Array.isArray(first[0])) {
      // Rows of values; an IN list of rows needs its own parentheses: (a, b) in ((1, 2), (3, 4)).
      const columns = first[0].map((_, i) => i);
      if (keyword === "in") t.text += "(";
      rowsText(first, columns, t);
      if (keyword === "in") t.text += ")";
      return;
    }
    rowsText([first], first.map((_, i) => i), t); // one row of values: ($1,$2,$3)
    return;
  }
  rowsText([first], columnsOf(first, given, keyword) as string[], t);
}

function select(
  first: unknown,
  given: readonly unknown[],
  t: HelperTarget,
  name: (x: unknown) => string,
  keyword: HelperKeyword | null,
): void {
  if (typeof first === "string" || Array.isArray(first)) {
    const names = typeof first === "string" ? [first, ...given] : first;
    if (names.length === 0) throw invalid("a column list needs at least one name");
    t.text += names.map(name).join(",");
    return;
  }
  if (keyword === null) {
    throw invalid(
      "cannot tell how to expand sql(object) here: use it after insert, update, select, returning, values or in",
    );
  }
  const columns = columnsOf(first, given, keyword);
  const row = first as Record<string, unknown>;
  for (let i = 0; i < columns.length; i++) {
    if (i > 0) t.text += ",";
    t.value(row[columns[i] as string]);
    t.text += " as " + name(columns[i]);
  }
}
