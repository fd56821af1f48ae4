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
import {
  applyEdits,
  editsFor,
  rowType,
  sameTypeArgs,
  wantedTypeArgs,
} from "../src/typegen/annotate.ts";
import { globToRegExp, NoSourceFiles, sourceFiles } from "../src/typegen/files.ts";
import { failureReport } from "../src/typegen/run.ts";
import type { QueryTypes } from "../src/typegen/model.ts";
import { typegenMain } from "../src/typegen/cli.ts";
import { openDescriber } from "../src/typegen/describer.ts";
import postgres from "./harness/postgres.ts";
import { databaseUrl } from "./harness/env.ts";
import { serverTest } from "./harness/pglite_mode.ts";
import { valueMatches } from "./harness/type_text.ts";
import { delay } from "./harness/wait.ts";
import ts from "typescript";
import plainPostgres from "../mod.ts";
import { pglite } from "../pglite.ts";

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
  // Through a barrel file's `export *` (and a circle of them, which exports nothing more).
  const files: Record<string, string> = {
    [FIXTURES + "barrel.ts"]: 'export * from "./shared/db.ts";\nexport * from "./circle.ts";\n',
    [FIXTURES + "circle.ts"]: 'export * from "./barrel.ts";\n',
  };
  const memory = (path: string) =>
    files[path] === undefined ? load(path) : parseSource(path, files[path]);
  const barrel = 'import { db, nothing } from "./circle.ts";\n' +
    "export const q = () => db`select 4 as d`;\nexport const r = () => nothing`select 5`;\n";
  assert.deepEqual(
    scanSource("app.ts", FIXTURES + "app.ts", barrel, memory).queries.map((q) => q.text),
    ["select 4 as d"],
  );
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

Deno.test("typegen scan: a const fragment is inlined where it is used, and is a query of its own when it is a statement, wherever it is declared", () => {
  const text = 'import postgres from "../../../mod.ts";\nconst sql = postgres();\n' +
    "export const q = () => sql`select name from users where id in (${ids}) ${older}`;\n" +
    "const ids = sql`select id from users where born > ${new Date(0)}`;\n" +
    "const older = sql`and age > ${30}`;\n" +
    "export const awaited = async () => sql`select ${await sql`select 1`}`;\n";
  const { queries, skipped } = scan("consts.ts", text);
  assert.deepEqual(queries.map((q) => [q.line, q.text]), [
    [3, "select name from users where id in (select id from users where born > $1) and age > $2"],
    [4, "select id from users where born > $1"],
    [6, "select 1"],
  ]);
  assert.deepEqual(skipped.map((s) => [s.line, s.reason]), [
    [5, "a fragment, not a statement on its own (and …)"],
    [6, "a fragment chosen or built at run time"],
  ]);
});

Deno.test("typegen scan: SQL behind a name (a let, a helper, a function's fragment, a typed parameter, an import) is left as it is, not described as a value", () => {
  const fragments = 'import postgres from "../../../mod.ts";\nconst sql = postgres();\n' +
    "export const active = sql`active`;\nexport const limit = 10;\n";
  const text = 'import postgres, { type Query } from "../../../mod.ts";\n' +
    'import { active, limit } from "./fragments.ts";\nconst sql = postgres();\n' +
    "let order = sql`order by id`;\n" +
    'const cols = sql(["id", "name"]);\n' +
    "const by = (desc: boolean) => desc ? sql`order by id desc` : sql`order by id`;\n" +
    "export const q1 = sql`select id from users ${order}`;\n" +
    "export const q2 = sql`select ${cols} from users`;\n" +
    "export const q3 = sql`select id from users ${by(true)}`;\n" +
    "export const q4 = (f: Query<any>) => sql`select id from users where ${f}`;\n" +
    "export const q5 = (f: ReturnType<typeof sql>) => sql`select id from users where ${f}`;\n" +
    "export const q6 = sql`select id from users where ${active}`;\n" +
    "export const q7 = async (n: number) => {\n" +
    "  const [u] = await sql`select id from users where age > ${n}`;\n" +
    "  const ids = [u.id, n + 1];\n" +
    "  return sql`select name from users where id = any(${ids}) limit ${limit}`;\n" +
    "};\n";
  const files: Record<string, string> = { [FIXTURES + "fragments.ts"]: fragments };
  const memory = (path: string) =>
    files[path] === undefined ? load(path) : parseSource(path, files[path]);
  const { queries, skipped } = scanSource("pieces.ts", FIXTURES + "pieces.ts", text, memory);
  assert.deepEqual(queries.map((q) => [q.line, q.text]), [
    [14, "select id from users where age > $1"],
    [16, "select name from users where id = any($1) limit $2"],
  ]);
  assert.deepEqual(skipped.filter((s) => s.line > 6).map((s) => [s.line, s.reason]), [
    [7, "order: a fragment chosen or built at run time"],
    [8, "cols: sql(...): a dynamic identifier or helper"],
    [9, "by(...) returns SQL: a fragment chosen or built at run time"],
    [10, "f: a piece of SQL given at run time"],
    [11, "f: a piece of SQL given at run time"],
    [12, "active: SQL from another module (only fragments of the same file are inlined)"],
  ]);
});

Deno.test("typegen scan: a typegen-ignore comment before a query leaves it alone, listed", () => {
  const text = 'import postgres from "../../../mod.ts";\nconst sql = postgres();\n' +
    "// typegen-ignore: the temporary table is made at run time\n" +
    "await sql`select * from pg_temp.scratch`;\n" +
    "export const both = () => [\n" +
    "  /* typegen-ignore */ sql`select * from made_later`,\n" +
    "  sql`select 1 as one`,\n" +
    "];\n";
  const { queries, skipped } = scan("ignored.ts", text);
  assert.deepEqual(queries.map((q) => [q.line, q.text]), [[7, "select 1 as one"]]);
  assert.deepEqual(skipped.map((s) => [s.line, s.reason]), [
    [4, "marked typegen-ignore"],
    [6, "marked typegen-ignore"],
  ]);
});

Deno.test("typegen scan: a bare name the project's import map points at pgpipe is pgpipe", async () => {
  const dir = await Deno.makeTempDir({ prefix: "typegen_map_" });
  try {
    await Deno.writeTextFile(
      `${dir}/deno.json`,
      JSON.stringify({ imports: { db: "jsr:@pgpipe/pgpipe@^0.1.0", other: "npm:postgres@3" } }),
    );
    await Deno.mkdir(`${dir}/src`);
    const text = (from: string) =>
      `import postgres from "${from}";\nconst sql = postgres();\nsql\`select 1 as one\`;\n`;
    const found = (from: string) =>
      scanSource("a.ts", `${dir}/src/a.ts`, text(from), load).queries.map((q) => q.text);
    assert.deepEqual(found("db"), ["select 1 as one"]);
    // The check can fail: a name mapped elsewhere (postgres.js) is not pgpipe.
    assert.deepEqual(found("other"), []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
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

Deno.test("typegen write: a nullable json column is unknown, which holds null already; other types get | null", () => {
  const columns = [
    { name: "data", type: "unknown", nullable: true },
    { name: "items", type: "unknown[]", nullable: true },
    { name: "nick", type: "string", nullable: true },
  ];
  assert.equal(
    rowType(columns),
    "{ data: unknown; items: unknown[] | null; nick: string | null }[]",
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
    "project/app.ts",
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
  // An argument that names no source file is an error, not a run over nothing.
  assert.throws(() => names(["none.ts", "gone.ts"]), NoSourceFiles, "gone.ts: no such file");
  assert.throws(() => names(["gone/**/*.ts"]), NoSourceFiles, "no such file or folder");
  assert.throws(() => names(["**/*.jsx"]), /\*\*\/\*\.jsx: the pattern matches no source file/);
  assert.throws(() => names(["project/migrations"]), /the folder holds no source file/);
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
  // An error about a parameter has no position: it points at that value's `${`.
  const other = scan("untyped.ts", text.replace("id = ${1}", () => "${1} is null or '$22' = ${2}"));
  const [untyped] = other.queries;
  assert.equal(untyped.text, "\n  select id, nmae\n  from users where $1 is null or '$22' = $2");
  const unknownType = failureReport(other, untyped, {
    ok: false,
    message: "could not determine data type of parameter $2",
    code: "42P18",
  });
  assert.deepEqual(unknownType, [
    "untyped.ts:5:44: error: could not determine data type of parameter $2 [42P18]",
    "  5 |   from users where ${1} is null or '$22' = ${2}`;",
    "                                                 ^",
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
  const wrongs: [string, (t: string) => string, RegExp][] = [
    [
      "a string where the server wants an int4",
      (t) => t.replace("(id: number) =>", "(id: string) =>"),
      /Type 'string' is not assignable to type 'number \| SqlPiece'\.[^~]*~+\n\s+at \S+variant\.ts:8:/,
    ],
    [
      "null where the column is NOT NULL",
      (t) => t.replace("(name: string, age: number)", "(name: string | null, age: number)"),
      /Type 'null' is not assignable to type 'string \| SqlPiece'/,
    ],
    [
      "a value in a fragment's slot",
      (t) => t.replace("and age > ${age}", "and age > ${name}"),
      /Type 'string' is not assignable to type 'number \| SqlPiece'/,
    ],
  ];
  for (const [what, edit, error] of wrongs) {
    using wrong = await variant("typed_values.ts", edit);
    const out = await deno(["check", "--config", `${ROOT}deno.json`, wrong.path]);
    assert.notEqual(out.code, 0, what);
    assert.match(out.output, error, what);
  }
});

/**
 * What typegen writes in the fixture project, query by query, on PGlite and on a server alike:
 * `select *` in column order, NOT NULL columns and the primary key non-null, the right side of a
 * left join nullable, `count(*)` an int8 (a string), a value for a NOT NULL column non-null.
 */
const PROJECT_TYPES = [
  "{ id: number; name: string; email: string | null; born: Date | null }[]",
  "{ id: number; name: string; email: string | null }[], [number | null]",
  "{ name: string; title: string | null }[]",
  "never[], [number | null, string]",
  "{ posts: string }[], [number | null]",
  "{ id: number }[], [string | null]",
];

/** A copy of the fixture project in a temporary folder, removed by `await using`. */
async function project() {
  const dir = await Deno.makeTempDir({ prefix: "typegen_" });
  await Deno.mkdir(`${dir}/migrations`);
  // deno fmt's settings of this repository, which the fixture is formatted with.
  await Deno.writeTextFile(`${dir}/deno.json`, '{ "fmt": { "lineWidth": 100 } }\n');
  for (const name of ["app.ts", "migrations/0000_users.sql"]) {
    await Deno.copyFile(`${FIXTURES}project/${name}`, `${dir}/${name}`);
  }
  return {
    dir,
    app: `${dir}/app.ts`,
    [Symbol.asyncDispose]: () => Deno.remove(dir, { recursive: true }),
  };
}

/** Runs the command in-process in `cwd`; its exit code and what it printed. */
async function typegen(cwd: string, ...args: string[]) {
  const lines: string[] = [];
  const code = await typegenMain(
    args,
    openDescriber,
    (l) => lines.push(l),
    (l) => lines.push(l),
    cwd,
  );
  return { code, output: lines.join("\n") };
}

/** The type arguments of each query of a file, as the scanner reads them back. */
function annotations(text: string): (string | null)[] {
  return scanSource("app.ts", "/app.ts", text, load).queries.map((q) => q.sites[0].typeArgs);
}

/** Asserts a file's queries carry these type arguments, whatever their layout. */
function assertAnnotations(text: string, expected: readonly string[]): void {
  const found = annotations(text);
  assert.equal(found.length, expected.length, found.join("\n"));
  found.forEach((f, i) =>
    assert.ok(f !== null && sameTypeArgs(f, expected[i]), `${f} is not ${expected[i]}`)
  );
}

Deno.test("typegen --migrations: annotations written from the migrations on PGlite, a file without queries untouched; a second run changes no byte; deno fmt --check passes; --check passes", async () => {
  await using p = await project();
  // A file with no pgpipe query beside it is not even rewritten.
  await Deno.copyFile(`${FIXTURES}none.ts`, `${p.dir}/none.ts`);
  const untouched = (await Deno.stat(`${p.dir}/none.ts`)).mtime;
  await delay(20); // the time itself: so that a rewrite would show in the mtime
  const first = await typegen(p.dir, "--migrations", "migrations", "app.ts", "none.ts");
  assert.equal(first.code, 0, first.output);
  assert.match(first.output, /6 queries in 2 files; 1 files written, 0 failed/);
  assert.deepEqual((await Deno.stat(`${p.dir}/none.ts`)).mtime, untouched);
  assert.equal(
    await Deno.readTextFile(`${p.dir}/none.ts`),
    await Deno.readTextFile(`${FIXTURES}none.ts`),
  );
  const written = await Deno.readTextFile(p.app);
  assertAnnotations(written, PROJECT_TYPES);

  const fmt = await deno(["fmt", "--check", p.app], p.dir);
  assert.equal(fmt.code, 0, fmt.output);
  const again = await typegen(p.dir, "--migrations", "migrations", "app.ts");
  assert.equal(again.code, 0, again.output);
  assert.match(again.output, /0 files written/);
  assert.equal(await Deno.readTextFile(p.app), written);
  const check = await typegen(p.dir, "--migrations", "migrations", "--check", "app.ts");
  assert.equal(check.code, 0, check.output);
});

Deno.test("typegen --check: fails after a migration adds a column select * returns, passes after a write", async () => {
  await using p = await project();
  assert.equal((await typegen(p.dir, "--migrations", "migrations", "app.ts")).code, 0);
  await Deno.writeTextFile(
    `${p.dir}/migrations/0001_users_admin.sql`,
    "ALTER TABLE users ADD COLUMN admin boolean NOT NULL DEFAULT false;\n",
  );
  const before = await Deno.readTextFile(p.app);
  const stale = await typegen(p.dir, "--migrations", "migrations", "--check", "app.ts");
  assert.equal(stale.code, 1, stale.output);
  assert.match(
    stale.output,
    /^app\.ts:\d+:\d+: the annotation differs: sql<\{ id: number; name: string; email: string \| null; born: Date \| null; admin: boolean \}\[\]>$/m,
  );
  assert.match(stale.output, /1 annotations differ/);
  assert.equal(await Deno.readTextFile(p.app), before, "--check writes nothing");
  assert.equal((await typegen(p.dir, "--migrations", "migrations", "app.ts")).code, 0);
  const fresh = await typegen(p.dir, "--migrations", "migrations", "--check", "app.ts");
  assert.equal(fresh.code, 0, fresh.output);
});

Deno.test("typegen: a misspelt column is reported at its line, and the other queries are still written", async () => {
  await using p = await project();
  const text = await Deno.readTextFile(p.app);
  await Deno.writeTextFile(p.app, text.replace("select u.name, p.title", "select u.name, p.titel"));
  const run = await typegen(p.dir, "--migrations", "migrations", "app.ts");
  assert.equal(run.code, 1, run.output);
  const line = text.split("\n").findIndex((l) => l.includes("p.title")) + 1;
  const column = text.split("\n")[line - 1].indexOf("p.title") + 1;
  assert.match(
    run.output,
    new RegExp(
      `^app\\.ts:${line}:${column}: error: column p\\.titel does not exist \\[42703\\]$`,
      "m",
    ),
  );
  assert.match(run.output, /\n {2}\d+ \| {5}select u\.name, p\.titel\n {20,}\^\n/);
  assert.match(run.output, /1 files written, 1 failed to describe/);
  // The five others are written.
  assert.equal(annotations(await Deno.readTextFile(p.app)).filter((a) => a !== null).length, 5);
});

Deno.test("typegen: deno.json's typegen key gives the migrations and the transform; a flag overrides it", async () => {
  await using p = await project();
  await Deno.writeTextFile(
    `${p.dir}/deno.json`,
    JSON.stringify({ typegen: { migrations: "migrations", transform: "camel" } }),
  );
  const file = `${p.dir}/authors.ts`;
  await Deno.writeTextFile(
    file,
    'import postgres from "jsr:@pgpipe/pgpipe";\nconst sql = postgres();\n' +
      "export const q = () => sql`select author_id, published from posts`;\n",
  );
  const run = await typegen(p.dir, "authors.ts");
  assert.equal(run.code, 0, run.output);
  assertAnnotations(await Deno.readTextFile(file), [
    "{ authorId: number | null; published: boolean }[]",
  ]);
  const kebab = await typegen(p.dir, "--transform", "kebab", "--check", "authors.ts");
  assert.equal(kebab.code, 1, kebab.output);
  assert.match(kebab.output, /sql<\{ "author-id": number \| null; published: boolean \}\[\]>/);
});

Deno.test("typegen: a const fragment used by two queries is typed once, and one that is a statement of its own keeps its row type", async () => {
  await using p = await project();
  const file = `${p.dir}/shared.ts`;
  await Deno.writeTextFile(
    file,
    [
      'import postgres from "jsr:@pgpipe/pgpipe";',
      "const sql = postgres();",
      "const since = new Date(0);",
      'const named = sql`and name = ${"Ada"}`;',
      "const recent = sql`select id from users where born > ${since}`;",
      "export const a = () => sql`select email from users where id in (${recent}) ${named}`;",
      "export const b = () => sql`select count(*) as n from users where id in (${recent}) ${named}`;",
      "",
    ].join("\n"),
  );
  const run = await typegen(p.dir, "--migrations", "migrations", "shared.ts");
  assert.equal(run.code, 0, run.output);
  const written = await Deno.readTextFile(file);
  assert.match(written, /const named = sql<unknown\[\], \[string \| null\]>`/);
  assertAnnotations(written, [
    "{ id: number }[], [Date | string | null]",
    "{ email: string | null }[], [never, never]",
    "{ n: string }[], [never, never]",
  ]);
  const again = await typegen(p.dir, "--migrations", "migrations", "--check", "shared.ts");
  assert.equal(again.code, 0, again.output);
});

Deno.test("typegen: a JavaScript file gets no type written, and its queries are still checked against the schema", async () => {
  await using p = await project();
  const js = 'import postgres from "jsr:@pgpipe/pgpipe";\nconst sql = postgres();\n' +
    "export const a = () => sql`select id from users`;\n" +
    "export const b = () => sql`select nope from users`;\n";
  await Deno.writeTextFile(`${p.dir}/legacy.js`, js);
  const run = await typegen(p.dir, "--migrations", "migrations", "legacy.js");
  assert.equal(run.code, 1, run.output);
  assert.match(run.output, /^legacy\.js:4:35: error: column "nope" does not exist \[42703\]$/m);
  assert.match(run.output, /2 queries in 1 files; 0 files written, 1 failed/);
  assert.equal(await Deno.readTextFile(`${p.dir}/legacy.js`), js);
});

Deno.test("typegen: with neither --migrations nor a database it says what to give and exits 2; --help exits 0", async () => {
  const run = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--config", `${ROOT}deno.json`, `${ROOT}typegen.ts`, "app.ts"],
    cwd: FIXTURES,
    clearEnv: true,
    env: { NO_COLOR: "1", PATH: Deno.env.get("PATH") ?? "", HOME: Deno.env.get("HOME") ?? "" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(run.code, 2);
  assert.match(new TextDecoder().decode(run.stderr), /give --migrations DIR .* or --database URL/);
  const both = await typegen(FIXTURES, "--migrations", "m", "--database", "postgres://x", "a.ts");
  assert.equal(both.code, 2);
  assert.match(both.output, /give --migrations or --database, not both/);
  const noFiles = await typegen(FIXTURES, "--migrations", "m");
  assert.equal(noFiles.code, 2);
  assert.match(noFiles.output, /no files/);
  // A glob that matches nothing (a folder moved, a typo) fails --check instead of passing.
  const stale = await typegen(FIXTURES, "--migrations", "m", "--check", "src/**/*.ts");
  assert.equal(stale.code, 2, stale.output);
  assert.match(stale.output, /src\/\*\*\/\*\.ts: no such file or folder/);
  const unknown = await typegen(FIXTURES, "--migration", "m", "a.ts");
  assert.equal(unknown.code, 2, unknown.output);
  const transform = await typegen(FIXTURES, "--transform", "snake", "--migrations", "m", "a.ts");
  assert.equal(transform.code, 2, transform.output);
  assert.match(transform.output, /--transform takes camel, pascal or kebab, not snake/);
  // The command is right but the schema cannot be read: exit 1, not a usage error.
  const noSchema = await typegen(FIXTURES, "--migrations", "no_such_folder", "queries.ts");
  assert.equal(noSchema.code, 1, noSchema.output);
  assert.match(noSchema.output, /cannot open the schema: .*no_such_folder/);
  const help = await typegen(FIXTURES, "--help");
  assert.equal(help.code, 0);
  assert.match(help.output, /--check +write nothing/);
});

serverTest(
  "typegen --database connects to the server by its URL (the --migrations tests are its PGlite run)",
  "typegen --database: annotations from a server's schema, the same as from the migrations on PGlite",
  async () => {
    const url = databaseUrl();
    const schema = `typegen_${crypto.randomUUID().slice(0, 8)}`;
    await using admin = postgres(url, { onnotice: () => {} });
    await admin`create schema ${admin(schema)}`;
    try {
      await using p = await project();
      const ddl = await Deno.readTextFile(`${p.dir}/migrations/0000_users.sql`);
      await admin.begin(async (tx) => {
        await tx.unsafe(`set local search_path = ${schema}`);
        await tx.unsafe(ddl.replaceAll("--> statement-breakpoint", ""));
      });
      const inSchema = `${url}${url.includes("?") ? "&" : "?"}search_path=${schema}`;
      const run = await typegen(p.dir, "--database", inSchema, "app.ts");
      assert.equal(run.code, 0, run.output);
      assertAnnotations(await Deno.readTextFile(p.app), PROJECT_TYPES);
    } finally {
      await admin`drop schema ${admin(schema)} cascade`;
    }
  },
);

Deno.test("typegen example: examples/typed_sql type-checks, its annotations are up to date with its migrations, and it runs", async () => {
  const check = await deno(["check", "--config", `${ROOT}deno.json`, "examples/typed_sql/main.ts"]);
  assert.equal(check.code, 0, check.output);
  const upToDate = await typegen(
    ROOT,
    "--migrations",
    "examples/typed_sql/migrations",
    "--check",
    "examples/typed_sql/",
  );
  assert.equal(upToDate.code, 0, upToDate.output);
  assert.match(upToDate.output, /4 queries in 1 files; 0 annotations differ, 0 failed/);
  // The migration runner's sql.unsafe is listed, not described.
  assert.match(upToDate.output, /main\.ts:\d+:\d+: left as it is: sql\.unsafe/);
  const run = await deno([
    "run",
    "-A",
    "--config",
    `${ROOT}deno.json`,
    "examples/typed_sql/main.ts",
  ]);
  assert.equal(run.code, 0, run.output);
  assert.equal(
    run.output,
    "Ada (member) published post 1; posts: 1\nAda: Notes on the engine math, engines\nGrace: (no posts) \n",
  );
});

/** The fenced blocks of a markdown file in `lang`, in order. */
function fenced(markdown: string, lang: string): string[] {
  return [...markdown.matchAll(new RegExp("^```" + lang + "\\n([\\s\\S]*?)^```$", "gm"))].map((m) =>
    m[1]
  );
}

Deno.test("typegen guide: docs/typegen.md's TypeScript blocks type-check, run, and their annotations are what typegen writes from its migration", async () => {
  const guide = await Deno.readTextFile(`${ROOT}docs/typegen.md`);
  const blocks = fenced(guide, "ts");
  assert.ok(blocks.length >= 3, `${blocks.length} blocks`);
  const checked = await deno([
    "check",
    "--config",
    `${ROOT}deno.json`,
    "--doc-only",
    "docs/typegen.md",
  ]);
  assert.equal(checked.code, 0, checked.output);
  const [migration] = fenced(guide, "sql");
  const dir = await Deno.makeTempDir({ prefix: "typegen_guide_" });
  try {
    await Deno.mkdir(`${dir}/migrations`);
    await Deno.writeTextFile(`${dir}/migrations/0000_users.sql`, migration);
    for (const [i, block] of blocks.entries()) {
      const file = `${dir}/block_${i}.ts`;
      await Deno.writeTextFile(file, block);
      const run = await deno(["run", "-A", "--config", `${ROOT}deno.json`, file]);
      assert.equal(run.code, 0, `block ${i}: ${run.output}`);
    }
    // The blocks that show annotations show typegen's own.
    const annotated = blocks.flatMap((b, i) => b.includes("sql<") ? [`block_${i}.ts`] : []);
    assert.equal(annotated.length, 2);
    const check = await typegen(dir, "--migrations", "migrations", "--check", ...annotated);
    assert.equal(check.code, 0, check.output);
    assert.match(check.output, /5 queries in 2 files; 0 annotations differ, 0 failed/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** The columns of a query's written row type (`{ a: T; b: U | null }[]`): name to type text. */
function rowColumns(typeArgs: string): Map<string, string> {
  const text = `type Row = Args<${typeArgs}>;`;
  const source = ts.createSourceFile("row.ts", text, ts.ScriptTarget.Latest, true);
  const args = (source.statements[0] as ts.TypeAliasDeclaration).type as ts.TypeReferenceNode;
  const literal = (args.typeArguments![0] as ts.ArrayTypeNode).elementType as ts.TypeLiteralNode;
  return new Map(literal.members.map((m) => {
    const p = m as ts.PropertySignature;
    const name = ts.isStringLiteral(p.name) ? p.name.text : p.name.getText(source);
    return [name, p.type!.getText(source)];
  }));
}

Deno.test("typegen example: the rows examples/typed_sql's queries return at run time have the types written on them", async () => {
  const file = `${ROOT}examples/typed_sql/main.ts`;
  const { queries } = scanSource("main.ts", file, await Deno.readTextFile(file), load);
  const app = await import("../examples/typed_sql/main.ts");
  await using sql = plainPostgres(pglite());
  await app.migrate(sql);
  const ada = await app.addUser(sql, "Ada", "ada@example.com");
  await app.addUser(sql, "Grace", null);
  await app.publish(sql, ada.id, "Notes", ["math", null as unknown as string]);
  const checked: [string, Record<string, unknown>[]][] = [
    [queries.find((q) => q.text.includes("insert into users"))!.sites[0].typeArgs!, [ada]],
    [
      queries.find((q) => q.text.includes("left join posts"))!.sites[0].typeArgs!,
      await app.usersAndPosts(sql),
    ],
  ];
  for (const [typeArgs, rows] of checked) {
    const columns = rowColumns(typeArgs);
    assert.ok(rows.length > 0);
    for (const row of rows) {
      assert.deepEqual(Object.keys(row), [...columns.keys()]);
      for (const [name, type] of columns) {
        assert.ok(
          valueMatches(row[name], type),
          `${name}: ${JSON.stringify(row[name])} is not ${type}`,
        );
      }
    }
  }
  // The check can fail: a value of another type does not match.
  assert.ok(!valueMatches("1", "number"));
});
