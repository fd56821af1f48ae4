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
  /** The SQL text again, under postgres.js's name for it. */
  readonly string: string;
  /** Parameter type OIDs as the server resolved them, when described. */
  parameterTypes: number[] | null;
  /** Result columns (empty for a statement that returns no rows). */
  columns: ResultColumn[];
}

/**
 * The connection a query ran on, as it was when the query completed.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * const result = await sql`select 1`;
 * console.log(result.state.pid, result.state.status); // 4711 "I"
 * ```
 */
export interface ResultState {
  /** The backend's process id. */
  pid: number;
  /** The backend's secret key (its first 4 bytes: under protocol 3.2 the key is longer). */
  secret: number;
  /** The transaction status at completion: "I" idle, "T" in a transaction, "E" in a failed one. */
  status: string;
  /** The TLS implementation the connection runs on (`"native"`, `"node"`), or null: plain. */
  tls: "native" | "node" | null;
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

// What a Result holds until its query completes (or for ever, for one made with `new Result()`):
// shared and frozen, so an unfinished Result allocates nothing for them.
const NO_COLUMNS: ResultColumn[] = Object.freeze([]) as unknown as ResultColumn[];
const NO_STATEMENT: ResultStatement = Object.freeze({
  name: "",
  text: "",
  string: "",
  parameterTypes: null,
  columns: NO_COLUMNS,
});
const NO_STATE: ResultState = Object.freeze({ pid: 0, secret: 0, status: "I", tls: null });
// postgres.js types `count` as a number and `command` as a string, yet leaves them null where the
// server gave none; programs written for it may test for that null, so pgpipe keeps it too.
const NO_COUNT = null as unknown as number;
const NO_COMMAND = null as unknown as string;

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
  // Private fields behind accessors, as cheap as plain fields: like postgres.js's (which defines
  // them non-enumerable), they are not among a result's keys, so `Object.keys`, spreading,
  // `assert.deepEqual(result, [...rows])` and test matchers see only the rows.
  #count: number = NO_COUNT;
  #command: string = NO_COMMAND;
  #columns: ResultColumn[] = NO_COLUMNS;
  #statement: ResultStatement = NO_STATEMENT;
  #state: ResultState = NO_STATE;

  /**
   * Rows affected (INSERT, UPDATE, DELETE, MERGE, COPY) or returned (SELECT, FETCH), from the
   * completion tag. As in postgres.js (whose type also says `number`), it is `null` when the tag
   * carries no count (CREATE TABLE, SET, BEGIN, ...) and for an empty query.
   *
   * @example
   * ```ts
   * import postgres from "jsr:@pgpipe/pgpipe";
   * const sql = postgres();
   * const { count } = await sql`delete from sessions where expires < now()`;
   * ```
   */
  get count(): number {
    return this.#count;
  }
  set count(value: number) {
    this.#count = value;
  }

  /**
   * The command word of the completion tag: SELECT, INSERT, UPDATE, ...; as in postgres.js, `null`
   * for an empty query.
   *
   * @example
   * ```ts
   * import postgres from "jsr:@pgpipe/pgpipe";
   * const sql = postgres();
   * const { command } = await sql`select 1`; // "SELECT"
   * ```
   */
  get command(): string {
    return this.#command;
  }
  set command(value: string) {
    this.#command = value;
  }

  /**
   * The result columns (empty when the statement returns no rows).
   *
   * @example
   * ```ts
   * import postgres from "jsr:@pgpipe/pgpipe";
   * const sql = postgres();
   * const { columns } = await sql`select 1 as n`; // [{ name: "n", type: 23, ... }]
   * ```
   */
  get columns(): ResultColumn[] {
    return this.#columns;
  }
  set columns(value: ResultColumn[]) {
    this.#columns = value;
  }

  /**
   * The statement that ran.
   *
   * @example
   * ```ts
   * import postgres from "jsr:@pgpipe/pgpipe";
   * const sql = postgres();
   * const { statement } = await sql`select ${1}::int as n`; // { name, text, ... }
   * ```
   */
  get statement(): ResultStatement {
    return this.#statement;
  }
  set statement(value: ResultStatement) {
    this.#statement = value;
  }

  /**
   * The connection's state at completion (see {@link ResultState}).
   *
   * @example
   * ```ts
   * import postgres from "jsr:@pgpipe/pgpipe";
   * const sql = postgres();
   * const { state } = await sql`select 1`; // { pid, secret, status: "I", tls }
   * ```
   */
  get state(): ResultState {
    return this.#state;
  }
  set state(value: ResultState) {
    this.#state = value;
  }

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
