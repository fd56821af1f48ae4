/**
 * Decoder for the messages of PostgreSQL's `pgoutput` logical decoding plugin,
 * protocol version 1: what each XLogData of a logical replication stream
 * carries once START_REPLICATION ... (proto_version '1') is running.
 *
 * Column values stay as the server sent them (text, or bytes for the binary
 * format): turning them into JavaScript values is the job of the layer that
 * knows the client's decoders and transforms.
 */
import { cstrEnd, i16, i32, ProtocolViolation, u16, utf8 } from "../protocol/backend.ts";
import { u64 } from "./messages.ts";

/**
 * One column of a tuple: its text (`t`), its bytes in the binary format
 * (`b`), `null` for SQL NULL (`n`), or `undefined` for an unchanged TOASTed
 * value the server did not resend (`u`).
 */
export type TupleValue = string | Uint8Array | null | undefined;

/** A column of a relation as the Relation message describes it. */
export interface RelationColumn {
  /** Part of the replica identity (the key sent for updates and deletes). */
  key: boolean;
  /** Column name. */
  name: string;
  /** Data type OID. */
  type: number;
  /** Type modifier (e.g. varchar length), or -1. */
  typmod: number;
}

/** Describes a table before the first change to it in a session (or after it changed). */
export interface RelationMessage {
  type: "relation";
  /** The table's OID, by which later changes refer to it. */
  oid: number;
  /** Schema; `pg_catalog` when the server sends an empty name. */
  schema: string;
  /** Table name. */
  table: string;
  /** REPLICA IDENTITY: `d` default (primary key), `n` nothing, `f` full, `i` an index. */
  replicaIdentity: string;
  /** The columns, in order. */
  columns: RelationColumn[];
}

/** Every message of protocol version 1 (`unknown` for a type byte this decoder does not know). */
export type PgoutputMessage =
  | {
    type: "begin";
    /** The LSN of the transaction's commit record. */
    finalLsn: bigint;
    /** Commit time (microseconds since 2000-01-01). */
    commitTime: bigint;
    /** Transaction ID. */
    xid: number;
  }
  | {
    type: "commit";
    /** Flags (currently always 0). */
    flags: number;
    /** The LSN of the commit record. */
    commitLsn: bigint;
    /** The LSN just past the commit record: everything before it has been sent. */
    endLsn: bigint;
    /** Commit time (microseconds since 2000-01-01). */
    commitTime: bigint;
  }
  | {
    type: "origin";
    /** The commit's LSN on the origin server. */
    lsn: bigint;
    /** The origin's name. */
    name: string;
  }
  | RelationMessage
  | {
    type: "type";
    /** The data type's OID. */
    oid: number;
    /** Its schema (`pg_catalog` when the server sends an empty name). */
    schema: string;
    /** Its name. */
    name: string;
  }
  | {
    type: "insert";
    /** The table's OID. */
    relation: number;
    /** The new row. */
    tuple: TupleValue[];
  }
  | {
    type: "update";
    /** The table's OID. */
    relation: number;
    /**
     * The old row when the server sent it: only the key columns (`key`) when the
     * key changed, or the whole row with REPLICA IDENTITY FULL; else null.
     */
    old: TupleValue[] | null;
    /** `old` holds only the key columns (the others are null). */
    key: boolean;
    /** The new row. */
    tuple: TupleValue[];
  }
  | {
    type: "delete";
    /** The table's OID. */
    relation: number;
    /** The deleted row: its key columns (`key`), or the whole row with REPLICA IDENTITY FULL. */
    old: TupleValue[];
    /** `old` holds only the key columns (the others are null). */
    key: boolean;
  }
  | {
    type: "truncate";
    /** The OIDs of the tables truncated together. */
    relations: number[];
    /** TRUNCATE ... CASCADE. */
    cascade: boolean;
    /** TRUNCATE ... RESTART IDENTITY. */
    restartIdentity: boolean;
  }
  | {
    type: "message";
    /** Emitted inside a transaction (else immediately). */
    transactional: boolean;
    /** The message's LSN. */
    lsn: bigint;
    /** The prefix given to pg_logical_emit_message. */
    prefix: string;
    /** The content. */
    content: Uint8Array;
  }
  | {
    type: "unknown";
    /** The message's type byte. */
    tag: number;
  };

const NULL = 0x6e; // 'n'
const UNCHANGED = 0x75; // 'u'
const TEXT = 0x74; // 't'
const BINARY = 0x62; // 'b'
const NEW = 0x4e; // 'N'
const KEY = 0x4b; // 'K'
const OLD = 0x4f; // 'O'

function truncated(what: string): ProtocolViolation {
  return new ProtocolViolation(`pgoutput ${what} message is truncated`);
}

/** Reads a message's fields in order, checking each against the message's end. */
class Reader {
  at: number;
  readonly buf: Uint8Array;
  readonly end: number;
  readonly what: string;

  constructor(buf: Uint8Array, start: number, end: number, what: string) {
    this.buf = buf;
    this.at = start;
    this.end = end;
    this.what = what;
  }

  #need(n: number): number {
    const at = this.at;
    if (at + n > this.end) throw truncated(this.what);
    this.at = at + n;
    return at;
  }

  u8(): number {
    return this.buf[this.#need(1)];
  }
  i16(): number {
    return i16(this.buf, this.#need(2));
  }
  u16(): number {
    return u16(this.buf, this.#need(2));
  }
  i32(): number {
    return i32(this.buf, this.#need(4));
  }
  /** OIDs and transaction IDs are unsigned 32-bit. */
  u32(): number {
    return i32(this.buf, this.#need(4)) >>> 0;
  }
  u64(): bigint {
    return u64(this.buf, this.#need(8));
  }
  cstr(): string {
    const nul = cstrEnd(this.buf, this.at, this.end);
    const s = utf8(this.buf, this.at, nul);
    this.at = nul + 1;
    return s;
  }
  bytes(n: number): Uint8Array {
    if (n < 0) throw truncated(this.what);
    const at = this.#need(n);
    return this.buf.slice(at, at + n);
  }
  text(n: number): string {
    if (n < 0) throw truncated(this.what);
    const at = this.#need(n);
    return utf8(this.buf, at, at + n);
  }
  done(): void {
    if (this.at !== this.end) {
      throw new ProtocolViolation(`pgoutput ${this.what} message has bytes after its fields`);
    }
  }
}

function tuple(r: Reader): TupleValue[] {
  const n = r.i16();
  if (n < 0) throw new ProtocolViolation(`pgoutput ${r.what} tuple has a negative column count`);
  const values = new Array<TupleValue>(n);
  for (let i = 0; i < n; i++) {
    const kind = r.u8();
    if (kind === TEXT) values[i] = r.text(r.i32());
    else if (kind === NULL) values[i] = null;
    else if (kind === UNCHANGED) values[i] = undefined;
    else if (kind === BINARY) values[i] = r.bytes(r.i32());
    else {
      throw new ProtocolViolation(
        `pgoutput ${r.what} tuple has an unknown column kind ${String.fromCharCode(kind)}`,
      );
    }
  }
  return values;
}

/** Reads the next tuple marker and checks it is one of `allowed`. */
function marker(r: Reader, allowed: readonly number[]): number {
  const m = r.u8();
  if (!allowed.includes(m)) {
    throw new ProtocolViolation(
      `pgoutput ${r.what} message has ${String.fromCharCode(m)} where ${
        allowed.map((a) => String.fromCharCode(a)).join(" or ")
      } belongs`,
    );
  }
  return m;
}

/** Decodes the pgoutput message in `buf[start, end)` (an XLogData payload). */
export function pgoutputMessage(buf: Uint8Array, start: number, end: number): PgoutputMessage {
  if (start >= end) throw new ProtocolViolation("an empty pgoutput message");
  const tag = buf[start];
  switch (tag) {
    case 0x42: { // B
      const r = new Reader(buf, start + 1, end, "Begin");
      const m = { type: "begin", finalLsn: r.u64(), commitTime: r.u64(), xid: r.u32() } as const;
      r.done();
      return m;
    }
    case 0x43: { // C
      const r = new Reader(buf, start + 1, end, "Commit");
      const m = {
        type: "commit",
        flags: r.u8(),
        commitLsn: r.u64(),
        endLsn: r.u64(),
        commitTime: r.u64(),
      } as const;
      r.done();
      return m;
    }
    case 0x4f: { // O
      const r = new Reader(buf, start + 1, end, "Origin");
      const m = { type: "origin", lsn: r.u64(), name: r.cstr() } as const;
      r.done();
      return m;
    }
    case 0x52: { // R
      const r = new Reader(buf, start + 1, end, "Relation");
      const oid = r.u32();
      const schema = r.cstr() || "pg_catalog";
      const table = r.cstr();
      const replicaIdentity = String.fromCharCode(r.u8());
      const n = r.u16();
      const columns: RelationColumn[] = new Array(n);
      for (let i = 0; i < n; i++) {
        const flags = r.u8();
        columns[i] = { key: (flags & 1) === 1, name: r.cstr(), type: r.u32(), typmod: r.i32() };
      }
      r.done();
      return { type: "relation", oid, schema, table, replicaIdentity, columns };
    }
    case 0x59: { // Y
      const r = new Reader(buf, start + 1, end, "Type");
      const m = {
        type: "type",
        oid: r.u32(),
        schema: r.cstr() || "pg_catalog",
        name: r.cstr(),
      } as const;
      r.done();
      return m;
    }
    case 0x49: { // I
      const r = new Reader(buf, start + 1, end, "Insert");
      const relation = r.u32();
      marker(r, [NEW]);
      const m = { type: "insert", relation, tuple: tuple(r) } as const;
      r.done();
      return m;
    }
    case 0x55: { // U
      const r = new Reader(buf, start + 1, end, "Update");
      const relation = r.u32();
      const first = marker(r, [KEY, OLD, NEW]);
      const old = first === NEW ? null : tuple(r);
      if (first !== NEW) marker(r, [NEW]);
      const m = { type: "update", relation, old, key: first === KEY, tuple: tuple(r) } as const;
      r.done();
      return m;
    }
    case 0x44: { // D
      const r = new Reader(buf, start + 1, end, "Delete");
      const relation = r.u32();
      const kind = marker(r, [KEY, OLD]);
      const m = { type: "delete", relation, old: tuple(r), key: kind === KEY } as const;
      r.done();
      return m;
    }
    case 0x54: { // T
      const r = new Reader(buf, start + 1, end, "Truncate");
      const n = r.u32();
      const options = r.u8();
      if (n > (end - r.at) / 4) throw truncated("Truncate");
      const relations = new Array<number>(n);
      for (let i = 0; i < n; i++) relations[i] = r.u32();
      r.done();
      return {
        type: "truncate",
        relations,
        cascade: (options & 1) !== 0,
        restartIdentity: (options & 2) !== 0,
      };
    }
    case 0x4d: { // M
      const r = new Reader(buf, start + 1, end, "Message");
      const transactional = (r.u8() & 1) !== 0;
      const lsn = r.u64();
      const prefix = r.cstr();
      const content = r.bytes(r.i32());
      r.done();
      return { type: "message", transactional, lsn, prefix, content };
    }
    default:
      return { type: "unknown", tag };
  }
}
