/**
 * The streaming replication sub-protocol carried in CopyData once
 * START_REPLICATION has switched the connection to CopyBoth: the server sends
 * XLogData ('w', a payload of WAL or, for logical replication, one output
 * plugin message) and primary keepalives ('k'); the client answers with
 * standby status updates ('r'). Positions in the WAL (LSNs) are unsigned
 * 64-bit numbers, kept as `bigint`.
 */
import { ProtocolViolation } from "../protocol/backend.ts";
import type { Writer } from "../protocol/writer.ts";
import { PG_EPOCH_MS } from "../types/formats.ts";

/** An XLogData message: WAL (or an output plugin message) starting at `walStart`. */
export interface XLogData {
  kind: "xlog";
  /** Where in the WAL the payload starts. */
  walStart: bigint;
  /** The server's current end of WAL. */
  walEnd: bigint;
  /** The server's clock when it sent the message (microseconds since 2000-01-01). */
  sentAt: bigint;
  /** The payload is `buf[payloadStart, payloadEnd)` of the buffer that was parsed. */
  payloadStart: number;
  /** End (exclusive) of the payload. */
  payloadEnd: number;
}

/** A primary keepalive: the server's end of WAL, and whether it wants an answer now. */
export interface Keepalive {
  kind: "keepalive";
  /** The server's current end of WAL. */
  walEnd: bigint;
  /** The server's clock when it sent the message (microseconds since 2000-01-01). */
  sentAt: bigint;
  /** The server asks for a status update at once (or it may time the connection out). */
  replyRequested: boolean;
}

/** What one CopyData body of a replication stream holds. */
export type ReplicationMessage = XLogData | Keepalive;

const XLOG_DATA = 0x77; // 'w'
const KEEPALIVE = 0x6b; // 'k'
const STATUS_UPDATE = 0x72; // 'r'

/** Microseconds between the Unix epoch and PostgreSQL's epoch (2000-01-01 UTC). */
const POSTGRES_EPOCH_US = BigInt(PG_EPOCH_MS) * 1000n;

/** Reads an unsigned big-endian 64-bit integer. */
export function u64(buf: Uint8Array, at: number): bigint {
  const hi = ((buf[at] << 24) | (buf[at + 1] << 16) | (buf[at + 2] << 8) | buf[at + 3]) >>> 0;
  const lo = ((buf[at + 4] << 24) | (buf[at + 5] << 16) | (buf[at + 6] << 8) | buf[at + 7]) >>> 0;
  return (BigInt(hi) << 32n) | BigInt(lo);
}

/** Parses one CopyData body `buf[start, end)` of a replication stream. */
export function replicationMessage(
  buf: Uint8Array,
  start: number,
  end: number,
): ReplicationMessage {
  const kind = start < end ? buf[start] : -1;
  if (kind === XLOG_DATA) {
    if (end - start < 25) throw new ProtocolViolation("XLogData is truncated");
    return {
      kind: "xlog",
      walStart: u64(buf, start + 1),
      walEnd: u64(buf, start + 9),
      sentAt: u64(buf, start + 17),
      payloadStart: start + 25,
      payloadEnd: end,
    };
  }
  if (kind === KEEPALIVE) {
    if (end - start !== 18) throw new ProtocolViolation("a primary keepalive must be 18 bytes");
    return {
      kind: "keepalive",
      walEnd: u64(buf, start + 1),
      sentAt: u64(buf, start + 9),
      replyRequested: buf[start + 17] !== 0,
    };
  }
  throw new ProtocolViolation(
    kind === -1
      ? "an empty CopyData in a replication stream"
      : `unknown replication message ${String.fromCharCode(kind)}`,
  );
}

function writeU64(w: Writer, v: bigint): void {
  w.i32(Number((v >> 32n) & 0xffffffffn) | 0);
  w.i32(Number(v & 0xffffffffn) | 0);
}

/** A Unix time in milliseconds as PostgreSQL's clock: microseconds since 2000-01-01. */
export function postgresClock(unixMs: number): bigint {
  return BigInt(Math.trunc(unixMs)) * 1000n - POSTGRES_EPOCH_US;
}

/** PostgreSQL's clock (microseconds since 2000-01-01) as a Date (millisecond precision). */
export function clockToDate(micros: bigint): Date {
  return new Date(Number((micros + POSTGRES_EPOCH_US) / 1000n));
}

/**
 * A CopyData carrying a standby status update: everything up to `lsn` has
 * been received, flushed and applied (the server may free the WAL before it).
 * `clock` is the client's time in PostgreSQL's clock (see {@linkcode postgresClock}).
 */
export function standbyStatusUpdate(
  w: Writer,
  lsn: bigint,
  clock: bigint,
  replyRequested = false,
): void {
  w.begin(0x64); // CopyData
  w.u8(STATUS_UPDATE);
  writeU64(w, lsn); // written
  writeU64(w, lsn); // flushed
  writeU64(w, lsn); // applied
  writeU64(w, clock);
  w.u8(replyRequested ? 1 : 0);
  w.end();
}

/** Parses an LSN in the server's text form, `X/Y` (two hex numbers of up to 32 bits each). */
export function parseLsn(text: string): bigint {
  const m = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(text);
  if (m === null) throw new ProtocolViolation(`invalid LSN: ${text}`);
  return (BigInt("0x" + m[1]) << 32n) | BigInt("0x" + m[2]);
}

/** Formats an LSN the way the server does: `X/Y`, upper-case hex without leading zeros. */
export function formatLsn(lsn: bigint): string {
  return `${(lsn >> 32n).toString(16).toUpperCase()}/${
    (lsn & 0xffffffffn).toString(16).toUpperCase()
  }`;
}
