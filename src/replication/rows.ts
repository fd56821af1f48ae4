/**
 * Rows from a logical replication stream. pgoutput describes each table in a
 * Relation message before its first change; the description is kept by OID
 * and turned into the same decoders and transforms (`types`, `bigint`,
 * `transform.column/value/row`) that shape ordinary query results, so a row
 * from `sql.subscribe` looks like the row a `select *` would return.
 */
import { type Column, ProtocolViolation } from "../protocol/backend.ts";
import type { RelationMessage, TupleValue } from "./pgoutput.ts";
import { Statement } from "../connection/statement.ts";
import type { DecodeOptions } from "../types/text_decoders.ts";
import type { Row } from "../query/result.ts";

/**
 * A column of a replicated table.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres({ publications: "alltables" });
 * await sql.subscribe("insert:users", (row, { relation }) => {
 *   for (const column of relation.columns) console.log(column.name, column.type, column.key);
 * });
 * ```
 */
export interface ColumnInfo {
  /** Part of the replica identity: the primary key by default, every column with REPLICA IDENTITY FULL. */
  key: boolean;
  /** The row key: the column name after `transform.column.from`. */
  name: string;
  /** Data type OID. */
  type: number;
  /** Type modifier (e.g. varchar length), or -1. */
  atttypmod: number;
}

/**
 * The table a change happened in.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres({ publications: "alltables" });
 * await sql.subscribe("*", (row, { command, relation }) => {
 *   console.log(command, `${relation.schema}.${relation.table}`, relation.keys.map((k) => row?.[k.name]));
 * });
 * ```
 */
export interface RelationInfo {
  /** The table's OID. */
  oid: number;
  /** Schema name. */
  schema: string;
  /** Table name. */
  table: string;
  /** Every column, in order. */
  columns: ColumnInfo[];
  /** The replica identity columns (the key sent with updates and deletes). */
  keys: ColumnInfo[];
}

/**
 * What a subscriber learns about an insert, update or delete besides the row.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres({ publications: "alltables" });
 * await sql.subscribe("update:users", (row, { old, key }) => {
 *   // REPLICA IDENTITY FULL: `old` is the whole previous row; a changed key: only the key columns.
 *   if (old) console.log(key ? "key changed from" : "was", old, "now", row);
 * });
 * ```
 */
export interface ReplicationEvent {
  /** What happened to the row. */
  command: "insert" | "update" | "delete";
  /** The table it happened in. */
  relation: RelationInfo;
  /**
   * The server sent only the key columns (the others are null): for a delete
   * under the default replica identity, and for `old` when an update changed the key.
   */
  key: boolean;
  /**
   * For an update, the previous row when the server sent one (REPLICA IDENTITY
   * FULL, or only the key columns when the key changed); else null.
   */
  old: Row | null;
}

/**
 * What a `truncate` subscriber receives for each table a TRUNCATE emptied (the row is null).
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres({ publications: "alltables" });
 * await sql.subscribe("truncate:users", (_row, info) => {
 *   if (info.command === "truncate") {
 *     console.log(`${info.relation.table} was emptied`, info.cascade ? "(cascade)" : "");
 *   }
 * });
 * ```
 */
export interface TruncateEvent {
  /** Always `truncate`. */
  command: "truncate";
  /** The table that was emptied. */
  relation: RelationInfo;
  /** Always false: a truncate carries no row. */
  key: false;
  /** Always null. */
  old: null;
  /** TRUNCATE ... CASCADE. */
  cascade: boolean;
  /** TRUNCATE ... RESTART IDENTITY. */
  restartIdentity: boolean;
}

/** A relation with what turns its tuples into rows. */
export interface DecodedRelation {
  /** What callbacks see. */
  info: RelationInfo;
  /** The column decoders and row shape, as a described statement holds them for query results. */
  statement: Statement;
  /**
   * What `transform.column.from` threw while naming the columns: every change to the
   * relation then fails with it (reported, not delivered) until the server describes it again.
   */
  broken: unknown;
}

/** The relations of one replication session, by OID. */
export class RelationRows {
  #decode: DecodeOptions;
  #relations = new Map<number, DecodedRelation>();

  constructor(decode: DecodeOptions) {
    this.#decode = decode;
  }

  /** Records (or replaces, after ALTER TABLE) a relation's description. */
  relation(m: RelationMessage): void {
    const columns: Column[] = m.columns.map((c, i) => ({
      name: c.name,
      table: m.oid,
      number: i + 1,
      type: c.type,
      size: -1,
      modifier: c.typmod,
      format: 0,
    }));
    const statement = new Statement("", "", []);
    let broken: unknown = undefined;
    try {
      statement.describe(columns, this.#decode);
    } catch (e) {
      broken = e; // the user's column transform threw: never into the read loop
    }
    const infos: ColumnInfo[] = m.columns.map((c, i) => ({
      key: c.key,
      name: broken === undefined ? statement.keys[i] : c.name,
      type: c.type,
      atttypmod: c.typmod,
    }));
    this.#relations.set(m.oid, {
      info: {
        oid: m.oid,
        schema: m.schema,
        table: m.table,
        columns: infos,
        keys: infos.filter((c) => c.key),
      },
      statement,
      broken,
    });
  }

  /** The relation a change refers to; the server always describes it first. */
  get(oid: number): DecodedRelation {
    const r = this.#relations.get(oid);
    if (r === undefined) {
      throw new ProtocolViolation(`pgoutput sent a change to relation ${oid} before describing it`);
    }
    return r;
  }

  /**
   * A tuple as a row: text values through the column's decoder, `null` for
   * NULL, `undefined` for an unchanged TOASTed value the server did not
   * resend; then `transform.row`.
   */
  row(relation: DecodedRelation, tuple: TupleValue[]): Row {
    if (relation.broken !== undefined) throw relation.broken;
    const st = relation.statement;
    // sql.options.parsers changed since the relation was described: decode with the new ones.
    if (st.describedWith !== this.#decode.parsers) st.pickDecoders(st.columns!, this.#decode);
    const decoders = st.decoders;
    const n = decoders.length;
    if (tuple.length !== n) {
      throw new ProtocolViolation(
        `pgoutput sent ${tuple.length} columns for ${relation.info.table}, which has ${n}`,
      );
    }
    const values = new Array<unknown>(n);
    for (let i = 0; i < n; i++) {
      const v = tuple[i];
      const decode = decoders[i];
      values[i] = typeof v === "string" && decode !== null ? decode(v) : v;
    }
    const row = new st.Row(values);
    return (st.rowTransform === null ? row : st.rowTransform(row)) as Row;
  }
}
