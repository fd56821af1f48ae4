/**
 * The shapes pgpipe asks of what other code hands it, for those who write that code:
 * `@pgpipe/pgpipe/interfaces`. An application rarely names them (the main entry,
 * `@pgpipe/pgpipe`, has everything a query needs); they are here for an OpenTelemetry SDK's
 * providers (`telemetry` option), a socket of your own (`socket` option), an embedded server
 * (what `@pgpipe/pgpipe/pglite` builds over PGlite), and the function types of the case
 * transforms (`postgres.camel`, `postgres.toCamel`, ...). Types only: importing this entry loads
 * no code.
 *
 * @example A socket of your own for the `socket` option
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * import type { DenoLikeConn } from "jsr:@pgpipe/pgpipe/interfaces";
 *
 * // A Deno.Conn is a DenoLikeConn; so is a wrapper that logs or throttles one.
 * const connect = (): Promise<DenoLikeConn> => Deno.connect({ hostname: "localhost", port: 5432 });
 * await using sql = postgres({ socket: connect });
 * ```
 *
 * @module
 */
export type {
  ObservableCallback,
  OtelContext,
  OtelContextManager,
  OtelMeterProvider,
  OtelSpan,
  OtelTracerProvider,
} from "./src/telemetry/otel.ts";
export type {
  DenoLikeConn,
  NodeLikeSocket,
  UserSocket,
} from "./src/connection/transport/transport.ts";
export type { EmbeddedServer, EmbeddedStream } from "./src/connection/transport/embedded.ts";
export type { CaseBoth, CaseFrom, CaseTo } from "./src/query/transform.ts";
export type { FieldMap } from "./src/protocol/backend.ts";
export type { BulkCopy } from "./src/copy/bulk_copy.ts";
