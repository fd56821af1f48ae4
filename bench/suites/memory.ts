// Memory. Each case runs in a fresh process per driver (bench/probes/memory.ts): peak
// RSS while reading a 100,000-row result (and the heap it retains per row), and peak RSS while
// reading 1,000,000 rows through a cursor in batches of 1,000, which should stay flat however
// large the result (deno-postgres, which has no cursor API, with SQL's DECLARE and FETCH).
import { suiteDrivers } from "../peers/drivers.ts";
import { benchUrl } from "../shared/env.ts";
import { probe } from "../shared/probe.ts";
import { fmt, mib, Report } from "../shared/report.ts";

const url = benchUrl();
const report = new Report("memory");
/** The drivers the probe knows (pglue has no cursor), each imported from where it loaded. */
const drivers = await suiteDrivers(["pgpipe", "postgres.js", "deno-postgres"]);
type Probed = Record<"peakRss" | "retainedPerRow", number>;
const measure = (kase: string, name: string, specifier: string) =>
  probe<Probed>("memory.ts", [name, kase, url, specifier], { flags: ["--v8-flags=--expose-gc"] });
const results = new Map<string, { result: Probed; cursor: Probed }>();
for (const { name, specifier } of drivers) {
  const result = await measure("result100k", name, specifier);
  results.set(name, { result, cursor: await measure("cursor1M", name, specifier) });
}

const ours = results.get("pgpipe");
for (const [peer, theirs] of ours ? results : []) {
  if (peer === "pgpipe") continue;
  const rss = (kind: "result" | "cursor") => theirs[kind].peakRss / ours![kind].peakRss;
  report.ratio("peak RSS, 100k-row result (lower is better)", peer, rss("result"));
  report.ratio("peak RSS, 1M rows via cursor (lower is better)", peer, rss("cursor"));
}
report.table(
  "Memory: 4 columns (int, text, float, timestamptz), each case in a fresh process",
  "driver | 100k rows: peak RSS MiB | 100k rows: heap kept per row (bytes) | 1M rows via cursor(1000): peak RSS MiB",
  [...results].map((
    [n, r],
  ) => [n, mib(r.result.peakRss), fmt(r.result.retainedPerRow), mib(r.cursor.peakRss)]),
);
report.note(
  "Heap kept per row: heap used after a full GC with the result held, minus before, divided by rows.",
  "Peak RSS is the process's high-water mark (VmHWM), including the runtime itself (about 40-60 MiB).",
);
if (results.has("deno-postgres")) {
  report.note(
    "deno-postgres has no cursor API: its 1M rows are read with DECLARE ... CURSOR and FETCH 1000 in a transaction.",
  );
}
await report.emit();
