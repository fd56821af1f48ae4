// Suite: what OpenTelemetry costs per query. bench/probes/telemetry_cost.ts runs in fresh
// processes, in rounds with the order rotated: pgpipe with telemetry off (no OTEL_DENO: the path
// every other suite measures), and on (OTEL_DENO=true, exporting protobuf to a loopback OTLP
// receiver in this process, metrics every 10 s, as a deployment would). With
// PGPIPE_BENCH_AGAINST=<another checkout's mod.ts> it also runs that checkout, to show that
// telemetry off costs nothing against a tree without it. Last, the floor: Deno's own spans and
// metric records for the same work, with no database or driver (bench/probes/telemetry_floor.ts).
import { benchUrl, isQuick } from "../shared/env.ts";
import { otelEnv, startOtlpReceiver } from "../shared/harness.ts";
import { probe } from "../shared/probe.ts";
import { fmt, Report } from "../shared/report.ts";
import { median, rotated } from "../shared/stats.ts";

const rounds = isQuick() ? 2 : 5;
const quick = isQuick() ? ["--quick"] : [];
const against = Deno.env.get("PGPIPE_BENCH_AGAINST");
const here = new URL("../../mod.ts", import.meta.url).pathname;
const receiver = startOtlpReceiver(false);

/** One run of the probe: the rate and the process CPU per query, pipelined and serial. */
type Run = Record<"pipelined" | "serial", { qps: number; cpuUs: number }>;

const on = {
  ...otelEnv(receiver),
  OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
  OTEL_METRIC_EXPORT_INTERVAL: "10000",
};
const variants = [
  { name: "telemetry off", mod: here, env: {} },
  { name: "telemetry on (OTEL_DENO)", mod: here, env: on },
  ...(against === undefined ? [] : [{ name: "other checkout", mod: against, env: {} }]),
];
const results = new Map<string, Run[]>(variants.map((v) => [v.name, []]));
const floors: number[] = [];
try {
  await rotated(rounds, variants, async (v) => {
    const env = { ...v.env, PGPIPE_BENCH_URL: benchUrl() };
    results.get(v.name)!.push(
      await probe<Run>("telemetry_cost.ts", [`--mod=${v.mod}`, ...quick], { env }),
    );
  });
  const floorRun = () => probe<{ cpuUsPerSpan: number }>("telemetry_floor.ts", quick, { env: on });
  for (let r = 0; r < rounds; r++) floors.push((await floorRun()).cpuUsPerSpan);
} finally {
  await receiver.close();
}
const floor = median(floors);

const med = (name: string, pick: (r: Run) => number) => median(results.get(name)!.map(pick));
const extra = (pick: (r: Run) => number) =>
  med(variants[1].name, pick) - med(variants[0].name, pick);
const report = new Report("telemetry");
const KINDS = ["pipelined", "serial"] as const;
const cells = (name: string, k: typeof KINDS[number]) => {
  return [fmt(med(name, (r) => r[k].qps)), fmt(med(name, (r) => r[k].cpuUs), 2)];
};
report.table(
  `OpenTelemetry's cost: select $1::int on one connection, fresh process per run (median of ${rounds} rotated rounds; CPU is the whole process's, exporter threads included)`,
  "pgpipe | pipelined q/s | µs CPU / query | serial q/s | µs CPU / query",
  variants.map(({ name }) => [name, ...KINDS.flatMap((k) => cells(name, k))]),
);
for (const k of KINDS) {
  const label = `telemetry on: extra CPU per ${k} query (spans, metrics, export)`;
  report.measure(label, "telemetry off", extra((r) => r[k].cpuUs), "µs");
}
const floorLabel =
  "Deno's own span + histogram record per query, no database (the floor under the cost)";
report.measure(floorLabel, "nothing traced", floor, "µs");
const floorUs = fmt(floor, 2);
report.note(
  `The floor: Deno's own OpenTelemetry doing what pgpipe asks of it per query (one client span with the same attributes, one setAttributes, one histogram record; bench/probes/telemetry_floor.ts), with no database or driver, costs ${floorUs} µs of CPU per query in this run (median of ${rounds}): the part of the 'on' cost that is the runtime's.`,
  "Off, a query pays one null check.",
);
await report.emit();
