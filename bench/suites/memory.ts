// Suite 4: memory. Each case runs in a fresh process per driver: peak RSS while reading a
// 100,000-row result (and the heap it retains per row), and peak RSS while reading 1,000,000
// rows through a cursor in batches of 1,000, which should stay flat however large the result.
import { suiteDrivers } from "../peers/drivers.ts";
import { benchUrl } from "../shared/env.ts";
import { emitReport, fmt, type Ratio, type Table } from "../shared/report.ts";

const url = benchUrl();
const probes = new URL("../probes/", import.meta.url).pathname;
const names = (await suiteDrivers()).map((d) => d.name).filter((n) =>
  n === "pgpipe" || n === "postgres.js"
);

async function probe(driver: string, kase: string): Promise<Record<string, number>> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--no-lock",
      "--v8-flags=--expose-gc",
      `${probes}memory.ts`,
      driver,
      kase,
      url,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (out.code !== 0) {
    throw new Error(`${driver} ${kase} failed: ${new TextDecoder().decode(out.stderr)}`);
  }
  const lines = new TextDecoder().decode(out.stdout).trim().split("\n");
  return JSON.parse(lines[lines.length - 1]);
}

const mib = (b: number) => fmt(b / 1048576, 1);
const results = new Map<
  string,
  { result: Record<string, number>; cursor: Record<string, number> }
>();
for (const name of names) {
  results.set(name, {
    result: await probe(name, "result100k"),
    cursor: await probe(name, "cursor1M"),
  });
}

const table: Table = {
  title: "Memory: 4 columns (int, text, float, timestamptz), each case in a fresh process",
  head: [
    "driver",
    "100k rows: peak RSS MiB",
    "100k rows: heap kept per row (bytes)",
    "1M rows via cursor(1000): peak RSS MiB",
  ],
  rows: names.map((n) => {
    const r = results.get(n)!;
    return [n, mib(r.result.peakRss), fmt(r.result.retainedPerRow), mib(r.cursor.peakRss)];
  }),
};
const ratios: Ratio[] = [];
const ours = results.get("pgpipe");
const theirs = results.get("postgres.js");
if (ours && theirs) {
  ratios.push({
    suite: "memory",
    label: "peak RSS, 100k-row result (lower is better)",
    peer: "postgres.js",
    value: theirs.result.peakRss / ours.result.peakRss,
  });
  ratios.push({
    suite: "memory",
    label: "peak RSS, 1M rows via cursor (lower is better)",
    peer: "postgres.js",
    value: theirs.cursor.peakRss / ours.cursor.peakRss,
  });
}
await emitReport({
  suite: "memory",
  tables: [table],
  ratios,
  notes: [
    "Heap kept per row: heap used after a full GC with the result held, minus before, divided by rows.",
    "Peak RSS is the process's high-water mark (VmHWM), including the runtime itself (about 40-60 MiB).",
  ],
});
