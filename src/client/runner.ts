/**
 * Where the query layer meets the connection layer: a `Query` hands its
 * runner a plain description of itself, and the runner turns it into a
 * request (a query, a cursor, a describe, a COPY) and sends it to its sink,
 * the pool or one reserved connection. Every `sql` has one (see makeTag).
 */
import { CursorRequest } from "../connection/requests/cursor_request.ts";
import {
  QueryRequest,
  type QuerySpec,
  type ResultTarget,
} from "../connection/requests/query_request.ts";
import type { PipelineRequest } from "../connection/requests/request.ts";
import { CopyRequest } from "../copy/copy_request.ts";
import { copyRequest, copyResult, startStream } from "../copy/query_copy.ts";
import { compile } from "../query/compile.ts";
import { readQueryFile } from "../query/file.ts";
import { type QueryDetails, withQueryDetails } from "../query/origin.ts";
import type {
  CopyStart,
  CopyStreams,
  CursorSource,
  DescribedStatement,
  Query,
  QueryRunner,
  RunControl,
} from "../query/query.ts";
import { Result } from "../query/result.ts";
import type { QueryConfig } from "../query/settings.ts";
import type { OtelContext } from "../telemetry/otel.ts";
import type { Telemetry } from "../telemetry/telemetry.ts";
import { traceCopy } from "../telemetry/traced_copy.ts";
import { type OperationTrace, QueryTrace } from "../telemetry/traces.ts";
import { querySpec, type SpecSettings } from "./query_spec.ts";
import type { StatementPolicy } from "../connection/statement_policy.ts";

/** Where a tag's requests go: the pool or one reserved connection. */
export interface Sink {
  /** Sends a request. */
  send(req: PipelineRequest): void;
  /** Cancels a request it was sent (see Connection.cancel). */
  cancel(req: PipelineRequest, reason: Error): void;
}

/** What every `sql` of one client is built with. */
export interface ClientSettings {
  /** The query settings: transforms, custom types, decoding. */
  readonly config: QueryConfig;
  /** The client's telemetry, or null when it records nothing. */
  readonly telemetry: Telemetry | null;
  /** The statement policy (`prepare`, `force_prepare`). */
  readonly statements: StatementPolicy;
}

/** What a runner's sink is, beyond where its requests go. */
export interface SinkScope {
  /**
   * A pool of several connections, where a transaction opened by a plain query would catch
   * unrelated queries pipelined on its connection, so it is refused (UNSAFE_TRANSACTION).
   */
  readonly shared?: boolean;
  /** A transaction's connection, where queries written together share one Sync. */
  readonly transaction?: boolean;
  /** The span context of the transaction whose queries these are. */
  readonly parent?: OtelContext;
}

/** An empty result for a request to fill (the simple protocol makes one per statement). */
function newResult(): ResultTarget {
  return new Result<unknown>() as unknown as ResultTarget;
}

/** Does nothing: marks a promise whose rejection is observed elsewhere. */
function ignore(): void {}

/** A query's details for its error; `spec` is null when building it failed. */
function queryDetails(query: Query<readonly unknown[]>, spec: QuerySpec | null): QueryDetails {
  return {
    origin: query.origin,
    query: spec?.text ?? query.strings.join("?"),
    // As postgres.js: the values as they were bound, before they became text.
    parameters: spec === null ? [] : spec.values ?? spec.params,
    args: query.args,
    types: spec?.types ?? [],
  };
}

/** A described statement's parameter types and columns, as `describe()` resolves to. */
function described(text: string, r: ResultTarget): DescribedStatement {
  const st = r.statement;
  return {
    name: "",
    string: text,
    types: st?.parameterTypes ?? [],
    columns: (st?.columns ?? []).map((c) => ({
      name: c.name,
      type: c.type,
      table: c.table,
      number: c.number,
    })),
  };
}

/** Turns queries into requests for one sink. */
export class Runner implements QueryRunner {
  /** The client settings its queries are built with. */
  readonly config: QueryConfig;
  readonly #sink: Sink;
  readonly #telemetry: Telemetry | null;
  readonly #parent: OtelContext | undefined;
  readonly #spec: SpecSettings;

  constructor(sink: Sink, settings: ClientSettings, scope: SinkScope = {}) {
    const config = settings.config;
    this.config = config;
    this.#sink = sink;
    this.#telemetry = settings.telemetry;
    this.#parent = scope.parent;
    this.#spec = {
      statements: settings.statements,
      shared: scope.shared ?? false,
      transaction: scope.transaction ?? false,
      config,
      undefinedValue: config.undefinedValue,
    };
  }

  run(query: Query<readonly unknown[]>, control?: RunControl): Promise<Result<unknown>> {
    return this.#withSpec(query, (spec, fail) =>
      new Promise<Result<unknown>>((resolve, reject) => {
        if (control?.cancelled) return reject(control.cancelled); // cancelled while read
        const target = newResult();
        const each = control?.each;
        if (each !== undefined) target.push = (row: unknown) => (each(row, target), 0);
        const settle = {
          resolve: resolve as unknown as (r: ResultTarget) => void, // the target is a Result
          reject: (e: Error) => reject(fail(e)),
        };
        // Telemetry off: one null check, nothing allocated.
        const telemetry = this.#telemetry;
        const trace = telemetry === null
          ? null
          : telemetry.query(spec.text, spec.simple !== true, settle, this.#parent);
        const req = new QueryRequest(
          spec,
          target,
          trace ?? settle,
          spec.simple ? newResult : undefined,
        );
        if (trace !== null) trace.request = req;
        this.#sink.send(req);
        if (trace !== null) trace.sent(this.#sink);
        if (control !== undefined) control.request = req;
      }));
  }

  cancel(control: RunControl, reason: Error): void {
    const req = control.request as PipelineRequest | null;
    if (req === null) { // not sent yet (its text is still being read): never send it
      control.cancelled = reason;
      return;
    }
    if (req instanceof QueryRequest && req.settle instanceof QueryTrace) req.settle.cancelled();
    // A COPY already on its connection ends through the protocol (CopyFail, or cancel/drain).
    if (req instanceof CopyRequest && req.sent) req.cancel(reason);
    else this.#sink.cancel(req, reason);
  }

  cursor(query: Query<readonly unknown[]>, rows: number): CursorSource {
    let fail = (e: unknown) => this.#failure(query, null, e);
    let trace: OperationTrace | null = null;
    const request = this.#withSpec(query, (spec, failWith) => {
      fail = failWith;
      if (this.#telemetry !== null) {
        trace = this.#telemetry.operation(spec.text, "cursor", spec.simple !== true, this.#parent);
      }
      // A cursor needs a portal with a row limit: the extended protocol, even for `unsafe` text.
      const req = new CursorRequest({ ...spec, simple: false }, rows, newResult);
      this.#sink.send(req);
      return req;
    });
    return {
      next: async () => {
        try {
          const batch = (await (await request).next()) as unknown as unknown[] | null;
          if (trace !== null) {
            if (batch === null) trace.done(null);
            else trace.rows += batch.length;
          }
          return batch;
        } catch (e) {
          const err = fail(e);
          trace?.done(err);
          throw err;
        }
      },
      close: async () => {
        await (await request.catch(() => null))?.close();
        trace?.done(null);
      },
    };
  }

  describe(query: Query<readonly unknown[]>): Promise<DescribedStatement> {
    return this.#withSpec(
      query,
      (spec, fail) =>
        new Promise<DescribedStatement>((resolve, reject) => {
          const describe = { ...spec, describeOnly: true, params: [] };
          const settle = {
            resolve: (r: ResultTarget) => resolve(described(spec.text, r)),
            reject: (e: Error) => reject(fail(e)),
          };
          this.#sink.send(new QueryRequest(describe, newResult(), settle));
        }),
    );
  }

  copy<K extends keyof CopyStreams>(
    query: Query<readonly unknown[]>,
    kind: K,
    control: RunControl,
  ): CopyStart<CopyStreams[K]> {
    let done: Promise<Result<unknown>> | null = null;
    const stream = this.#withSpec(query, (spec, fail) => {
      if (control.cancelled) throw control.cancelled; // cancelled while its text was read
      const req = copyRequest(spec, kind, fail);
      control.request = req;
      done = req.done.then(copyResult);
      const telemetry = this.#telemetry;
      if (telemetry !== null) {
        traceCopy(telemetry.operation(spec.text, "copy", spec.simple !== true, this.#parent), done);
      }
      done.catch(ignore); // when the stream rejects, `result` rejects with that instead
      return startStream(this.#sink, kind, req);
    });
    const result = stream.then(() => done!);
    result.catch(ignore); // observed by awaiting the query, if ever
    return { stream, result };
  }

  /**
   * The query's spec. Tagged queries are built synchronously (so everything
   * issued in one tick leaves in one write); `sql.file` reads its file first.
   * Bad input throws (or rejects, for files).
   */
  #specOf(query: Query<readonly unknown[]>): QuerySpec | Promise<QuerySpec> {
    if (query.failure !== undefined) throw query.failure;
    if (query.file !== null) {
      return readQueryFile(query.file).then((text) =>
        querySpec(query, text, query.args, this.#spec)
      );
    }
    const { text, values } = compile(query, this.config.columnTo);
    return querySpec(query, text, values, this.#spec);
  }

  /** The error a query rejects with: its details attached (see withQueryDetails). */
  #failure(query: Query<readonly unknown[]>, spec: QuerySpec | null, e: unknown): Error {
    return withQueryDetails(e, queryDetails(query, spec), this.config.debug);
  }

  /**
   * Runs `start` with the spec now when it is ready, later for files; failures
   * reject, with the query's details. `start` gets the `fail` to reject with.
   */
  #withSpec<T>(
    query: Query<readonly unknown[]>,
    start: (spec: QuerySpec, fail: (e: unknown) => Error) => T | Promise<T>,
  ): Promise<T> {
    let spec: QuerySpec | null = null;
    const fail = (e: unknown) => this.#failure(query, spec, e);
    try {
      const ready = this.#specOf(query);
      if (ready instanceof Promise) {
        return ready.then((s) => start(spec = s, fail)).catch((e) => {
          throw fail(e);
        });
      }
      spec = ready;
      return Promise.resolve(start(ready, fail));
    } catch (e) {
      return Promise.reject(fail(e));
    }
  }
}
