/**
 * Large objects, as postgres.js's `sql.largeObject`: a large object opened on
 * a reserved connection inside a transaction (its descriptor only lives that
 * long), read and written with the server's lo_* functions; `close()` closes
 * the descriptor and commits, which releases the connection.
 *
 * Every operation is one query on the transaction's connection, so operations
 * issued together are pipelined and run in the order they were issued.
 */
import type { Buffer } from "node:buffer";
import type { Readable, Writable } from "node:stream";
import { bufferModule, streamModule } from "../builtins.ts";
import { QueryError } from "../errors.ts";
import type { Result, Row } from "../query/result.ts";

/** `INV_WRITE | INV_READ`: open for reading and writing (postgres.js's default mode). */
export const LARGE_OBJECT_READ_WRITE = 0x00020000 | 0x00040000;

/** The largest `loread` the server allows (its `int4` length; a read is at most 1 GB anyway). */
const MAX_READ = 0x7fffffff;

/**
 * The row `lo.read()` resolves with.
 *
 * @example
 * ```ts
 * import postgres, { type LargeObjectData } from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * const lo = await sql.largeObject(16403, 0x40000);
 * const [row]: LargeObjectData[] = await lo.read(4096);
 * console.log(row.data.length); // up to 4096
 * ```
 */
export interface LargeObjectData {
  /** The bytes read: fewer than asked at the end of the object, none past it. */
  data: Buffer;
}

/**
 * A large object opened by `sql.largeObject()`. The methods resolve with the
 * same results as postgres.js's (one row, named after the server function),
 * except that positions and sizes are numbers, not `int8` text (a large
 * object's size, at most 4 TB, is exact as a number).
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * const lo = await sql.largeObject(); // a new one; sql.largeObject(oid) opens an existing one
 * await lo.write(new TextEncoder().encode("hello"));
 * await lo.seek(0);
 * const [{ data }] = await lo.read(5); // Buffer "hello"
 * const [{ size }] = await lo.size(); // 5
 * await lo.close(); // commits: lo.oid now names a stored large object
 * ```
 */
export interface LargeObject {
  /** The large object's OID (the one created, or the one opened). */
  readonly oid: number;
  /** Reads up to `size` bytes at the current position (`loread`). */
  read(size: number): Promise<Result<LargeObjectData>>;
  /** Writes bytes (a string as UTF-8) at the current position (`lowrite`); `lowrite` is the count. */
  write(buffer: Uint8Array | string): Promise<Result<{ lowrite: number }>>;
  /**
   * Moves the position (`lo_lseek64`): `whence` 0 from the start (default), 1
   * from the current position, 2 from the end; `lo_lseek64` is the new position.
   */
  seek(offset: number, whence?: number): Promise<Result<{ lo_lseek64: number }>>;
  /** The current position (`lo_tell64`). */
  tell(): Promise<Result<{ lo_tell64: number }>>;
  /** Cuts (or zero-extends) the object to `size` bytes (`lo_truncate64`). */
  truncate(size: number): Promise<Result<{ lo_truncate64: number }>>;
  /** The object's size, and the current position (which it leaves unchanged). */
  size(): Promise<Result<{ position: number; size: number }>>;
  /**
   * Closes the descriptor and commits; the connection goes back to the pool.
   * If an operation failed (the transaction is then aborted) or closing fails,
   * it rolls back and rejects with the error. Later calls do nothing.
   */
  close(): Promise<void>;
  /**
   * A Node Readable of the object's bytes from `start` (default: 0, after a
   * seek there) up to `end` (exclusive; default: the end of the object), read
   * `highWaterMark` bytes (default 16 kB) per query.
   */
  readable(options?: LargeObjectReadableOptions): Promise<Readable>;
  /**
   * A Node Writable writing at `start` (default: 0, after a seek there), one
   * `lowrite` per chunk (chunks buffered meanwhile are written together);
   * `'finish'` follows the last write.
   */
  writable(options?: LargeObjectWritableOptions): Promise<Writable>;
}

/**
 * Options of {@linkcode LargeObject.readable}.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * const lo = await sql.largeObject(16403);
 * const head = await lo.readable({ start: 0, end: 1024, highWaterMark: 512 }); // the first 1 kB
 * ```
 */
export interface LargeObjectReadableOptions {
  /** Bytes asked for per read (and the stream's buffer size); default 16384. */
  highWaterMark?: number;
  /** Where to start: the stream seeks there first; default 0. */
  start?: number;
  /** Where to stop (exclusive); default: the end of the object. */
  end?: number;
}

/**
 * Options of {@linkcode LargeObject.writable}.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * const lo = await sql.largeObject(16403);
 * const append = await lo.writable({ start: (await lo.size())[0].size });
 * ```
 */
export interface LargeObjectWritableOptions {
  /** The stream's buffer size in bytes; default 16384. */
  highWaterMark?: number;
  /** Where to write: the stream seeks there first; default 0. */
  start?: number;
}

/**
 * What a large object needs of the transaction it lives in (a `Transaction` of `sql.begin()`):
 * tagged queries, commit and rollback.
 */
export interface LargeObjectTransaction {
  /** Runs one tagged query in the transaction. */
  <T extends readonly unknown[] = Row[]>(
    strings: TemplateStringsArray,
    ...values: unknown[]
  ): PromiseLike<
    Result<T[number]>
  >;
  /** Commits and releases the connection. */
  commit(): Promise<void>;
  /** Rolls back and releases the connection. */
  rollback(): Promise<void>;
}

/** A transaction to roll back when its large object was dropped without `close()`. */
const unclosed = new FinalizationRegistry<LargeObjectTransaction>((tx) => {
  tx.rollback().catch(() => {}); // the connection may be gone; it is released either way
});

function invalid(message: string): QueryError {
  return new QueryError("INVALID_ARGUMENTS", message);
}

function isPosition(n: unknown): n is number {
  return typeof n === "number" && Number.isSafeInteger(n) && n >= 0;
}

function isOid(n: unknown): n is number {
  return typeof n === "number" && Number.isInteger(n) && n > 0 && n <= 0xffffffff;
}

/**
 * Opens (or, without an OID, creates) a large object in a transaction opened
 * with `begin`. Bad arguments reject before anything is reserved.
 */
export async function openLargeObject(
  begin: () => Promise<LargeObjectTransaction>,
  oid: number | undefined | null,
  mode: number = LARGE_OBJECT_READ_WRITE,
): Promise<LargeObject> {
  const creating = oid === undefined || oid === null || oid === 0;
  if (!creating && !isOid(oid)) {
    throw invalid(`sql.largeObject needs an OID (a positive 32-bit integer), got ${oid}`);
  }
  if (!Number.isInteger(mode) || mode < 0 || mode > 0x7fffffff) {
    throw invalid(
      `sql.largeObject needs a mode (INV_READ 0x40000 | INV_WRITE 0x20000), got ${mode}`,
    );
  }
  const tx = await begin();
  try {
    const [opened] = creating
      ? await tx`with created as materialized (select lo_creat(-1) as oid)
          select oid::int8::float8 as oid, lo_open(oid, ${mode}) as fd from created`
      : await tx`select ${oid}::int8::float8 as oid, lo_open(${oid}::int8::oid, ${mode}) as fd`;
    return largeObject(tx, opened.oid as number, opened.fd as number);
  } catch (e) {
    await tx.rollback().catch(() => {});
    throw e;
  }
}

function largeObject(tx: LargeObjectTransaction, oid: number, fd: number): LargeObject {
  let closing: Promise<void> | null = null;
  /** Runs one operation, unless the object was closed (its descriptor is gone with the transaction). */
  const op = <R>(run: () => PromiseLike<R>): Promise<R> =>
    closing === null
      ? Promise.resolve(run())
      : Promise.reject(new QueryError("LARGE_OBJECT_CLOSED", "the large object was closed"));

  const lo: LargeObject = {
    oid,
    read: (size) =>
      isPosition(size) && size <= MAX_READ
        ? op(() => tx<LargeObjectData[]>`select loread(${fd}, ${size}) as data`)
        : Promise.reject(invalid(`lo.read needs a byte count, got ${size}`)),
    write: (buffer) => {
      const bytes = typeof buffer === "string" ? bufferModule().Buffer.from(buffer) : buffer;
      if (!(bytes instanceof Uint8Array)) {
        return Promise.reject(invalid("lo.write needs a Uint8Array (or a string)"));
      }
      return op(() => tx<{ lowrite: number }[]>`select lowrite(${fd}, ${bytes}) as lowrite`);
    },
    seek: (offset, whence = 0) =>
      Number.isSafeInteger(offset) && (whence === 0 || whence === 1 || whence === 2)
        ? op(() =>
          tx<{ lo_lseek64: number }[]>`
            select lo_lseek64(${fd}, ${offset}, ${whence})::float8 as lo_lseek64`
        )
        : Promise.reject(invalid(`lo.seek needs an integer offset and whence 0, 1 or 2`)),
    tell: () => op(() => tx<{ lo_tell64: number }[]>`select lo_tell64(${fd})::float8 as lo_tell64`),
    truncate: (size) =>
      isPosition(size)
        ? op(() =>
          tx<{ lo_truncate64: number }[]>`
            select lo_truncate64(${fd}, ${size}) as lo_truncate64`
        )
        : Promise.reject(invalid(`lo.truncate needs a size in bytes, got ${size}`)),
    // The end is found by seeking there; the position is then restored, in the same statement.
    size: () =>
      op(() =>
        tx<{ position: number; size: number }[]>`
          select lo_lseek64(${fd}, location, 0)::float8 as position, ends.size::float8 as size
          from (
            select lo_lseek64(${fd}, 0, 2) as size, here.location
            from (select lo_tell64(${fd}) as location) here
          ) ends`
      ),
    close: () => {
      if (closing !== null) return closing;
      unclosed.unregister(lo);
      closing = (async () => {
        try {
          await tx`select lo_close(${fd})`;
        } catch (e) {
          await tx.rollback().catch(() => {});
          throw e;
        }
        await tx.commit();
      })();
      return closing;
    },
    readable: async (options = {}) => {
      const { highWaterMark = 16384, start = 0, end = Infinity } = options;
      if (!isPosition(highWaterMark) || highWaterMark === 0 || !isPosition(start)) {
        throw invalid("lo.readable needs a positive highWaterMark and a start position");
      }
      if (end !== Infinity && (!isPosition(end) || end < start)) {
        throw invalid("lo.readable needs an end position at or after start");
      }
      await lo.seek(start);
      return readableOf(lo, highWaterMark, end - start);
    },
    writable: async (options = {}) => {
      const { highWaterMark = 16384, start = 0 } = options;
      if (!isPosition(highWaterMark) || highWaterMark === 0 || !isPosition(start)) {
        throw invalid("lo.writable needs a positive highWaterMark and a start position");
      }
      await lo.seek(start);
      return writableOf(lo, highWaterMark);
    },
  };
  // Dropped without close(): roll back, so the connection is not reserved for ever.
  unclosed.register(lo, tx, lo);
  return lo;
}

/** Reads `remaining` bytes (or to the end of the object) from the current position. */
function readableOf(lo: LargeObject, highWaterMark: number, remaining: number): Readable {
  return new (streamModule().Readable)({
    highWaterMark,
    read(size) {
      const want = Math.min(size, remaining, MAX_READ);
      if (want <= 0) return void this.push(null);
      lo.read(want).then(([{ data }]) => {
        remaining -= data.length;
        if (data.length > 0) this.push(data);
        if (data.length < want || remaining <= 0) this.push(null);
      }, (e) => this.destroy(e));
    },
  });
}

/** Writes each chunk (or the chunks buffered together) at the current position. */
function writableOf(lo: LargeObject, highWaterMark: number): Writable {
  return new (streamModule().Writable)({
    highWaterMark,
    write(chunk: Buffer, _encoding, callback) {
      lo.write(chunk).then(() => callback(), callback);
    },
    writev(chunks, callback) {
      lo.write(bufferModule().Buffer.concat(chunks.map((c) => c.chunk as Buffer))).then(
        () => callback(),
        callback,
      );
    },
  });
}
