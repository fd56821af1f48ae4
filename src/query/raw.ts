/**
 * `sql.unsafe(text, args?, options?)` and `sql.file(path, args?, options?)`:
 * queries whose SQL text is given whole (with its own `$n` placeholders)
 * instead of built from a template. As in postgres.js, with no arguments they
 * use the simple protocol, so one call may hold several statements.
 */
import { QueryError } from "../errors.ts";
import { Query, type QueryRunner } from "./query.ts";
import type { Row } from "./result.ts";

/**
 * Options of `sql.unsafe` and `sql.file`.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * await sql.unsafe("select * from users where id = $1", [1], { prepare: true });
 * ```
 */
export interface UnsafeOptions {
  /**
   * Use a named prepared statement. Default: false for `sql.unsafe` (as in
   * postgres.js), the client's `prepare` option for `sql.file`.
   */
  prepare?: boolean;
  /** Use the simple protocol. Default: true when there are no arguments. */
  simple?: boolean;
}

function template(text: string): TemplateStringsArray {
  return Object.freeze(
    Object.assign([text], { raw: Object.freeze([text]) }),
  ) as unknown as TemplateStringsArray;
}

/** `(args?, options?)` or `(options)`, as postgres.js accepts them. */
function split(
  args: readonly unknown[] | UnsafeOptions | undefined,
  options: UnsafeOptions | undefined,
): [readonly unknown[], UnsafeOptions] {
  if (args === undefined) return [[], options ?? {}];
  if (Array.isArray(args)) return [args, options ?? {}];
  if (typeof args === "object" && args !== null && options === undefined) {
    return [[], args as UnsafeOptions];
  }
  throw new QueryError("INVALID_ARGUMENTS", "the arguments of a raw query must be an array");
}

/**
 * A query of raw SQL text (`sql.unsafe`). The text is converted with String(),
 * as postgres.js does; if that conversion throws (an object whose `toString`
 * throws), the query rejects with that error when it runs.
 */
export function unsafeQuery<T extends readonly unknown[] = Row[]>(
  runner: QueryRunner,
  text: unknown,
  args?: readonly unknown[] | UnsafeOptions,
  options?: UnsafeOptions,
): Query<T> {
  const [values, o] = split(args, options);
  let sqlText = "";
  let failure: unknown = undefined;
  try {
    sqlText = typeof text === "string" ? text : String(text);
  } catch (e) {
    failure = e;
  }
  return new Query<T>(template(sqlText), values, runner, {
    unsafe: true,
    prepare: o.prepare ?? false,
    simple: o.simple ?? values.length === 0,
    failure,
  });
}

/** A query whose SQL text is read from a file when it runs (`sql.file`). */
export function fileQuery<T extends readonly unknown[] = Row[]>(
  runner: QueryRunner,
  path: string | URL,
  args?: readonly unknown[] | UnsafeOptions,
  options?: UnsafeOptions,
): Query<T> {
  if (typeof path !== "string" && !(path instanceof URL)) {
    throw new QueryError("INVALID_ARGUMENTS", "sql.file needs a path (a string or a file URL)");
  }
  const [values, o] = split(args, options);
  return new Query<T>(template(""), values, runner, {
    file: path,
    prepare: o.prepare,
    simple: o.simple ?? values.length === 0,
  });
}
