// Suite: what OpenTelemetry costs per query. bench/probes/telemetry_cost.ts runs in fresh
// processes, in rounds with the order rotated: pgpipe with telemetry off (no OTEL_DENO: the path
// every other suite measures), and on (OTEL_DENO=true, exporting protobuf to a loopback OTLP
// receiver in this process, metrics every 10 s, as a deployment would). With
// PGPIPE_BENCH_AGAINST=<another checkout's mod.ts> it also runs that checkout, to show that
// telemetry off costs nothing against a tree without it.
import { otelEnv, startOtlpReceiver } from "../../test/harness/otlp_receiver.ts";
import { benchUrl, isQuick } from "../shared/env.ts";
import { emitReport, fmt, type Measure } from "../shared/report.ts";
import { median } from "../shared/stats.ts";

const rounds = isQuick() ? 2 : 5;
const against = Deno.env.get("PGPIPE_BENCH_AGAINST");
const probe = new URL("../probes/telemetry_cost.ts", import.meta.url).pathname;
const here = new URL("../../mod.ts", import.meta.url).pathname;
const receiver = startOtlpReceiver(false);

interface Run {
  pipelined: { qps: number; cpuUs: number };
  serial: { qps: number; cpuUs: number };
}

const variants: { name: string; mod: string; env: Record<string, string> }[] = [
  { name: "off", mod: here, env: {} },
  {
    name: "on",
    mod: here,
    env: {
      ...otelEnv(receiver),
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
      OTEL_METRIC_EXPORT_INTERVAL: "10000",
    },
  },
];
if (against !== undefined) variants.push({ name: "other checkout", mod: against, env: {} });

async function runOne(mod: string, env: Record<string, string>): Promise<Run> {
  const args = ["run", "-A", "--no-lock", probe, `--mod=${mod}`];
  if (isQuick()) args.push("--quick");
  const out = await new Deno.Command(Deno.execPath(), {
    args,
    env: { ...env, PGPIPE_BENCH_URL: benchUrl() },
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) {
    throw new Error(`telemetry probe failed for ${mod}: ${new TextDecoder().decode(out.stderr)}`);
  }
  return JSON.parse(new TextDecoder().decode(out.stdout).trim().split("\n").at(-1)!);
}

const results = new Map<string, Run[]>(variants.map((v) => [v.name, []]));
try {
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < variants.length; i++) {
      const v = variants[(i + r) % variants.length];
      results.get(v.name)!.push(await runOne(v.mod, v.env));
    }
  }
} finally {
  await receiver.close();
}

// The floor: Deno's own spans and metric records for the same work, with no database or driver.
const floorProbe = new URL("../probes/telemetry_floor.ts", import.meta.url).pathname;
const floors: number[] = [];
const onEnv = variants[1].env;
const receiver2 = startOtlpReceiver(false);
try {
  for (let r = 0; r < rounds; r++) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--no-lock", floorProbe, ...(isQuick() ? ["--quick"] : [])],
      env: { ...onEnv, ...otelEnv(receiver2) },
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!out.success) {
      throw new Error(`telemetry floor probe failed: ${new TextDecoder().decode(out.stderr)}`);
    }
    floors.push(
      JSON.parse(new TextDecoder().decode(out.stdout).trim().split("\n").at(-1)!).cpuUsPerSpan,
    );
  }
} finally {
  await receiver2.close();
}
const floor = median(floors);

const med = (name: string, pick: (r: Run) => number) => median(results.get(name)!.map(pick));
const extra = (pick: (r: Run) => number) => med("on", pick) - med("off", pick);
const measures: Measure[] = [
  {
    suite: "telemetry",
    label: "telemetry on: extra CPU per pipelined query (spans, metrics, export)",
    against: "telemetry off",
    value: extra((r) => r.pipelined.cpuUs),
    unit: "µs",
  },
  {
    suite: "telemetry",
    label: "telemetry on: extra CPU per serial query (spans, metrics, export)",
    against: "telemetry off",
    value: extra((r) => r.serial.cpuUs),
    unit: "µs",
  },
  {
    suite: "telemetry",
    label: "Deno's own span + histogram record per query, no database (the floor under the cost)",
    against: "nothing traced",
    value: floor,
    unit: "µs",
  },
];
await emitReport({
  suite: "telemetry",
  tables: [{
    title: `OpenTelemetry's cost: select $1::int on one connection, fresh process per run ` +
      `(median of ${rounds} rotated rounds; CPU is the whole process's, exporter threads included)`,
    head: ["pgpipe", "pipelined q/s", "µs CPU / query", "serial q/s", "µs CPU / query"],
    rows: variants.map((v) => [
      v.name === "off" ? "telemetry off" : v.name === "on" ? "telemetry on (OTEL_DENO)" : v.name,
      fmt(med(v.name, (r) => r.pipelined.qps), 0),
      fmt(med(v.name, (r) => r.pipelined.cpuUs), 2),
      fmt(med(v.name, (r) => r.serial.qps), 0),
      fmt(med(v.name, (r) => r.serial.cpuUs), 2),
    ]),
  }],
  ratios: [],
  measures,
  notes: [
    `The floor: Deno's own OpenTelemetry doing what pgpipe asks of it per query (one client span ` +
    `with the same attributes, one setAttributes, one histogram record; bench/probes/` +
    `telemetry_floor.ts), with no database or driver, costs ${fmt(floor, 2)} µs of CPU per ` +
    `query in this run (median of ${rounds}): the part of the 'on' cost that is the runtime's.`,
    "Off, a query pays one null check.",
  ],
});
