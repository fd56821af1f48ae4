/**
 * Backend (server to client) message types and decoders. Decoders read from a
 * byte range of the receive buffer in place; they never copy the frame.
 */
import type { Buffer } from "node:buffer";
import { bufferModule } from "../builtins.ts";

/** Backend message type bytes. */
export const Backend = {
  Authentication: 0x52, // R
  BackendKeyData: 0x4b, // K
  BindComplete: 0x32, // 2
  CloseComplete: 0x33, // 3
  CommandComplete: 0x43, // C
  CopyData: 0x64, // d
  CopyDone: 0x63, // c
  CopyInResponse: 0x47, // G
  CopyOutResponse: 0x48, // H
  CopyBothResponse: 0x57, // W
  DataRow: 0x44, // D
  EmptyQueryResponse: 0x49, // I
  ErrorResponse: 0x45, // E
  NegotiateProtocolVersion: 0x76, // v
  NoData: 0x6e, // n
  NoticeResponse: 0x4e, // N
  NotificationResponse: 0x41, // A
  ParameterDescription: 0x74, // t
  ParameterStatus: 0x53, // S
  ParseComplete: 0x31, // 1
  PortalSuspended: 0x73, // s
  ReadyForQuery: 0x5a, // Z
  RowDescription: 0x54, // T
} as const;

/** Authentication request codes carried by an Authentication message. */
export const Auth = {
  Ok: 0,
  KerberosV5: 2,
  CleartextPassword: 3,
  MD5Password: 5,
  GSS: 7,
  GSSContinue: 8,
  SSPI: 9,
  SASL: 10,
  SASLContinue: 11,
  SASLFinal: 12,
} as const;

// Fatal: with client_encoding UTF8 the server only sends valid UTF-8, so invalid bytes mean a
// broken peer, and silently replacing them would corrupt data.
const decoder = new TextDecoder("utf-8", { fatal: true });

function decode(bytes: Uint8Array): string {
  try {
    return decoder.decode(bytes);
  } catch {
    throw new ProtocolViolation("the server sent invalid UTF-8");
  }
}

/** A Buffer over the last receive buffer seen, so decoding needs no new view per value. */
let view: Buffer | null = null;
let viewOf: Uint8Array | null = null;

/**
 * How many more values TextDecoder decodes before `Buffer#toString` takes over. Buffer decodes a
 * short value about 0.3 µs faster, but its first use loads Deno's Node compatibility layer (about
 * 15 ms of CPU): a cold start's first answers, and a program of small results, are faster
 * without it; from this many values on, a program that decodes many more pays the load back.
 */
let textDecoderValues = 1 << 15;

/**
 * Decodes UTF-8 bytes `[start, end)`. `Buffer#toString` on a view kept over the
 * receive buffer is the cheapest decoder Deno has for both short and long
 * values, and it makes flat strings (building them by `+=` made ropes, which
 * JSON.stringify then had to flatten). It replaces invalid bytes with U+FFFD,
 * so a value holding one is decoded again strictly.
 */
export function utf8(buf: Uint8Array, start: number, end: number): string {
  if (viewOf !== buf) {
    if (textDecoderValues > 0) {
      textDecoderValues--;
      return decode(buf.subarray(start, end));
    }
    view = bufferModule().Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
    viewOf = buf;
  }
  const s = view!.toString("utf8", start, end);
  return s.indexOf("\uFFFD") === -1 ? s : decode(buf.subarray(start, end));
}

/** Reads a big-endian signed 32-bit integer. */
export function i32(buf: Uint8Array, at: number): number {
  return (buf[at] << 24) | (buf[at + 1] << 16) | (buf[at + 2] << 8) | buf[at + 3];
}

/** Reads a big-endian signed 16-bit integer. */
export function i16(buf: Uint8Array, at: number): number {
  const v = (buf[at] << 8) | buf[at + 1];
  return v > 0x7fff ? v - 0x10000 : v;
}

/** Reads a big-endian unsigned 16-bit integer (counts: up to 65535 parameters). */
export function u16(buf: Uint8Array, at: number): number {
  return (buf[at] << 8) | buf[at + 1];
}

/**
 * Index of the NUL terminating the C string at `at`. A string not terminated
 * before `end` (the end of its message) is a {@link ProtocolViolation}: what
 * follows `end` in the buffer belongs to other messages.
 */
export function cstrEnd(buf: Uint8Array, at: number, end: number): number {
  const i = at < end ? buf.indexOf(0, at) : -1;
  if (i === -1 || i >= end) {
    throw new ProtocolViolation("a string runs past the end of its message");
  }
  return i;
}

/** Thrown when the server sends bytes that do not follow the protocol. */
export class ProtocolViolation extends Error {
  /** Describes which rule the server's bytes broke. */
  constructor(message: string) {
    super(message);
    this.name = "ProtocolViolation";
  }
}

/**
 * Error and notice fields by their one-letter protocol code
 * (S severity, C code, M message, D detail, H hint, ...).
 *
 * @example
 * ```ts
import type { FieldMap } from "jsr:@pgpipe/pgpipe";
 * const f: FieldMap = { S: "ERROR", C: "42601", M: "syntax error" };
 * ```
 */
export type FieldMap = Record<string, string>;

/** Decodes an ErrorResponse or NoticeResponse body. */
export function fields(buf: Uint8Array, start: number, end: number): FieldMap {
  const out: FieldMap = {};
  let at = start;
  while (at < end && buf[at] !== 0) {
    const code = String.fromCharCode(buf[at]);
    const stop = cstrEnd(buf, at + 1, end);
    out[code] = utf8(buf, at + 1, stop);
    at = stop + 1;
  }
  // The fields end with a zero byte, the message's last.
  if (at !== end - 1) throw new ProtocolViolation("error or notice fields are not terminated");
  return out;
}

/** One column of a RowDescription. */
export interface Column {
  /** Column name as the server reports it (alias or attribute name). */
  name: string;
  /** OID of the table the column comes from, or 0. */
  table: number;
  /** Attribute number in that table, or 0. */
  number: number;
  /** Data type OID. */
  type: number;
  /** Type size (negative for variable width). */
  size: number;
  /** Type modifier (e.g. varchar length), or -1. */
  modifier: number;
  /** 0 for text, 1 for binary. */
  format: number;
}

/** Each column takes at least a NUL-terminated name and 18 bytes. */
const MIN_COLUMN_BYTES = 19;

/**
 * The last RowDescription bodies decoded, with their columns. The unnamed statement is described
 * again at every run (`prepare: false`, `sql.unsafe`, the simple protocol: every query of an
 * ORM's postgres.js driver), nearly always with the same bytes as before; comparing them costs a
 * tenth of decoding the names again, and the same columns array lets the statement reuse the
 * decoders it picked for them (QueryRequest). Nothing mutates a Column, so sharing them is safe.
 */
const described: { bytes: Uint8Array; columns: Column[] }[] = [];
const DESCRIBED_MAX = 8;

/** The columns decoded from the same bytes before, or null. */
function describedBefore(buf: Uint8Array, start: number, end: number): Column[] | null {
  const length = end - start;
  search: for (let k = 0; k < described.length; k++) {
    const { bytes, columns } = described[k];
    if (bytes.length !== length) continue;
    for (let i = 0; i < length; i++) if (bytes[i] !== buf[start + i]) continue search;
    if (k > 0) described.unshift(described.splice(k, 1)[0]); // most recent first
    return columns;
  }
  return null;
}

/** Decodes a RowDescription body into its columns (the same array for the same bytes). */
export function rowDescription(buf: Uint8Array, start: number, end: number): Column[] {
  const known = describedBefore(buf, start, end);
  if (known !== null) return known;
  const columns = decodeRowDescription(buf, start, end);
  described.unshift({ bytes: buf.slice(start, end), columns });
  if (described.length > DESCRIBED_MAX) described.pop();
  return columns;
}

function decodeRowDescription(buf: Uint8Array, start: number, end: number): Column[] {
  if (end - start < 2) throw new ProtocolViolation("RowDescription is truncated");
  const n = u16(buf, start);
  // Checked before allocating: a count the body cannot hold is a lie.
  if (n * MIN_COLUMN_BYTES > end - start - 2) {
    throw new ProtocolViolation("RowDescription is truncated");
  }
  const columns: Column[] = new Array(n);
  let at = start + 2;
  for (let i = 0; i < n; i++) {
    const stop = cstrEnd(buf, at, end);
    const name = utf8(buf, at, stop);
    at = stop + 1;
    if (at + 18 > end) throw new ProtocolViolation("RowDescription is truncated");
    columns[i] = {
      name,
      table: i32(buf, at) >>> 0,
      number: i16(buf, at + 4),
      type: i32(buf, at + 6) >>> 0,
      size: i16(buf, at + 10),
      modifier: i32(buf, at + 12),
      format: i16(buf, at + 16),
    };
    at += 18;
  }
  if (at !== end) throw new ProtocolViolation("RowDescription has bytes after its columns");
  return columns;
}

/**
 * Decodes a ParameterDescription body into parameter type OIDs. The count is
 * unsigned: a statement may have up to 65535 parameters. Pass `end`, the end of
 * the body: without it only the bounds of `buf` are checked.
 */
export function parameterDescription(buf: Uint8Array, start: number, end?: number): number[] {
  const limit = end ?? buf.length;
  if (limit - start < 2) throw new ProtocolViolation("ParameterDescription is truncated");
  const n = u16(buf, start);
  const size = 2 + 4 * n;
  if (end === undefined ? size > limit - start : size !== end - start) {
    throw new ProtocolViolation("ParameterDescription's length does not match its count");
  }
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) out[i] = i32(buf, start + 2 + 4 * i) >>> 0;
  return out;
}

/** The command words of most tags, matched as bytes so no string is made for them. */
const COMMAND_WORDS: readonly [string, Uint8Array][] = [
  "SELECT",
  "INSERT",
  "UPDATE",
  "DELETE",
  "MERGE",
  "FETCH",
  "MOVE",
  "COPY",
].map((w) => [w, new TextEncoder().encode(w)]);

function commandWord(buf: Uint8Array, start: number, stop: number): string {
  const n = stop - start;
  for (let k = 0; k < COMMAND_WORDS.length; k++) {
    const [word, bytes] = COMMAND_WORDS[k];
    if (bytes.length !== n) continue;
    let i = 0;
    while (i < n && buf[start + i] === bytes[i]) i++;
    if (i === n) return word;
  }
  return utf8(buf, start, stop);
}

/**
 * Decodes a CommandComplete tag into the command word and affected row count ("SELECT 5",
 * "INSERT 0 5", "CREATE TABLE"). It runs once per query, so it reads the bytes directly.
 */
export function commandComplete(
  buf: Uint8Array,
  start: number,
  end: number,
): { command: string; count: number | null } {
  const stop = end - 1;
  if (stop < start || buf[stop] !== 0) {
    throw new ProtocolViolation("a string runs past the end of its message");
  }
  let first = -1;
  let last = -1;
  for (let i = start; i < stop; i++) {
    const c = buf[i];
    if (c === 0) throw new ProtocolViolation("CommandComplete has bytes after its tag");
    if (c === 0x20) {
      if (first === -1) first = i;
      last = i;
    }
  }
  if (last === -1 || last + 1 === stop) return { command: utf8(buf, start, stop), count: null };
  let count = 0;
  for (let i = last + 1; i < stop; i++) {
    const d = buf[i] - 0x30;
    if (d < 0 || d > 9) return { command: utf8(buf, start, stop), count: null };
    count = count * 10 + d;
  }
  // "INSERT 0 5" carries a legacy OID before the count; the command is the first word.
  return { command: commandWord(buf, start, first), count };
}

/** Decodes a pair of C strings (ParameterStatus: name and value), the whole body. */
export function cstrPair(buf: Uint8Array, start: number, end: number): [string, string] {
  const a = cstrEnd(buf, start, end);
  const b = cstrEnd(buf, a + 1, end);
  if (b !== end - 1) throw new ProtocolViolation("bytes after the second string of a pair");
  return [utf8(buf, start, a), utf8(buf, a + 1, b)];
}

/**
 * A NotificationResponse: who sent it, on which channel, with what payload.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * await sql.listen("jobs", (_payload, n) => console.log(n.pid, n.channel, n.payload));
 * ```
 */
export interface Notification {
  /** The notifying backend's process ID. */
  pid: number;
  /** The channel name. */
  channel: string;
  /** The payload ("" when none was given). */
  payload: string;
}

/** Decodes a NotificationResponse body. */
export function notification(buf: Uint8Array, start: number, end: number): Notification {
  if (end - start < 4) throw new ProtocolViolation("NotificationResponse is truncated");
  const [channel, payload] = cstrPair(buf, start + 4, end);
  return { pid: i32(buf, start), channel, payload };
}

/**
 * Decodes a ReadyForQuery body: its transaction status, `I` (idle), `T` (in a transaction
 * block) or `E` (in a failed one); anything else is a violation.
 */
export function readyStatus(buf: Uint8Array, start: number, end: number): number {
  const status = buf[start];
  if (end - start !== 1 || (status !== 0x49 && status !== 0x54 && status !== 0x45)) {
    throw new ProtocolViolation("ReadyForQuery must carry one status byte: I, T or E");
  }
  return status;
}
