// Suite 4: memory. Each case runs in a fresh process per driver: peak RSS while reading a
// 100,000-row result (and the heap it retains per row), and peak RSS while reading 1,000,000
// rows through a cursor in batches of 1,000, which should stay flat however large the result
// (deno-postgres, which has no cursor API, with SQL's DECLARE and FETCH).
import { suiteDrivers } from "../peers/drivers.ts";
import { benchUrl } from "../shared/env.ts";
import { emitReport, fmt, type Ratio, type Table } from "../shared/report.ts";

const url = benchUrl();
const probes = new URL("../probes/", import.meta.url).pathname;
/** The drivers the probe knows (pglue has no cursor), and where each is imported from. */
const PROBED = ["pgpipe", "postgres.js", "deno-postgres"];
const drivers = (await suiteDrivers()).filter((d) => PROBED.includes(d.name));
const names = drivers.map((d) => d.name);
const specifiers = new Map(drivers.map((d) => [d.name, d.specifier]));

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
      specifiers.get(driver)!,
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
for (const [peer, theirs] of results) {
  if (!ours || peer === "pgpipe") continue;
  ratios.push({
    suite: "memory",
    label: "peak RSS, 100k-row result (lower is better)",
    peer,
    value: theirs.result.peakRss / ours.result.peakRss,
  });
  ratios.push({
    suite: "memory",
    label: "peak RSS, 1M rows via cursor (lower is better)",
    peer,
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
    ...(names.includes("deno-postgres")
      ? [
        "deno-postgres has no cursor API: its 1M rows are read with DECLARE ... CURSOR and FETCH 1000 in a transaction.",
      ]
      : []),
  ],
});
