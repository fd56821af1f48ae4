// The documentation as a newcomer pastes it: every ts/js block of README.md and docs/*.md (but
// the files harness/doc_blocks.ts's NOT_RUN names) type-checks, in one `deno check` over them
// all, and every block not marked check-only runs, after its guide's setup block, against the
// test database (in a schema of its own, through DATABASE_URL) and, on `--pg=pglite`, on PGlite.
// A failure names the markdown file and line. And every file or folder the documentation names
// (src/..., test/..., bench/..., examples/..., docs/...) exists.
import assert from "node:assert/strict";
import postgres from "./harness/postgres.ts";
import { databaseUrl } from "./harness/env.ts";
import { onPglite, recordSkip } from "./harness/pglite_mode.ts";
import {
  headingAnchors,
  markdownFiles,
  namedPaths,
  rootUrl,
  type Snippet,
  snippetName,
  snippets,
} from "./harness/doc_blocks.ts";

const root = rootUrl();
const files = markdownFiles();
const texts = new Map(files.map((f) => [f, Deno.readTextFileSync(new URL(f, root))]));
const all = files.flatMap((f) => snippets(f, texts.get(f)!));
const where = (s: Snippet) => `${s.block.file}:${s.block.line}`;

Deno.test("docs: every file, folder and heading README.md and docs/*.md name exists", () => {
  const missing: string[] = [];
  for (const [file, text] of texts) {
    for (const { path, line, anchor } of namedPaths(file, text)) {
      try {
        Deno.statSync(new URL(path, root));
      } catch {
        missing.push(`${file}:${line}: ${path}`);
        continue;
      }
      if (anchor && path.endsWith(".md")) {
        const target = texts.get(path) ?? Deno.readTextFileSync(new URL(path, root));
        if (!headingAnchors(target).has(anchor)) missing.push(`${file}:${line}: ${path}#${anchor}`);
      }
    }
  }
  assert.deepEqual(missing, [], `named but missing:\n${missing.join("\n")}`);
});

Deno.test("docs: the README's latency chart is drawn from bench/RESULTS.md as it is now", async () => {
  // A full bench run rewrites RESULTS.md; the chart the README shows must be redrawn with it.
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL("docs/chart.ts", root).pathname, "--check"],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const said = new TextDecoder().decode(out.stderr) + new TextDecoder().decode(out.stdout);
  assert.equal(out.code, 0, said);
});

Deno.test("docs: README.md stays a landing page, its first runnable block near the top", () => {
  const readme = texts.get("README.md")!;
  const lines = readme.split("\n").length;
  const words = readme.split(/\s+/).filter(Boolean).length;
  assert.ok(lines <= 600, `README.md has ${lines} lines (at most 600: the rest goes to docs/)`);
  assert.ok(words <= 8000, `README.md has ${words} words (at most 8,000)`);
  const first = all.find((s) => s.block.file === "README.md" && s.runs);
  assert.ok(
    first && first.block.line <= 40,
    `README.md's first runnable block is at ${first?.block.line}`,
  );
});

Deno.test("docs: every guide has at most one setup block, and it comes first", () => {
  for (const file of files) {
    const blocks = all.filter((s) => s.block.file === file).map((s) => s.block);
    const setup = blocks.findIndex((b) => b.flags.has("setup"));
    if (setup > 0) {
      const before = blocks.slice(0, setup).filter((b) => !b.flags.has("alone"));
      assert.deepEqual(before.map((b) => b.line), [], `${file}: blocks before its setup block`);
    }
  }
});

Deno.test("docs: every ts/js block type-checks (one deno check over all of them)", async () => {
  const dir = await Deno.makeTempDir({ prefix: "pgpipe_docs_" });
  try {
    const byName = new Map<string, Snippet>();
    for (const s of all) {
      const name = snippetName(s);
      byName.set(name, s);
      await Deno.writeTextFile(`${dir}/${name}`, s.source);
    }
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "check",
        "--quiet",
        "--config",
        new URL("deno.json", root).pathname,
        ...[...byName.keys()].map((n) => `${dir}/${n}`),
      ],
      env: { NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    // deno check's output names the temporary files: say which block and line each one is.
    const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    const explained = text.replace(
      /(?:file:\/\/)?[^\s'"]*?pgpipe_docs_[^/\s]*\/([\w.-]+?\.[tj]s)(?::(\d+)(?::\d+)?)?/g,
      (whole, name: string, line?: string) => {
        const s = byName.get(name);
        if (!s) return whole;
        const at = line === undefined ? s.block.line : s.block.codeLine + Number(line) - 1 -
          s.offset;
        return Number(line) <= s.offset
          ? `${s.block.file}:${s.block.line} (its setup block, line ${line})`
          : `${s.block.file}:${at}`;
      },
    );
    assert.equal(out.code, 0, `deno check failed on the documentation's blocks:\n${explained}`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

const url = databaseUrl();
const quiet = { onnotice: () => {} };

/** The URL with search_path set to `schema`, so the block's tables are created there. */
function inSchema(base: string, schema: string): string {
  return `${base}${base.includes("?") ? "&" : "?"}search_path=${schema}`;
}

async function admin(fn: (sql: ReturnType<typeof postgres>) => Promise<unknown>) {
  await using sql = postgres(url, quiet);
  await fn(sql);
}

/** Runs one block (a module) with DATABASE_URL set to a fresh schema; what it logs is kept. */
async function runSnippet(s: Snippet, schema: string): Promise<void> {
  const file = await Deno.makeTempFile({ prefix: "pgpipe_doc_", suffix: `.${s.block.lang}` });
  await admin(async (sql) => {
    await sql`drop schema if exists ${sql(schema)} cascade`;
    await sql`create schema ${sql(schema)}`;
  });
  const saved = Deno.env.get("DATABASE_URL");
  const lines: string[] = [];
  const log = console.log;
  console.log = (...args: unknown[]) =>
    void lines.push(args.map((a) => typeof a === "string" ? a : Deno.inspect(a)).join(" "));
  try {
    await Deno.writeTextFile(file, s.source);
    Deno.env.set("DATABASE_URL", inSchema(url, schema));
    await import(`file://${file}`);
  } catch (e) {
    const printed = lines.length ? `\nit printed:\n${lines.join("\n")}` : "";
    throw new Error(`${where(s)}: the block failed: ${(e as Error)?.stack ?? e}${printed}`);
  } finally {
    console.log = log;
    // PGPIPE_DOCS_LOG=1 shows what each block printed, to compare with the comments beside it.
    if (Deno.env.get("PGPIPE_DOCS_LOG")) console.error(`${where(s)}:\n${lines.join("\n")}`);
    if (saved === undefined) Deno.env.delete("DATABASE_URL");
    else Deno.env.set("DATABASE_URL", saved);
    await Deno.remove(file);
    await admin((sql) => sql`drop schema if exists ${sql(schema)} cascade`);
  }
}

for (const file of files) {
  const runnable = all.filter((s) => s.block.file === file && s.runs);
  if (runnable.length === 0) continue;
  Deno.test(`docs: ${file}: every block runs${onPglite ? " (PGlite)" : ""}`, async (t) => {
    for (const s of runnable) {
      const ignore = onPglite && s.block.flags.has("server-only");
      if (ignore) recordSkip(`${where(s)}`, "a block marked server-only");
      await t.step({
        name: where(s),
        ignore,
        fn: () => runSnippet(s, `pgpipe_docs_${s.block.line}`),
      });
    }
  });
}

Deno.test("docs: the count of blocks that run and that are only type-checked", () => {
  const runs = all.filter((s) => s.runs).length;
  const checked = all.length - runs;
  // Blocks that cannot run alone are few: each is marked check-only in its guide.
  assert.ok(checked <= runs / 4, `${checked} check-only blocks against ${runs} that run`);
  console.log(`docs: ${runs} blocks run, ${checked} are type-checked only`);
});
