// What telemetry costs per query: one process runs `select $1::int` pipelined (a window of 1,000
// in flight on one connection) and serially, and prints the rate and the process CPU per query
// (every thread's, so the exporter's own threads count too: bench/shared/cpu.ts) as JSON.
// bench/suites/telemetry.ts starts it for the driver with telemetry off and on, and for another
// checkout (`--mod=`) to compare.
//
//   deno run -A bench/probes/telemetry_cost.ts --mod=../../mod.ts [--quick]
import { cpuMs } from "../shared/cpu.ts";
import { benchUrl, isQuick } from "../shared/env.ts";

const modArg = Deno.args.find((a) => a.startsWith("--mod="))?.slice(6) ?? "../../mod.ts";
const { default: postgres } = await import(new URL(modArg, import.meta.url).href);
const quick = isQuick();
const PIPELINED = quick ? 20_000 : 100_000;
const SERIAL = quick ? 2_000 : 10_000;
const WINDOW = 1_000;

const sql = postgres(benchUrl(), { max: 1, fetch_types: false });
await sql`select 1`;

/** CPU microseconds this process used since `start` (ms, from cpuMs). */
const cpuSince = (start: number) => (cpuMs()! - start) * 1000;

async function pipelined(n: number): Promise<{ qps: number; cpuUs: number }> {
  const cpu = cpuMs()!;
  const t0 = performance.now();
  let issued = 0;
  const lane = async () => {
    while (issued < n) {
      issued++;
      await sql`select ${issued}::int as x`;
    }
  };
  await Promise.all(Array.from({ length: WINDOW }, lane));
  const ms = performance.now() - t0;
  return { qps: n / ms * 1000, cpuUs: cpuSince(cpu) / n };
}

async function serial(n: number): Promise<{ qps: number; cpuUs: number }> {
  const cpu = cpuMs()!;
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await sql`select ${i}::int as x`;
  const ms = performance.now() - t0;
  return { qps: n / ms * 1000, cpuUs: cpuSince(cpu) / n };
}

await pipelined(PIPELINED / 10); // warm-up: statements prepared, code optimised
await serial(SERIAL / 10);
const p = await pipelined(PIPELINED);
const s = await serial(SERIAL);
await sql.end();
console.log(JSON.stringify({ pipelined: p, serial: s }));
