/**
 * Programs written for postgres.js, Drizzle's postgres-js driver and kysely-postgres-js
 * type-check on pgpipe with only their imports changed: `deno check` runs on the fixtures of
 * test/fixtures/typed/ (each alone, as a user's program: the repository's configuration, so
 * `jsr:@pgpipe/pgpipe` names this package) and must pass; variants that must fail show that the
 * check can fail. No server needed.
 */
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const FIXTURES = `${ROOT}test/fixtures/typed/`;

/** `deno check` of `file` (and `deno info --json` of it): its exit code and its output. */
async function deno(command: "check" | "info", file: string) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: command === "check"
      ? ["check", "--config", `${ROOT}deno.json`, file]
      : ["info", "--json", "--config", `${ROOT}deno.json`, file],
    cwd: ROOT,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: text(out.stdout), output: text(out.stdout) + text(out.stderr) };
}

/** A fixture with `edit` applied, written to a temporary file; removed by `using`. */
async function variant(fixture: string, edit: (text: string) => string) {
  const text = await Deno.readTextFile(FIXTURES + fixture);
  const dir = await Deno.makeTempDir();
  const path = `${dir}/${fixture}`;
  // Its helper stays where it is.
  const helper = new URL("type_equal.ts", `file://${FIXTURES}`).href;
  await Deno.writeTextFile(path, edit(text).replaceAll('"./type_equal.ts"', `"${helper}"`));
  return { path, [Symbol.dispose]: () => Deno.removeSync(dir, { recursive: true }) };
}

/** Replaces `from` by `to` in a fixture's text, which must contain it. */
function replacing(from: string, to: string): (text: string) => string {
  return (text) => {
    assert.ok(text.includes(from), `the fixture contains ${from}`);
    return text.replaceAll(from, to);
  };
}

Deno.test("typecheck: a postgres.js program type-checks with only its import changed", async () => {
  const pgpipe = await deno("check", FIXTURES + "postgres_js_program.ts");
  assert.equal(pgpipe.code, 0, pgpipe.output);
  // It is a postgres.js program: it type-checks against postgres.js's own types as well.
  using original = await variant(
    "postgres_js_program.ts",
    replacing('"jsr:@pgpipe/pgpipe"', '"npm:postgres@3.4.9"'),
  );
  const postgresJs = await deno("check", original.path);
  assert.equal(postgresJs.code, 0, postgresJs.output);
});

Deno.test("typecheck: a Drizzle program type-checks on @pgpipe/pgpipe/drizzle without a cast or postgres.js", async () => {
  const run = await deno("check", FIXTURES + "drizzle_program.ts");
  assert.equal(run.code, 0, run.output);
  const info = await deno("info", FIXTURES + "drizzle_program.ts");
  assert.equal(info.code, 0, info.output);
  const packages = Object.keys(JSON.parse(info.stdout).npmPackages ?? {});
  assert.ok(packages.some((p) => p.startsWith("drizzle-orm@")), packages.join());
  assert.ok(!packages.some((p) => p.startsWith("postgres@")), packages.join());
});

Deno.test("typecheck: a kysely-postgres-js program type-checks with either dialect over pgpipe", async () => {
  const run = await deno("check", FIXTURES + "kysely_program.ts");
  assert.equal(run.code, 0, run.output);
});

Deno.test("typecheck: the check fails where the types disagree", async () => {
  // A result's count is a number: not a string.
  using wrongCount = await variant(
    "postgres_js_program.ts",
    (text) => text + "\nexport const wrong: string = (await sql`select 1`).count;\n",
  );
  const count = await deno("check", wrongCount.path);
  assert.notEqual(count.code, 0);
  assert.match(count.output, /TS2322 \[ERROR\]: Type 'number' is not assignable to type 'string'/);

  // The Drizzle program on Drizzle's own driver, postgres.js installed as that driver needs:
  // pgpipe's client is not postgres.js's `Sql` (this is the cast @pgpipe/pgpipe/drizzle saves).
  using ownDriver = await variant(
    "drizzle_program.ts",
    (text) =>
      'import type {} from "npm:postgres@3.4.9";\n' +
      replacing('"jsr:@pgpipe/pgpipe/drizzle"', '"npm:drizzle-orm@^0.45/postgres-js"')(text),
  );
  const drizzle = await deno("check", ownDriver.path);
  assert.notEqual(drizzle.code, 0);
  assert.match(drizzle.output, /TS2345 \[ERROR\]: Argument of type '\[Sql, \{ schema:/);
});
