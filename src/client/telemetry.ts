/**
 * OpenTelemetry spans and metrics, with no dependency: the providers are
 * Deno's own (`Deno.telemetry`, live when `OTEL_DENO=true` or on Deploy) or
 * ones the user passes (`npm:@opentelemetry/api` SDKs have the same shape).
 * They are looked for once per client; with none, the client holds `null`
 * and the query path pays one null check.
 *
 * Names follow OpenTelemetry's database semantic conventions (db.*, server.*);
 * what is pgpipe's own is under `pgpipe.*`.
 */
import { Connection } from "../connection/connection.ts";
import type { QueryRequest, ResultTarget, Settle } from "../connection/query_request.ts";
import { ConnectionError, PostgresError } from "../errors.ts";
import { Identifier } from "../query/identifier.ts";
import { Query } from "../query/query.ts";
import type { BulkCopy } from "./bulk_copy.ts";

/** Attribute values as OpenTelemetry takes them (the scalar kinds pgpipe sets). */
type Attributes = Record<string, string | number | boolean>;

/**
 * The parts of an OpenTelemetry `Span` pgpipe uses.
 *
 * @example
 * ```ts
 * import type { OtelSpan } from "jsr:@pgpipe/pgpipe";
 * // A span that prints what pgpipe records on it (a stand-in for an SDK's span in a test):
 * const span: OtelSpan = {
 *   setAttribute: (key, value) => console.log(key, value),
 *   setAttributes: (attributes) => console.log(attributes),
 *   addEvent: (name, attributes) => console.log("event", name, attributes),
 *   setStatus: ({ code, message }) => console.log("status", code, message),
 *   end: () => console.log("end"),
 * };
 * ```
 */
export interface OtelSpan {
  /** Sets one attribute. */
  setAttribute(key: string, value: string | number | boolean): unknown;
  /** Sets several attributes. */
  setAttributes(attributes: Record<string, string | number | boolean>): unknown;
  /** Adds a timed event. */
  addEvent(name: string, attributes?: Record<string, string | number | boolean>): unknown;
  /** Sets the status: code 2 is ERROR. */
  setStatus(status: { code: number; message?: string }): unknown;
  /** Ends the span. */
  end(): void;
}

/**
 * The parts of an OpenTelemetry `Context` pgpipe uses.
 *
 * @example
 * ```ts
 * import type { OtelContext } from "jsr:@pgpipe/pgpipe";
 * // Immutable, as OpenTelemetry's: setValue returns a copy and leaves the original as it was.
 * const context = (values: ReadonlyMap<symbol, unknown> = new Map()): OtelContext => ({
 *   setValue: (key, value) => context(new Map(values).set(key, value)),
 * });
 * const root = context();
 * const child = root.setValue(Symbol.for("app.request"), "GET /users");
 * ```
 */
export interface OtelContext {
  /** A copy of the context with `key` set. */
  setValue(key: symbol, value: unknown): OtelContext;
}

/**
 * The parts of an OpenTelemetry `TracerProvider` pgpipe uses.
 *
 * @example
 * ```ts
 * import postgres, { type OtelTracerProvider } from "jsr:@pgpipe/pgpipe";
 * // Logs each span's name as pgpipe starts it ("SELECT users", "transaction", "connect"):
 * const logging: OtelTracerProvider = {
 *   getTracer: () => ({
 *     startSpan(name) {
 *       console.log("span", name);
 *       return { setAttribute() {}, setAttributes() {}, addEvent() {}, setStatus() {}, end() {} };
 *     },
 *   }),
 * };
 * const sql = postgres({ telemetry: { tracerProvider: logging } });
 * ```
 */
export interface OtelTracerProvider {
  /** The tracer of an instrumentation scope. */
  getTracer(name: string, version?: string): {
    /** Starts a span under `context`'s span. */
    startSpan(
      name: string,
      options?: { kind?: number; attributes?: Record<string, string | number | boolean> },
      context?: OtelContext,
    ): OtelSpan;
  };
}

/**
 * The parts of an OpenTelemetry `ContextManager` pgpipe uses.
 *
 * @example
 * ```ts
 * import { AsyncLocalStorage } from "node:async_hooks";
 * import postgres, { type OtelContext, type OtelContextManager } from "jsr:@pgpipe/pgpipe";
 * // The active context kept in AsyncLocalStorage, as @opentelemetry/context-async-hooks does:
 * const context = (values: ReadonlyMap<symbol, unknown> = new Map()): OtelContext => ({
 *   setValue: (key, value) => context(new Map(values).set(key, value)),
 * });
 * const storage = new AsyncLocalStorage<OtelContext>();
 * const root = context();
 * const contextManager: OtelContextManager = {
 *   active: () => storage.getStore() ?? root,
 *   with: (active, fn) => storage.run(active, fn),
 * };
 * const sql = postgres({ telemetry: { contextManager } });
 * ```
 */
export interface OtelContextManager {
  /** The context active where the call is made. */
  active(): OtelContext;
  /** Runs `fn` with `context` active (and active in what `fn` awaits). */
  with<R>(context: OtelContext, fn: () => R): R;
}

/**
 * The parts of an OpenTelemetry `MeterProvider` pgpipe uses.
 *
 * @example
 * ```ts
 * import postgres, { type OtelMeterProvider } from "jsr:@pgpipe/pgpipe";
 * // Prints each duration and error as pgpipe records it; the connection gauges go unobserved.
 * const printing: OtelMeterProvider = {
 *   getMeter: () => ({
 *     createHistogram: (name) => ({ record: (value, attrs) => console.log(name, value, attrs) }),
 *     createCounter: (name) => ({ add: (value, attrs) => console.log(name, value, attrs) }),
 *     createObservableUpDownCounter: () => ({ addCallback() {} }),
 *   }),
 * };
 * const sql = postgres({ telemetry: { meterProvider: printing } });
 * ```
 */
export interface OtelMeterProvider {
  /** The meter of an instrumentation scope. */
  getMeter(name: string, version?: string): {
    /** A histogram. */
    createHistogram(name: string, options?: { unit?: string; description?: string }): {
      record(value: number, attributes?: Record<string, string | number | boolean>): void;
    };
    /** A counter. */
    createCounter(name: string, options?: { unit?: string; description?: string }): {
      add(value: number, attributes?: Record<string, string | number | boolean>): void;
    };
    /** An up-down counter observed by callbacks when metrics are collected. */
    createObservableUpDownCounter(
      name: string,
      options?: { unit?: string; description?: string },
    ): {
      addCallback(cb: ObservableCallback): void;
      /** Stops calling `cb` (when the client ends). */
      removeCallback?(cb: ObservableCallback): void;
    };
  };
}

/**
 * What an observable instrument calls when metrics are collected.
 *
 * @example
 * ```ts
 * import type { ObservableCallback } from "jsr:@pgpipe/pgpipe";
 * const report: ObservableCallback = (result) => result.observe(1, { state: "idle" });
 * ```
 */
export type ObservableCallback = (result: {
  observe(value: number, attributes?: Record<string, string | number | boolean>): void;
}) => void;

type Meter = ReturnType<OtelMeterProvider["getMeter"]>;
type Recorder = ReturnType<Meter["createHistogram"]>;
type Counter = ReturnType<Meter["createCounter"]>;

/**
 * The `telemetry` option. Without it, pgpipe uses Deno's providers when Deno's
 * telemetry is on (`OTEL_DENO=true`, or Deno Deploy), and records nothing
 * otherwise; `false` turns it off.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * // Spans and metrics, but never the query text:
 * const sql = postgres({ telemetry: { query_text: false } });
 * // Nothing at all, even under OTEL_DENO=true:
 * const quiet = postgres({ telemetry: false });
 * ```
 */
export interface TelemetryOptions {
  /** Spans go here instead of `Deno.telemetry.tracerProvider` (e.g. an SDK's provider). */
  tracerProvider?: OtelTracerProvider;
  /** Metrics go here instead of `Deno.telemetry.meterProvider`. */
  meterProvider?: OtelMeterProvider;
  /** Where the parent of each span is found (default `Deno.telemetry.contextManager`). */
  contextManager?: OtelContextManager;
  /**
   * Record `db.query.text`: the text with `$n` placeholders, never the values.
   * Text sent by `sql.unsafe` without parameters (the simple protocol) is not
   * recorded unless this is true, since it may hold literal values. Default: true
   * for parameterised text only.
   */
  query_text?: boolean;
}

/** The key OpenTelemetry keeps the active span under in a context (`@opentelemetry/api`'s). */
const SPAN_KEY = Symbol.for("OpenTelemetry Context Key SPAN");
const CLIENT = 2; // SpanKind.CLIENT
const ERROR = 2; // SpanStatusCode.ERROR
const SCOPE = "pgpipe";
const VERSION = "0.1.0";

interface DenoProviders {
  tracerProvider: OtelTracerProvider;
  meterProvider: OtelMeterProvider;
  contextManager: OtelContextManager;
}

let denoProviders: DenoProviders | null | undefined;

/** A provider given in the options must have its methods: checked in `postgres()`, not later. */
function checkProvider(value: unknown, name: string, ...methods: string[]): void {
  if (value === undefined) return;
  for (const method of methods) {
    if (typeof (value as Record<string, unknown> | null)?.[method] !== "function") {
      throw new TypeError(`telemetry.${name} must have a ${method}() method`);
    }
  }
}

/**
 * Deno's providers when its telemetry is on, else null; looked for once. With
 * telemetry off, `getMeter` throws ("otel not initialized"): that is the test,
 * and it exports nothing.
 */
function deno(): DenoProviders | null {
  if (denoProviders !== undefined) return denoProviders;
  denoProviders = null;
  try {
    const t = (globalThis as { Deno?: { telemetry?: DenoProviders } }).Deno?.telemetry;
    if (t !== undefined) {
      t.meterProvider.getMeter(SCOPE, VERSION);
      denoProviders = t;
    }
  } catch {
    // telemetry is off
  }
  return denoProviders;
}

/** Where the client is, for the attributes every span and metric carries. */
interface TelemetryTarget {
  /** The database (`db.namespace`). */
  database: string;
  /** The first host (`server.address`); each span says the host its connection reached. */
  host: string;
  /** The first host's port. */
  port: number;
}

/** What the pool reports for the connection metrics. */
export interface PoolCounts {
  /** Open connections with nothing in flight and no one holding them. */
  idle: number;
  /** Open connections in use. */
  used: number;
  /** Requests waiting for a connection. */
  pending: number;
}

/** What an operation's name and target are (`SELECT users`), worked out once per text. */
interface Summary {
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

const OPERATION = /^\s*(?:--[^\n]*\n\s*|\/\*[\s\S]*?\*\/\s*)*([a-z]+)/i;
/**
 * The table right after the keyword that names it, for the common statement shapes; not a
 * function (`from generate_series(...)`).
 */
const COLLECTION =
  /\b(?:from|into|update|table|join|copy)\s+((?:"[^"]+"|[a-z_][\w$]*)(?:\.(?:"[^"]+"|[a-z_][\w$]*))?)(?!\s*\(|[\w$.])/i;
/** Distinct query texts summarised before the cache starts over (bounded memory). */
const SUMMARY_CACHE = 1000;

/** One client's telemetry: its tracer, meters and the attributes they share. */
export class Telemetry {
  readonly #tracer: ReturnType<OtelTracerProvider["getTracer"]> | null;
  readonly #context: OtelContextManager | null;
  readonly #queryText: boolean | undefined;
  readonly #base: Attributes;
  readonly #summaries = new Map<string, Summary>();
  readonly #observers: (() => void)[] = []; // removes each gauge callback
  readonly #duration: Recorder | null = null;
  readonly #errors: Counter | null = null;
  readonly #createTime: Recorder | null = null;
  readonly #meter: ReturnType<OtelMeterProvider["getMeter"]> | null;

  private constructor(
    tracer: OtelTracerProvider | undefined,
    meter: OtelMeterProvider | undefined,
    context: OtelContextManager | undefined,
    queryText: boolean | undefined,
    target: TelemetryTarget,
  ) {
    this.#tracer = tracer?.getTracer(SCOPE, VERSION) ?? null;
    this.#context = context ?? null;
    this.#queryText = queryText;
    this.#base = {
      "db.system.name": "postgresql",
      "db.namespace": target.database,
      "server.address": target.host,
      "server.port": target.port,
    };
    this.#meter = meter?.getMeter(SCOPE, VERSION) ?? null;
    const m = this.#meter;
    if (m !== null) {
      this.#duration = m.createHistogram("db.client.operation.duration", {
        unit: "s",
        description: "Duration of database client operations.",
      });
      this.#errors = m.createCounter("pgpipe.client.errors", {
        unit: "{error}",
        description: "Failed operations, by SQLSTATE class (error.type) or connection error code.",
      });
      this.#createTime = m.createHistogram("db.client.connection.create_time", {
        unit: "s",
        description: "The time it took to create a new connection.",
      });
    }
  }

  /**
   * The client's telemetry, or null when there is none to record (no
   * providers, or `telemetry: false`): then no span is ever started.
   */
  static of(
    option: TelemetryOptions | false | undefined,
    target: TelemetryTarget,
  ): Telemetry | null {
    if (option === false) return null;
    checkProvider(option?.tracerProvider, "tracerProvider", "getTracer");
    checkProvider(option?.meterProvider, "meterProvider", "getMeter");
    checkProvider(option?.contextManager, "contextManager", "active", "with");
    const queryText = option?.query_text;
    if (queryText !== undefined && typeof queryText !== "boolean") {
      throw new TypeError(`telemetry.query_text must be a boolean; got ${typeof queryText}`);
    }
    const d = option?.tracerProvider !== undefined && option?.meterProvider !== undefined
      ? null
      : deno();
    const tracer = option?.tracerProvider ?? d?.tracerProvider;
    const meter = option?.meterProvider ?? d?.meterProvider;
    if (tracer === undefined && meter === undefined) return null;
    const context = option?.contextManager ?? d?.contextManager ??
      (globalThis as { Deno?: { telemetry?: DenoProviders } }).Deno?.telemetry?.contextManager;
    return new Telemetry(tracer, meter, context, queryText, target);
  }

  /**
   * `db.client.connection.count` by state, pending requests and each connection's pipeline
   * depth, read when metrics are exported (nothing per query).
   */
  observePool(pool: string, counts: () => PoolCounts, open: () => readonly Connection[]): void {
    const m = this.#meter;
    if (m === null) return;
    const observe = (
      instrument: ReturnType<Meter["createObservableUpDownCounter"]>,
      cb: ObservableCallback,
    ) => {
      instrument.addCallback(cb);
      this.#observers.push(() => instrument.removeCallback?.(cb));
    };
    const idle = { "db.client.connection.pool.name": pool, "db.client.connection.state": "idle" };
    const used = { "db.client.connection.pool.name": pool, "db.client.connection.state": "used" };
    const named = { "db.client.connection.pool.name": pool };
    const count = m.createObservableUpDownCounter("db.client.connection.count", {
      unit: "{connection}",
      description: "Connections by state.",
    });
    const pending = m.createObservableUpDownCounter("db.client.connection.pending_requests", {
      unit: "{request}",
      description: "Requests waiting for an open connection.",
    });
    observe(count, (r) => {
      const c = counts();
      r.observe(c.idle, idle);
      r.observe(c.used, used);
    });
    observe(pending, (r) => r.observe(counts().pending, named));
    const depth = m.createObservableUpDownCounter("pgpipe.client.pipeline.depth", {
      unit: "{request}",
      description: "Requests in flight on each connection (written or waiting for room).",
    });
    observe(depth, (r) => {
      for (const c of open()) {
        if (c.closed) continue;
        r.observe(c.inFlight, {
          "db.client.connection.pool.name": pool,
          "server.address": c.endpoint.host,
          "pgpipe.connection.pid": c.pid,
        });
      }
    });
  }

  /** The client ended: its gauges stop being observed (nor keep the pool alive). */
  close(): void {
    for (const remove of this.#observers.splice(0)) guarded(remove);
  }

  #summary(text: string): Summary {
    let s = this.#summaries.get(text);
    if (s !== undefined) return s;
    const operation = OPERATION.exec(text)?.[1]?.toUpperCase() ?? "";
    const collection = COLLECTION.exec(text)?.[1];
    const name = operation === ""
      ? String(this.#base["db.namespace"])
      : collection === undefined
      ? operation
      : `${operation} ${collection}`;
    const ok = { ...this.#base, "db.operation.name": operation };
    const span: Attributes = { ...ok };
    if (collection !== undefined) span["db.collection.name"] = collection;
    s = { operation, collection, name, ok, span };
    if (this.#summaries.size >= SUMMARY_CACHE) this.#summaries.clear();
    this.#summaries.set(text, s);
    return s;
  }

  /** The context queries issued now belong under (the caller's active span). */
  #active(): OtelContext | undefined {
    return this.#context?.active();
  }

  #start(name: string, attributes: Attributes, parent?: OtelContext): OtelSpan | null {
    const tracer = this.#tracer;
    if (tracer === null) return null;
    try {
      return tracer.startSpan(name, { kind: CLIENT, attributes }, parent ?? this.#active());
    } catch (e) {
      reported(e);
      return null;
    }
  }

  /**
   * A query's span and duration: returns the `Settle` to give its request in
   * place of `settle`, which it calls once the span is ended.
   */
  query(
    text: string,
    parameterised: boolean,
    settle: Settle,
    parent: OtelContext | undefined,
  ): QueryTrace {
    const s = this.#summary(text);
    // The attributes are the same for every query of this text: one object, not one per query.
    const attributes = this.#recordsText(parameterised)
      ? s.spanWithText ??= { ...s.span, "db.query.text": text }
      : s.span;
    return new QueryTrace(this, s, this.#start(s.name, attributes, parent), settle);
  }

  /**
   * Whether a span records its text: always with `query_text: true`, never with `false`, and by
   * default only for text sent with parameters (`sql.unsafe` text without them may hold values).
   */
  #recordsText(parameterised: boolean): boolean {
    return this.#queryText === true || (this.#queryText === undefined && parameterised);
  }

  /** A transaction's span: the parent of its queries, ended at its COMMIT or ROLLBACK. */
  transaction(): TransactionTrace {
    const span = this.#start("transaction", { ...this.#base, "pgpipe.operation": "transaction" });
    const context = this.#context;
    let parent: OtelContext | undefined;
    if (span !== null && context !== null) {
      try {
        parent = context.active().setValue(SPAN_KEY, span);
      } catch (e) {
        reported(e);
      }
    }
    return new TransactionTrace(span, context, parent);
  }

  /** A span for a whole operation (a cursor, a COPY), ended by `done`. */
  operation(
    text: string,
    kind: string,
    parameterised: boolean,
    parent?: OtelContext,
  ): OperationTrace {
    const s = this.#summary(text);
    const attributes: Attributes = { ...s.ok, "pgpipe.operation": kind };
    if (s.collection !== undefined) attributes["db.collection.name"] = s.collection;
    if (this.#recordsText(parameterised)) attributes["db.query.text"] = text;
    return new OperationTrace(this, s, this.#start(s.name, attributes, parent));
  }

  /** A span for opening a connection; `done` ends it and records the create time. */
  connect(): ConnectTrace {
    return new ConnectTrace(this, this.#start("connect", { ...this.#base }));
  }

  /** Records an operation's duration, and its error by class. */
  recorded(summary: Summary, seconds: number, err: Error | null): void {
    if (err === null) return this.#duration?.record(seconds, summary.ok);
    const code = errorCode(err);
    const attributes: Attributes = { ...summary.ok, "error.type": code.type };
    if (code.sqlstate !== undefined) attributes["db.response.status_code"] = code.sqlstate;
    this.#duration?.record(seconds, attributes);
    this.#errors?.add(1, {
      ...this.#base,
      "db.operation.name": summary.operation,
      "error.type": code.type,
      ...(code.sqlstate !== undefined
        ? { "pgpipe.sqlstate.class": code.sqlstate.slice(0, 2) }
        : {}),
    });
  }

  /** Sets the address of the host a connection reached, when it is not the first host. */
  where(span: OtelSpan, conn: Connection): void {
    const e = conn.endpoint;
    if (e.host !== this.#base["server.address"] || e.port !== this.#base["server.port"]) {
      span.setAttributes({ "server.address": e.host, "server.port": e.port });
    }
  }

  /** Records how long a connection took to open. */
  created(seconds: number): void {
    this.#createTime?.record(seconds, this.#base);
  }
}

let warned = false;

/** A provider that throws must not break a query: it is reported once on the console. */
function reported(e: unknown): void {
  if (warned) return;
  warned = true;
  console.error("pgpipe: the OpenTelemetry provider threw; telemetry may be incomplete", e);
}

/** Runs telemetry work that calls into a provider, reporting what it throws. */
function guarded(fn: () => void): void {
  try {
    fn();
  } catch (e) {
    reported(e);
  }
}

/** `error.type` and the SQLSTATE of a failure. */
function errorCode(err: Error): { type: string; sqlstate?: string } {
  if (err instanceof PostgresError) return { type: err.code, sqlstate: err.code };
  if (err instanceof ConnectionError) return { type: err.code };
  const code = (err as { code?: unknown }).code;
  return { type: typeof code === "string" ? code : err.name };
}

/** Sets a span's error status and attributes. */
function failed(span: OtelSpan, err: Error): void {
  const code = errorCode(err);
  span.setAttribute("error.type", code.type);
  if (code.sqlstate !== undefined) span.setAttribute("db.response.status_code", code.sqlstate);
  span.setStatus({ code: ERROR, message: err.message });
}

/** One query's span: the request's `Settle`, ending the span before settling the caller. */
export class QueryTrace implements Settle {
  readonly #telemetry: Telemetry;
  readonly #summary: Summary;
  readonly #span: OtelSpan | null;
  readonly #settle: Settle;
  readonly #start = performance.now();
  #behind = -1; // requests ahead of it on its connection when it was sent
  /** The request, for what it learned while running (prepared, retried). */
  request: QueryRequest | null = null;

  constructor(telemetry: Telemetry, summary: Summary, span: OtelSpan | null, settle: Settle) {
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
  readonly #telemetry: Telemetry;
  readonly #summary: Summary;
  readonly #span: OtelSpan | null;
  readonly #start = performance.now();
  #done = false;
  /** Rows read or written so far. */
  rows = 0;

  constructor(telemetry: Telemetry, summary: Summary, span: OtelSpan | null) {
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
class ConnectTrace {
  readonly #telemetry: Telemetry;
  readonly #span: OtelSpan | null;
  readonly #start = performance.now();

  constructor(telemetry: Telemetry, span: OtelSpan | null) {
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

/** The SQL a bulk COPY's span is named and described by (its text is built inside the COPY). */
function bulkText(source: unknown, direction: "from stdin" | "to stdout"): string {
  const target = typeof source === "string"
    ? source
    : source instanceof Identifier
    ? source.text
    : source instanceof Query
    ? `(${source.strings.join("?")})`
    : "";
  return `copy ${target} ${direction}`;
}

/** `sql.copyFrom`/`copyTo` with one span each (rows counted), when telemetry is on. */
export function tracedBulkCopy(telemetry: Telemetry, bulk: BulkCopy): BulkCopy {
  const copyFrom: BulkCopy["copyFrom"] = (table, rows, options) => {
    const trace = telemetry.operation(bulkText(table, "from stdin"), "copy", true);
    const done = bulk.copyFrom(table, rows, options);
    done.then((n) => trace.done(null, n), (e) => trace.done(e));
    return done;
  };
  const copyTo = ((source: Parameters<BulkCopy["copyTo"]>[0], options?: { values?: boolean }) => {
    const batches = bulk.copyTo(source, options as never) as AsyncIterable<unknown[]>;
    return {
      async *[Symbol.asyncIterator]() {
        const trace = telemetry.operation(bulkText(source, "to stdout"), "copy", true);
        let failure: unknown = null;
        try {
          for await (const batch of batches) {
            trace.rows += batch.length;
            yield batch;
          }
        } catch (e) {
          failure = e;
          throw e;
        } finally {
          trace.done(failure);
        }
      },
    };
  }) as BulkCopy["copyTo"];
  return { copyFrom, copyTo };
}
