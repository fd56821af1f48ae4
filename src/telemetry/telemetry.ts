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
import type { Connection } from "../connection/connection.ts";
import type { Settle } from "../connection/requests/query_request.ts";
import type {
  Attributes,
  Counter,
  Meter,
  ObservableCallback,
  OtelContext,
  OtelContextManager,
  OtelMeterProvider,
  OtelSpan,
  OtelTracerProvider,
  Recorder,
  TelemetryOptions,
} from "./otel.ts";
import { errorCode, guarded, reported } from "./guard.ts";
import {
  ConnectTrace,
  OperationTrace,
  QueryTrace,
  type Summary,
  type TraceSink,
  TransactionTrace,
} from "./traces.ts";

/** The key OpenTelemetry keeps the active span under in a context (`@opentelemetry/api`'s). */
const SPAN_KEY = Symbol.for("OpenTelemetry Context Key SPAN");
const CLIENT = 2; // SpanKind.CLIENT
const SCOPE = "pgpipe";
const VERSION = "0.1.0";

interface DenoProviders {
  tracerProvider: OtelTracerProvider;
  meterProvider: OtelMeterProvider;
  contextManager: OtelContextManager;
}

let denoProviders: DenoProviders | null | undefined;

/**
 * Where OpenTelemetry's JS API keeps the providers registered in this realm. Deno's runtime, when
 * it starts with its tracing or metrics on (`OTEL_DENO=true`, Deploy), registers its own there
 * before any program code runs.
 */
const OTEL_API = Symbol.for("opentelemetry.js.api.1");

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
 * and it exports nothing. `Deno.telemetry` is only asked when OpenTelemetry's
 * global is there: the first read of it loads Deno's telemetry code (over a
 * millisecond of a cold start), which, with its telemetry on, ran at startup.
 */
function deno(): DenoProviders | null {
  if (denoProviders !== undefined) return denoProviders;
  denoProviders = null;
  if (!(OTEL_API in globalThis)) return null; // Deno's telemetry is off
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
export class Telemetry implements TraceSink {
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
