/**
 * The result of a query: an Array of rows with the completion details
 * postgres.js users expect (`count`, `command`, `columns`, `statement`).
 */

/**
 * A result column as described by the server.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * const result = await sql`select 1 as n`;
 * console.log(result.columns?.[0].name, result.columns?.[0].type); // "n" 23
 * ```
 */
export interface ResultColumn {
  /** Column name (the row key). */
  name: string;
  /** Type OID. */
  type: number;
  /** Source table OID, or 0. */
  table: number;
  /** Attribute number in that table, or 0. */
  number: number;
}

/**
 * The prepared statement a query ran as.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * const result = await sql`select ${1}::int as n`;
 * console.log(result.statement?.text, result.statement?.parameterTypes);
 * ```
 */
export interface ResultStatement {
  /** Server-side name ("" for the unnamed statement). */
  name: string;
  /** The SQL text. */
  text: string;
  /** Parameter type OIDs as the server resolved them, when described. */
  parameterTypes: number[] | null;
  /** Result columns. */
  columns: ResultColumn[] | null;
}

/**
 * A row as an object keyed by column name. Its values are `any`, as in
 * postgres.js, so code written against postgres.js's types type-checks
 * unchanged; give the query a row type (`sql<User[]>`) for checked access.
 *
 * @example
 * ```ts
 * import postgres, { type Row } from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * const rows = await sql<Row[]>`select * from users`;
 * ```
 */
// deno-lint-ignore no-explicit-any
export type Row = Record<string, any>;

/**
 * Rows plus completion details. It is a real Array: index it, iterate it,
 * `map` it (which returns a plain Array).
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * const result = await sql`update users set active = true where age > ${18}`;
 * console.log(result.command, result.count); // "UPDATE" 42
 * ```
 */
export class Result<T = Row> extends Array<T> {
  /** Rows affected (INSERT/UPDATE/DELETE) or returned (SELECT), from the completion tag. */
  count: number | null = null;
  /** The command word: SELECT, INSERT, UPDATE, ... */
  command: string | null = null;
  /** The result columns. */
  columns: ResultColumn[] | null = null;
  /** The statement that ran. */
  statement: ResultStatement | null = null;
  /**
   * The connection's backend pid, secret key (its first 4 bytes: under protocol 3.2 the key is
   * longer), transaction status ("I", "T", "E") at completion, and the TLS implementation it runs
   * on (`"native"`, `"node"`, or null: plain).
   */
  state: { pid: number; secret: number; status: string; tls: "native" | "node" | null } | null =
    null;

  /** Derived arrays (`map`, `filter`, ...) are plain Arrays, not Results. */
  static override get [Symbol.species](): ArrayConstructor {
    return Array;
  }

  /**
   * Appends rows, as `Array#push`. Its own method because V8's builtin push takes a slow path
   * on an Array subclass (about 45 ns a row against 7), and every row arrives through it.
   *
   * @example
   * ```ts
   * import { Result } from "jsr:@pgpipe/pgpipe";
   * const r = new Result<{ x: number }>();
   * r.push({ x: 1 }, { x: 2 }); // 2
   * ```
   */
  override push(...rows: T[]): number {
    for (let i = 0; i < rows.length; i++) this[this.length] = rows[i];
    return this.length;
  }
}
