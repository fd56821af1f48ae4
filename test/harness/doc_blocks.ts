// The code blocks of README.md and docs/*.md as the docs test runs them. A ```ts or ```js block
// is a snippet; words after the language on its opening fence say how it runs:
//
//   setup       the guide's setup block: run on its own first, and put before every later
//               block of the same file (its imports, its `sql`, its tables)
//   alone       runs without the setup block (it makes its own client)
//   check-only  type-checked, never run (a provider's URL, a Deploy handler, a file it needs)
//   server-only run against the test server, not on PGlite (the feature needs a server)
//
// Each runnable block becomes a module file whose jsr:@pgpipe/pgpipe imports point at this
// checkout (the main entry through harness/postgres.ts, which maps the test URL to PGlite on
// `--pg=pglite`).

/** Markdown files whose blocks are not run here, and why. */
export const NOT_RUN: Readonly<Record<string, string>> = {
  "docs/ARCHITECTURE.md": "the map of the code: it has no runnable blocks",
  "docs/typegen.md": "typed SQL: its own test runs its blocks",
};

/** The flags a block's opening fence may carry after its language. */
export type Flag = "setup" | "alone" | "check-only" | "server-only";
const FLAGS: ReadonlySet<string> = new Set(["setup", "alone", "check-only", "server-only"]);

/** One ts/js block of a markdown file. */
export interface Block {
  /** The markdown file, relative to the repository root. */
  file: string;
  /** The line of the opening fence (1-based). */
  line: number;
  /** The line of the block's first line of code. */
  codeLine: number;
  lang: "ts" | "js";
  flags: ReadonlySet<Flag>;
  code: string;
}

const ROOT = new URL("../../", import.meta.url);

/** The repository root as a file URL. */
export function rootUrl(): URL {
  return ROOT;
}

/** README.md and docs/*.md, but the files in NOT_RUN, relative to the root, sorted. */
export function markdownFiles(): string[] {
  const docs = [...Deno.readDirSync(new URL("docs/", ROOT))]
    .filter((e) => e.isFile && e.name.endsWith(".md"))
    .map((e) => `docs/${e.name}`);
  return ["README.md", ...docs.sort()].filter((f) => !(f in NOT_RUN));
}

/** Every ts/js block of `text` (the markdown of `file`); throws on an unknown flag. */
export function extractBlocks(file: string, text: string): Block[] {
  const lines = text.split("\n");
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*(\S*)(.*)$/.exec(lines[i]);
    if (!open) continue;
    const [, indent, fence, info, rest] = open;
    let end = i + 1;
    while (end < lines.length && !lines[end].trimStart().startsWith(fence)) end++;
    if (end === lines.length) {
      throw new Error(`${file}:${i + 1}: a code fence that is never closed`);
    }
    const lang = info.toLowerCase();
    const body = lines.slice(i + 1, end).map((l) =>
      l.startsWith(indent) ? l.slice(indent.length) : l
    );
    if (["ts", "typescript", "js", "javascript"].includes(lang)) {
      const words = rest.trim().split(/\s+/).filter(Boolean);
      for (const w of words) {
        if (!FLAGS.has(w)) throw new Error(`${file}:${i + 1}: unknown code block flag "${w}"`);
      }
      blocks.push({
        file,
        line: i + 1,
        codeLine: i + 2,
        lang: lang.startsWith("t") ? "ts" : "js",
        flags: new Set(words as Flag[]),
        code: body.join("\n"),
      });
    }
    i = end;
  }
  return blocks;
}

/** Where each import of the published package points in this checkout. */
function rewriteImports(code: string, harness: boolean): string {
  const at = (path: string) => new URL(path, ROOT).href;
  const entries: Record<string, string> = {
    "": harness ? at("test/harness/postgres.ts") : at("mod.ts"),
    "/pglite": at("pglite.ts"),
    "/kysely": at("kysely.ts"),
    "/drizzle": at("drizzle.ts"),
    "/drizzle/migrator": at("drizzle_migrator.ts"),
  };
  return code.replace(
    /(["'])(?:jsr:)?@pgpipe\/pgpipe(\/[\w/]+)?\1/g,
    (_whole, quote: string, sub: string | undefined) => {
      const target = entries[sub ?? ""];
      if (target === undefined) throw new Error(`no entry @pgpipe/pgpipe${sub}`);
      return `${quote}${target}${quote}`;
    },
  );
}

/** One module to check or run: the setup block (if any) and the block, imports rewritten. */
export interface Snippet {
  block: Block;
  /** The source of the module. */
  source: string;
  /** How many lines precede the block's own code in `source`. */
  offset: number;
  /** Whether it runs (else it is only type-checked). */
  runs: boolean;
}

/** The snippets of one markdown file, in order. */
export function snippets(file: string, text: string): Snippet[] {
  const blocks = extractBlocks(file, text);
  const setups = blocks.filter((b) => b.flags.has("setup"));
  if (setups.length > 1) {
    throw new Error(`${file}: ${setups.length} setup blocks (lines ${setups.map((b) => b.line)})`);
  }
  const setup = setups[0];
  return blocks.map((block) => {
    const withSetup = setup !== undefined && block !== setup && !block.flags.has("alone") &&
      block.line > setup.line;
    const head = `// ${block.file}:${block.line}\n` + (withSetup ? `${setup.code}\n` : "");
    const source = rewriteImports(head + block.code + "\n", true) + "export {};\n";
    return {
      block,
      source,
      offset: head.split("\n").length - 1,
      runs: !block.flags.has("check-only"),
    };
  });
}

/** A temporary file name for a snippet that says where it comes from. */
export function snippetName(s: Snippet): string {
  return `${s.block.file.replace(/[/.]/g, "_")}_L${s.block.line}.${s.block.lang}`;
}

/** A path a markdown file names, and the heading anchor of a link to a markdown file. */
export interface NamedPath {
  path: string;
  line: number;
  anchor?: string;
}

/** The anchors GitHub gives a markdown text's headings (lower case, punctuation dropped). */
export function headingAnchors(text: string): Set<string> {
  const anchors = new Set<string>();
  let fenced = false;
  for (const line of text.split("\n")) {
    if (/^\s*(`{3,}|~{3,})/.test(line)) fenced = !fenced;
    const m = fenced ? null : /^#{1,6}\s+(.*)$/.exec(line);
    if (!m) continue;
    const base = m[1].trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-");
    let anchor = base;
    for (let n = 1; anchors.has(anchor); n++) anchor = `${base}-${n}`;
    anchors.add(anchor);
  }
  return anchors;
}

/**
 * Paths of this repository a markdown text names: in backticks or as link targets, starting with
 * src/, test/, bench/, examples/ or docs/ (links relative to the file's folder, resolved).
 */
export function namedPaths(file: string, text: string): NamedPath[] {
  const found: NamedPath[] = [];
  const folder = file.includes("/") ? file.slice(0, file.lastIndexOf("/") + 1) : "";
  const prefix = /^(src|test|bench|examples|docs)\//;
  text.split("\n").forEach((lineText, i) => {
    for (const m of lineText.matchAll(/`([^`\s]+)`/g)) {
      const p = m[1].replace(/[),.:;]+$/, "");
      if (prefix.test(p) && !/[*<>{}$]/.test(p)) found.push({ path: p, line: i + 1 });
    }
    for (const m of lineText.matchAll(/\]\(([^)\s#]*)(#[^)]*)?\)/g)) {
      const target = m[1] || file.slice(folder.length); // "#anchor": this file
      if (/^[a-z]+:/i.test(target)) continue; // https:, mailto:
      const resolved = new URL(target, new URL(folder, "file:///r/")).pathname.slice(3);
      found.push({ path: resolved, line: i + 1, anchor: m[2]?.slice(1) });
    }
  });
  return found;
}
