/**
 * A cold start imports only what a first query needs (a serverless isolate pays every import on
 * each cold start): the features a first query never uses load on first use, through a dynamic
 * `import()` or src/builtins.ts's getters, and stay out of mod.ts's static import graph. Unlike
 * test/layout_test.ts's graph, this one follows only the imports that load code (a type-only
 * import loads nothing), as Deno does.
 */
import assert from "node:assert/strict";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { databaseUrl } from "./harness/env.ts";
import { NETWORK, serverTest } from "./harness/pglite_mode.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

/** A static `import`/`export ... from` statement: its clause (if any) and its specifier. */
const STATEMENT = /(?:^|\n)[ \t]*(import|export)\s+(?:([^;"'`]*?)\s*from\s*)?["']([^"']+)["']/g;

/** The specifiers `text` imports for their values: type-only imports and exports left out. */
function valueImports(text: string): string[] {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
  const found: string[] = [];
  for (const [, keyword, clause = "", specifier] of code.matchAll(STATEMENT)) {
    const names = clause.trim();
    if (/^type\b/.test(names)) continue; // import type { A } / export type { A } from
    const braces = names.match(/^\{([\s\S]*)\}$/);
    const list = braces?.[1].split(",").map((s) => s.trim()).filter((s) => s !== "");
    if (list !== undefined && list.every((s) => s.startsWith("type "))) continue;
    if (keyword === "export" && names === "") continue;
    found.push(specifier);
  }
  return found;
}

/** Every file and `node:` built-in mod.ts loads statically, repository-relative and sorted. */
function staticGraph(entry: string): string[] {
  const seen = new Set<string>();
  const queue = [entry];
  while (queue.length > 0) {
    const file = queue.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    if (file.startsWith("node:")) continue;
    for (const s of valueImports(Deno.readTextFileSync(join(ROOT, file)))) {
      queue.push(s.startsWith(".") ? relative(ROOT, resolve(dirname(join(ROOT, file)), s)) : s);
    }
  }
  return [...seen].sort();
}

/** What a first query never needs: each loaded on first use (see the files' comments). */
const LAZY = [
  "src/copy/copy_from.ts", // sql.copyFrom, and the binary encoders behind it
  "src/copy/copy_to.ts", // sql.copyTo, and the binary decoders behind it
  "src/replication/subscribe.ts", // sql.subscribe
  "src/large_object/large_object.ts", // sql.largeObject
  "src/connection/transport/node_tls.ts", // TLS through node:tls
  "src/protocol/scram.ts", // SCRAM, imported when a server first asks for SASL
  "src/protocol/channel_binding.ts", // SCRAM's channel binding over TLS
  "src/config/pgpass.ts", // the password file, read when a server asks for a password
];

Deno.test("cold graph: importing mod.ts loads no Node built-in and none of the features a first query never uses", () => {
  const graph = staticGraph("mod.ts");
  assert.ok(graph.includes("src/connection/connection.ts"), graph.join());
  assert.deepEqual(graph.filter((f) => f.startsWith("node:")), []);
  assert.deepEqual(graph.filter((f) => LAZY.includes(f) || f.startsWith("src/replication/")), []);
  // Each is still there, behind a dynamic import somewhere in the graph.
  const dynamic = graph.filter((f) => !f.startsWith("node:")).flatMap((f) =>
    [...Deno.readTextFileSync(join(ROOT, f)).matchAll(/import\(\s*"([^"]+)"\s*\)/g)].map((m) =>
      relative(ROOT, resolve(dirname(join(ROOT, f)), m[1]))
    )
  );
  assert.deepEqual(LAZY.filter((f) => !dynamic.includes(f)), []);
});

Deno.test("cold graph: the import reader tells imports that load code from type-only ones", () => {
  // The check above is only worth something if this can tell them apart.
  const sample = [
    'import type { A } from "./a.ts";',
    'import { type B, type C } from "./b.ts";',
    'import { type D, e } from "./d.ts";',
    'import * as f from "node:buffer";',
    'export type { G } from "./g.ts";',
    'export { h } from "./h.ts";',
    "// import { i } from './i.ts';",
    'const j = await import("./j.ts");',
  ].join("\n");
  assert.deepEqual(valueImports(sample), ["./d.ts", "node:buffer", "./h.ts"]);
});

// A fresh process of its own: the test runner has loaded Node's layer long ago.
serverTest(
  NETWORK,
  "cold graph: plain queries and the end reach no Node built-in nor Deno.telemetry; the first bytea loads Buffer",
  async () => {
    const fixture = fileURLToPath(new URL("./fixtures/cold_first_query.ts", import.meta.url));
    // Plaintext: a first connection over TLS may take node:tls (see src/connection/transport).
    const url = new URL(databaseUrl());
    url.searchParams.set("sslmode", "disable");
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", fixture, url.href],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stdout);
    assert.ok(out.success, new TextDecoder().decode(out.stderr));
    const report = JSON.parse(text.trim().split("\n").at(-1)!);
    assert.deepEqual(report.firstAnswer, [1, "text", true, "x"]);
    // postgres.js's bytea: a Buffer, unchanged by loading node:buffer late.
    assert.deepEqual(report.bytea, { type: "Buffer", bytes: [1, 2, 255] });
    assert.equal(report.processFirstTouched, "bytea (process)");
    // No timer either (Deno's own load the layer's timers): the connect timeout is unreferenced
    // (AbortSignal.timeout), and ending clears only timers that exist.
    assert.equal(report.timersFirstTouched, undefined);
    // Deno's telemetry is off here (no OTEL_DENO): pgpipe sees so without loading its code.
    assert.equal(report.telemetryFirstTouched, undefined);
  },
);
