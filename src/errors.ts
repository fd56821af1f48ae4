/**
 * The errors pgpipe rejects with. Every layer may import this leaf module.
 *
 * - {@link PostgresError}: the server refused a statement (it has a SQLSTATE `code`).
 * - {@link ConnectionError}: the socket, TLS, startup or protocol failed; `code` is stable.
 */
import type { FieldMap } from "./protocol/backend.ts";

/** The text of whatever was thrown, without trusting its own toString. */
export function thrownText(value: unknown): string {
  if (value instanceof Error) return value.message;
  try {
    return String(value);
  } catch {
    return Object.prototype.toString.call(value);
  }
}

/**
 * An error reported by the PostgreSQL server, with every field it sent.
 * Field names follow postgres.js so handlers can be shared.
 *
 * @example
 * ```ts
 * import postgres, { PostgresError } from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * try {
 *   await sql`select 1/0`;
 * } catch (e) {
 *   if (e instanceof PostgresError && e.code === "22012") console.log("division by zero");
 * }
 * ```
 */
export class PostgresError extends Error {
  /**
   * SQLSTATE code, e.g. `23505` for a unique violation; `NO_SQLSTATE` when the server's
   * ErrorResponse carried none (a broken server or proxy: the statement still failed).
   */
  readonly code: string;
  /** ERROR, FATAL, PANIC (never localised). */
  readonly severity: string;
  /** Severity in the server's language. */
  readonly severity_local: string;
  /** Secondary detail, if any. */
  readonly detail?: string;
  /** A suggestion, if any. */
  readonly hint?: string;
  /** 1-based character position in the query text. */
  readonly position?: string;
  /** Position in an internally generated query. */
  readonly internal_position?: string;
  /** The internally generated query. */
  readonly internal_query?: string;
  /** Call stack context (e.g. inside a PL/pgSQL function). */
  readonly where?: string;
  /** Schema of the object involved. */
  readonly schema_name?: string;
  /** Table of the object involved. */
  readonly table_name?: string;
  /** Column involved. */
  readonly column_name?: string;
  /** Data type involved. */
  readonly data_type_name?: string;
  /** Constraint violated. */
  readonly constraint_name?: string;
  /** Server source file. */
  readonly file?: string;
  /** Server source line. */
  readonly line?: string;
  /** Server source routine. */
  readonly routine?: string;
  /** The query text (enumerable only with the `debug` option, so logs do not show it). */
  declare readonly query?: string;
  /** The parameters as sent (enumerable only with `debug`: they may hold secrets). */
  declare readonly parameters?: readonly unknown[];
  /** The values as given to the query (enumerable only with `debug`). */
  declare readonly args?: readonly unknown[];
  /** The parameter type OIDs sent (enumerable only with `debug`). */
  declare readonly types?: readonly number[];

  /** Builds the error from an ErrorResponse's fields. */
  constructor(fields: FieldMap) {
    super(fields.M ?? "the server sent an error without a message");
    this.name = "PostgresError";
    this.code = fields.C ?? "NO_SQLSTATE";
    this.severity = fields.V ?? fields.S ?? "ERROR";
    this.severity_local = fields.S ?? this.severity;
    if (fields.D !== undefined) this.detail = fields.D;
    if (fields.H !== undefined) this.hint = fields.H;
    if (fields.P !== undefined) this.position = fields.P;
    if (fields.p !== undefined) this.internal_position = fields.p;
    if (fields.q !== undefined) this.internal_query = fields.q;
    if (fields.W !== undefined) this.where = fields.W;
    if (fields.s !== undefined) this.schema_name = fields.s;
    if (fields.t !== undefined) this.table_name = fields.t;
    if (fields.c !== undefined) this.column_name = fields.c;
    if (fields.d !== undefined) this.data_type_name = fields.d;
    if (fields.n !== undefined) this.constraint_name = fields.n;
    if (fields.F !== undefined) this.file = fields.F;
    if (fields.L !== undefined) this.line = fields.L;
    if (fields.R !== undefined) this.routine = fields.R;
  }

  /** Attaches the query text and parameters without making them enumerable. */
  attach(query: string, parameters: readonly unknown[]): this {
    Object.defineProperty(this, "query", { value: query, enumerable: false, configurable: true });
    Object.defineProperty(this, "parameters", {
      value: parameters,
      enumerable: false,
      configurable: true,
    });
    return this;
  }
}

/**
 * Node's errno-style codes for a socket that could not be opened, as
 * {@link ConnectionError} reports them: refused, reset, timed out, no route,
 * a host name that does not resolve (`ENOTFOUND`; `EAI_AGAIN` when the
 * resolver itself failed), a unix socket file that does not exist (`ENOENT`)
 * or may not be opened (`EACCES`).
 *
 * @example
 * ```ts
 * import postgres, { ConnectionError } from "jsr:@pgpipe/pgpipe";
 * const sql = postgres("postgres://localhost:1/db");
 * try {
 *   await sql`select 1`;
 * } catch (e) {
 *   if (e instanceof ConnectionError && e.code === "ECONNREFUSED") console.log("nothing listens there");
 * }
 * ```
 */
export type SocketErrorCode =
  | "ECONNREFUSED"
  | "ECONNRESET"
  | "ECONNABORTED"
  | "ETIMEDOUT"
  | "EHOSTUNREACH"
  | "ENETUNREACH"
  | "EADDRNOTAVAIL"
  | "ENOTFOUND"
  | "EAI_AGAIN"
  | "ENOENT"
  | "EACCES";

const SOCKET_ERROR_CODES: ReadonlySet<string> = new Set<SocketErrorCode>([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EADDRNOTAVAIL",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ENOENT",
  "EACCES",
]);

/** Whether `code` is one of the {@link SocketErrorCode}s (a socket that could not be opened). */
export function isSocketErrorCode(code: string): code is SocketErrorCode {
  return SOCKET_ERROR_CODES.has(code);
}

/**
 * The error of a query cancelled before the server ran it: the same SQLSTATE
 * (57014) and message as the server's own, so one check covers both.
 */
export function cancelledByUser(): PostgresError {
  return new PostgresError({
    S: "ERROR",
    V: "ERROR",
    C: "57014",
    M: "canceling statement due to user request",
  });
}

/**
 * A notice from the server (a NoticeResponse: `NOTICE`, `WARNING`, `INFO`,
 * ...), as the `onnotice` option receives it: a plain object with the same
 * field names as {@linkcode PostgresError} (postgres.js's names).
 *
 * @example
 * ```ts
 * import postgres, { type Notice } from "jsr:@pgpipe/pgpipe";
 * const sql = postgres({
 *   onnotice: (notice: Notice) => console.log(notice.severity, notice.code, notice.message),
 * });
 * ```
 */
export interface Notice {
  /** NOTICE, WARNING, INFO, DEBUG, LOG (never localised). */
  severity: string;
  /** Severity in the server's language. */
  severity_local: string;
  /** SQLSTATE code, e.g. `42P07` for "relation already exists, skipping". */
  code: string;
  /** The message. */
  message: string;
  /** Secondary detail, if any. */
  detail?: string;
  /** A suggestion, if any. */
  hint?: string;
  /** 1-based character position in the query text. */
  position?: string;
  /** Position in an internally generated query. */
  internal_position?: string;
  /** The internally generated query. */
  internal_query?: string;
  /** Call stack context. */
  where?: string;
  /** Schema of the object involved. */
  schema_name?: string;
  /** Table of the object involved. */
  table_name?: string;
  /** Column involved. */
  column_name?: string;
  /** Data type involved. */
  data_type_name?: string;
  /** Constraint involved. */
  constraint_name?: string;
  /** Server source file. */
  file?: string;
  /** Server source line. */
  line?: string;
  /** Server source routine. */
  routine?: string;
}

/** Protocol field codes and the names postgres.js gives them (optional fields). */
const FIELD_NAMES: readonly (readonly [string, keyof Notice])[] = [
  ["D", "detail"],
  ["H", "hint"],
  ["P", "position"],
  ["p", "internal_position"],
  ["q", "internal_query"],
  ["W", "where"],
  ["s", "schema_name"],
  ["t", "table_name"],
  ["c", "column_name"],
  ["d", "data_type_name"],
  ["n", "constraint_name"],
  ["F", "file"],
  ["L", "line"],
  ["R", "routine"],
];

/** A NoticeResponse's fields as a {@linkcode Notice}. */
export function noticeOf(fields: FieldMap): Notice {
  const severity = fields.V ?? fields.S ?? "NOTICE";
  const notice: Notice = {
    severity,
    severity_local: fields.S ?? severity,
    code: fields.C ?? "00000",
    message: fields.M ?? "",
  };
  for (const [letter, name] of FIELD_NAMES) {
    if (fields[letter] !== undefined) notice[name] = fields[letter];
  }
  return notice;
}

/**
 * Stable codes of {@link ConnectionError}: the driver's own, and the
 * {@link SocketErrorCode}s Node reports when a socket cannot be opened.
 *
 * @example
 * ```ts
 * import postgres, { ConnectionError } from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * try {
 *   await sql`select 1`;
 * } catch (e) {
 *   if (e instanceof ConnectionError && e.code === "CONNECT_TIMEOUT") console.log("database unreachable");
 * }
 * ```
 */
export type ConnectionErrorCode =
  | "CONNECTION_CLOSED"
  | "CONNECTION_DESTROYED"
  | "CONNECTION_ENDED"
  | "CONNECT_TIMEOUT"
  | "QUERY_TIMEOUT"
  | "CONNECT_FAILED"
  | "NO_MATCHING_HOST"
  | "SSL_NOT_SUPPORTED"
  | "SSL_FAILED"
  | "AUTH_UNSUPPORTED"
  | "AUTH_FAILED"
  | "AUTH_REFUSED"
  | "PROTOCOL_VIOLATION"
  | SocketErrorCode;

/**
 * What a {@link ConnectionError} may carry besides its code and message.
 *
 * @example
 * ```ts
 * import { ConnectionError } from "jsr:@pgpipe/pgpipe";
 * const e = new ConnectionError("ECONNREFUSED", "could not connect", { address: "db", port: 5432, errno: -111 });
 * ```
 */
export interface ConnectionErrorOptions {
  /** Host or socket path. */
  address?: string;
  /** TCP port. */
  port?: number;
  /** The underlying error. */
  cause?: unknown;
  /** Node's errno: a negative OS error number for a socket error; defaults to the code. */
  errno?: number | string;
  /** The system call that failed (`connect`, `getaddrinfo`), for a socket error. */
  syscall?: string;
}

/**
 * The connection could not be made or was lost. `outcome` tells, for a query
 * that was in flight, whether the server may have run it (`"unknown"`) or
 * certainly did not (`"not-sent"`). A socket that could not be opened has
 * Node's code (`ECONNREFUSED`, `ENOTFOUND`, ...), with `errno` and `syscall`
 * as Node's errors have them.
 *
 * @example
 * ```ts
 * import postgres, { ConnectionError } from "jsr:@pgpipe/pgpipe";
 * const sql = postgres("postgres://localhost:1/db", { connect_timeout: 1 });
 * try {
 *   await sql`select 1`;
 * } catch (e) {
 *   if (e instanceof ConnectionError) console.log(e.code); // "ECONNREFUSED"
 * }
 * ```
 */
export class ConnectionError extends Error {
  /** A stable machine-readable reason. */
  readonly code: ConnectionErrorCode;
  /**
   * Node's errno: for a socket error the negative OS error number (e.g. -111
   * for ECONNREFUSED on Linux) when known, else the code (as postgres.js sets it).
   */
  readonly errno: number | string;
  /** The system call that failed (`connect`, `getaddrinfo`), for a socket error. */
  readonly syscall?: string;
  /** Host or socket path. */
  readonly address?: string;
  /** TCP port, when there is one. */
  readonly port?: number;
  /**
   * For a query that was in flight: could it have run on the server? For a transaction
   * (`sql.begin`, `tx.commit()`): `"not-sent"` when its COMMIT was never written, so nothing
   * committed; `"unknown"` when COMMIT was written and its answer never came.
   */
  outcome?: "unknown" | "not-sent";

  /** Builds the error; `cause` keeps the underlying error (e.g. a FATAL from the server). */
  constructor(code: ConnectionErrorCode, message: string, options?: ConnectionErrorOptions) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "ConnectionError";
    this.code = code;
    this.errno = options?.errno ?? code;
    if (options?.syscall !== undefined) this.syscall = options.syscall;
    if (options?.address !== undefined) this.address = options.address;
    if (options?.port !== undefined) this.port = options.port;
  }
}

/**
 * The caller passed something that cannot be sent: an `undefined` parameter,
 * too many parameters, a value of an unsupported type. Nothing was sent and the
 * connection is unaffected.
 *
 * @example
 * ```ts
 * import postgres, { QueryError } from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * try {
 *   await sql`select ${undefined}`;
 * } catch (e) {
 *   if (e instanceof QueryError) console.log(e.code); // "UNDEFINED_VALUE"
 * }
 * ```
 */
export class QueryError extends TypeError {
  /** A stable machine-readable reason. */
  readonly code: string;

  /** Builds the error with a code such as `UNDEFINED_VALUE` or `MAX_PARAMETERS_EXCEEDED`. */
  constructor(code: string, message: string) {
    super(message);
    this.name = "QueryError";
    this.code = code;
  }
}

/**
 * A row given to `sql.copyFrom` that cannot be loaded: a value of the wrong
 * kind for its column (`INVALID_VALUE`), an `undefined` value
 * (`UNDEFINED_VALUE`), or a row that is neither an array nor an object or has
 * the wrong number of values (`INVALID_ROW`). The COPY was cancelled
 * (CopyFail), so the table is unchanged and the connection usable.
 *
 * @example
 * ```ts
 * import postgres, { CopyRowError } from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * try {
 *   await sql.copyFrom("items", [[1, "a"], ["two", "b"]]);
 * } catch (e) {
 *   if (e instanceof CopyRowError) console.log(e.row, e.column); // 1 "id"
 * }
 * ```
 */
export class CopyRowError extends QueryError {
  /** The row's index in the source (the first row is 0). */
  readonly row: number;
  /** The column's name in the table, or null when the row itself is wrong. */
  readonly column: string | null;

  /** Builds the error; `message` already names the row and column. */
  constructor(
    code: string,
    message: string,
    row: number,
    column: string | null,
    options?: { cause?: unknown },
  ) {
    super(code, message);
    this.name = "CopyRowError";
    this.row = row;
    this.column = column;
    if (options?.cause !== undefined) this.cause = options.cause;
  }
}
