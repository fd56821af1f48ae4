/**
 * The shape of `src/`, checked: no import circles between files, and each folder imports only the
 * folders below it in docs/ARCHITECTURE.md's diagram. Type-only imports count: a circle of types
 * still means the two files cannot be understood apart. No server needed.
 */
import assert from "node:assert/strict";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const SRC = join(ROOT, "src");

/**
 * Which folders each folder of `src/` may import (besides itself). `errors.ts` is the one leaf
 * every layer shares. Kept in step with the diagram in docs/ARCHITECTURE.md.
 */
/** Leaves every folder may import: the error classes, and the Node built-ins loaded on first use. */
const SHARED = ["errors.ts", "builtins.ts"];

/** The PGlite entry, as a file of `src/` names it: the one file outside `src/` it may import. */
const ENTRY_PGLITE = "../pglite.ts";

const ALLOWED: Record<string, readonly string[]> = {
  "errors.ts": ["protocol"],
  "builtins.ts": [],
  protocol: [],
  types: ["protocol"],
  "connection/transport": ["protocol"],
  connection: ["protocol", "types", "connection/transport"],
  query: ["types"],
  copy: ["protocol", "types", "connection", "query"],
  telemetry: ["connection", "query", "copy"],
  config: ["protocol", "types", "connection", "connection/transport", "query", "telemetry"],
  replication: ["protocol", "types", "connection", "query", "config"],
  listen: ["protocol", "connection", "config"],
  large_object: ["query"],
  // PGlite as an embedded server: its stream speaks the protocol; nothing in src imports it.
  pglite: ["protocol", "connection/transport"],
  client: [
    "protocol",
    "types",
    "connection",
    "connection/transport",
    "query",
    "copy",
    "telemetry",
    "config",
    "replication",
    "listen",
    "large_object",
  ],
  // The Kysely dialect (`@pgpipe/pgpipe/kysely`): on the client's public API, beside everything.
  kysely: ["query", "client"],
  // Drizzle's postgres-js driver (`@pgpipe/pgpipe/drizzle`): the client, and its options to make
  // one from `drizzle(url)` or `drizzle({ connection })`.
  drizzle: ["client", "config"],
  // The typed-SQL describer (`@pgpipe/pgpipe/typegen`): a client it makes itself, its config's
  // environment, the query layer's transforms and types' OIDs, and PGlite through its entry
  // (`../pglite.ts`, which loads npm:@electric-sql/pglite at run time). Nothing in src imports it.
  typegen: ["client", "config", "query", "types", ENTRY_PGLITE],
};

/** Every `.ts` file under `dir`, as paths relative to `src/`. */
function sources(dir: string): string[] {
  const out: string[] = [];
  for (const entry of Deno.readDirSync(dir)) {
    const path = join(dir, entry.name);
    if (entry.isDirectory) out.push(...sources(path));
    else if (entry.name.endsWith(".ts")) out.push(relative(SRC, path));
  }
  return out.sort();
}

const IMPORT =
  /(?:^|\n)\s*(?:import|export)\s+(?:type\s+)?(?:[^;"']*?\s+from\s+)?["'](\.{1,2}\/[^"']+)["']|import\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)/g;

/** The files of `src/` that `file` imports, relative to `src/`. */
function importsOf(file: string): string[] {
  const text = Deno.readTextFileSync(join(SRC, file));
  const out = new Set<string>();
  for (const m of text.matchAll(IMPORT)) {
    const spec = m[1] ?? m[2];
    out.add(relative(SRC, resolve(dirname(join(SRC, file)), spec)));
  }
  return [...out];
}

/** The layer a file belongs to: the longest key of ALLOWED its path starts with. */
function layerOf(file: string): string {
  if (file === "errors.ts" || file === "builtins.ts" || file === ENTRY_PGLITE) return file;
  const keys = Object.keys(ALLOWED).filter((k) => file.startsWith(k + "/"));
  assert.ok(keys.length > 0, `src/${file} is in no folder docs/ARCHITECTURE.md names`);
  return keys.reduce((a, b) => (b.length > a.length ? b : a));
}

/** The import circles of a graph: its strongly connected components with more than one file. */
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

const files = sources(SRC);
const graph = new Map(files.map((f) => [f, importsOf(f)]));

Deno.test("layout: every import in src/ names a file that exists", () => {
  const missing = [...graph].flatMap(([f, deps]) =>
    deps.filter((d) => !graph.has(d) && d !== ENTRY_PGLITE).map((d) => `src/${f} -> src/${d}`)
  );
  assert.deepEqual(missing, []);
});

Deno.test("layout: no import circles in src/", () => {
  assert.deepEqual(circles(graph).map((c) => c.map((f) => `src/${f}`).join(" <-> ")), []);
});

Deno.test("layout: each folder imports only the folders below it", () => {
  const wrong: string[] = [];
  for (const [file, deps] of graph) {
    const from = layerOf(file);
    for (const dep of deps) {
      const to = layerOf(dep);
      if (to !== from && !SHARED.includes(to) && !ALLOWED[from].includes(to)) {
        wrong.push(`src/${file} (${from}) -> src/${dep} (${to})`);
      }
    }
  }
  assert.deepEqual(wrong, []);
});

Deno.test("layout: the circle finder finds a circle", () => {
  // The check above is only worth something if it can fail.
  const sample = new Map([["a", ["b"]], ["b", ["c"]], ["c", ["a"]], ["d", ["a"]]]);
  assert.deepEqual(circles(sample), [["a", "b", "c"]]);
});

/** Every file mod.ts reaches through relative imports, as paths relative to the repository. */
function reachedFrom(entry: string): string[] {
  const seen = new Set<string>([entry]);
  const queue = [entry];
  while (queue.length > 0) {
    const file = queue.pop()!;
    const text = Deno.readTextFileSync(join(ROOT, file));
    for (const m of text.matchAll(IMPORT)) {
      const dep = relative(ROOT, resolve(dirname(join(ROOT, file)), m[1] ?? m[2]));
      if (!seen.has(dep)) {
        seen.add(dep);
        queue.push(dep);
      }
    }
  }
  return [...seen].sort();
}

/** A static or dynamic import of anything but a relative path or a `node:` built-in. */
const FOREIGN_IMPORT =
  /(?:^|\n)\s*(?:import|export)\s+(?:type\s+)?(?:[^;"']*?\s+from\s+)?["'](?!\.{1,2}\/|node:)([^"']+)["']|import\(\s*["'](?!\.{1,2}\/|node:)([^"']+)["']\s*\)/g;

/** The foreign imports of `file`, its comments (JSDoc examples import from JSR) left out. */
function foreignImports(file: string): string[] {
  const code = Deno.readTextFileSync(join(ROOT, file)).replace(/\/\*[\s\S]*?\*\//g, "")
    .replace(/^\s*\/\/.*$/gm, "");
  return [...code.matchAll(FOREIGN_IMPORT)].map((m) => m[1] ?? m[2]);
}

Deno.test("layout: mod.ts's import graph imports nothing outside the repository but node:", () => {
  const reached = reachedFrom("mod.ts");
  assert.ok(
    reached.length > 50 &&
      !reached.some((f) => f.includes("kysely") || f.includes("drizzle") || f.includes("typegen")),
    reached.join(),
  );
  const foreign = reached.flatMap((f) => foreignImports(f).map((s) => `${f}: ${s}`));
  assert.deepEqual(foreign, []);
  // The check can fail: the Kysely entry imports npm:kysely.
  const kysely = reachedFrom("kysely.ts").flatMap(foreignImports);
  assert.ok(kysely.some((s) => s.startsWith("npm:kysely@")), kysely.join());
});

/** The Node built-ins pgpipe loads on first use (src/builtins.ts), never when it is imported. */
const LAZY_BUILTINS = ["node:crypto", "node:dns", "node:net", "node:stream", "node:tls"];

/** The lazy built-ins `file` imports for their values (type-only imports load nothing). */
function eagerBuiltins(file: string): string[] {
  const text = Deno.readTextFileSync(join(ROOT, file)).replace(/\/\*[\s\S]*?\*\//g, "");
  const eager = /(?:^|\n)\s*import\s+(?!type\b)[^;"']*?["'](node:[^"'/]+)/g;
  return [...text.matchAll(eager)].map((m) => m[1]).filter((m) => LAZY_BUILTINS.includes(m));
}

Deno.test("layout: importing mod.ts loads no node:tls, net, dns, stream or crypto (they load on first use)", () => {
  const eager = reachedFrom("mod.ts").flatMap((f) => eagerBuiltins(f).map((m) => `${f}: ${m}`));
  assert.deepEqual(eager, []);
  // The check can fail: the lazy loader names them in type-only imports, and this line does not.
  const sample = 'import * as tls from "node:tls";\nimport type * as net from "node:net";';
  const path = join(ROOT, "test", "layout_sample.tmp.ts");
  Deno.writeTextFileSync(path, sample);
  try {
    assert.deepEqual(eagerBuiltins("test/layout_sample.tmp.ts"), ["node:tls"]);
  } finally {
    Deno.removeSync(path);
  }
});

/** The npm packages a file's import graph names (specifiers `npm:name@...`), sorted. */
function npmPackagesFrom(entry: string): string[] {
  const specifiers = reachedFrom(entry).flatMap(foreignImports);
  const names = specifiers.map((s) => s.match(/^npm:(@?[^@/]+(?:\/[^@/]+)?)/)?.[1] ?? s);
  return [...new Set(names)].sort();
}

Deno.test("layout: each ORM entry imports its ORM from npm and nothing else outside the repository", () => {
  assert.deepEqual(npmPackagesFrom("kysely.ts"), ["kysely"]);
  // The Drizzle entries: drizzle-orm only, never postgres.js (test/orm_drizzle_test.ts runs them
  // where postgres.js cannot even be resolved).
  assert.deepEqual(npmPackagesFrom("drizzle.ts"), ["drizzle-orm"]);
  assert.deepEqual(npmPackagesFrom("drizzle_migrator.ts"), ["drizzle-orm"]);
  // The check can fail: the test program names both postgres.js and Drizzle's driver for it.
  assert.deepEqual(npmPackagesFrom("test/orm_drizzle_test.ts").includes("postgres"), true);
});

Deno.test("layout: the PGlite entry names npm:@electric-sql/pglite only to load it at run time; mod.ts never reaches it", () => {
  assert.ok(!reachedFrom("mod.ts").some((f) => f.includes("pglite")));
  // Nothing in its graph imports outside the repository: PGlite is loaded by a name the module
  // graph cannot see (see pglite.ts: drizzle-orm's optional peer dependency on it).
  assert.deepEqual(reachedFrom("pglite.ts").flatMap(foreignImports), []);
  // The check can fail: the entry does name the package it loads, pinned.
  assert.match(
    Deno.readTextFileSync(join(ROOT, "pglite.ts")),
    /"npm:@electric-sql\/pglite@\d+\.\d+\.\d+"/,
  );
});

Deno.test("layout: typegen's TypeScript compiler stays out of mod.ts's graph", () => {
  assert.ok(!reachedFrom("mod.ts").some((f) => f.startsWith("src/typegen/")));
  const typescript = (file: string) =>
    foreignImports(file).some((s) => /^(?:npm:)?typescript\b/.test(s));
  assert.deepEqual(reachedFrom("mod.ts").filter(typescript), []);
  // The check can fail: the scanner does import it.
  assert.ok(typescript("src/typegen/scan.ts"));
  // The typegen entry brings the TypeScript compiler and nothing else from outside (PGlite is
  // loaded by name at run time, through pglite.ts).
  assert.deepEqual(npmPackagesFrom("typegen.ts"), ["typescript"]);
});
