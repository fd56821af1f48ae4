/**
 * `sql.copyFrom(table, rows, options)`: JavaScript rows into a table through
 * `COPY ... FROM STDIN (FORMAT binary)`.
 *
 * The column types are looked up once (or given), each column gets the binary
 * encoder of its type, and the rows are pulled from the source one at a time
 * and encoded into a chunk that goes out as one CopyData message when full.
 * Rows for the next chunk are pulled while that one goes out, and that next
 * chunk is only sent once the previous one has reached the socket, so a
 * source of any size is loaded in constant memory (two chunks), at the pace
 * the server takes it. A column pgpipe has no binary encoder for (or a custom `types`
 * serializer) switches the whole COPY to the text format, values serialised
 * as parameters are.
 *
 * Any failure (a bad value, the source throwing, the signal) sends CopyFail:
 * the server discards the COPY, so the table is untouched, and the connection
 * is free again when the promise rejects.
 */
import { Writer } from "../protocol/writer.ts";
import { CopyFromRequest } from "./bulk_copy_request.ts";
import { CopyRowError, QueryError } from "../errors.ts";
import type { QueryConfig } from "../query/settings.ts";
import { BigIntType } from "../query/custom_types.ts";
import {
  arrayEncoder,
  type BinaryEncoder,
  binaryEncoderFor,
  EncodeError,
  textEncoder,
  writeFieldCount,
  writeNull,
} from "../types/binary_encoders.ts";
import { writeBinaryHeader, writeBinaryTrailer, writeTextField } from "./copy_format.ts";
import { Parameter, serializeParameter } from "../types/encode.ts";
import { Oid } from "../types/oids.ts";
import {
  type CopyColumn,
  type CopySink,
  type CopyType,
  givenColumns,
  pickColumns,
  tableColumns,
} from "./copy_columns.ts";
import { quoteIdentifier } from "../connection/requests/driver_queries.ts";
import { checkColumns, checkSignal, invalidArguments, tableName } from "./copy_arguments.ts";

/**
 * Options of `sql.copyFrom`.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * await sql.copyFrom("events", [[1, "signup"]], {
 *   columns: ["id", "kind"],
 *   types: ["int8", "text"], // no catalog lookup
 *   signal: AbortSignal.timeout(60_000),
 * });
 * ```
 */
export interface CopyFromOptions {
  /**
   * The columns to fill, in the order of array rows; for object rows, the
   * keys to read (mapped to column names by `transform.column.to`, as
   * `sql(rows)` does). Default: every column of the table for array rows,
   * the first row's keys for object rows. Columns left out get their default.
   */
  columns?: readonly string[];
  /**
   * Each column's type (OIDs, or built-in names such as `"int8"`, `"jsonb"`,
   * `"text[]"`), in the order of `columns`, which it needs. Given, the types
   * are not looked up in the catalog.
   */
  types?: readonly CopyType[];
  /** Cancels the load: CopyFail is sent and the promise rejects with the signal's reason. */
  signal?: AbortSignal;
}

/**
 * The rows `sql.copyFrom` takes: arrays (values in column order) or objects
 * (keyed by column), from an array, any iterable, an async iterable or a
 * ReadableStream.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * async function* rows() {
 *   for (let id = 1; id <= 1_000_000; id++) yield { id, name: `user ${id}` };
 * }
 * await sql.copyFrom("users", rows());
 * ```
 */
export type CopyFromSource<T = unknown> = Iterable<T> | AsyncIterable<T> | ReadableStream<T>;

/** What copyFrom and copyTo need from the tag they hang off. */
export interface CopyEnv {
  /** Where the COPY (and the catalog lookup) go. */
  sink: CopySink;
  /** The client's settings (transforms, custom types, decoding). */
  config: QueryConfig;
}

/** Rows are encoded into chunks of about this size, each sent as one CopyData message. */
const CHUNK_BYTES = 128 * 1024;

// ---------------------------------------------------------------------------------------
// the row source

interface RowSource {
  /** The rows, when they are an array: read by index, the fast path. */
  array: readonly unknown[] | null;
  sync: Iterator<unknown> | null;
  async: AsyncIterator<unknown> | null;
  /** The source has no more rows (or was closed): nothing to close. */
  exhausted: boolean;
}

function openRows(rows: unknown): RowSource {
  const source: RowSource = { array: null, sync: null, async: null, exhausted: false };
  if (Array.isArray(rows)) source.array = rows;
  else if (rows !== null && typeof rows === "object" && Symbol.iterator in rows) {
    source.sync = (rows as Iterable<unknown>)[Symbol.iterator]();
  } else if (rows !== null && typeof rows === "object" && Symbol.asyncIterator in rows) {
    source.async = (rows as AsyncIterable<unknown>)[Symbol.asyncIterator]();
  } else {
    throw invalidArguments(
      "copyFrom needs the rows as an array, an iterable, an async iterable or a ReadableStream",
    );
  }
  return source;
}

/** Lets an unfinished iterator clean up (a generator's finally, a stream's cancel). */
async function closeRows(source: RowSource): Promise<void> {
  if (source.exhausted) return;
  source.exhausted = true;
  try {
    if (source.sync !== null) source.sync.return?.();
    else if (source.async !== null) await source.async.return?.();
  } catch {
    // the load already failed or was cancelled; that error is the one to report
  }
}

const NO_ROW = Symbol("no row");

/** The first row (consumed from iterators), or NO_ROW for an empty source. */
async function firstRow(source: RowSource): Promise<unknown> {
  if (source.array !== null) return source.array.length > 0 ? source.array[0] : NO_ROW;
  const r = source.sync !== null ? source.sync.next() : await source.async!.next();
  if (r.done) source.exhausted = true;
  return r.done ? NO_ROW : r.value;
}

// ---------------------------------------------------------------------------------------
// encoding rows

/** Encodes one row into the chunk; throws a CopyRowError naming it. */
type RowEncoder = (w: Writer, row: unknown, index: number) => void;

const TYPE_NAMES = new Map<number, string>();
for (const [name, oid] of Object.entries(Oid)) {
  TYPE_NAMES.set(oid, name.endsWith("Array") ? name.slice(0, -5) + "[]" : name);
}

function typeName(oid: number): string {
  return TYPE_NAMES.get(oid) ?? `type ${oid}`;
}

/** The binary encoder of a column, or null where only the text format can carry it. */
function columnEncoder(column: CopyColumn, undef: unknown): BinaryEncoder | null {
  if (column.element !== 0) {
    const element = column.elementKind === "e" ? textEncoder : binaryEncoderFor(column.elementBase);
    return element === null ? null : arrayEncoder(column.element, element, undef);
  }
  return column.kind === "e" ? textEncoder : binaryEncoderFor(column.base);
}

/** Whether a custom `types` serializer applies to the column (postgres.BigInt's needs none). */
function hasCustomSerializer(column: CopyColumn, config: QueryConfig): boolean {
  const serializers = config.serializers;
  if (serializers === null) return false;
  for (const oid of [column.type, column.base, column.element, column.elementBase]) {
    const custom = oid === 0 ? undefined : serializers.get(oid);
    if (custom !== undefined && custom !== BigIntType.serialize) return true;
  }
  return false;
}

function rowError(target: string, index: number, message: string): CopyRowError {
  return new CopyRowError(
    "INVALID_ROW",
    `copyFrom ${target}: row ${index}: ${message}`,
    index,
    null,
  );
}

/** The error for a value that failed, naming its row and column. */
function valueError(target: string, index: number, column: CopyColumn, e: unknown): Error {
  if (e instanceof CopyRowError) return e;
  const code = e instanceof QueryError ? e.code : "INVALID_VALUE";
  const why = e instanceof Error ? e.message : String(e);
  return new CopyRowError(
    code,
    `copyFrom ${target}: row ${index}, column ${JSON.stringify(column.name)} (${
      typeName(column.type)
    }): ${why}`,
    index,
    column.name,
    { cause: e },
  );
}

function undefinedValue(): EncodeError {
  return new EncodeError(
    "UNDEFINED_VALUE",
    "the value is undefined; use null for NULL (or the transform.undefined option)",
  );
}

/** Checks a row's shape; the keys to read for objects, null for arrays. */
function rowShape(row: unknown, n: number, target: string, index: number): boolean {
  if (Array.isArray(row)) {
    if (row.length !== n) {
      throw rowError(target, index, `an array row needs ${n} values, this one has ${row.length}`);
    }
    return true;
  }
  if (typeof row === "object" && row !== null) return false;
  throw rowError(
    target,
    index,
    `a row is an array or an object, got ${row === null ? "null" : typeof row}`,
  );
}

/**
 * The binary row encoder: the field count, then each column's value by its
 * column's encoder. Compiled per column list where code generation is
 * allowed, so each column has its own property load and its own call site,
 * which V8 inlines (a loop over the encoders is one megamorphic call site);
 * the loop below is the fallback, with the same behaviour.
 */
function binaryRows(columns: CopyColumn[], config: QueryConfig, target: string): RowEncoder {
  const n = columns.length;
  const undef = config.undefinedValue;
  const keys = columns.map((c) => c.key);
  const encoders = columns.map((c) => columnEncoder(c, undef)!);
  /** A value that is `undefined`: `transform.undefined`'s value, or an error. */
  const missing = (w: Writer, c: number) => {
    if (undef === undefined) throw undefinedValue();
    if (undef === null) writeNull(w);
    else encoders[c](w, undef);
  };
  const fail = (index: number, c: number, e: unknown) => {
    throw valueError(target, index, columns[c], e);
  };
  const compiled = compileRowEncoders(keys, encoders, missing, fail);
  if (compiled !== null) {
    const [arrays, objects] = compiled;
    return (w, row, index) => {
      if (rowShape(row, n, target, index)) arrays(w, row, index);
      else objects(w, row, index);
    };
  }
  return (w, row, index) => {
    const isArray = rowShape(row, n, target, index);
    let c = 0;
    try {
      writeFieldCount(w, n);
      for (; c < n; c++) {
        const value = isArray ? (row as unknown[])[c] : (row as Record<string, unknown>)[keys[c]];
        if (value === null) writeNull(w);
        else if (value !== undefined) encoders[c](w, value);
        else missing(w, c);
      }
    } catch (e) {
      fail(index, c, e);
    }
  };
}

/** Encodes one row whose shape was checked; throws through `fail`. */
type ShapedRowEncoder = (w: Writer, row: unknown, index: number) => void;

/**
 * Generated row encoders for array rows and object rows, or null where the
 * runtime refuses code generation. Keys are quoted with JSON.stringify, so
 * no column name can inject code.
 */
function compileRowEncoders(
  keys: readonly string[],
  encoders: readonly BinaryEncoder[],
  missing: (w: Writer, c: number) => void,
  fail: (index: number, c: number, e: unknown) => void,
): [ShapedRowEncoder, ShapedRowEncoder] | null {
  const n = keys.length;
  const source = (read: (c: number) => string) => {
    let body = `w.ensure(2);w.buf[w.length]=${n >>> 8};w.buf[w.length+1]=${n & 255};w.length+=2;`;
    for (let c = 0; c < n; c++) {
      body += `c=${c};v=${read(c)};` +
        `if(v===null)writeNull(w);else if(v!==undefined)e${c}(w,v);else missing(w,${c});`;
    }
    return `return function(w,row,index){let c=0,v;try{${body}}catch(e){fail(index,c,e)}}`;
  };
  const names = keys.map((_, c) => `e${c}`);
  try {
    const make = (read: (c: number) => string) =>
      new Function(...names, "writeNull", "missing", "fail", source(read))(
        ...encoders,
        writeNull,
        missing,
        fail,
      ) as ShapedRowEncoder;
    return [make((c) => `row[${c}]`), make((c) => `row[${JSON.stringify(keys[c])}]`)];
  } catch {
    return null; // code generation disallowed (a restrictive embedder)
  }
}

/** A value as text-format COPY data: serialised as a parameter is (custom serializers too). */
function textValue(column: CopyColumn, value: unknown, config: QueryConfig): string | null {
  const undef = config.undefinedValue;
  if (value === undefined) {
    if (undef === undefined) throw undefinedValue();
    value = undef;
  }
  if (value === null) return null;
  if (typeof value === "string" && (column.base === Oid.json || column.base === Oid.jsonb)) {
    return value; // JSON text, as a string parameter for a json column is
  }
  if (value instanceof Parameter) return serializeParameter(value, config.serializers, undef);
  const serializers = config.serializers;
  const type = serializers?.has(column.type) ? column.type : column.base;
  const element = column.element === 0
    ? null
    : serializers?.has(column.element)
    ? column.element
    : column.elementBase;
  return serializeParameter(
    new Parameter(value, type, Array.isArray(value) ? element : null),
    serializers,
    undef,
  );
}

function textRows(columns: CopyColumn[], config: QueryConfig, target: string): RowEncoder {
  const n = columns.length;
  return (w, row, index) => {
    const isArray = rowShape(row, n, target, index);
    let c = 0;
    try {
      for (; c < n; c++) {
        if (c > 0) w.u8(9); // tab
        const value = isArray
          ? (row as unknown[])[c]
          : (row as Record<string, unknown>)[columns[c].key];
        writeTextField(w, textValue(columns[c], value, config));
      }
      w.u8(10); // newline
    } catch (e) {
      throw valueError(target, index, columns[c], e);
    }
  };
}

// ---------------------------------------------------------------------------------------
// the load

/** Shared between the load and its abort handler. */
interface LoadState {
  aborted: boolean;
  reason: unknown;
  req: CopyFromRequest | null;
}

/** CopyFail's reason: a C string, so no NUL. */
function failReason(e: unknown): string {
  const text = e instanceof Error ? e.message : String(e);
  return `pgpipe copyFrom: ${text}`.replaceAll("\0", " ").slice(0, 1000);
}

/** Loads `rows` into `table`; resolves with the number of rows the server copied. */
export function copyFrom(
  env: CopyEnv,
  table: unknown,
  rows: unknown,
  options: CopyFromOptions = {},
): Promise<number> {
  let signal: AbortSignal | undefined;
  let load: Promise<number>;
  const state: LoadState = { aborted: false, reason: undefined, req: null };
  try {
    if (typeof options !== "object" || options === null) {
      throw invalidArguments("copyFrom options must be an object");
    }
    signal = checkSignal(options.signal);
    if (signal?.aborted) return Promise.reject(signal.reason);
    load = run(env, table, rows, options, state);
  } catch (e) {
    return Promise.reject(e);
  }
  if (signal === undefined) return load;
  const s = signal;
  return new Promise<number>((resolve, reject) => {
    const onAbort = () => {
      state.aborted = true;
      state.reason = s.reason;
      // CopyFail now (the load may be waiting on its source); reject once the server has
      // discarded the COPY, so the table is untouched and the connection free.
      const req = state.req;
      const discarded = req === null ? Promise.resolve() : req.abort(failReason(s.reason));
      discarded.then(() => reject(s.reason));
    };
    s.addEventListener("abort", onAbort, { once: true });
    load.then(resolve, reject).finally(() => s.removeEventListener("abort", onAbort));
  });
}

async function run(
  env: CopyEnv,
  table: unknown,
  rows: unknown,
  options: CopyFromOptions,
  state: LoadState,
): Promise<number> {
  const { sink, config } = env;
  const columnTo = config.columnTo;
  const keys = checkColumns(options.columns);
  const types = options.types;
  if (types !== undefined) {
    if (keys === undefined || !Array.isArray(types) || types.length !== keys.length) {
      throw invalidArguments("types needs columns, and one type per column");
    }
  }
  const target = tableName(table, columnTo);
  const source = openRows(rows);
  const check = () => {
    if (state.aborted) throw state.reason;
  };
  try {
    const first = await firstRow(source);
    if (first === NO_ROW) return 0;
    check();
    const names = keys ??
      (first !== null && typeof first === "object" && !Array.isArray(first)
        ? Object.keys(first)
        : undefined);
    let columns: CopyColumn[];
    if (types !== undefined) columns = givenColumns(keys!, types, columnTo);
    else {
      const all = await tableColumns(sink, target);
      check();
      columns = names === undefined ? all : pickColumns(all, names, columnTo, target);
    }
    if (columns.length === 0) throw invalidArguments(`${target} has no columns COPY can fill`);
    const binary = columns.every((c) =>
      columnEncoder(c, undefined) !== null && !hasCustomSerializer(c, config)
    );
    const encodeRow = binary
      ? binaryRows(columns, config, target)
      : textRows(columns, config, target);
    const list = columns.map((c) => quoteIdentifier(c.name)).join(", ");
    const req = new CopyFromRequest(
      `copy ${target} (${list}) from stdin (format ${binary ? "binary" : "text"})`,
    );
    state.req = req;
    sink.send(req);
    await req.started;
    check();
    return await pump(req, source, first, encodeRow, binary, check);
  } catch (e) {
    await state.req?.abort(failReason(e));
    throw e;
  } finally {
    await closeRows(source);
  }
}

/** Encodes every row and sends it chunk by chunk; resolves with the server's row count. */
async function pump(
  req: CopyFromRequest,
  source: RowSource,
  first: unknown,
  encodeRow: RowEncoder,
  binary: boolean,
  check: () => void,
): Promise<number> {
  const w = new Writer(CHUNK_BYTES + 16 * 1024);
  if (binary) writeBinaryHeader(w);
  // The previous chunk's way to the socket, waited for only when the next chunk is full: rows
  // are pulled and encoded while it goes out, and at most one chunk is in flight (the connection
  // copies it) besides the one filling.
  let inFlight: Promise<void> | null = null;
  const flush = async () => {
    if (inFlight !== null) await inFlight;
    if (req.failure !== null) throw req.failure;
    check();
    req.write(w.buf.subarray(0, w.length));
    w.reset();
    inFlight = req.sent();
  };
  let index = 0;
  if (source.array !== null) {
    const rows = source.array;
    for (; index < rows.length; index++) {
      encodeRow(w, rows[index], index);
      if (w.length >= CHUNK_BYTES) await flush();
    }
  } else if (source.sync !== null) {
    const it = source.sync;
    encodeRow(w, first, index++);
    for (let r = it.next(); !r.done; r = it.next()) {
      encodeRow(w, r.value, index++);
      if (w.length >= CHUNK_BYTES) await flush();
    }
    source.exhausted = true;
  } else {
    const it = source.async!;
    encodeRow(w, first, index++);
    for (let r = await it.next(); !r.done; r = await it.next()) {
      check();
      encodeRow(w, r.value, index++);
      if (w.length >= CHUNK_BYTES) await flush();
    }
    source.exhausted = true;
  }
  if (binary) writeBinaryTrailer(w);
  await flush();
  await inFlight;
  check();
  return await req.end();
}
