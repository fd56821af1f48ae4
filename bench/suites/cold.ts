// Suite 5: cold start, as a Deno Deploy isolate sees it: a fresh process imports the driver,
// connects and runs its first query. Each driver runs in alternation, many times, and the
// medians are compared. Every driver gets the same URL and its default options.
import { suiteDrivers } from "../peers/drivers.ts";
import { benchUrl, isQuick } from "../shared/env.ts";
import { emitReport, fmt, type Ratio } from "../shared/report.ts";
import { median } from "../shared/stats.ts";

const url = benchUrl();
const runs = isQuick() ? 5 : 20;
const probes = new URL("../probes/", import.meta.url).pathname;
/** The drivers the probe knows, and where each is imported from. */
const PROBED = ["pgpipe", "postgres.js", "deno-postgres"];
const drivers = (await suiteDrivers()).filter((d) => PROBED.includes(d.name));
const names = drivers.map((d) => d.name);
const specifiers = new Map(drivers.map((d) => [d.name, d.specifier]));

async function once(driver: string): Promise<{ firstQuery: number; importToAnswer: number }> {
  const t0 = performance.now();
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--no-lock", `${probes}cold.ts`, driver, url, specifiers.get(driver)!],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const wall = performance.now() - t0;
  if (out.code !== 0) throw new Error(`${driver}: ${new TextDecoder().decode(out.stderr)}`);
  const r = JSON.parse(new TextDecoder().decode(out.stdout).trim().split("\n").pop()!);
  return { firstQuery: wall, importToAnswer: r.importToAnswer };
}

const samples = new Map<string, { wall: number[]; inner: number[] }>();
for (const n of names) samples.set(n, { wall: [], inner: [] });
for (let i = 0; i < runs; i++) {
  for (const n of names) {
    const r = await once(n);
    samples.get(n)!.wall.push(r.firstQuery);
    samples.get(n)!.inner.push(r.importToAnswer);
  }
}
const med = (n: string) => ({
  wall: median(samples.get(n)!.wall),
  inner: median(samples.get(n)!.inner),
});
const ratios: Ratio[] = [];
for (const peer of names) {
  if (peer === "pgpipe" || !names.includes("pgpipe")) continue;
  ratios.push({
    suite: "cold",
    label: "cold start: import, connect, first query (in process)",
    peer,
    value: med(peer).inner / med("pgpipe").inner,
  });
}
await emitReport({
  suite: "cold",
  tables: [{
    title: `Cold start: fresh process, import, connect, first query (median of ${runs})`,
    head: ["driver", "import to first answer (ms)", "whole process incl. Deno start (ms)"],
    rows: names.map((n) => [n, fmt(med(n).inner, 1), fmt(med(n).wall, 1)]),
  }],
  ratios,
  notes: [
    "Every driver uses its default options with the same URL (sslmode=disable); pgpipe and postgres.js fetch array types on connect.",
  ],
});
