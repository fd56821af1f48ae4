/**
 * `sql.copyTo(tableOrQuery, options)`: a table or a query's rows through
 * `COPY ... TO STDOUT (FORMAT binary)`, decoded into rows batch by batch as the consumer asks, and
 * handed out in batches by an async iterator.
 *
 * Each CopyData message (one row) is queued in a backlog as it arrives and
 * decoded only while the consumer waits for the next batch (between socket
 * reads, so the batch fills as the data arrives), with the binary
 * decoder of each column's type, then the client's value transform, column
 * names and row transform, exactly as a query's rows are. Memory is bounded:
 * the batch the consumer holds, and once two batches' worth of rows wait as
 * bytes, reading from the server pauses until it takes one. Decoding on
 * demand keeps the rows' objects young: rows decoded ahead would survive
 * garbage collections while they wait, and every byte that survives one
 * makes V8 grow its young generation (up to 64 MiB). A column only
 * the text form can give (a custom `types` parser, a type pgpipe cannot read
 * in binary) switches the COPY to the text format, decoded by the same text
 * decoders as query results.
 *
 * Stopping early (`break`, the signal) cancels the COPY on the server, or
 * inside a transaction block (where a cancel landing late could hit the next
 * statement) reads the rest and drops it.
 */
import type { Column } from "../protocol/backend.ts";
import { CopyToRequest } from "./bulk_copy_request.ts";
import { Statement } from "../connection/statement.ts";
import { QueryError } from "../errors.ts";
import { BigIntType } from "../query/custom_types.ts";
import { Query } from "../query/query.ts";
import { compile } from "../query/compile.ts";
import { readQueryFile } from "../query/file.ts";
import type { ByteDecoderFn } from "../types/byte_decoders.ts";
import { arrayDecoder, copyDecoderFor, decodeText } from "../types/copy_decoders.ts";
import { CopyBacklog } from "./copy_backlog.ts";
import { BinaryCopyReader, TextCopyReader } from "./copy_format.ts";
import { Oid } from "../types/oids.ts";
import type { DecodeOptions } from "../types/text_decoders.ts";
import { type CopyColumn, describeColumns, pickColumns, tableColumns } from "./copy_columns.ts";
import type { CopyEnv } from "./copy_from.ts";
import { type CopyToArguments, tableName } from "./copy_arguments.ts";
import { quoteIdentifier } from "../connection/requests/driver_queries.ts";

/**
 * Options of `sql.copyTo`.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * for await (const rows of sql.copyTo("events", { columns: ["id", "kind"], batch: 5000 })) {
 *   console.log(rows.length); // up to 5000 objects
 * }
 * ```
 */
export interface CopyToOptions {
  /** For a table: the columns to read, in order (default: all but generated ones). */
  columns?: readonly string[];
  /**
   * Rows per batch (default 1000). Memory holds about three batches: the one
   * handed out, decoded, and up to two more as the server sent them.
   */
  batch?: number;
  /** Stops reading: the iteration rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Rows as arrays of values in column order instead of objects. */
  values?: boolean;
}

/** Reading pauses while this many batches' worth of rows wait undecoded. */
const QUEUED_BATCHES = 2;
const IDLE = 0x49;

/** What the COPY reads and how its rows are decoded. */
interface Plan {
  text: string;
  columns: CopyColumn[];
}

/** The binary decoder of a column, or null where only the text format can be read. */
function columnDecoder(column: CopyColumn, decode: DecodeOptions): ByteDecoderFn | null {
  const custom = decode.parsers;
  const parser = custom?.get(column.base) ?? custom?.get(column.type);
  if (parser !== undefined) {
    // postgres.BigInt parses int8 text to a bigint: the binary decoder gives the same.
    if (parser !== BigIntType.parse || column.base !== Oid.int8) return null;
    return copyDecoderFor(Oid.int8, { ...decode, bigint: true });
  }
  if (column.element !== 0) {
    if (custom?.has(column.element) || custom?.has(column.elementBase)) return null;
    const element = column.elementKind === "e"
      ? decodeText
      : copyDecoderFor(column.elementBase, decode);
    return element === null ? null : arrayDecoder(element);
  }
  if (column.kind === "e") return decodeText;
  return copyDecoderFor(column.base, decode);
}

/** Columns as a query result describes them, for the row keys and the value transform. */
function asResultColumns(columns: readonly CopyColumn[], binary: boolean): Column[] {
  return columns.map((c) => ({
    name: c.name,
    table: c.table,
    number: c.number,
    type: c.base,
    size: 0,
    modifier: -1,
    format: binary ? 1 : 0,
  }));
}

/**
 * Reads `source` through COPY, with the options `sql.copyTo` checked at its call
 * (copy_arguments.ts's copyToArguments; see CopyToOptions).
 */
export function copyTo(
  env: CopyEnv,
  source: unknown,
  { batch, columns, signal, values }: CopyToArguments,
): AsyncIterable<unknown[]> {
  return {
    [Symbol.asyncIterator]: () => new CopyToIterator(env, source, columns, batch, values, signal),
  };
}

/** Works out the COPY statement and its columns: a catalog lookup or a Describe. */
async function plan(env: CopyEnv, source: unknown, keys?: readonly string[]): Promise<Plan> {
  if (source instanceof Query) {
    // Compiled and described here, on this tag's sink: the query may come from another tag
    // (the pool's `sql` inside a transaction), whose connection may be the one this COPY holds.
    if (source.failure !== undefined) throw source.failure;
    const { text, values } = source.file !== null
      ? { text: await readQueryFile(source.file), values: source.args }
      : compile(source, env.config.columnTo);
    if (values.length > 0) {
      throw new QueryError(
        "COPY_PARAMETERS",
        "COPY cannot take parameters: write the values into the query, or read it with .cursor()",
      );
    }
    // The newline ends a trailing line comment in the query text.
    return { text: `copy (${text}\n) to stdout`, columns: await describeColumns(env.sink, text) };
  }
  const target = tableName(source, env.config.columnTo);
  const all = await tableColumns(env.sink, target);
  const columns = keys === undefined ? all : pickColumns(all, keys, env.config.columnTo, target);
  if (columns.length === 0) {
    throw new QueryError("INVALID_ARGUMENTS", `${target} has no columns COPY can read`);
  }
  const list = columns.map((c) => quoteIdentifier(c.name)).join(", ");
  return { text: `copy ${target} (${list}) to stdout`, columns };
}

/** Decodes one binary row's fields into `vals`. */
type RowDecoder = (buf: Uint8Array, fields: Int32Array, vals: unknown[]) => void;

/**
 * A row decoder generated for the column list, with a call site per column
 * that V8 can inline (a loop over the decoders is one megamorphic call
 * site), or null where the runtime refuses code generation.
 */
function compileRowDecoder(decoders: readonly ByteDecoderFn[]): RowDecoder | null {
  let body = "let s;";
  for (let i = 0; i < decoders.length; i++) {
    body += `s=f[${2 * i}];v[${i}]=s===-1?null:d${i}(buf,s,f[${2 * i + 1}]);`;
  }
  const names = decoders.map((_, i) => `d${i}`);
  try {
    return new Function(...names, `return function(buf,f,v){${body}}`)(...decoders) as RowDecoder;
  } catch {
    return null; // code generation disallowed (a restrictive embedder)
  }
}

class CopyToIterator implements AsyncIterator<unknown[]> {
  readonly #env: CopyEnv;
  readonly #source: unknown;
  readonly #keys: readonly string[] | undefined;
  readonly #size: number;
  readonly #values: boolean;
  readonly #signal: AbortSignal | undefined;
  /** Messages (one row each, from the server) read ahead before reading pauses. */
  readonly #ahead: number;
  #starting: Promise<void> | null = null;
  #req: CopyToRequest | null = null;
  #reader: BinaryCopyReader | TextCopyReader | null = null;
  /** What was read and not yet decoded. */
  #backlog = new CopyBacklog();
  /** Rows of a batch cut short by the backlog running dry, until more arrives. */
  #batch: unknown[] = [];
  /** Rows decoded past a full batch (a message with more than one row): the next batch's. */
  #spill: unknown[] | null = null;
  #error: unknown = null;
  #failed = false;
  #finished = false; // the COPY ended: everything is in the backlog
  #closed = false; // returned, or failed and reported
  #wake: (() => void) | null = null;
  #onAbort: (() => void) | null = null;
  #stopping: Promise<void> | null = null;

  constructor(
    env: CopyEnv,
    source: unknown,
    keys: readonly string[] | undefined,
    size: number,
    values: boolean,
    signal: AbortSignal | undefined,
  ) {
    this.#env = env;
    this.#source = source;
    this.#keys = keys;
    this.#size = size;
    this.#values = values;
    this.#signal = signal;
    this.#ahead = QUEUED_BATCHES * size;
  }

  async next(): Promise<IteratorResult<unknown[]>> {
    if (this.#closed) return { done: true, value: undefined };
    try {
      await (this.#starting ??= this.#start());
    } catch (e) {
      this.#closed = true;
      this.#detach();
      throw e;
    }
    for (;;) {
      if (this.#closed) return { done: true, value: undefined }; // return() meanwhile
      if (this.#failed) { // before any row still queued: after a failure nothing more is given
        this.#closed = true;
        await this.#stop();
        throw this.#error;
      }
      const backlog = this.#backlog;
      if (backlog.count > 0 || this.#finished) {
        const batch = this.#decode();
        if (batch === null) continue; // failed
        if (backlog.count < this.#ahead) this.#req?.resume();
        if (batch.length >= this.#size || (this.#finished && batch.length > 0)) {
          return { done: false, value: batch };
        }
        this.#batch = batch; // short of a batch: the rest is still to come
        if (this.#finished) {
          this.#closed = true;
          this.#detach();
          return { done: true, value: undefined };
        }
      }
      await new Promise<void>((resolve) => this.#wake = resolve);
    }
  }

  async return(): Promise<IteratorResult<unknown[]>> {
    this.#closed = true;
    await this.#stop();
    return { done: true, value: undefined };
  }

  /**
   * Decodes queued messages into the next batch until it is full or the
   * backlog is empty, and at the end of the data checks that no row was cut
   * short; null when that or a decoder failed.
   */
  #decode(): unknown[] | null {
    const size = this.#size;
    const backlog = this.#backlog;
    const reader = this.#reader!;
    const batch = this.#spill ?? this.#batch;
    this.#spill = null;
    this.#batch = [];
    try {
      backlog.flush(); // the read loop is between reads: its buffer still holds the run
      while (batch.length < size && backlog.shift()) {
        reader.feed(backlog.buf, backlog.start, backlog.end, batch);
      }
      if (
        this.#finished && backlog.count === 0 &&
        (reader.partial || (reader instanceof BinaryCopyReader && !reader.ended))
      ) {
        throw new QueryError("COPY_TRUNCATED", "the COPY data ended inside a row");
      }
    } catch (e) {
      this.#fail(e);
      return null;
    }
    if (batch.length > size) this.#spill = batch.splice(size);
    return batch;
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = null;
    wake?.();
  }

  /** Records the first failure and wakes the consumer, who reports it. */
  #fail(e: unknown): void {
    if (this.#failed) return;
    this.#failed = true;
    this.#error = e;
    this.#notify();
  }

  #detach(): void {
    if (this.#onAbort !== null) this.#signal!.removeEventListener("abort", this.#onAbort);
    this.#onAbort = null;
  }

  /**
   * Ends an unfinished COPY and waits until the connection is free: a cancel
   * on the server, or inside a transaction block, the rest read and dropped.
   */
  #stop(): Promise<void> {
    return this.#stopping ??= this.#halt();
  }

  async #halt(): Promise<void> {
    this.#detach();
    this.#backlog.clear();
    this.#batch = [];
    this.#spill = null;
    if (this.#req === null) await this.#starting?.catch(() => {});
    const req = this.#req;
    if (req === null) return;
    if (!req.settled) {
      req.discard();
      if (req.status === IDLE) {
        this.#env.sink.cancel(req, new QueryError("COPY_STOPPED", "copyTo was stopped"));
      }
    }
    await req.done.catch(() => {});
  }

  async #start(): Promise<void> {
    const signal = this.#signal;
    if (signal !== undefined) {
      signal.throwIfAborted();
      this.#onAbort = () => {
        this.#fail(signal.reason);
        this.#stop(); // at once, even if the consumer is not waiting in next()
      };
      signal.addEventListener("abort", this.#onAbort, { once: true });
    }
    const { text, columns } = await plan(this.#env, this.#source, this.#keys);
    if (this.#failed) throw this.#error;
    if (this.#closed) return;
    const decode = this.#env.config.decode;
    const decoders = columns.map((c) => columnDecoder(c, decode));
    const binary = decoders.every((d) => d !== null);
    const described = asResultColumns(columns, binary);
    // The statement's machinery gives the row keys, constructor, text decoders and row transform.
    const st = new Statement("", text, []);
    st.describe(described, decode);
    const transform = decode.value;
    const n = columns.length;
    const values = this.#values;
    const Row = st.Row;
    const rowTransform = st.rowTransform;
    const scratch: unknown[] = new Array(n);
    const push = (vals: unknown[], out: unknown[]) => {
      let row: unknown = values ? vals : new Row(vals);
      if (rowTransform !== null) row = rowTransform(row);
      out.push(row);
    };
    if (binary) {
      const fns = decoders.map((d, i) => {
        const inner = d!;
        const column = described[i];
        return transform === undefined
          ? inner
          : (buf: Uint8Array, start: number, end: number) =>
            transform(inner(buf, start, end), column);
      });
      const decodeRow = compileRowDecoder(fns) ?? ((buf, fields, vals) => {
        for (let i = 0; i < n; i++) {
          const start = fields[2 * i];
          vals[i] = start === -1 ? null : fns[i](buf, start, fields[2 * i + 1]);
        }
      });
      this.#reader = new BinaryCopyReader(n, (buf, fields, out) => {
        const vals = values ? new Array<unknown>(n) : scratch;
        decodeRow(buf, fields, vals);
        push(vals, out);
      });
    } else {
      const fns = st.decoders;
      this.#reader = new TextCopyReader(n, (texts, out) => {
        const vals = values ? texts as unknown[] : scratch;
        for (let i = 0; i < n; i++) {
          const t = texts[i];
          const fn = fns[i];
          vals[i] = t === null || fn === null ? t : fn(t);
        }
        push(vals, out);
      });
    }
    // Each message is queued as it arrives (copied in runs) and decoded when the consumer asks
    // for its rows; reading pauses once two batches' worth wait.
    const backlog = this.#backlog;
    const size = this.#size;
    const ahead = this.#ahead;
    const req = new CopyToRequest(`${text} (format ${binary ? "binary" : "text"})`, {
      data: (buf, start, end) => {
        backlog.push(buf, start, end);
        const count = backlog.count;
        if (count >= ahead) req.pause();
        if (count >= size) this.#notify();
      },
      // Between reads the consumer decodes what came (as the rows would be decoded during the
      // read), so a batch fills as the data arrives instead of in one burst.
      release: () => {
        backlog.flush();
        if (backlog.count > 0) this.#notify();
      },
    });
    this.#req = req;
    req.done.then(
      () => {
        this.#finished = true;
        this.#notify();
      },
      (e) => this.#fail(e),
    );
    this.#env.sink.send(req);
  }
}
