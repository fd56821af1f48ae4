/**
 * The shape of the code, checked against the one statement of it: docs/ARCHITECTURE.md's table of
 * folders (who may import whom, which npm packages each may name). No import circles between
 * files or between folders; each folder and root entry imports only what its row allows, type-only
 * imports included (a circle of types still means two files cannot be understood apart); each
 * entry's graph names exactly its row's npm packages; and every path the document names exists.
 * Each rule is a function of a table and an import graph, shown failing on a graph made to break
 * it. No server needed.
 */
import assert from "node:assert/strict";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const DOC_PATH = "docs/ARCHITECTURE.md";
const DOC = Deno.readTextFileSync(join(ROOT, DOC_PATH));

// ---------------------------------------------------------------------------------------------
// The table

/**
 * One row of the table. `unit` is a folder (`src/copy`) or a file (`mod.ts`, `src/errors.ts`);
 * `imports` and `typesOnly` are units too.
 */
interface Row {
  unit: string;
  /** A root `.ts` file: an entry point of the package. */
  entry: boolean;
  /** A leaf every unit may import (`src/errors.ts`, `src/builtins.ts`). */
  shared: boolean;
  imports: string[];
  /** Units this one may import only with `import type`. */
  typesOnly: string[];
  /** npm packages its files may import. */
  npm: string[];
}

type Table = Map<string, Row>;

/** A unit named in a cell: `protocol`, `connection/transport`, `` `src/kysely/` ``, `mod.ts`. */
function unitName(name: string): string {
  const bare = name.replaceAll("`", "").trim().replace(/\/$/, "");
  return bare.startsWith("src/") || /^[\w.]+\.ts$/.test(bare) ? bare : `src/${bare}`;
}

function names(cell: string): string[] {
  return cell.split(",").map((n) => n.trim()).filter((n) => n !== "");
}

/**
 * Reads the table whose header has a `may import` column. Cells: `nothing`, a list of units,
 * `every folder above` (each `src/` folder in an earlier row), and `; types only: ...`.
 */
function parseTable(markdown: string): Table {
  const lines = markdown.split("\n");
  const head = lines.findIndex((l) => l.startsWith("|") && l.includes("may import"));
  assert.ok(head >= 0, `${DOC_PATH} has no table with a "may import" column`);
  const columns = lines[head].split("|").slice(1, -1).map((c) => c.trim());
  const at = (name: string) => {
    const i = columns.indexOf(name);
    assert.ok(i >= 0, `the layout table has no "${name}" column`);
    return i;
  };
  const [unitAt, ownsAt, importsAt, npmAt] = [
    at("folder"),
    at("owns"),
    at("may import"),
    at("npm"),
  ];
  const table: Table = new Map();
  for (const line of lines.slice(head + 2)) {
    if (!line.startsWith("|")) break;
    const cells = line.split("|").slice(1, -1).map((c) => c.trim());
    const unit = unitName(cells[unitAt]);
    const [plain, typed = ""] = cells[importsAt].split(/;\s*types only:/);
    let imports: string[];
    if (plain.trim() === "nothing") imports = [];
    else if (plain.trim() === "every folder above") {
      imports = [...table.values()].filter((r) => !r.entry && !r.unit.endsWith(".ts"))
        .map((r) => r.unit);
    } else imports = names(plain).map(unitName);
    table.set(unit, {
      unit,
      entry: !unit.startsWith("src/") && unit.endsWith(".ts"),
      shared: cells[ownsAt].includes("a leaf every folder may import"),
      imports,
      typesOnly: names(typed).map(unitName),
      npm: names(cells[npmAt]).map((n) => n.replaceAll("`", "")),
    });
  }
  return table;
}

/** Names in cells that are no row of the table (a misspelt folder would allow nothing). */
function unknownNames(table: Table): string[] {
  return [...table.values()].flatMap((r) =>
    [...r.imports, ...r.typesOnly].filter((u) => !table.has(u)).map((u) => `${r.unit}: ${u}`)
  );
}

/** The unit a file belongs to: itself if it has a row, else the longest folder containing it. */
function unitOf(table: Table, file: string): string | undefined {
  if (table.has(file)) return file;
  let best: string | undefined;
  for (const unit of table.keys()) {
    if (file.startsWith(unit + "/") && (best === undefined || unit.length > best.length)) {
      best = unit;
    }
  }
  return best;
}

// ---------------------------------------------------------------------------------------------
// The import graph

/** One import of a file: the repository path it names, and whether it is `import type`. */
interface Edge {
  to: string;
  typeOnly: boolean;
}

/** Files as repository paths, each with its imports of the repository and of npm. */
interface Graph {
  edges: Map<string, Edge[]>;
  npm: Map<string, string[]>;
}

const RELATIVE =
  /(?:^|\n)\s*(import|export)\s+(type\s+)?(?:[^;"']*?\s+from\s+)?["'](\.{1,2}\/[^"']+)["']|import\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)/g;

/** A static or dynamic import of anything but a relative path or a `node:` built-in. */
const FOREIGN =
  /(?:^|\n)\s*(?:import|export)\s+(?:type\s+)?(?:[^;"']*?\s+from\s+)?["'](?!\.{1,2}\/|node:)([^"']+)["']|import\(\s*["'](?!\.{1,2}\/|node:)([^"']+)["']\s*\)/g;

/** The file's relative imports, as repository paths. */
function importsOf(file: string, text: string): Edge[] {
  const out = new Map<string, Edge>();
  for (const m of text.matchAll(RELATIVE)) {
    const to = relative(ROOT, resolve(dirname(join(ROOT, file)), m[3] ?? m[4]));
    const typeOnly = m[2] !== undefined;
    // A file imported for its values and for its types is imported for its values.
    out.set(to, { to, typeOnly: typeOnly && (out.get(to)?.typeOnly ?? true) });
  }
  return [...out.values()];
}

/** Its comments removed: JSDoc examples import from JSR. */
function code(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
}

/** The npm packages a file imports (`npm:name@version/path` gives `name`); other specifiers whole. */
function npmOf(text: string): string[] {
  const specifiers = [...code(text).matchAll(FOREIGN)].map((m) => m[1] ?? m[2]);
  return specifiers.map((s) => s.match(/^npm:(@?[^@/]+(?:\/[^@/]+)?)/)?.[1] ?? s);
}

/** Every `.ts` file under `dir` (a repository path). */
function sources(dir: string): string[] {
  const out: string[] = [];
  for (const entry of Deno.readDirSync(join(ROOT, dir))) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory) out.push(...sources(path));
    else if (entry.name.endsWith(".ts")) out.push(path);
  }
  return out.sort();
}

/** The graph of `files` and everything they import, read from the repository. */
function readGraph(files: string[]): Graph {
  const graph: Graph = { edges: new Map(), npm: new Map() };
  const queue = [...files];
  while (queue.length > 0) {
    const file = queue.pop()!;
    if (graph.edges.has(file)) continue;
    let text: string;
    try {
      text = Deno.readTextFileSync(join(ROOT, file));
    } catch {
      continue; // reported by missingImports
    }
    const edges = importsOf(file, text);
    graph.edges.set(file, edges);
    graph.npm.set(file, npmOf(text));
    queue.push(...edges.map((e) => e.to));
  }
  return graph;
}

/** Files of the repository's root: the package's entries and anything else left there. */
function rootFiles(): string[] {
  return [...Deno.readDirSync(ROOT)].filter((e) => e.isFile && e.name.endsWith(".ts"))
    .map((e) => e.name).sort();
}

// ---------------------------------------------------------------------------------------------
// The rules: each takes a table and a graph and lists what breaks it

/** Imports of files that do not exist. */
function missingImports(graph: Graph): string[] {
  return [...graph.edges].flatMap(([f, edges]) =>
    edges.filter((e) => !graph.edges.has(e.to)).map((e) => `${f} -> ${e.to}`)
  );
}

/** Files of `src/` and root entries that no row of the table places. */
function unplaced(table: Table, graph: Graph): string[] {
  return [...graph.edges.keys()].filter((f) => unitOf(table, f) === undefined);
}

/** Imports from one unit into another its row does not allow. */
function forbiddenImports(table: Table, graph: Graph): string[] {
  const wrong: string[] = [];
  for (const [file, edges] of graph.edges) {
    const from = unitOf(table, file);
    if (from === undefined) continue;
    const row = table.get(from)!;
    for (const { to: dep, typeOnly } of edges) {
      const to = unitOf(table, dep);
      if (to === undefined || to === from || table.get(to)!.shared) continue;
      if (row.imports.includes(to) || (typeOnly && row.typesOnly.includes(to))) continue;
      const kind = row.typesOnly.includes(to) ? " (only types may be imported)" : "";
      wrong.push(`${file} (${from}) -> ${dep} (${to})${kind}`);
    }
  }
  return wrong.sort();
}

/** The circles of a graph: its strongly connected components of more than one node, or a loop. */
function circles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

/** Circles between files. */
function fileCircles(graph: Graph): string[] {
  const plain = new Map([...graph.edges].map(([f, e]) => [f, e.map((x) => x.to)]));
  return circles(plain).map((c) => c.join(" <-> "));
}

/** Circles between units: a folder imports another that, through any file, imports it back. */
function unitCircles(table: Table, graph: Graph): string[] {
  const units = new Map<string, Set<string>>();
  for (const [file, edges] of graph.edges) {
    const from = unitOf(table, file);
    if (from === undefined) continue;
    const out = units.get(from) ?? units.set(from, new Set()).get(from)!;
    for (const e of edges) {
      const to = unitOf(table, e.to);
      if (to !== undefined && to !== from) out.add(to);
    }
  }
  return circles(new Map([...units].map(([u, s]) => [u, [...s]]))).map((c) => c.join(" <-> "));
}

/** Files importing an npm package (or any other foreign specifier) their row does not name. */
function foreignImports(table: Table, graph: Graph): string[] {
  return [...graph.npm].flatMap(([file, packages]) => {
    const unit = unitOf(table, file);
    const allowed = unit === undefined ? [] : table.get(unit)!.npm;
    return packages.filter((p) => !allowed.includes(p)).map((p) => `${file}: ${p}`);
  });
}

/** Every file `entry` reaches. */
function reached(graph: Graph, entry: string): string[] {
  const seen = new Set([entry]);
  const queue = [entry];
  while (queue.length > 0) {
    for (const e of graph.edges.get(queue.pop()!) ?? []) {
      if (seen.has(e.to)) continue;
      seen.add(e.to);
      queue.push(e.to);
    }
  }
  return [...seen].sort();
}

/**
 * Entries whose whole graph names other npm packages than their row: an entry's dependencies
 * stay behind it (mod.ts names none, kysely.ts only `kysely`).
 */
function entryPackages(table: Table, graph: Graph): string[] {
  return [...table.values()].filter((r) => r.entry).flatMap((r) => {
    const names = [...new Set(reached(graph, r.unit).flatMap((f) => graph.npm.get(f) ?? []))];
    const got = names.sort().join(", ") || "none";
    const want = [...r.npm].sort().join(", ") || "none";
    return got === want ? [] : [`${r.unit} reaches ${got}, its row says ${want}`];
  });
}

/** Root `.ts` files with no entry row, and package exports that point at no entry row. */
function entriesWithoutRows(table: Table, roots: string[], exported: string[]): string[] {
  const entries = new Set([...table.values()].filter((r) => r.entry).map((r) => r.unit));
  return [
    ...roots.filter((f) => !entries.has(f)).map((f) => `${f} has no row`),
    ...exported.filter((f) => !entries.has(f)).map((f) => `export ${f} has no row`),
  ];
}

// ---------------------------------------------------------------------------------------------
// The paths the document names

/** Top-level folders whose paths the document names from the root. */
const ROOTS = ["src", "test", "bench", "docs", "examples"];
/** Files the document names by their name alone. */
const BARE = /^[\w.-]+\.(?:ts|md|json|svg|c|py)$/;

/**
 * The repository paths in the document's backticks, each with where to look for it: a path from
 * the root (`src/x/y.ts`, `bench/...`), one inside `src/` (`copy/query_copy.ts`), or a bare file
 * name (`statement.ts`), looked for in the folders its paragraph named before it, else anywhere.
 * Other backticked text (identifiers, `node:tls`, npm paths, `~/.pgpass`) is left alone.
 */
function namedPaths(markdown: string, srcFolders: Set<string>): { path: string; near: string[] }[] {
  const out: { path: string; near: string[] }[] = [];
  const code = markdown.replace(/```[\s\S]*?```/g, "");
  for (const paragraph of code.split(/\n\s*\n|\n(?=\s*- )/)) {
    const near: string[] = [];
    for (const m of paragraph.matchAll(/`([^`\s]+)`/g)) {
      const token = m[1].replace(/[.,:;)]+$/, "").replace(/'s$/, "");
      // `sql.json` is a method; `NAME` stands for any name.
      if (token.startsWith("sql.") || token.includes("NAME")) continue;
      const first = token.split("/")[0];
      let path: string | undefined;
      if (ROOTS.includes(first) && token.includes("/")) path = token;
      else if (srcFolders.has(first) && token.includes("/")) path = `src/${token}`;
      if (path !== undefined) {
        path = path.replace(/\/$/, "");
        out.push({ path, near: [] });
        const dir = path.includes(".") ? dirname(path) : path;
        if (!near.includes(dir)) near.unshift(dir);
      } else if (BARE.test(token)) out.push({ path: token, near: [...near] });
    }
  }
  return out;
}

/** Every file and folder of the repository, as paths from its root (hidden ones left out). */
function repositoryPaths(): Set<string> {
  const out = new Set<string>();
  const walk = (dir: string) => {
    for (const e of Deno.readDirSync(join(ROOT, dir))) {
      if (e.name.startsWith(".") || e.name === "node_modules") continue;
      const path = dir === "" ? e.name : `${dir}/${e.name}`;
      out.add(path);
      if (e.isDirectory) walk(path);
    }
  };
  walk("");
  return out;
}

/**
 * The paths the document names that do not exist where it says: a bare name must be in a folder
 * its paragraph named (or below it), or in one of that folder's parents (`open.ts` beside the
 * transport's folder); named before any folder, anywhere.
 */
function missingPaths(named: { path: string; near: string[] }[], exists: Set<string>): string[] {
  const all = [...exists];
  const ancestors = (dir: string): string[] =>
    dir === "." || dir === "" ? [""] : [dir, ...ancestors(dirname(dir))];
  const foundNear = (name: string, dir: string) =>
    all.some((p) => p.startsWith(`${dir}/`) && p.endsWith(`/${name}`)) ||
    ancestors(dir).some((a) => exists.has(a === "" ? name : `${a}/${name}`));
  return named.filter(({ path, near }) => {
    if (path.includes("/")) return !exists.has(path);
    if (near.length > 0) return !near.some((d) => foundNear(path, d));
    return !all.some((p) => p === path || p.endsWith(`/${path}`));
  }).map(({ path, near }) => near.length > 0 ? `${path} (in ${near.join(" or ")})` : path);
}

// ---------------------------------------------------------------------------------------------
// The repository against the document

const table = parseTable(DOC);
const roots = rootFiles();
const exported = Object.values(
  (JSON.parse(Deno.readTextFileSync(join(ROOT, "deno.json"))) as {
    exports: Record<string, string>;
  })
    .exports,
).map((p) => p.replace(/^\.\//, ""));
const graph = readGraph([...sources("src"), ...roots]);

Deno.test("layout: the table names only units it has rows for, and every row exists", () => {
  assert.deepEqual(unknownNames(table), []);
  const exists = repositoryPaths();
  assert.deepEqual([...table.keys()].filter((u) => !exists.has(u)), []);
  assert.ok(table.size >= 20 && table.get("src/client")!.imports.includes("src/config"));
});

Deno.test("layout: every import names a file that exists, and every file has a row", () => {
  assert.deepEqual(missingImports(graph), []);
  assert.deepEqual(unplaced(table, graph), []);
});

Deno.test("layout: each folder and entry imports only what its row in the table allows", () => {
  assert.deepEqual(forbiddenImports(table, graph), []);
});

Deno.test("layout: no import circles, between files or between folders", () => {
  assert.deepEqual(fileCircles(graph), []);
  assert.deepEqual(unitCircles(table, graph), []);
});

Deno.test("layout: npm packages only where the table names them; each entry's graph names exactly its row's", () => {
  assert.deepEqual(foreignImports(table, graph), []);
  assert.deepEqual(entryPackages(table, graph), []);
  // The test program names both postgres.js and Drizzle: a graph outside the table sees them.
  const program = readGraph(["test/orm_drizzle_test.ts"]);
  const names = reached(program, "test/orm_drizzle_test.ts").flatMap((f) =>
    program.npm.get(f) ?? []
  );
  assert.ok(names.includes("postgres") && names.includes("drizzle-orm"), names.join());
});

Deno.test("layout: every root .ts file and every package export has an entry row", () => {
  assert.deepEqual(entriesWithoutRows(table, roots, exported), []);
  // The files were found (a new entry adds to them, with its row).
  const known = ["drizzle.ts", "drizzle_migrator.ts", "kysely.ts", "mod.ts", "pglite.ts"];
  assert.deepEqual(known.filter((f) => !roots.includes(f) || !exported.includes(f)), []);
});

Deno.test("layout: every file and folder docs/ARCHITECTURE.md names exists", () => {
  const srcFolders = new Set(
    [...table.keys()].filter((u) => u.startsWith("src/")).map((u) => u.split("/")[1]),
  );
  const named = namedPaths(DOC, srcFolders);
  assert.ok(named.length > 100, `only ${named.length} paths found`);
  assert.deepEqual(missingPaths(named, repositoryPaths()), []);
});

// ---------------------------------------------------------------------------------------------
// Each rule can fail

/** A small table in the document's own syntax. */
const SAMPLE_TABLE = parseTable(`
| folder | owns | may import | npm |
| --- | --- | --- | --- |
| \`src/low/\` | the bottom | nothing | |
| \`src/mid/\` | above it | low | |
| \`src/desc/\` | describes | low; types only: mid | |
| \`src/top/\` | the rest | every folder above | |
| \`src/err.ts\` | errors; a leaf every folder may import | nothing | |
| \`src/orm/\` | an ORM's driver | top | \`orm\` |
| \`main.ts\` | the entry | every folder above | |
| \`orm.ts\` | the ORM's entry | \`src/orm/\` | \`orm\` |
`);

/** A graph from `file: imports` lines; `type:` before an import makes it type-only. */
function sampleGraph(spec: Record<string, string[]>, npm: Record<string, string[]> = {}): Graph {
  const edges = new Map<string, Edge[]>();
  for (const [file, deps] of Object.entries(spec)) {
    edges.set(
      file,
      deps.map((d) => ({ to: d.replace(/^type:/, ""), typeOnly: d.startsWith("type:") })),
    );
  }
  return { edges, npm: new Map(Object.keys(spec).map((f) => [f, npm[f] ?? []])) };
}

/** A graph every rule accepts; each test below breaks it one way. */
const GOOD: Record<string, string[]> = {
  "src/low/a.ts": ["src/err.ts"],
  "src/mid/b.ts": ["src/low/a.ts"],
  "src/desc/c.ts": ["src/low/a.ts", "type:src/mid/b.ts"],
  "src/top/d.ts": ["src/desc/c.ts", "src/mid/b.ts"],
  "src/err.ts": [],
  "src/orm/e.ts": ["src/top/d.ts"],
  "main.ts": ["src/top/d.ts"],
  "orm.ts": ["src/orm/e.ts"],
};
const GOOD_NPM = { "src/orm/e.ts": ["orm"] };

Deno.test("layout: the table is read as written (every folder above, types only, shared leaves)", () => {
  assert.deepEqual(SAMPLE_TABLE.get("src/top")!.imports, ["src/low", "src/mid", "src/desc"]);
  assert.deepEqual(SAMPLE_TABLE.get("src/desc")!.typesOnly, ["src/mid"]);
  assert.deepEqual(SAMPLE_TABLE.get("main.ts")!.imports, [
    "src/low",
    "src/mid",
    "src/desc",
    "src/top",
    "src/orm",
  ]);
  assert.ok(SAMPLE_TABLE.get("src/err.ts")!.shared && SAMPLE_TABLE.get("orm.ts")!.entry);
  assert.deepEqual(unknownNames(SAMPLE_TABLE), []);
  assert.deepEqual(
    unknownNames(parseTable(
      "| folder | owns | may import | npm |\n| - |\n" +
        "| `src/a/` | a | nothing | |\n| `src/b/` | b | a, c | |\n",
    )),
    ["src/b: src/c"],
  );
  const good = sampleGraph(GOOD, GOOD_NPM);
  const rules = [
    missingImports(good),
    unplaced(SAMPLE_TABLE, good),
    forbiddenImports(SAMPLE_TABLE, good),
    fileCircles(good),
    unitCircles(SAMPLE_TABLE, good),
    foreignImports(SAMPLE_TABLE, good),
    entryPackages(SAMPLE_TABLE, good),
    entriesWithoutRows(SAMPLE_TABLE, ["main.ts", "orm.ts"], ["main.ts"]),
  ];
  assert.deepEqual(rules, rules.map(() => []));
});

Deno.test("layout: each rule fails on a graph made to break it", () => {
  const broken = (change: Record<string, string[]>, npm: Record<string, string[]> = GOOD_NPM) =>
    sampleGraph({ ...GOOD, ...change }, npm);
  assert.deepEqual(missingImports(broken({ "src/mid/b.ts": ["src/low/gone.ts"] })), [
    "src/mid/b.ts -> src/low/gone.ts",
  ]);
  assert.deepEqual(unplaced(SAMPLE_TABLE, broken({ "src/stray/f.ts": [] })), ["src/stray/f.ts"]);
  // An import upwards, and a value import where only types may be.
  assert.deepEqual(forbiddenImports(SAMPLE_TABLE, broken({ "src/low/a.ts": ["src/mid/b.ts"] })), [
    "src/low/a.ts (src/low) -> src/mid/b.ts (src/mid)",
  ]);
  assert.deepEqual(
    forbiddenImports(SAMPLE_TABLE, broken({ "src/desc/c.ts": ["src/mid/b.ts"] })),
    ["src/desc/c.ts (src/desc) -> src/mid/b.ts (src/mid) (only types may be imported)"],
  );
  // An entry reaching past its row.
  assert.deepEqual(forbiddenImports(SAMPLE_TABLE, broken({ "orm.ts": ["src/top/d.ts"] })), [
    "orm.ts (orm.ts) -> src/top/d.ts (src/top)",
  ]);
  assert.deepEqual(
    fileCircles(broken({ "src/low/a.ts": ["src/low/g.ts"], "src/low/g.ts": ["src/low/a.ts"] })),
    ["src/low/a.ts <-> src/low/g.ts"],
  );
  // No file circle, yet the folders import each other.
  assert.deepEqual(
    unitCircles(SAMPLE_TABLE, broken({ "src/low/g.ts": ["src/mid/b.ts"] })),
    ["src/low <-> src/mid"],
  );
  assert.deepEqual(
    foreignImports(SAMPLE_TABLE, broken({}, { ...GOOD_NPM, "src/top/d.ts": ["orm"] })),
    ["src/top/d.ts: orm"],
  );
  // The ORM named in main.ts's graph: its row says none.
  assert.deepEqual(entryPackages(SAMPLE_TABLE, broken({ "src/top/d.ts": ["src/orm/e.ts"] })), [
    "main.ts reaches orm, its row says none",
  ]);
  assert.deepEqual(entriesWithoutRows(SAMPLE_TABLE, ["main.ts", "cli.ts"], ["tool.ts"]), [
    "cli.ts has no row",
    "export tool.ts has no row",
  ]);
});

Deno.test("layout: a path the document names that does not exist is reported", () => {
  const doc = [
    "`src/copy/` holds `copy_format.ts` and `copy_gone.ts`; `copy/query_copy.ts` and",
    "`bench/nowhere.ts`, `node:tls`, `~/.pgpass`, `drizzle-orm/postgres-js/session`.",
    "",
    "- `statement.ts` alone, anywhere; `no_such_file.ts` nowhere.",
  ].join("\n");
  const named = namedPaths(doc, new Set(["copy"]));
  assert.deepEqual(missingPaths(named, repositoryPaths()), [
    "copy_gone.ts (in src/copy)",
    "bench/nowhere.ts",
    "no_such_file.ts",
  ]);
});

// ---------------------------------------------------------------------------------------------
// What the bottom layers and mod.ts's import may not do

Deno.test("layout: src/protocol/ and src/types/ open no socket and start no timer", () => {
  const io =
    /\b(?:setTimeout|setInterval|queueMicrotask|Deno\.(?:connect|listen|open))\b|node:(?:net|tls)/;
  const touching = (files: string[]) =>
    files.filter((f) => io.test(code(Deno.readTextFileSync(join(ROOT, f)))));
  assert.deepEqual(touching([...sources("src/protocol"), ...sources("src/types")]), []);
  // The check can fail: the transport opens sockets.
  assert.ok(touching(sources("src/connection/transport")).length > 0);
});

/** The Node built-ins pgpipe loads on first use (src/builtins.ts), never when it is imported. */
const LAZY_BUILTINS = ["node:crypto", "node:dns", "node:net", "node:stream", "node:tls"];

/** The lazy built-ins `text` imports for their values (type-only imports load nothing). */
function eagerBuiltins(text: string): string[] {
  const eager = /(?:^|\n)\s*import\s+(?!type\b)[^;"']*?["'](node:[^"'/]+)/g;
  return [...code(text).matchAll(eager)].map((m) => m[1]).filter((m) => LAZY_BUILTINS.includes(m));
}

Deno.test("layout: importing mod.ts loads no node:tls, net, dns, stream or crypto (they load on first use)", () => {
  const eager = reached(graph, "mod.ts").flatMap((f) =>
    eagerBuiltins(Deno.readTextFileSync(join(ROOT, f))).map((m) => `${f}: ${m}`)
  );
  assert.deepEqual(eager, []);
  // The check can fail: the lazy loader names them in type-only imports, and this line does not.
  const sample = 'import * as tls from "node:tls";\nimport type * as net from "node:net";';
  assert.deepEqual(eagerBuiltins(sample), ["node:tls"]);
});

Deno.test("layout: the PGlite entry names npm:@electric-sql/pglite only to load it at run time; mod.ts never reaches it", () => {
  assert.ok(!reached(graph, "mod.ts").some((f) => f.includes("pglite")));
  // Its graph imports nothing outside the repository (checked above, its row names no npm
  // package): PGlite is loaded by a name the module graph cannot see (see pglite.ts: drizzle-orm's
  // optional peer dependency on it). The entry does name the package it loads, pinned.
  assert.match(
    Deno.readTextFileSync(join(ROOT, "pglite.ts")),
    /"npm:@electric-sql\/pglite@\d+\.\d+\.\d+"/,
  );
});
