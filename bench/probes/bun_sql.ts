// Bun.sql's side of the throughput suite's comparison, run by bun: `bun bench/probes/bun_sql.ts
// URL SERIAL TOTAL WINDOW [POSTMASTER]` opens Bun.sql with its default pool, runs SERIAL strictly
// serial `select 1`, then TOTAL `select $1::int` keeping WINDOW in flight, and prints
// `{"serialUs":…,"qps":…}`; given the local postmaster's pid, also `"cpu":{"client":…,"server":…}`,
// the CPU per query of the in-flight run in this process and the server's (bench/shared/cpu.ts).
import { cpuPerQuery } from "../shared/cpu.ts";
import { Bun } from "./bun_api.ts";

const [url, ...numbers] = Bun.argv.slice(2);
const [serial, total, window, postmaster] = numbers.map(Number);
const sql = new Bun.SQL(url);
// Warm-up: every connection of the default pool open, statements prepared.
await Promise.all(Array.from({ length: 100 }, (_, i) => sql`select ${i}::int as x`));
for (let i = 0; i < 200; i++) await sql`select 1`;
const t0 = performance.now();
for (let i = 0; i < serial; i++) {
  const [row] = await sql`select 1`;
  if (Object.values(row)[0] !== 1) throw new Error("wrong answer");
}
const serialUs = (performance.now() - t0) * 1000 / serial;

let next = 0;
const lane = async () => {
  while (next < total) {
    const v = next++;
    const [{ x }] = await sql`select ${v}::int as x`;
    if (x !== v) throw new Error(`wrong answer: ${x} for ${v}`);
  }
};
// Timed inside, so reading /proc around the run stays out of the rate.
const { result: ms, cpu } = await cpuPerQuery(postmaster || undefined, async () => {
  const start = performance.now();
  await Promise.all(Array.from({ length: window }, lane));
  return performance.now() - start;
}, () => total);
await sql.close({ timeout: 5 });
console.log(JSON.stringify({ serialUs, qps: total / (ms / 1000), ...(cpu ? { cpu } : {}) }));
