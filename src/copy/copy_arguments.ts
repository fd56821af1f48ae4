/**
 * The arguments of `sql.copyFrom` and `sql.copyTo`, checked. Apart from the loads themselves,
 * which are imported on a program's first bulk COPY, so that `sql.copyTo`'s bad arguments still
 * throw at the call.
 */
import { QueryError } from "../errors.ts";
import { Identifier } from "../query/identifier.ts";
import { Query } from "../query/query.ts";

/** The error of an argument a bulk COPY cannot take. */
export function invalidArguments(message: string): QueryError {
  return new QueryError("INVALID_ARGUMENTS", message);
}

/** The quoted table name: a string as `sql(name)` quotes it (schema-qualified with a dot). */
export function tableName(
  table: unknown,
  columnTo: ((name: string) => string) | undefined,
): string {
  if (table instanceof Identifier) return table.text;
  if (typeof table === "string") {
    return new Identifier(columnTo === undefined ? table : columnTo(table)).text;
  }
  throw invalidArguments(
    `a COPY needs a table name (a string or sql("name")), got ${
      table === null ? "null" : typeof table
    }`,
  );
}

/** Checks `columns` is a list of names; returns it (or undefined). */
export function checkColumns(columns: unknown): readonly string[] | undefined {
  if (columns === undefined) return undefined;
  if (
    !Array.isArray(columns) || columns.length === 0 || !columns.every((c) => typeof c === "string")
  ) {
    throw invalidArguments("columns must be a non-empty array of column names");
  }
  return columns;
}

/** Checks `signal` is an AbortSignal; returns it (or undefined). */
export function checkSignal(signal: unknown): AbortSignal | undefined {
  if (signal === undefined) return undefined;
  if (!(signal instanceof AbortSignal)) throw invalidArguments("signal must be an AbortSignal");
  return signal;
}

/** `sql.copyTo`'s options, checked. */
export interface CopyToArguments {
  batch: number;
  columns: readonly string[] | undefined;
  signal: AbortSignal | undefined;
  values: boolean;
}

const DEFAULT_BATCH = 1000;

/** Checks `sql.copyTo`'s source and options (see CopyToOptions); throws on bad ones. */
export function copyToArguments(
  source: unknown,
  options: unknown,
  columnTo: ((name: string) => string) | undefined,
): CopyToArguments {
  if (typeof options !== "object" || options === null) {
    throw invalidArguments("copyTo options must be an object");
  }
  const given = options as Record<string, unknown>;
  const batch = given.batch ?? DEFAULT_BATCH;
  if (!Number.isInteger(batch) || (batch as number) < 1) {
    throw invalidArguments(`batch must be a positive integer, got ${batch}`);
  }
  const columns = checkColumns(given.columns);
  const signal = checkSignal(given.signal);
  if (source instanceof Query && columns !== undefined) {
    throw invalidArguments("columns applies to a table; select them in the query");
  }
  if (!(source instanceof Query)) tableName(source, columnTo); // refuse bad names now
  return { batch: batch as number, columns, signal, values: given.values === true };
}
