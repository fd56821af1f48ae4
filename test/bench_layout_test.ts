/**
 * The shape of `bench/`, checked: what the bench borrows from the test harness comes in through
 * `bench/shared/harness.ts` alone, which re-exports nothing the bench leaves unused;
 * `bench/shared/` (what everything else stands on) imports
 * neither `bench/peers/` nor `bench/probes/` nor `bench/suites/`, and every suite file is listed
 * in `SUITES` of `bench/run.ts`. No server needed.
 */
import assert from "node:assert/strict";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const HARNESS = "bench/shared/harness.ts";

/** Every `.ts` file under `dir` (relative to the repository). */
function sources(dir: string): string[] {
  return [...Deno.readDirSync(join(ROOT, dir))].flatMap((e) =>
    e.isDirectory ? sources(`${dir}/${e.name}`) : e.name.endsWith(".ts") ? [`${dir}/${e.name}`] : []
  );
}

const IMPORT =
  /(?:^|\n)\s*(?:import|export)\s+(?:type\s+)?(?:[^;"']*?\s+from\s+)?["'](\.{1,2}\/[^"']+)["']|import\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)/g;

/** Each bench file and the repository files it imports by relative path. */
function benchGraph(): Map<string, string[]> {
  return new Map(
    sources("bench").sort().map((file) => {
      const text = Deno.readTextFileSync(join(ROOT, file));
      const deps = [...text.matchAll(IMPORT)].map((m) =>
        relative(ROOT, resolve(dirname(join(ROOT, file)), m[1] ?? m[2]))
      );
      return [file, deps];
    }),
  );
}

/** The imports that break the bench's rules, as `from -> to: why`. */
function wrongImports(graph: Map<string, string[]>): string[] {
  const wrong: string[] = [];
  for (const [file, deps] of graph) {
    for (const dep of deps) {
      if (dep.startsWith("test/") && file !== HARNESS) {
        wrong.push(`${file} -> ${dep}: the test harness only through ${HARNESS}`);
      }
      if (file.startsWith("bench/shared/") && /^bench\/(peers|probes|suites)\//.test(dep)) {
        wrong.push(`${file} -> ${dep}: shared/ stands below peers/, probes/ and suites/`);
      }
    }
  }
  return wrong;
}

const graph = benchGraph();

Deno.test("bench layout: the scan sees the bench's imports", () => {
  // Else every rule below would pass on an empty graph.
  assert.ok(graph.size > 40, `only ${graph.size} files`);
  assert.ok(graph.get(HARNESS)!.some((d) => d === "test/harness/cluster.ts"), HARNESS);
  assert.ok(graph.get("bench/run.ts")!.includes(HARNESS), "bench/run.ts");
});

Deno.test("bench layout: test/ only through shared/harness.ts; shared/ imports no peer or probe", () => {
  assert.deepEqual(wrongImports(graph), []);
});

/** The names a file takes from harness.ts in its `import { ... } from ".../harness.ts"`. */
function namesFrom(text: string, module: RegExp): string[] {
  return [
    ...text.matchAll(/(?:import|export)\s*(?:type\s+)?\{([^}]*)\}\s*from\s*["']([^"']+)["']/g),
  ]
    .filter((m) => module.test(m[2]))
    .flatMap((m) => m[1].split(",").map((n) => n.trim().replace(/^type\s+/, "")).filter(Boolean));
}

Deno.test("bench layout: shared/harness.ts re-exports exactly what the bench uses", () => {
  const exported = namesFrom(Deno.readTextFileSync(join(ROOT, HARNESS)), /test\/harness\//);
  const used = new Set(
    [...graph.keys()].filter((f) => f !== HARNESS).flatMap((f) =>
      namesFrom(Deno.readTextFileSync(join(ROOT, f)), /(^|\/)harness\.ts$/)
    ),
  );
  // What the rule reads: the names of an import, types included, from that file only.
  const sample = `import { a, type B } from "../shared/harness.ts";\nimport { c } from "./x.ts";`;
  assert.deepEqual(namesFrom(sample, /(^|\/)harness\.ts$/), ["a", "B"]);
  assert.ok(exported.length > 3, `harness.ts exports ${exported}`);
  assert.deepEqual(exported.filter((n) => !used.has(n)), [], "exported, used by no bench file");
});

Deno.test("bench layout: the rules catch what they forbid", () => {
  const sample = new Map([
    ["bench/suites/cold.ts", ["test/harness/cluster.ts", "bench/shared/harness.ts"]],
    ["bench/shared/machine.ts", ["bench/peers/drivers.ts", "bench/shared/probe.ts"]],
    ["bench/shared/loadgen.ts", ["bench/probes/http_load.ts"]],
    ["bench/peers/bun.ts", ["bench/shared/loadgen.ts"]],
    [HARNESS, ["test/harness/cluster.ts"]],
  ]);
  assert.deepEqual(wrongImports(sample), [
    "bench/suites/cold.ts -> test/harness/cluster.ts: the test harness only through bench/shared/harness.ts",
    "bench/shared/machine.ts -> bench/peers/drivers.ts: shared/ stands below peers/, probes/ and suites/",
    "bench/shared/loadgen.ts -> bench/probes/http_load.ts: shared/ stands below peers/, probes/ and suites/",
  ]);
});

Deno.test("bench layout: every suite file is a line of SUITES in bench/run.ts, and back", () => {
  const run = Deno.readTextFileSync(join(ROOT, "bench/run.ts"));
  const listed = [...run.matchAll(/^\s*suite\("([a-z_]+)"/gm)].map((m) => m[1]).sort();
  const files = sources("bench/suites").map((f) => f.slice("bench/suites/".length, -3)).sort();
  assert.ok(listed.length > 5, `SUITES not found: ${listed}`);
  assert.deepEqual(listed, files);
});
