// Turns `deno bench --json` output of suite 1 into the bench's report format: one table per
// group and a pgpipe-vs-peer ratio per group (from the average, as deno bench's own summary).
import { fmt, formatRatio, Report } from "./report.ts";

/** The driver suite's last group, which only closes connections; it is left out of the tables. */
export const TEARDOWN_GROUP = "teardown";

/** The parts of deno bench's JSON (format version 1) that are used; times in nanoseconds. */
type Result = { ok: { n: number; min: number; avg: number; p75: number } } | { failed: string };
type Bench = { group: string | null; name: string; baseline: boolean; results: Result[] };

/** "2.43 ms" / "812.5 µs" from nanoseconds. */
const duration = (ns: number) => ns >= 1e6 ? `${fmt(ns / 1e6, 2)} ms` : `${fmt(ns / 1e3, 1)} µs`;

/** Builds suite 1's report; failed benches become notes (and keep the report honest). */
export function driverReport(json: { benches: Bench[] }): Report {
  const report = new Report("driver");
  const groups = Map.groupBy(json.benches, (b) => b.group ?? b.name);
  groups.delete(TEARDOWN_GROUP);
  const ok = (b: Bench) => b.results[0] && "ok" in b.results[0] ? b.results[0].ok : undefined;
  for (const [group, benches] of groups) {
    const base = ok(benches.find((b) => b.baseline) ?? benches[0]);
    const rows = benches.map((b) => {
      const m = ok(b);
      if (!m) {
        const r = b.results[0];
        const why = (r && "failed" in r ? r.failed : "no result").split("\n")[0];
        report.note(`${group}, ${b.name}: FAILED: ${why}`);
        return [b.name, "FAILED", "", "", "", ""];
      }
      const speedup = base ? m.avg / base.avg : NaN;
      if (m !== base && base) report.ratio(group, b.name, speedup);
      const times = [m.avg, m.min, m.p75].map(duration);
      return [b.name, ...times, String(m.n), m === base ? "baseline" : formatRatio(speedup)];
    });
    report.table(group, "driver | avg | min | p75 | iterations | pgpipe speed-up", rows);
  }
  return report;
}
