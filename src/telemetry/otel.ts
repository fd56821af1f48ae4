/** The OpenTelemetry API shapes pgpipe uses and the `telemetry` option: types only. */

/** Attribute values as OpenTelemetry takes them (the scalar kinds pgpipe sets). */
export type Attributes = Record<string, string | number | boolean>;

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

export type Meter = ReturnType<OtelMeterProvider["getMeter"]>;
export type Recorder = ReturnType<Meter["createHistogram"]>;
export type Counter = ReturnType<Meter["createCounter"]>;

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
