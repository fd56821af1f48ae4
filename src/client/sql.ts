/**
 * The `sql` function: a tagged template that builds lazy queries, with the
 * helpers hanging off it (`unsafe`, `file`, `json`, `array`, `typed`, bulk
 * COPY). The same tag is built for the pool, for a transaction and for a
 * reserved connection; only where requests go differs (its sink).
 */
import { PostgresError, QueryError } from "../errors.ts";
import type { Typed } from "../query/custom_types.ts";
import { Helper } from "../query/helpers.ts";
import { Identifier } from "../query/identifier.ts";
import { CLOSE, Query } from "../query/query.ts";
import { fileQuery, type UnsafeOptions, unsafeQuery } from "../query/raw.ts";
import { originOf } from "../query/origin.ts";
import type { Row } from "../query/result.ts";
import { array, json } from "../query/typed_values.ts";
import type { Parameter } from "../types/encode.ts";
import { type BulkCopy, bulkCopy } from "../copy/bulk_copy.ts";
import { tracedBulkCopy } from "../telemetry/traced_copy.ts";
import { type ClientSettings, Runner, type Sink, type SinkScope } from "./runner.ts";

/**
 * The tagged template shared by a client, a transaction and a reserved
 * connection: call it to build a query, await the query to run it. Called as a
 * plain function it makes identifiers and helpers to interpolate.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * const rows = await sql`select * from users where id = ${1}`;
 * await sql`insert into users ${sql({ name: "Ada", age: 36 })}`;
 * await sql`select ${sql(["name", "age"])} from ${sql("public.users")}`;
 * ```
 */
export interface SqlTag extends BulkCopy {
  /**
   * Builds a query from a template; values become parameters. `T` is the rows' type; `P`, when
   * given, the type of each interpolated value in order (what `typegen` writes), so a value of
   * the wrong type fails to type-check. A slot may always hold SQL instead of a value: a
   * fragment, an identifier or a helper (a slot typed `never` holds nothing else).
   *
   * @example
   * ```ts
   * import postgres from "jsr:@pgpipe/pgpipe";
   * const sql = postgres();
   * const [user] = await sql<{ id: number; name: string | null }[], [number]>`
   *   select id, name from users where id = ${1}
   * `;
   * ```
   */
  <T extends readonly unknown[] = Row[], P extends readonly unknown[] = readonly unknown[]>(
    strings: TemplateStringsArray,
    ...values: TemplateValues<NoInfer<P>>
  ): Query<T>;
  /** An escaped identifier: `sql("public.users")` is `"public"."users"`. */
  (name: string): Identifier;
  /** A list of escaped identifiers: `sql("a", "b")` is `"a","b"`. */
  (name: string, ...names: string[]): Helper;
  /** An insert/update/select/values helper over an object or rows, with the columns to use (default: all keys of the first). */
  <T extends object>(value: T | readonly T[], ...columns: (keyof T & string)[]): Helper;
  /** Same, with the columns as one array. */
  <T extends object>(value: T | readonly T[], columns: readonly (keyof T & string)[]): Helper;
  /** A list of values (after `in` or `values`) or of column names (after `select`). */
  (values: readonly unknown[]): Helper;
  /**
   * Raw SQL with its own `$n` placeholders. Without arguments it uses the simple
   * protocol (several statements allowed: one result each); `prepare` defaults to false.
   */
  unsafe<T extends readonly unknown[] = Row[]>(
    text: string,
    args?: readonly unknown[],
    options?: UnsafeOptions,
  ): Query<T>;
  /** Same, with options and no arguments. */
  unsafe<T extends readonly unknown[] = Row[]>(text: string, options: UnsafeOptions): Query<T>;
  /** Like `unsafe`, with the text read from a file when the query runs. */
  file<T extends readonly unknown[] = Row[]>(
    path: string | URL,
    args?: readonly unknown[],
    options?: UnsafeOptions,
  ): Query<T>;
  /** Same, with options and no arguments. */
  file<T extends readonly unknown[] = Row[]>(path: string | URL, options: UnsafeOptions): Query<T>;
  /** A jsonb parameter: the value's JSON text (even for a string). */
  json(value: unknown): Parameter;
  /** An array parameter of an element type OID (or an array type OID); see docs/types.md. */
  array(values: readonly unknown[], type?: number): Parameter;
  /** A parameter of a type OID; `sql.typed.<name>(value)` for each custom type. */
  readonly typed: Typed;
  /** The same as `typed` (postgres.js has both). */
  readonly types: Typed;
  /** Return it from a `cursor` callback to stop reading early. */
  readonly CLOSE: typeof CLOSE;
  /** The same as `CLOSE` (postgres.js has both). */
  readonly END: typeof CLOSE;
  /** The class of errors reported by the server, for `err instanceof sql.PostgresError`. */
  readonly PostgresError: typeof PostgresError;
}

/**
 * What a template slot may hold besides a value: SQL that is inlined (a fragment, an array of
 * fragments, an identifier, a helper), or a parameter of an explicit type (`sql.json`, ...).
 *
 * @example
 * ```ts
 * import postgres, { type SqlPiece } from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * const older: SqlPiece = sql`and age > ${30}`;
 * await sql<{ id: number }[], [string, never]>`select id from users where name = ${"Ada"} ${older}`;
 * ```
 */
export type SqlPiece = Query<any> | readonly Query<any>[] | Identifier | Helper | Parameter;

/**
 * The values of a template whose slots have the types `P`: each a value of its type or a piece
 * of SQL ({@link SqlPiece}).
 *
 * @example
 * ```ts
 * import type { TemplateValues } from "jsr:@pgpipe/pgpipe";
 * const values: TemplateValues<[number, string | null]> = [1, null];
 * ```
 */
export type TemplateValues<P extends readonly unknown[]> = { [K in keyof P]: P[K] | SqlPiece };

/** Whether `sql(...)` was called as a tag (a template's strings carry their `raw` twin). */
function isTemplate(value: unknown): value is TemplateStringsArray {
  return Array.isArray(value) && Object.hasOwn(value, "raw");
}

/**
 * Builds the tagged template whose requests go to `sink`: its runner turns queries into requests,
 * and bulk COPY (with spans when telemetry is on) goes to the same sink.
 */
export function makeTag(sink: Sink, settings: ClientSettings, scope?: SinkScope): SqlTag {
  const runner = new Runner(sink, settings, scope);
  const telemetry = settings.telemetry;
  const { columnTo, typed, debug } = runner.config;
  const sql = function sql(first: unknown, ...rest: unknown[]) {
    if (isTemplate(first)) {
      const query = new Query(first, rest, runner);
      query.origin = originOf(first, sql, debug);
      return query;
    }
    if (typeof first === "string" && rest.length === 0) {
      return new Identifier(columnTo === undefined ? first : columnTo(first));
    }
    if (typeof first === "string" || (typeof first === "object" && first !== null)) {
      return new Helper(first, rest.flat());
    }
    throw new QueryError(
      "INVALID_IDENTIFIER",
      `sql(...) takes a template, an identifier, or an object or array for a helper; got ${
        first === null ? "null" : typeof first
      }`,
    );
  } as SqlTag;
  const unsafe = (
    text: string,
    args?: readonly unknown[] | UnsafeOptions,
    options?: UnsafeOptions,
  ) => {
    const query = unsafeQuery(runner, text, args, options);
    query.origin = originOf(typeof text === "string" ? text : "", unsafe, debug);
    return query;
  };
  const file = (
    path: string | URL,
    args?: readonly unknown[] | UnsafeOptions,
    options?: UnsafeOptions,
  ) => {
    const query = fileQuery(runner, path, args, options);
    query.origin = originOf(String(path), file, debug);
    return query;
  };
  const plain = bulkCopy({ sink, config: runner.config });
  const bulk = telemetry === null ? plain : tracedBulkCopy(telemetry, plain);
  return Object.defineProperties(sql, {
    unsafe: { value: unsafe },
    file: { value: file },
    json: { value: json },
    array: { value: array },
    typed: { value: typed },
    types: { value: typed },
    CLOSE: { value: CLOSE },
    END: { value: CLOSE },
    PostgresError: { value: PostgresError },
    copyFrom: { value: bulk.copyFrom },
    copyTo: { value: bulk.copyTo },
  });
}
