// bench/RESULTS.md: the tables of a run together with what they were measured on, the date and
// the exact command, so a reader can judge the numbers and reproduce them. Files are named by
// their path in the repository and peers by their specifier: never a path of the machine.
import type { Machine } from "./machine.ts";
import { inRepo } from "./probe.ts";
import { renderSuite, renderTable, type SuiteReport, type Table } from "./report.ts";
import { targetTexts } from "./targets.ts";

/** One suite's run (`bulk-tls` for a TLS twin), its title and its report. */
export type Section = { run: string; title: string; report: SuiteReport };

/**
 * Everything RESULTS.md is written from: the command line, each driver and what was loaded for it,
 * and whether bench/run.ts started its own server (else DATABASE_URL).
 */
export interface Run {
  command: string;
  quick: boolean;
  machine: Machine;
  sections: Section[];
  failures: string[];
  /** One line for each peer that did not load (bench/peers/drivers.ts says why). */
  skipped: string[];
  drivers: { name: string; source: string }[];
  ownServer: boolean;
  summary: Table;
  startedAt: Date;
  seconds: number;
}

export function resultsMarkdown(run: Run): string {
  const { machine, sections, drivers } = run;
  const lines = [
    "# pgpipe benchmark results",
    "",
    `Written by \`${run.command}\` (bench/run.ts) on ${run.startedAt.toISOString()}, ` +
    `in ${Math.round(run.seconds)} s. Regenerate with the same command.`,
    "",
    "## Machine",
    "",
    `- CPU: ${machine.cpu}, ${machine.cores} cores; memory ${machine.memory}`,
    `- OS: ${machine.os}`,
    `- Deno ${machine.deno} (V8 ${machine.v8})`,
    `- Server: ${machine.server}`,
    run.ownServer
      ? "- Setup: a throwaway cluster started by bench/run.ts (fsync=off), on this machine, reached over TCP 127.0.0.1: without TLS (sslmode=disable), and with it (sslmode=require, the server's certificate from a private CA) in each suite's -tls twin"
      : "- Setup: DATABASE_URL, reached without TLS (sslmode=disable) and, in the -tls twins, with sslmode=require",
    `- pgpipe: ${machine.pgpipe}`,
    ...drivers.slice(1).map((d) => `- ${d.name}: \`${d.source}\`, default options except max`),
    ...(run.quick ? ["- --quick: few iterations, smoke run only"] : []),
    ...run.skipped.map((s) => `- ${s}`),
    "- The machine may be shared with other work: expect noise of tens of percent on the small cases, and compare ratios within one run rather than absolute numbers across runs.",
    "- postgres.js keeps at most `max_pipeline` (default 100) queries in flight per connection and queues the rest; pgpipe's default `max_pipeline` is 1000.",
    ...drivers.filter((d) => d.name === "deno-postgres").map(() =>
      `- deno-postgres sends a client's queries one at a time (no pipelining) and has no COPY: those cells say "cannot", and its concurrent-query benches run fewer iterations (at least 3); it returns float8 as a string (the typed rows). It writes each message of a query with parameters separately and leaves Nagle's algorithm on, so on Linux such a query waits about 40 ms for the delayed ACK (queries without parameters do not: see its serial latency beside its ping-pong \`select 1\`); that is what its users get, so it is measured as is.`
    ),
    "",
    "## Summary",
    "",
    "Ratios are how many times faster pgpipe is (above 1x pgpipe wins). pgpipe's speed targets are shown next to them, not enforced:",
    ...targetTexts().map((t) => `- ${t}`),
    "",
    renderTable(run.summary),
    "",
  ];
  if (run.failures.length) {
    lines.push("## Failures", "", ...run.failures.map((f) => `- ${inRepo(f)}`), "");
  }
  for (const { run, title, report } of sections) {
    const alone = `Alone: \`deno task bench --only=${run}\`.`;
    lines.push(`## ${title}`, "", alone, renderSuite(report), "");
  }
  return lines.join("\n");
}
