/**
 * The request for one extended-protocol query: `[Parse Describe] Bind Execute
 * Sync`, and the decoding of its rows as they arrive.
 */
import { bufferModule } from "../../builtins.ts";
import { type Column, i32, ProtocolViolation, utf8 } from "../../protocol/backend.ts";
import * as fe from "../../protocol/frontend.ts";
import type { Writer } from "../../protocol/writer.ts";
import { ConnectionError, type PostgresError, QueryError } from "../../errors.ts";
import type { ConnectionState, EncodeContext, PipelineRequest } from "./request.ts";
import type { DecodeOptions } from "../../types/text_decoders.ts";
import { Statement, StatementCache } from "../statement.ts";
import type { StatementPolicy } from "../statement_policy.ts";
import { Plan, statementBounds } from "../sequence.ts";
import { FIRST_USER_OID } from "../../types/oids.ts";

/** Values of the row being decoded, before the statement's row constructor copies them. */
const scratch: unknown[] = [];
/** A transaction opened by a plain query on a shared connection (postgres.js's code). */
function unsafeTransaction(): QueryError {
  return new QueryError(
    "UNSAFE_TRANSACTION",
    "a transaction on a pool of several connections needs sql.begin() or sql.reserve() " +
      "(or max: 1); the connection was closed, which rolled the transaction back",
  );
}

/** Server routines whose error means a cached statement no longer fits its tables. */
const REPLAN_ROUTINES = new Set(["RevalidateCachedQuery", "transformAssignedExpr"]);
/** Bind's result formats when every column is text (the default). */
const TEXT: readonly number[] = [];

/** How rows are shaped: objects keyed by column name, arrays, or arrays of raw bytes. */
export type RowMode = "object" | "array" | "raw";

/** Where a query's rows and outcome go; the client passes its Result (an Array). */
export interface ResultTarget {
  /** Appends a row. */
  push(row: unknown): number;
  /** Row count (set to 0 to discard rows before a retry). */
  length: number;
  /** The command word of the completion tag (SELECT, INSERT, ...; null for an empty query). */
  command: string | null;
  /** Rows affected or returned, per the completion tag (null when it has none). */
  count: number | null;
  /** The result columns. */
  columns: Column[] | null;
  /** The statement that ran. */
  statement: Statement | null;
  /** The connection's state when the query completed. */
  state?: ConnectionState;
}

/** Callbacks that settle the query's promise. */
export interface Settle {
  /** Called once with the completed result. */
  resolve(target: ResultTarget): void;
  /** Called once with the reason the query failed. */
  reject(err: Error): void;
}

/** Everything needed to run one parameterised query. */
export interface QuerySpec {
  /** SQL text with `$n` placeholders. */
  text: string;
  /** Serialised parameters (text format), null for NULL. */
  params: (string | null)[];
  /** The values the parameters were serialised from (for a failed query's error). */
  values?: readonly unknown[];
  /** Parameter type OIDs (0: inferred by the server). */
  types: number[];
  /** Use a cached named statement (true) or the unnamed one (false). */
  prepare: boolean;
  /**
   * The query asked for the unnamed statement and this policy's `force_prepare` gave it a named
   * one: named while the policy is `forcing`; a named statement that vanished or whose name was
   * taken tells the policy (a pooler moved the session), and the query runs again unnamed.
   */
  forced?: StatementPolicy;
  /** Row shape. */
  mode: RowMode;
  /**
   * Send as a simple-protocol Query (no parameters; several statements allowed,
   * each with its own result).
   */
  simple?: boolean;
  /**
   * Sent on a connection shared by a pool of several: it must leave the
   * connection outside a transaction block (see `PipelineRequest.shared`).
   */
  shared?: boolean;
  /**
   * A query of a transaction block: it may share one Sync with the queries written with it
   * (see `PipelineRequest.batchable`).
   */
  batch?: boolean;
  /** Only Parse and Describe the statement (unnamed), without running it. */
  describeOnly?: boolean;
  /**
   * Decoding for this query instead of the connection's: the driver's own
   * queries (fetch_types, host checks) must not see the user's transforms.
   */
  decode?: DecodeOptions;
}

/** One query in the pipeline. */
export class QueryRequest implements PipelineRequest {
  /** Where the pool sent it (for cancel). */
  route: PipelineRequest["route"] = undefined;
  readonly spec: QuerySpec;
  target: ResultTarget;
  readonly settle: Settle;
  #statement: Statement | null = null;
  #key = "";
  #cache: StatementCache | null = null; // set when this request sent the statement's Parse
  #owner = false; // this request sent the statement's Parse
  #closes: Statement[] | null = null; // evicted statements this request's Close messages close
  #ctx: EncodeContext | null = null;
  #retried = false; // re-prepared once after a stale statement
  // The decoders of the statement's description this request was bound with (null: read the
  // statement's when rows come, as a statement described meanwhile was bound in text).
  #decoders: Statement["decoders"] | null = null;
  #bytes: Statement["byteDecoders"] | null = null;
  // Rows kept as bytes until fetch_types' catalog query has registered its types (#checkHold).
  #held: Uint8Array[] | null = null;
  #heldFor: Promise<void> | null = null;
  #holdChecked = false;
  /** `fetch_types`' catalog query: settles when it has registered its types, or failed. */
  typesDone?: Promise<void>;
  /** The first error of this request (server, decoding); settles it as a rejection. */
  protected failure: Error | null = null;
  #targets: ResultTarget[] | null = null; // simple protocol: one result per statement
  #completed = false; // `target` got its CommandComplete or EmptyQueryResponse
  #makeTarget: (() => ResultTarget) | null;
  /** What the last encode sent (`Plan` bits of sequence.ts): the answers the server owes. */
  plan = 0;
  /** A simple Query: the fewest statements its text holds (sequence.ts). */
  fewestStatements = 1;
  /** A simple Query: the most statements its text holds. */
  mostStatements = 1;

  /** `makeTarget` makes the result of each further statement of a simple-protocol query. */
  constructor(
    spec: QuerySpec,
    target: ResultTarget,
    settle: Settle,
    makeTarget?: () => ResultTarget,
  ) {
    this.spec = spec;
    this.target = target;
    this.settle = settle;
    this.#makeTarget = makeTarget ?? null;
  }

  /**
   * Whether this error means the cached statement went stale and the query
   * can simply run again: `0A000 cached plan must not change result type`
   * after a schema change, `26000` when the statement vanished (DISCARD ALL,
   * a pooler), or an error while the server re-planned it for a changed table
   * (`42804` from transformAssignedExpr after a column changed type). Only outside a transaction block (`idle`), and only once. The
   * stale statement leaves the cache and is closed on the server.
   */
  retryable(err: PostgresError, idle: boolean): boolean {
    const st = this.#statement;
    const cache = this.#cache;
    if (st === null || st.name === "" || cache === null) return false;
    const forced = this.spec.forced;
    if (forced !== undefined && (err.code === "26000" || err.code === "42P05")) {
      forced.sessionMoved();
      cache.forget(this.#key, st); // not closed: on this server it is not (or not ours)
      if (!idle || this.#retried) return false;
      this.#retried = true;
      return this.restart();
    }
    if (!idle || this.#retried) return false;
    const stale = (err.code === "0A000" && /cached plan/.test(err.message)) ||
      (err.code === "26000" && st.error === null) ||
      // Re-planning a cached statement against a changed table failed: a fresh Parse, which
      // infers the parameter types again, may succeed (e.g. 42804 after a column changed type).
      (!this.#owner && err.routine !== undefined && REPLAN_ROUTINES.has(err.routine));
    if (!stale) return false;
    if (cache.forget(this.#key, st)) cache.evicted.push(st);
    this.#retried = true;
    return this.restart();
  }

  /**
   * How the query used a statement (for telemetry): `prepared` sent the Parse of a named one,
   * `cached` reused one, `unnamed` parsed the unnamed statement.
   */
  get statementUse(): "prepared" | "cached" | "unnamed" {
    if (this.#cache === null) return "unnamed";
    return this.#owner ? "prepared" : "cached";
  }

  /** Whether it ran again with a fresh statement after its cached one went stale. */
  get retried(): boolean {
    return this.#retried;
  }

  /** Sent on a shared connection of a pool of several (no transaction may stay open). */
  get shared(): boolean {
    return this.spec.shared === true;
  }

  /** A transaction's plain query: it shares the Sync of the queries written with it. */
  get batchable(): boolean {
    const spec = this.spec;
    return spec.batch === true && spec.simple !== true && spec.describeOnly !== true;
  }

  /** Whether it went as a simple-protocol Query. */
  get simpleProtocol(): boolean {
    return this.spec.simple === true;
  }

  /** Forgets the partial outcome so the request can be sent again (bystander of a cancel). */
  restart(): boolean {
    if (this.#targets !== null && this.#targets.length > 1) return false;
    this.failure = null;
    this.target.length = 0;
    this.target.command = null;
    this.target.count = null;
    this.#completed = false;
    return true;
  }

  /** The simple protocol's next statement starts: give it its own statement and result. */
  #nextStatement(): void {
    const targets = this.#targets!;
    if (this.#completed && this.#makeTarget !== null) {
      this.target = this.#makeTarget();
      targets.push(this.target);
      this.#completed = false;
    }
    this.#statement = new Statement("", this.spec.text, []);
  }

  encode(w: Writer, ctx: EncodeContext): void {
    // A request may be encoded again (re-sent on another connection, or retried): start clean.
    this.#ctx = ctx;
    this.#owner = false;
    this.#key = "";
    this.#cache = null;
    this.#decoders = null;
    this.#bytes = null;
    this.#held = null;
    this.#heldFor = null;
    this.#holdChecked = false;
    this.#closes = null;
    this.#completed = false;
    const spec = this.spec;
    const cache = ctx.statements;
    if (spec.describeOnly) {
      this.#statement = new Statement("", spec.text, spec.types);
      this.#owner = true;
      fe.parse(w, "", spec.text, spec.types);
      fe.describe(w, "S", "");
      fe.sync(w);
      this.plan = Plan.PARSE | Plan.DESCRIBE_STATEMENT;
      return;
    }
    if (spec.simple) {
      this.#targets = [this.target];
      this.#statement = new Statement("", spec.text, []);
      fe.query(w, spec.text);
      this.plan = 0;
      [this.fewestStatements, this.mostStatements] = statementBounds(spec.text);
      return;
    }
    if (!spec.prepare || spec.forced?.forcing === false) {
      this.#statement = new Statement("", spec.text, spec.types);
      this.#owner = true;
      fe.parse(w, "", spec.text, spec.types);
      fe.bind(w, "", spec.params, []);
      fe.describe(w, "P", "");
      this.plan = Plan.PARSE | Plan.BIND | Plan.DESCRIBE_PORTAL;
    } else {
      const key = StatementCache.key(spec.text, spec.types);
      let st = cache.get(key);
      this.#key = key;
      this.#cache = cache;
      let plan = Plan.BIND;
      if (st === undefined) {
        st = cache.create(key, spec.text, spec.types);
        this.#owner = true;
        // Close what the new statement evicted before it is parsed, so the server never holds more than the bound.
        while (cache.evicted.length > 0) {
          const old = cache.evicted.pop()!;
          fe.close(w, "S", old.name);
          (this.#closes ??= []).push(old);
        }
        fe.parse(w, st.name, spec.text, spec.types);
        fe.describe(w, "S", st.name);
        plan |= Plan.PARSE | Plan.DESCRIBE_STATEMENT | Plan.CLOSE * (this.#closes?.length ?? 0);
      } else if (st.columns !== null && st.columns.length > 0) plan |= Plan.RETURNS_ROWS;
      this.plan = plan;
      this.#statement = st;
      if (st.columns !== null) {
        // `sql.options.parsers` changed since the statement was described: pick its decoders
        // (and so its result formats) again before binding.
        const decode = spec.decode ?? ctx.decode;
        if (st.describedWith !== decode.parsers) st.pickDecoders(st.columns, decode);
      }
      // Binary results only once the columns are known (not for the query that prepares the
      // statement) and never for raw(), which hands out the server's text bytes. While the
      // connection's fetch_types catalog query is pending, its types may change the decoders
      // before the rows come: text, and the statement's decoders as they are then.
      const settled = ctx.typesPending === null;
      const binary = settled && st.formats.length > 0 && spec.mode !== "raw";
      if (st.columns !== null && settled) {
        this.#decoders = st.decoders;
        this.#bytes = binary ? st.binaryDecoders : st.byteDecoders;
      }
      fe.bind(w, st.name, spec.params, binary ? st.formats : TEXT);
    }
    this.encodeExecute(w);
  }

  /** The tail of the segment: run the portal to completion and Sync (unless batched). */
  protected encodeExecute(w: Writer): void {
    fe.execute(w, "", 0);
    if (!this.batchable) fe.sync(w);
  }

  parseComplete(): void {}

  parameterDescription(types: number[]): void {
    this.#statement!.parameterTypes = types;
  }

  rowDescription(columns: Column[], ctx: EncodeContext): void {
    if (this.#targets !== null) this.#nextStatement();
    const st = this.#statement!;
    const decode = this.spec.decode ?? ctx.decode;
    if (st.name !== "") return st.describe(columns, decode);
    // The unnamed statement, described at every run: most often as the one before it was.
    const cache = ctx.statements;
    const last = cache.unnamed;
    if (last !== null && st.sameShape(last, columns, decode)) return st.adopt(last);
    st.describe(columns, decode);
    cache.unnamed = st;
  }

  noData(): void {
    const st = this.#statement!;
    if (st.columns === null) st.columns = [];
  }

  dataRow(buf: Uint8Array, start: number, end: number): void {
    if (this.failure !== null) return;
    if (!this.#holdChecked) this.#checkHold();
    if (this.#held !== null) {
      this.#held.push(buf.slice(start, end));
      return;
    }
    try {
      const row = this.#decode(buf, start, end);
      const transform = this.#statement!.rowTransform;
      this.target.push(transform === null || this.spec.mode === "raw" ? row : transform(row));
    } catch (e) {
      // A value the decoders reject fails this query only, never the connection.
      if (e instanceof ProtocolViolation) {
        const err = new ConnectionError("PROTOCOL_VIOLATION", e.message, { cause: e });
        err.outcome = "unknown"; // the server ran the query; its answer was unreadable
        this.failure = err;
      } else this.failure = e as Error;
    }
  }

  /**
   * A query written before `fetch_types`' catalog query on a new connection that returns a
   * user-defined type with no decoder yet (its array type may be one the catalog query is about
   * to register) keeps its rows as bytes, and decodes them once the catalog's answer is in.
   */
  #checkHold(): void {
    this.#holdChecked = true;
    const ctx = this.#ctx;
    const st = this.#statement;
    this.#repickDecoders();
    const pending = ctx?.typesPending ?? null;
    // Driver queries (their own decode options), simple multi-statement texts and raw rows
    // decode as they come.
    if (
      pending === null || this.spec.decode !== undefined || this.#targets !== null ||
      this.spec.mode === "raw" || !this.mayKeepRows()
    ) return;
    const columns = st?.columns;
    if (!columns) return;
    const parsers = ctx!.decode.parsers;
    for (const c of columns) {
      if (c.type >= FIRST_USER_OID && parsers?.get(c.type) === undefined) {
        this.#held = [];
        this.#heldFor = pending;
        return;
      }
    }
  }

  /**
   * Whether it may be written before `fetch_types`' catalog query: its rows can wait for the
   * catalog's types (not a simple-protocol text, whose results are one per statement, nor a
   * cursor).
   */
  get mayPrecedeTypes(): boolean {
    return this.#makeTarget === null && this.mayKeepRows();
  }

  /** Whether rows may wait for the catalog's types (a cursor hands each batch out at once). */
  protected mayKeepRows(): boolean {
    return true;
  }

  /**
   * Bound in text with the statement's decoders as they are when rows come (#decoders null): if
   * fetch_types' types (or the user's table) changed them since they were picked, picks them again.
   */
  #repickDecoders(): void {
    const st = this.#statement;
    const ctx = this.#ctx;
    if (this.#decoders !== null || !st?.columns || ctx === null) return;
    if (this.spec.decode === undefined && st.describedWith !== ctx.decode.parsers) {
      st.pickDecoders(st.columns, ctx.decode);
    }
  }

  /**
   * Decodes the rows kept for the catalog's types (#checkHold), then settles. A held query was
   * bound in text with no decoders of its own (its statement was new on a new connection).
   */
  #release(held: Uint8Array[]): void {
    try {
      this.#repickDecoders();
      for (const row of held) this.dataRow(row, 0, row.length);
    } catch (e) {
      this.failure ??= e as Error;
    }
    if (this.failure !== null) return this.settle.reject(this.failure);
    this.#resolve();
  }

  #decode(buf: Uint8Array, start: number, end: number): unknown {
    const st = this.#statement!;
    const decoders = this.#decoders ?? st.decoders;
    const bytes = this.#bytes ?? st.byteDecoders;
    if (end - start < 2) throw new ProtocolViolation("DataRow is truncated");
    const n = (buf[start] << 8) | buf[start + 1];
    if (st.columns === null || n !== st.columns.length) {
      throw new ProtocolViolation(
        `DataRow has ${n} columns but the statement described ${st.columns?.length ?? "none"}`,
      );
    }
    let at = start + 2;
    const mode = this.spec.mode;
    // Object rows are built by the statement's generated constructor from a reused scratch array.
    const values = mode === "object" ? scratch : new Array<unknown>(n);
    for (let i = 0; i < n; i++) {
      if (end - at < 4) throw new ProtocolViolation("DataRow is truncated");
      const len = i32(buf, at);
      at += 4;
      if (len < 0) {
        values[i] = null;
        continue;
      }
      if (len > end - at) throw new ProtocolViolation("DataRow value runs past the message");
      if (mode === "raw") {
        values[i] = bufferModule().Buffer.from(buf.subarray(at, at + len)); // a copy, as a Buffer
      } else {
        const direct = bytes[i];
        if (direct !== null) values[i] = direct(buf, at, at + len);
        else {
          const text = utf8(buf, at, at + len);
          const decode = decoders[i];
          values[i] = decode === null ? text : decode(text);
        }
      }
      at += len;
    }
    if (at !== end) throw new ProtocolViolation("DataRow has bytes after its last column");
    return mode === "object" ? new st.Row(values) : values;
  }

  commandComplete(command: string, count: number | null): void {
    if (command === "BEGIN" && this.spec.shared === true) this.failure ??= unsafeTransaction();
    const target = this.#complete();
    target.command = command;
    target.count = count; // null: a tag without a count (CREATE TABLE, SET, BEGIN, ...)
  }

  /** An empty query string: no command, no rows (`command` and `count` stay null, as postgres.js). */
  emptyQuery(): void {
    const target = this.#complete();
    target.command = null;
    target.count = null;
  }

  /** The result a completion belongs to (a statement without rows gets its own in simple mode). */
  #complete(): ResultTarget {
    if (this.#targets !== null && this.#completed) this.#nextStatement();
    this.#completed = true;
    const target = this.target;
    const st = this.#statement!;
    // A simple-protocol statement that returns no rows is never described: it has no columns.
    target.columns = st.columns ??= [];
    target.statement = st;
    return target;
  }

  portalSuspended(): void {}

  error(err: PostgresError, skipped = false): void {
    // Skipped: our Close messages never ran, so those statements still need closing.
    if (skipped && this.#closes !== null) this.#cache?.evicted.push(...this.#closes);
    const st = this.#statement;
    if (st !== null && this.#owner && st.columns === null && st.error === null) {
      // Parse or Describe failed: the statement does not exist, so nobody may reuse it.
      st.error = err;
    } else if (st !== null && !this.#owner && st.error !== null && err.code === "26000") {
      // We bound a statement whose Parse failed earlier in the pipeline: report that
      // cause (already attached to the same text by the query that sent the Parse).
      this.failure ??= st.error;
      return;
    }
    this.failure ??= err.attach(this.spec.text, this.spec.params);
  }

  ready(): void {
    const st = this.#statement;
    if (st !== null && st.error !== null && this.#owner && this.#cache !== null) {
      this.#cache.forget(this.#key, st);
    }
    if (this.failure !== null) return this.settle.reject(this.failure);
    const held = this.#held;
    if (held !== null) {
      this.#held = null;
      void this.#heldFor!.then(() => this.#release(held));
      return;
    }
    this.#resolve();
  }

  /** Settles with the result (or one per statement). */
  #resolve(): void {
    const st = this.#statement;
    const state = this.#ctx?.state;
    const targets = this.#targets;
    if (targets !== null && targets.length > 1) {
      // Several statements: postgres.js resolves with one result per statement.
      for (const t of targets) t.state = state;
      return this.settle.resolve(targets as unknown as ResultTarget);
    }
    const target = this.target;
    target.state = state;
    if (!this.#completed) { // described only (`describe()`): no command ran
      target.columns = st?.columns ?? null;
      target.statement = st;
    }
    this.settle.resolve(target);
  }

  fail(err: Error): void {
    this.settle.reject(err);
  }
}
