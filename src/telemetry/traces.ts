/** The spans of one query, transaction, cursor or COPY, and of a connection being opened. */
import { Connection } from "../connection/connection.ts";
import type { QueryRequest, ResultTarget, Settle } from "../connection/requests/query_request.ts";
import type { Attributes, OtelContext, OtelContextManager, OtelSpan } from "./otel.ts";
import { failed, guarded, reported } from "./guard.ts";

/** What an operation's name and target are (`SELECT users`), worked out once per text. */
export interface Summary {
  operation: string;
  collection: string | undefined;
  name: string;
  /** The duration metric's attributes on success, shared by every query of this text. */
  ok: Attributes;
  /** A query span's attributes at its start, without the text, shared likewise. */
  span: Attributes;
  /** The same with `db.query.text`, made the first time a query of this text may record it. */
  spanWithText?: Attributes;
}

/** What a trace reports back to its client's telemetry (its metrics and base attributes). */
export interface TraceSink {
  /** An operation of `summary` took `seconds` and failed with `err` (or null). */
  recorded(summary: Summary, seconds: number, err: Error | null): void;
  /** Sets the span's server attributes to the host `conn` reached. */
  where(span: OtelSpan, conn: Connection): void;
  /** A connection was opened in `seconds`. */
  created(seconds: number): void;
}

/** One query's span: the request's `Settle`, ending the span before settling the caller. */
export class QueryTrace implements Settle {
  readonly #telemetry: TraceSink;
  readonly #summary: Summary;
  readonly #span: OtelSpan | null;
  readonly #settle: Settle;
  readonly #start = performance.now();
  #behind = -1; // requests ahead of it on its connection when it was sent
  /** The request, for what it learned while running (prepared, retried). */
  request: QueryRequest | null = null;

  constructor(telemetry: TraceSink, summary: Summary, span: OtelSpan | null, settle: Settle) {
    this.#telemetry = telemetry;
    this.#summary = summary;
    this.#span = span;
    this.#settle = settle;
  }

  /** The request was handed to the pool or a connection: where it went, and behind how many. */
  sent(where: unknown): void {
    try {
      this.#sent(this.request?.route ?? where);
    } catch (e) {
      reported(e);
    }
  }

  #sent(conn: unknown): void {
    const span = this.#span;
    if (span === null) return;
    if (!(conn instanceof Connection)) {
      span.addEvent("pgpipe.waiting_for_connection");
      return;
    }
    this.#behind = conn.inFlight - 1;
    // The span started with the first host's address: another host of a list says so.
    this.#telemetry.where(span, conn);
  }

  /** A cancel was asked for. */
  cancelled(): void {
    guarded(() => this.#span?.addEvent("pgpipe.cancel"));
  }

  #end(err: Error | null, rows: number | null): void {
    this.#telemetry.recorded(this.#summary, (performance.now() - this.#start) / 1000, err);
    const span = this.#span;
    if (span === null) return;
    // One call for what was learned on the way (attributes cross into the runtime in groups).
    const req = this.request;
    const late: Attributes = { "pgpipe.statement": req?.statementUse ?? "unnamed" };
    if (this.#behind >= 0) late["pgpipe.pipeline.behind"] = this.#behind;
    if (rows !== null) late["db.response.returned_rows"] = rows;
    if (req?.retried === true) late["pgpipe.reprepared"] = true;
    span.setAttributes(late);
    if (err !== null) failed(span, err);
    span.end();
  }

  resolve(target: ResultTarget): void {
    try {
      this.#end(null, Array.isArray(target) ? target.length : target.count);
    } catch (e) {
      reported(e);
    }
    this.#settle.resolve(target);
  }

  reject(err: Error): void {
    try {
      this.#end(err, null);
    } catch (e) {
      reported(e);
    }
    this.#settle.reject(err);
  }
}

/** A transaction's span and the context its queries are started under. */
export class TransactionTrace {
  readonly #span: OtelSpan | null;
  readonly #manager: OtelContextManager | null;
  #ended = false;
  /** The parent of the transaction's queries (undefined: no span). */
  readonly context: OtelContext | undefined;

  constructor(
    span: OtelSpan | null,
    manager: OtelContextManager | null,
    context: OtelContext | undefined,
  ) {
    this.#span = span;
    this.#manager = manager;
    this.context = context;
  }

  /** Runs `fn` (the transaction's callback) with the span active, so what it does is a child. */
  run<R>(fn: () => Promise<R>): Promise<R> {
    const manager = this.#manager;
    const context = this.context;
    if (manager === null || context === undefined) return fn();
    let ran = false;
    try {
      return manager.with(context, () => {
        ran = true;
        return fn();
      });
    } catch (e) {
      if (ran) throw e; // fn's own failure
      reported(e);
      return fn();
    }
  }

  /** Ends the span once: at the transaction's end, with its error if it failed. */
  end(err: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    const span = this.#span;
    if (span === null) return;
    guarded(() => {
      if (err !== null && err !== undefined) failed(span, err as Error);
      span.end();
    });
  }

  /** Ends the span when `p` settles; returns `p`. */
  settle<R>(p: Promise<R>): Promise<R> {
    p.then(() => this.end(null), (e) => this.end(e));
    return p;
  }
}

/** The span of a cursor or a COPY: rows counted as they go, ended once. */
export class OperationTrace {
  readonly #telemetry: TraceSink;
  readonly #summary: Summary;
  readonly #span: OtelSpan | null;
  readonly #start = performance.now();
  #done = false;
  /** Rows read or written so far. */
  rows = 0;

  constructor(telemetry: TraceSink, summary: Summary, span: OtelSpan | null) {
    this.#telemetry = telemetry;
    this.#summary = summary;
    this.#span = span;
  }

  /** Ends the span (once); `rows` overrides the count kept so far. */
  done(err: unknown, rows?: number | null): void {
    if (this.#done) return;
    this.#done = true;
    guarded(() => this.#end(err, rows));
  }

  #end(err: unknown, rows?: number | null): void {
    const e = err === null || err === undefined ? null : err as Error;
    this.#telemetry.recorded(this.#summary, (performance.now() - this.#start) / 1000, e);
    const span = this.#span;
    if (span === null) return;
    span.setAttribute("db.response.returned_rows", rows ?? this.rows);
    if (e !== null) failed(span, e);
    span.end();
  }
}

/** The span of a connection being opened: TCP/TLS and authentication as events. */
export class ConnectTrace {
  readonly #telemetry: TraceSink;
  readonly #span: OtelSpan | null;
  readonly #start = performance.now();

  constructor(telemetry: TraceSink, span: OtelSpan | null) {
    this.#telemetry = telemetry;
    this.#span = span;
  }

  /** A step of the startup: the socket is open (and encrypted or not), or the server let us in. */
  stage = (stage: "transport" | "authenticated", encrypted: boolean): void => {
    const name = stage === "transport" ? "pgpipe.transport" : "pgpipe.authenticated";
    guarded(() => this.#span?.addEvent(name, { "pgpipe.tls": encrypted }));
  };

  /** The connection is open (`conn`) or could not be (`err`). */
  done(conn: Connection | null, err: unknown): void {
    guarded(() => this.#end(conn, err));
  }

  #end(conn: Connection | null, err: unknown): void {
    const span = this.#span;
    if (conn !== null) {
      this.#telemetry.created((performance.now() - this.#start) / 1000);
      span?.setAttribute("server.address", conn.endpoint.host);
      span?.setAttribute("server.port", conn.endpoint.port);
      span?.setAttribute("pgpipe.connection.pid", conn.pid);
    } else if (span !== null) failed(span, err as Error);
    span?.end();
  }
}
