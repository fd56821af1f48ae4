// The floor under telemetry's cost: what Deno's own OpenTelemetry takes for the work pgpipe asks of
// it per query, with no database and no driver at all. One client span with the attributes a
// pipelined `select $1::int` span carries (set at start, the rest in one setAttributes, as pgpipe
// does), ended, plus one histogram record. Run with OTEL_DENO=true (bench/suites/telemetry.ts
// gives it the same exporter settings as the driver's run); prints the process CPU per span
// (every thread's, exporter threads included; bench/shared/cpu.ts) as JSON.
import { cpuMs } from "../shared/cpu.ts";
import { isQuick } from "../shared/env.ts";

const N = isQuick() ? 20_000 : 100_000;
const CLIENT = 2; // SpanKind.CLIENT
const tracer = Deno.telemetry.tracerProvider.getTracer("pgpipe-floor", "0");
const meter = Deno.telemetry.meterProvider.getMeter("pgpipe-floor", "0");
const histogram = meter.createHistogram("db.client.operation.duration", { unit: "s" });
const base = {
  "db.system.name": "postgresql",
  "db.namespace": "postgres",
  "server.address": "127.0.0.1",
  "server.port": 5432,
  "db.operation.name": "SELECT",
};
const start = { ...base, "db.query.text": "select $1::int as x" };

function once(i: number): void {
  const span = tracer.startSpan("SELECT", { kind: CLIENT, attributes: start });
  span.setAttributes({
    "pgpipe.pipeline.behind": i % 1000,
    "pgpipe.statement": "cached",
    "db.response.returned_rows": 1,
  });
  span.end();
  histogram.record(0.0001, base);
}

for (let i = 0; i < N / 10; i++) once(i); // warm-up
const cpu = cpuMs()!;
for (let i = 0; i < N; i++) {
  once(i);
  // Yield now and then, as a driver between reads does, so the exporter's batches go out.
  if (i % 1000 === 999) await new Promise((r) => setTimeout(r, 0));
}
console.log(JSON.stringify({ cpuUsPerSpan: (cpuMs()! - cpu) * 1000 / N }));
