/**
 * typegen: the scanner finds pgpipe's queries (client, transaction, savepoint, reserved, typed
 * parameters, imported clients) and their text as pgpipe sends it, and lists the dynamic ones;
 * the writer puts the types in place, byte-identical the second time and `deno fmt`-clean; the
 * parameter types make `deno check` fail on a wrong value; the command end to end, on
 * `--migrations` (PGlite, no server) and on the test server.
 */
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { scanSource } from "../src/typegen/scan.ts";
import { parseSource } from "../src/typegen/recognise.ts";
import { applyEdits, editsFor, sameTypeArgs, wantedTypeArgs } from "../src/typegen/annotate.ts";
import { globToRegExp, sourceFiles } from "../src/typegen/files.ts";
import { failureReport } from "../src/typegen/run.ts";
import type { QueryTypes } from "../src/typegen/model.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const FIXTURES = `${ROOT}test/fixtures/typegen/`;

const load = (path: string) => {
  try {
    return parseSource(path, Deno.readTextFileSync(path));
  } catch {
    return undefined;
  }
};

/** The scan of a fixture (or of `text` under a fixture's name). */
function scan(fixture: string, text = Deno.readTextFileSync(FIXTURES + fixture)) {
  return scanSource(fixture, FIXTURES + fixture, text, load);
}

/** Runs deno with `args` from the repository; its exit code and output. */
async function deno(args: string[], cwd = ROOT) {
  const out = await new Deno.Command(Deno.execPath(), {
    args,
    cwd,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, output: text(out.stdout) + text(out.stderr) };
}

Deno.test("typegen scan: the client, a transaction, a savepoint, a reserved connection and typed parameters", () => {
  const { queries } = scan("queries.ts");
  assert.deepEqual(queries.map((q) => [q.line, q.text]), [
    [9, "select id, name from users where age >= $1"],
    [13, "insert into users (name, age) values ($1, $2)"],
    [15, "update users set age = age + 1 where name = $1"],
    [21, "select pg_advisory_lock($1)"],
    [25, "select 1 as one"],
    [26, "select 2 as two"],
    [27, "select 3 as three"],
    [32, "select id from users where name = $1 and age < $2 and age > $3"],
  ]);
  // Each query's line and column are its backtick's.
  const text = Deno.readTextFileSync(FIXTURES + "queries.ts").split("\n");
  for (const q of queries) assert.equal(text[q.line - 1][q.column - 1], "`", q.text);
});

Deno.test("typegen scan: nested fragments are inlined, values numbered in order, each character mapped to its source", () => {
  const source = Deno.readTextFileSync(FIXTURES + "queries.ts");
  const nested = scan("queries.ts").queries.find((q) => q.line === 32)!;
  // The query, its inline fragment, and the const fragment it names.
  assert.deepEqual(nested.sites.map((s) => s.slots), [
    [{ param: 1 }, { sql: true }, { sql: true }],
    [{ param: 2 }],
    [{ param: 3 }],
  ]);
  // Every character but the placeholders is the source's own; a placeholder maps to its `${`.
  [...nested.text].forEach((c, i) => {
    const at = nested.sourceOffsets[i];
    if (/\$\d/.test(nested.text.slice(i - 1, i + 1)) || /\$\d/.test(nested.text.slice(i, i + 2))) {
      assert.equal(source.slice(at, at + 2), "${");
    } else assert.equal(source[at], c, `character ${i}`);
  });
  const age = nested.text.indexOf("age > $3");
  assert.equal(source.slice(nested.sourceOffsets[age], nested.sourceOffsets[age] + 8), "age > ${");
});

Deno.test("typegen scan: escapes are cooked as the tag receives them, and mapped to their backslash", () => {
  const text = 'import postgres from "../../../mod.ts";\nconst sql = postgres();\n' +
    "sql`select '\\`a\\`' as \\u0078,\r\n  $$\\$${1}$$`;\n";
  const [q] = scan("escapes.ts", text).queries;
  assert.equal(q.text, "select '`a`' as x,\n  $$$$1$$");
  assert.equal(text.slice(q.sourceOffsets[q.text.indexOf("x")]).slice(0, 6), "\\u0078");
});

Deno.test("typegen scan: dynamic queries are left as they are, each with its reason", () => {
  const { skipped } = scan("queries.ts");
  assert.deepEqual(skipped.map((s) => [s.line, s.reason]), [
    [30, "a fragment, not a statement on its own (and …)"],
    [35, "sql(...): a dynamic identifier or helper"],
    [36, "a fragment chosen or built at run time"],
    [37, "sql(...): a dynamic identifier or helper"],
    [38, "sql.unsafe or sql.file text, known only at run time"],
  ]);
});

Deno.test("typegen scan: a client imported from another module, under any name; another library's sql tag is not pgpipe's", () => {
  assert.deepEqual(scan("shared/uses_db.ts").queries.map((q) => q.text), [
    "select 1 as a",
    "select 2 as b",
    "select 3 as c",
  ]);
  const none = scan("none.ts");
  assert.deepEqual([none.queries, none.skipped], [[], []]);
  // The check can fail: the same file with pgpipe's postgres() finds its query.
  const text = Deno.readTextFileSync(FIXTURES + "none.ts").replace(
    /const sql = .*\n/,
    'import postgres from "jsr:@pgpipe/pgpipe";\nconst sql = postgres();\n',
  );
  assert.deepEqual(scan("none.ts", text).queries.map((q) => q.text), [
    "select * from users where id = $1",
  ]);
});

/** What a describer says of a query, written by hand for the writer's cases. */
function described(
  columns: [string, string, boolean][],
  params: string[],
): Extract<QueryTypes, { ok: true }> {
  return {
    ok: true,
    columns: columns.map(([name, type, nullable]) => ({ name, type, nullable })),
    params,
  };
}

Deno.test("typegen write: the row and parameter types in place, fragments' values typed, odd names quoted", () => {
  const { text, queries } = scan("queries.ts");
  const client = queries[0];
  const nested = queries.find((q) => q.line === 32)!;
  const edits = [
    ...editsFor(
      client,
      wantedTypeArgs(
        client,
        described([["id", "number", false], ["name", "string", true]], ["number"]),
      ),
    ),
    ...editsFor(
      nested,
      wantedTypeArgs(
        nested,
        described([["user-id", "number", false]], ["string", "number", "number"]),
      ),
    ),
  ];
  const after = applyEdits(text, edits).split("\n");
  assert.equal(
    after[8],
    "export const client = () => sql<{ id: number; name: string | null }[], [number]>`select id, name from users where age >= ${minAge}`;",
  );
  assert.equal(
    after[31],
    '  sql<{ "user-id": number }[], [string, never, never]>`select id from users where name = ${name} ${sql<unknown[], [number]>`and age < ${99}`} ${older}`;',
  );
});

Deno.test("typegen write: an annotation already right is left byte for byte, whatever its layout", () => {
  const { queries } = scan("typed_values.ts");
  const types = [
    described([["id", "number", false], ["name", "string", true]], ["number"]),
    described([], ["string | null", "number"]),
    described([["id", "number", false]], ["string", "number"]),
  ];
  queries.forEach((q, i) => assert.deepEqual(editsFor(q, wantedTypeArgs(q, types[i])), [], q.text));
  assert.ok(
    sameTypeArgs("{ a: number; b: string | null }[]", "{\n  a: number;\n  b: string | null;\n}[]"),
  );
  assert.ok(sameTypeArgs("[\n  | 'x'\n  | 'y',\n]", "['x' | 'y']"));
  // The check can fail: a changed type is another annotation.
  assert.ok(!sameTypeArgs("{ a: number }[]", "{ a: string }[]"));
  assert.equal(
    editsFor(
      queries[0],
      wantedTypeArgs(queries[0], described([["id", "string", false]], ["number"])),
    ).length,
    1,
  );
});

Deno.test("typegen files: folders, globs and files; .d.ts, node_modules and hidden folders left out", () => {
  const dir = FIXTURES;
  const names = (args: string[]) => sourceFiles(args, dir).map((f) => f.display);
  assert.deepEqual(names(["."]), [
    "none.ts",
    "queries.ts",
    "shared/db.ts",
    "shared/uses_db.ts",
    "typed_values.ts",
  ]);
  assert.deepEqual(names(["**/u*.ts"]), ["shared/uses_db.ts"]);
  assert.deepEqual(names(["shared/*.ts", "none.ts", "shared/db.ts"]), [
    "shared/db.ts",
    "shared/uses_db.ts",
    "none.ts",
  ]);
  assert.ok(globToRegExp("src/**/*.{ts,tsx}").test("src/a/b/c.tsx"));
  assert.ok(!globToRegExp("src/*.ts").test("src/a/c.ts"));
});

Deno.test("typegen errors: a server position maps to the source line and column it came from", () => {
  const text = 'import postgres from "../../../mod.ts";\nconst sql = postgres();\n' +
    "sql`\n  select id, nmae\n  from users where id = ${1}`;\n";
  const file = scan("misspelt.ts", text);
  const [q] = file.queries;
  const position = q.text.indexOf("nmae") + 1;
  const lines = failureReport(file, q, {
    ok: false,
    message: 'column "nmae" does not exist',
    position,
    code: "42703",
  });
  assert.deepEqual(lines, [
    'misspelt.ts:4:14: error: column "nmae" does not exist [42703]',
    "  4 |   select id, nmae",
    "                   ^",
  ]);
});

/** A copy of a fixture with `edit` applied, in a temporary folder beside it (so imports hold). */
async function variant(fixture: string, edit: (text: string) => string) {
  const path = `${FIXTURES}${fixture.replace(/\.ts$/, "")}.variant.ts`;
  await Deno.writeTextFile(path, edit(await Deno.readTextFile(FIXTURES + fixture)));
  return { path, [Symbol.dispose]: () => Deno.removeSync(path) };
}

Deno.test("typegen types: deno check fails when a value of the wrong type is interpolated, and passes with the right one", async () => {
  const right = await deno(["check", "--config", `${ROOT}deno.json`, FIXTURES + "typed_values.ts"]);
  assert.equal(right.code, 0, right.output);
  // A string where the server wants an int4.
  {
    using wrong = await variant(
      "typed_values.ts",
      (t) => t.replace("(id: number) =>", "(id: string) =>"),
    );
    const out = await deno(["check", "--config", `${ROOT}deno.json`, wrong.path]);
    assert.notEqual(out.code, 0);
    assert.match(
      out.output,
      /Type 'string' is not assignable to type 'number \| SqlPiece'\.[^~]*~+\n\s+at \S+variant\.ts:8:/,
    );
  }
  // null where the column is NOT NULL.
  {
    using wrong = await variant(
      "typed_values.ts",
      (t) => t.replace("(name: string, age: number)", "(name: string | null, age: number)"),
    );
    const out = await deno(["check", "--config", `${ROOT}deno.json`, wrong.path]);
    assert.notEqual(out.code, 0);
    assert.match(
      out.output,
      /Type 'null' is not assignable to type 'string \| SqlPiece'/,
    );
  }
  // A value in a fragment's slot is checked too.
  {
    using wrong = await variant(
      "typed_values.ts",
      (t) => t.replace("and age > ${age}", "and age > ${name}"),
    );
    const out = await deno(["check", "--config", `${ROOT}deno.json`, wrong.path]);
    assert.notEqual(out.code, 0);
    assert.match(
      out.output,
      /Type 'string' is not assignable to type 'number \| SqlPiece'/,
    );
  }
});
