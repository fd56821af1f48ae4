// Turns `deno bench --json` output of suite 1 into the bench's report format: one table per
// group and a pgpipe-vs-peer ratio per group (from the average, as deno bench's own summary).
import { fmt, formatRatio, type Ratio, type SuiteReport, type Table } from "./report.ts";

/** Suite 1's last group, which only closes connections; it is left out of the tables. */
export const TEARDOWN_GROUP = "teardown";

/** The parts of deno bench's JSON (format version 1) that are used. */
interface BenchJson {
  benches: {
    group: string | null;
    name: string;
    baseline: boolean;
    results: ({ ok: Measured } | { failed: string })[];
  }[];
}

/** Times are in nanoseconds. */
interface Measured {
  n: number;
  min: number;
  avg: number;
  p75: number;
  max: number;
}

/** "2.43 ms" / "812.5 µs" from nanoseconds. */
function duration(ns: number): string {
  return ns >= 1e6 ? `${fmt(ns / 1e6, 2)} ms` : `${fmt(ns / 1e3, 1)} µs`;
}

/** Builds suite 1's report; failed benches become notes (and keep the report honest). */
export function driverReport(json: BenchJson): SuiteReport {
  const groups = new Map<
    string,
    { name: string; baseline: boolean; m?: Measured; err?: string }[]
  >();
  for (const b of json.benches) {
    const group = b.group ?? b.name;
    if (group === TEARDOWN_GROUP) continue;
    const r = b.results[0];
    const entry = r && "ok" in r
      ? { name: b.name, baseline: b.baseline, m: r.ok }
      : { name: b.name, baseline: b.baseline, err: r && "failed" in r ? r.failed : "no result" };
    if (!groups.has(group)) groups.set(group, []);
    groups.get(group)!.push(entry);
  }

  const tables: Table[] = [];
  const ratios: Ratio[] = [];
  const notes: string[] = [];
  for (const [group, entries] of groups) {
    const base = entries.find((e) => e.baseline) ?? entries[0];
    const rows = entries.map((e) => {
      if (!e.m) {
        notes.push(`${group}, ${e.name}: FAILED: ${e.err?.split("\n")[0]}`);
        return [e.name, "FAILED", "", "", "", ""];
      }
      const speedup = base.m ? e.m.avg / base.m.avg : NaN;
      if (e !== base && base.m) {
        ratios.push({ suite: "driver", label: group, peer: e.name, value: speedup });
      }
      return [
        e.name,
        duration(e.m.avg),
        duration(e.m.min),
        duration(e.m.p75),
        String(e.m.n),
        e === base ? "baseline" : formatRatio(speedup),
      ];
    });
    tables.push({
      title: group,
      head: ["driver", "avg", "min", "p75", "iterations", "pgpipe speed-up"],
      rows,
    });
  }
  return { suite: "driver", tables, ratios, notes };
}
