// What telemetry costs per query (`deno run -A bench/probes/telemetry_cost.ts --mod=../../mod.ts
// [--quick]`): `select $1::int` pipelined (1,000 in flight on one connection) and serially; prints
// the rate and the process CPU per query (every thread's, the exporter's too: bench/shared/cpu.ts)
// as JSON. bench/suites/telemetry.ts runs it with telemetry off and on, and on another checkout.
import { cpuMs } from "../shared/cpu.ts";
import { benchUrl, isQuick } from "../shared/env.ts";

const modArg = Deno.args.find((a) => a.startsWith("--mod="))?.slice(6) ?? "../../mod.ts";
const { default: postgres } = await import(new URL(modArg, import.meta.url).href);
const [PIPELINED, SERIAL, WINDOW] = isQuick() ? [20_000, 2_000, 1_000] : [100_000, 10_000, 1_000];
const sql = postgres(benchUrl(), { max: 1, fetch_types: false });
await sql`select 1`;

/** `n` queries, each lane awaiting one at a time: the rate and the CPU µs per query. */
async function timed(n: number, lanes: number): Promise<{ qps: number; cpuUs: number }> {
  const [cpu, t0] = [cpuMs()!, performance.now()];
  let issued = 0;
  const lane = async () => {
    while (issued < n) await sql`select ${++issued}::int as x`;
  };
  await Promise.all(Array.from({ length: lanes }, lane));
  return { qps: n / (performance.now() - t0) * 1000, cpuUs: (cpuMs()! - cpu) * 1000 / n };
}

await timed(PIPELINED / 10, WINDOW); // warm-up: statements prepared, code optimised
await timed(SERIAL / 10, 1);
const pipelined = await timed(PIPELINED, WINDOW);
const serial = await timed(SERIAL, 1);
await sql.end();
console.log(JSON.stringify({ pipelined, serial }));
