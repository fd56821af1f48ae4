// What a suite hands back to bench/run.ts (tables, ratios and measures for the summary, notes),
// and the bench's one table printer: Markdown, which reads well in a terminal too. A suite
// gathers its figures in a Report and ends with report.emit(), which prints its tables and
// writes it as JSON to the file named by PGPIPE_BENCH_REPORT (bench/run.ts reads it).
import { limitFor, targetFor } from "./targets.ts";

/** A table: its title, column heads and rows of cells. */
export type Table = { title: string; head: string[]; rows: string[][] };

/**
 * "pgpipe is `value` times faster than `peer` on `label`" (above 1: pgpipe wins); `cannot` says
 * why there is no value: the peer cannot do this at all (the summary says so, not "-").
 */
export type Ratio = { suite: string; label: string; peer: string; value: number; cannot?: string };

/** An amount of pgpipe's, measured `against` a baseline, with an absolute goal (LIMITS). */
export type Measure = Record<"suite" | "label" | "against" | "unit", string> & { value: number };

/** One suite's results. */
export type SuiteReport = {
  suite: string;
  tables: Table[];
  ratios: Ratio[];
  measures?: Measure[];
  notes: string[];
};

/** A table from its title, its column heads (or one string of them, `|` between) and its rows. */
export function table(title: string, head: string | string[], rows: string[][]): Table {
  const heads = typeof head === "string" ? head.split("|").map((h) => h.trim()) : head;
  return { title, head: heads, rows };
}

/** A suite's report as it fills up, in the order its tables and notes are to be read. */
export class Report implements SuiteReport {
  tables: Table[] = [];
  ratios: Ratio[] = [];
  measures: Measure[] = [];
  notes: string[] = [];
  constructor(readonly suite: string) {}

  table(title: string, head: string | string[], rows: string[][]): void {
    this.tables.push(table(title, head, rows));
  }
  /** pgpipe `value` times faster than `peer` (NaN with `cannot`: the peer cannot do it). */
  ratio(label: string, peer: string, value: number, cannot?: string): void {
    this.ratios.push({ suite: this.suite, label, peer, value, ...(cannot ? { cannot } : {}) });
  }
  measure(label: string, against: string, value: number, unit: string): void {
    this.measures.push({ suite: this.suite, label, against, value, unit });
  }
  note(...notes: string[]): void {
    this.notes.push(...notes);
  }

  /** Prints the tables and notes, then hands the report to bench/run.ts if it started us. */
  async emit(): Promise<void> {
    console.log(renderSuite(this));
    const path = Deno.env.get("PGPIPE_BENCH_REPORT");
    if (path) await Deno.writeTextFile(path, JSON.stringify(this));
    else console.log("\n" + renderTable(summaryTable(this.ratios, this.measures)));
  }
}

/** Renders a Markdown table with padded columns (first column left, others right-aligned). */
export function renderTable(t: Table): string {
  const widths = t.head.map((h, i) =>
    Math.max(h.length, ...t.rows.map((r) => (r[i] ?? "").length))
  );
  const pad = (c: string, i: number) => i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]);
  const line = (cells: string[]) => `| ${cells.map(pad).join(" | ")} |`;
  const rule = widths.map((w, i) => i === 0 ? "-".repeat(w + 2) : "-".repeat(w + 1) + ":");
  const lines = [line(t.head), `|${rule.join("|")}|`, ...t.rows.map(line)];
  return [`### ${t.title}`, "", ...lines].join("\n");
}

/** A suite's tables and notes as Markdown. */
export function renderSuite(report: SuiteReport): string {
  const parts = report.tables.map(renderTable);
  const notes = report.notes.filter((n) => n !== "");
  if (notes.length) parts.push(notes.map((n) => `- ${n}`).join("\n"));
  return "\n" + parts.join("\n\n");
}

/** The items in order, but each TLS figure right after its plaintext twin (same case and peer). */
export function besideTwins<T extends { suite: string; label: string }>(
  items: readonly T[],
  peer: (item: T) => string,
) {
  const key = (item: T) =>
    [item.suite.replace(/-tls$/, ""), item.label.replace(/ \(TLS\)$/, ""), peer(item)].join("\n");
  return [...Map.groupBy(items, key).values()].flat();
}

/**
 * The summary table: every ratio, with pgpipe's speed target next to it where one exists, then
 * the absolute measures with their limits; TLS rows beside their plaintext twins.
 */
export function summaryTable(ratios: readonly Ratio[], measures: readonly Measure[] = []): Table {
  const rows = besideTwins(ratios, (r) => r.peer).map((r) => {
    const target = targetFor(r.suite, r.label, r.peer);
    const [goal, verdict] = target
      ? [`>= ${target.min}x`, r.value >= target.min ? "met" : "not met"]
      : ["", ""];
    return [`${r.suite}: ${r.label}`, r.peer, r.cannot ?? formatRatio(r.value), goal, verdict];
  });
  for (const m of besideTwins(measures, (m) => m.against)) {
    const limit = limitFor(m.suite, m.label);
    const [goal, verdict] = limit
      ? [`<= ${limit.max} ${limit.unit}`, m.value <= limit.max ? "met" : "not met"]
      : ["", ""];
    rows.push([`${m.suite}: ${m.label}`, m.against, `${fmt(m.value, 1)} ${m.unit}`, goal, verdict]);
  }
  const head = "case | peer | pgpipe speed-up | target | vs target";
  return table("Summary: how many times faster pgpipe is than each peer", head, rows);
}

/** Formats a number with a fixed count of decimals and thousands separators ("-" if none). */
export function fmt(value: number, decimals = 0): string {
  if (!Number.isFinite(value)) return "-";
  return value.toLocaleString("en-US", {
    minimumFractionDigits: decimals,
    maximumFractionDigits: decimals,
  });
}

/** "2.31x", or "-" when there is nothing to compare. */
export const formatRatio = (value: number) => Number.isFinite(value) ? `${value.toFixed(2)}x` : "-";

/** Bytes as MiB with one decimal ("-" for none). */
export const mib = (bytes: number | null) => bytes === null ? "-" : fmt(bytes / 1048576, 1);

/** `part` as a percentage of `whole`, one decimal. */
export const pct = (part: number, whole = 1) => `${fmt((100 * part) / whole, 1)}%`;
