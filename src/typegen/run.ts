/**
 * One typegen run over a list of files: scan them, describe every query at once (the describer
 * pipelines them), then write each file's annotations, or with `check` only say which differ.
 * A query that fails to describe is reported at the line its error points to; the run goes on.
 */
import type { Describer, QueryTypes } from "./model.ts";
import { applyEdits, type Edit, editsFor, wantedTypeArgs } from "./annotate.ts";
import { sourceFiles } from "./files.ts";
import { layOut } from "./format.ts";
import { parseSource, type SourceLoader } from "./recognise.ts";
import { type ScannedFile, type ScannedQuery, scanSource, type SkippedQuery } from "./scan.ts";

/** What a run is given. */
export interface RunOptions {
  /** Files, folders and globs. */
  files: readonly string[];
  /** Write nothing; report what differs. */
  check: boolean;
  describer: Describer;
  /** Where relative arguments start (default: the current folder). */
  cwd?: string;
  /** Where lines of the report go (default: the console). */
  print?: (line: string) => void;
}

/** What a run found and did. */
export interface RunReport {
  files: number;
  queries: number;
  /** Files written (none with `check`). */
  written: string[];
  /** `file:line:column` of each query whose annotation differs (with `check`: left so). */
  differing: string[];
  /** How many queries failed to describe. */
  failed: number;
  skipped: SkippedQuery[];
}

/** A 1-based line and column of a source offset. */
function lineColumn(text: string, offset: number): { line: number; column: number } {
  let line = 1;
  let start = 0;
  for (let i = text.indexOf("\n"); i !== -1 && i < offset; i = text.indexOf("\n", i + 1)) {
    line++;
    start = i + 1;
  }
  return { line, column: offset - start + 1 };
}

/** The UTF-16 index of a 1-based position counted in characters (code points), as the server counts. */
function unitIndex(text: string, position: number): number {
  let index = 0;
  for (let n = 1; n < position && index < text.length; n++) {
    index += (text.codePointAt(index) ?? 0) > 0xffff ? 2 : 1;
  }
  return Math.min(index, text.length - 1);
}

/** The lines that report a query that failed to describe, pointing at the source. */
export function failureReport(
  file: ScannedFile,
  query: ScannedQuery,
  failure: Extract<QueryTypes, { ok: false }>,
): string[] {
  let offset = query.sourceOffsets[0] ?? 0;
  // An error about a parameter ("could not determine data type of parameter $2") has no
  // position: it points at the `${` of that value instead.
  const param = failure.message.match(/\bparameter \$(\d+)\b/)?.[1];
  const at = param === undefined ? -1 : query.text.search(new RegExp(`\\$${param}(?!\\d)`));
  if (failure.position !== undefined && query.sourceOffsets.length > 0) {
    offset = query.sourceOffsets[unitIndex(query.text, failure.position)];
  } else if (at !== -1) {
    offset = query.sourceOffsets[at];
  }
  const { line, column } = lineColumn(file.text, offset);
  const code = failure.code === undefined ? "" : ` [${failure.code}]`;
  const sourceLine = file.text.split("\n")[line - 1]?.replace(/\r$/, "") ?? "";
  const gutter = `${line} | `;
  return [
    `${file.file}:${line}:${column}: error: ${failure.message}${code}`,
    `  ${gutter}${sourceLine}`,
    `  ${" ".repeat(gutter.length)}${sourceLine.slice(0, column - 1).replace(/[^\t]/g, " ")}^`,
  ];
}

/** Whether a file is JavaScript, where no type can be written. */
function isJavaScript(file: string): boolean {
  return /\.[cm]?jsx?$/.test(file);
}

/**
 * Reads and parses the files the scanner follows imports to, each once per run: a module that
 * many scanned files import (the one exporting the client) is not read and parsed again for each.
 */
function loaderOnce(): SourceLoader {
  const parsed = new Map<string, ReturnType<SourceLoader>>();
  return (path) => {
    if (parsed.has(path)) return parsed.get(path);
    let source: ReturnType<SourceLoader>;
    try {
      source = parseSource(path, Deno.readTextFileSync(path));
    } catch {
      source = undefined;
    }
    parsed.set(path, source);
    return source;
  };
}

/** How many files are laid out and written at once (each may run `deno fmt` twice). */
const WRITERS = 8;

/** Runs `fn` over `items`, at most `limit` at a time; rejects with the first failure. */
async function inParallel<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>) {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++]);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** Runs typegen over the files; see {@link RunOptions}. */
export async function runTypegen(options: RunOptions): Promise<RunReport> {
  const print = options.print ?? ((line: string) => console.log(line));
  const paths = sourceFiles(options.files, options.cwd);
  const load = loaderOnce();
  const scanned = paths.map(({ path, display }) =>
    scanSource(display, path, Deno.readTextFileSync(path), load)
  );
  const all = scanned.flatMap((f) => f.queries);
  const described = all.length === 0
    ? []
    : await options.describer.describe(all.map((q) => q.text));
  const report: RunReport = {
    files: paths.length,
    queries: all.length,
    written: [],
    differing: [],
    failed: 0,
    skipped: scanned.flatMap((f) => f.skipped),
  };
  let next = 0;
  // The files to write: laid out (deno fmt, a process each) a few at a time once all are known.
  const writes: { path: string; file: ScannedFile; after: string; edits: Edit[] }[] = [];
  for (const [i, file] of scanned.entries()) {
    const edits: Edit[] = [];
    const claimed = new Set(file.queries.map((q) => q.sites[0].typeArgsStart));
    for (const query of file.queries) {
      const types = described[next++];
      if (!types.ok) {
        report.failed++;
        failureReport(file, query, types).forEach((l) => print(l));
        continue;
      }
      // JavaScript has no type arguments: its queries are checked against the schema only.
      if (isJavaScript(file.file)) continue;
      const wanted = wantedTypeArgs(query, types);
      const mine = editsFor(query, wanted, claimed);
      if (mine.length === 0) continue;
      edits.push(...mine);
      const where = `${file.file}:${query.line}:${query.column}`;
      report.differing.push(where);
      if (options.check) print(`${where}: the annotation differs: sql<${wanted[0]}>`);
    }
    if (options.check || edits.length === 0) continue;
    writes.push({ path: paths[i].path, file, after: applyEdits(file.text, edits), edits });
  }
  await inParallel(writes, WRITERS, async ({ path, file, after }) => {
    await Deno.writeTextFile(path, await layOut(path, file.text, after));
  });
  report.written.push(...writes.map((w) => w.file.file));
  for (const w of writes) print(`${w.file.file}: ${w.edits.length} type arguments written`);
  for (const s of report.skipped) {
    print(`${s.file}:${s.line}:${s.column}: left as it is: ${s.reason}`);
  }
  const verb = options.check ? "differ" : "written";
  print(
    `typegen: ${report.queries} queries in ${report.files} files; ` +
      `${options.check ? report.differing.length : report.written.length} ${
        options.check ? "annotations" : "files"
      } ${verb}, ${report.failed} failed to describe, ${report.skipped.length} left as they are`,
  );
  return report;
}
