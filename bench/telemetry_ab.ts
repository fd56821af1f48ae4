// Telemetry's cost, A/B: bench/probes/telemetry_cost.ts run as fresh processes, in rounds with
// the order rotated: this checkout with telemetry off, with it on (OTEL_DENO=true, exporting to
// a loopback OTLP receiver in this process), and, with `--against=PATH/mod.ts`, another checkout
// (e.g. main) for the off-path comparison. Prints each run and the medians.
//
//   PGPIPE_BENCH_URL=postgres://... deno run -A bench/telemetry_ab.ts [--rounds=5] [--quick]
//     [--against=/path/to/other/mod.ts]
import { otelEnv, startOtlpReceiver } from "../test/harness/otlp_receiver.ts";
import { benchUrl, isQuick } from "./shared/env.ts";

const rounds = Number(Deno.args.find((a) => a.startsWith("--rounds="))?.slice(9) ?? 5);
const against = Deno.args.find((a) => a.startsWith("--against="))?.slice(10);
const probe = new URL("./probes/telemetry_cost.ts", import.meta.url).pathname;
const receiver = startOtlpReceiver(false);

interface Run {
  pipelined: { qps: number; cpuUs: number };
  serial: { qps: number; cpuUs: number };
}

const variants: { name: string; mod: string; env: Record<string, string> }[] = [
  { name: "off", mod: new URL("../mod.ts", import.meta.url).pathname, env: {} },
  {
    name: "on",
    mod: new URL("../mod.ts", import.meta.url).pathname,
    // Deno's default encoding (protobuf), metrics every 10 s: what a deployment would use.
    env: {
      ...otelEnv(receiver),
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
      OTEL_METRIC_EXPORT_INTERVAL: "10000",
    },
  },
];
if (against !== undefined) variants.push({ name: "against", mod: against, env: {} });

async function runOne(mod: string, env: Record<string, string>): Promise<Run> {
  const args = ["run", "-A", "--no-lock", probe, `--mod=${mod}`];
  if (isQuick()) args.push("--quick");
  const out = await new Deno.Command(Deno.execPath(), {
    args,
    env: { ...env, PGPIPE_BENCH_URL: benchUrl() },
    stderr: "inherit",
  }).output();
  if (!out.success) throw new Error(`probe failed for ${mod}`);
  return JSON.parse(new TextDecoder().decode(out.stdout).trim().split("\n").at(-1)!);
}

const results = new Map<string, Run[]>(variants.map((v) => [v.name, []]));
for (let r = 0; r < rounds; r++) {
  for (let i = 0; i < variants.length; i++) {
    const v = variants[(i + r) % variants.length];
    const run = await runOne(v.mod, v.env);
    results.get(v.name)!.push(run);
    console.log(
      `round ${r + 1} ${v.name.padEnd(7)} pipelined ${run.pipelined.qps.toFixed(0)} q/s ` +
        `${run.pipelined.cpuUs.toFixed(2)} µs CPU/q · serial ${run.serial.qps.toFixed(0)} q/s ` +
        `${run.serial.cpuUs.toFixed(2)} µs CPU/q`,
    );
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log("\nmedians:");
for (const [name, runs] of results) {
  console.log(
    `${name.padEnd(7)} pipelined ${median(runs.map((r) => r.pipelined.qps)).toFixed(0)} q/s ` +
      `${median(runs.map((r) => r.pipelined.cpuUs)).toFixed(2)} µs CPU/q · serial ` +
      `${median(runs.map((r) => r.serial.qps)).toFixed(0)} q/s ` +
      `${median(runs.map((r) => r.serial.cpuUs)).toFixed(2)} µs CPU/q`,
  );
}
console.log(`OTLP posts received: ${JSON.stringify(Object.fromEntries(receiver.posts))}`);
await receiver.close();
