// deno-lint-ignore-file no-import-prefix -- npm packages are test-only imports, pinned here
/**
 * Drizzle ORM over pgpipe: one program written for postgres.js (test/orm/drizzle_program.ts,
 * covering drizzle-orm/postgres-js 0.45's surface) runs over postgres.js 3.4.9 and over pgpipe
 * against the same server; every step must give the same outcome, to the types of the values.
 */
import assert from "node:assert/strict";
import postgresJs from "npm:postgres@3.4.9";
import postgres from "../mod.ts";
import { drizzleProgram, type Outcome } from "./orm/drizzle_program.ts";
import { databaseUrl } from "./harness/env.ts";

const url = databaseUrl();
const quiet = { onnotice: () => {} };

/** The steps of a run that failed, and why (the program expects none to fail). */
function failures(run: Record<string, Outcome>): string[] {
  return Object.entries(run).filter(([, o]) => "error" in o).map(([name, o]) =>
    `${name}: ${JSON.stringify((o as { error: unknown }).error)}`
  );
}

Deno.test("drizzle: a program written for postgres.js gives the same results over pgpipe", async () => {
  const reference = postgresJs(url, quiet);
  let expected: Record<string, Outcome>;
  try {
    expected = await drizzleProgram(reference);
  } finally {
    await reference.end();
  }
  assert.deepEqual(failures(expected), [], "the program runs cleanly over postgres.js");

  const sql = postgres(url, quiet);
  let actual: Record<string, Outcome>;
  try {
    actual = await drizzleProgram(sql);
  } finally {
    await sql.end();
  }
  assert.deepEqual(Object.keys(actual), Object.keys(expected));
  const differences: string[] = [];
  for (const name of Object.keys(expected)) {
    try {
      assert.deepStrictEqual(actual[name], expected[name]);
    } catch (e) {
      differences.push(`${name}:\n${(e as Error).message}`);
    }
  }
  assert.equal(differences.length, 0, differences.join("\n\n"));
});
