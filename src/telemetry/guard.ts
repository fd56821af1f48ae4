/** Telemetry never breaks a query: what a provider throws is reported once, and swallowed. */
import { ConnectionError, PostgresError } from "../errors.ts";
import type { OtelSpan } from "./otel.ts";

const ERROR = 2; // SpanStatusCode.ERROR

let warned = false;

/** A provider that throws must not break a query: it is reported once on the console. */
export function reported(e: unknown): void {
  if (warned) return;
  warned = true;
  console.error("pgpipe: the OpenTelemetry provider threw; telemetry may be incomplete", e);
}

/** Runs telemetry work that calls into a provider, reporting what it throws. */
export function guarded(fn: () => void): void {
  try {
    fn();
  } catch (e) {
    reported(e);
  }
}

/** `error.type` and the SQLSTATE of a failure. */
export function errorCode(err: Error): { type: string; sqlstate?: string } {
  if (err instanceof PostgresError) return { type: err.code, sqlstate: err.code };
  if (err instanceof ConnectionError) return { type: err.code };
  const code = (err as { code?: unknown }).code;
  return { type: typeof code === "string" ? code : err.name };
}

/** Sets a span's error status and attributes. */
export function failed(span: OtelSpan, err: Error): void {
  const code = errorCode(err);
  span.setAttribute("error.type", code.type);
  if (code.sqlstate !== undefined) span.setAttribute("db.response.status_code", code.sqlstate);
  span.setStatus({ code: ERROR, message: err.message });
}
