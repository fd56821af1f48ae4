// What a suite hands back to bench/run.ts: tables to print and ratios for the summary. Suites
// that run as child processes write it as JSON to the file named by PGPIPE_BENCH_REPORT.
import { limitFor, targetFor } from "./targets.ts";

/** A table, rendered as Markdown (which also reads well in a terminal). */
export interface Table {
  title: string;
  head: string[];
  rows: string[][];
}

/** "pgpipe is `value` times faster than `peer` on `label`" (above 1: pgpipe wins). */
export interface Ratio {
  suite: string;
  label: string;
  peer: string;
  value: number;
  /** Why there is no value: the peer cannot do this at all (the summary says so, not "-"). */
  cannot?: string;
}

/** A measured amount of pgpipe's that has an absolute goal (see LIMITS in targets.ts). */
export interface Measure {
  suite: string;
  label: string;
  /** What it is measured against, for the summary's peer column. */
  against: string;
  value: number;
  unit: string;
}

/** One suite's results. */
export interface SuiteReport {
  suite: string;
  tables: Table[];
  ratios: Ratio[];
  /** Absolute figures with a goal; absent in suites that have none. */
  measures?: Measure[];
  notes: string[];
}

/** Renders a Markdown table with padded columns (first column left, others right-aligned). */
export function renderTable(t: Table): string {
  const widths = t.head.map((h, i) =>
    Math.max(h.length, ...t.rows.map((r) => (r[i] ?? "").length))
  );
  const line = (cells: string[]) =>
    "| " + cells.map((c, i) => i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i])).join(" | ") +
    " |";
  const rule = "|" +
    widths.map((w, i) => i === 0 ? "-".repeat(w + 2) : "-".repeat(w + 1) + ":").join("|") + "|";
  return [`### ${t.title}`, "", line(t.head), rule, ...t.rows.map(line)].join("\n");
}

/** "2.31x", or "-" when there is nothing to compare. */
export function formatRatio(value: number): string {
  return Number.isFinite(value) ? `${value.toFixed(2)}x` : "-";
}

/** A figure's label without the " (TLS)" of a suite's TLS variant. */
const plainLabel = (label: string) => label.replace(/ \(TLS\)$/, "");

/**
 * The items in their order, except that a TLS variant's figure moves up to sit right after
 * its plaintext twin (same case and peer), so the two read side by side.
 */
export function besideTwins<T extends { suite: string; label: string }>(
  items: readonly T[],
  peer: (item: T) => string,
): T[] {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const key = `${item.suite.replace(/-tls$/, "")}\n${plainLabel(item.label)}\n${peer(item)}`;
    const group = groups.get(key);
    if (group) group.push(item);
    else groups.set(key, [item]);
  }
  return [...groups.values()].flat();
}

/**
 * The summary table: every ratio, with pgpipe's speed target next to it where one exists, then
 * the absolute measures with their limits; TLS rows beside their plaintext twins.
 */
export function summaryTable(ratios: readonly Ratio[], measures: readonly Measure[] = []): Table {
  const rows = besideTwins(ratios, (r) => r.peer).map((r) => {
    const target = targetFor(r.suite, r.label, r.peer);
    const verdict = target ? (r.value >= target.min ? "met" : "not met") : "";
    return [
      `${r.suite}: ${r.label}`,
      r.peer,
      r.cannot ?? formatRatio(r.value),
      target ? `>= ${target.min}x` : "",
      verdict,
    ];
  });
  for (const m of besideTwins(measures, (m) => m.against)) {
    const limit = limitFor(m.suite, m.label);
    rows.push([
      `${m.suite}: ${m.label}`,
      m.against,
      `${fmt(m.value, 1)} ${m.unit}`,
      limit ? `<= ${limit.max} ${limit.unit}` : "",
      limit ? (m.value <= limit.max ? "met" : "not met") : "",
    ]);
  }
  return {
    title: "Summary: how many times faster pgpipe is than each peer",
    head: ["case", "peer", "pgpipe speed-up", "target", "vs target"],
    rows,
  };
}

/** Prints the suite's tables and notes, then hands the report to bench/run.ts if it started us. */
export async function emitReport(report: SuiteReport): Promise<void> {
  console.log(renderSuite(report));
  const path = Deno.env.get("PGPIPE_BENCH_REPORT");
  if (path) await Deno.writeTextFile(path, JSON.stringify(report));
  else console.log("\n" + renderTable(summaryTable(report.ratios, report.measures)));
}

/** A suite's tables and notes as Markdown. */
export function renderSuite(report: SuiteReport): string {
  const parts = report.tables.map(renderTable);
  const notes = report.notes.filter((n) => n !== "");
  if (notes.length) parts.push(notes.map((n) => `- ${n}`).join("\n"));
  return "\n" + parts.join("\n\n");
}

/** Formats a number with a fixed count of decimals and thousands separators. */
export function fmt(value: number, decimals = 0): string {
  if (!Number.isFinite(value)) return "-";
  return value.toLocaleString("en-US", {
    minimumFractionDigits: decimals,
    maximumFractionDigits: decimals,
  });
}
