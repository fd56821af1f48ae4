// deno-lint-ignore-file no-import-prefix -- npm packages are test-only imports, pinned here
/**
 * Drizzle ORM over pgpipe: one program written for postgres.js (test/orm/drizzle_program.ts,
 * covering drizzle-orm/postgres-js 0.45's surface) runs over postgres.js 3.4.9 and over pgpipe
 * against the same server; every step must give the same outcome, to the types of the values.
 */
import assert from "node:assert/strict";
import postgresJs from "npm:postgres@3.4.9";
import postgres, { type Options } from "../mod.ts";
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

/** The program's outcomes over postgres.js, run once for every variant below. */
let reference: Promise<Record<string, Outcome>> | undefined;
function expected(): Promise<Record<string, Outcome>> {
  return reference ??= (async () => {
    const sql = postgresJs(url, quiet);
    try {
      return await drizzleProgram(sql);
    } finally {
      await sql.end();
    }
  })();
}

/** pgpipe's options in each run: the defaults, and the settings an ORM user may pick. */
const variants: [string, Options][] = [
  ["the defaults", {}],
  ["force_prepare", { force_prepare: true }],
  ["prepare: false (a transaction-mode pooler)", { prepare: false }],
  ["max: 1 (every query pipelined on one connection)", { max: 1 }],
];

for (const [name, options] of variants) {
  Deno.test(`drizzle: a program written for postgres.js gives its results over pgpipe, ${name}`, async () => {
    const want = await expected();
    assert.deepEqual(failures(want), [], "the program runs cleanly over postgres.js");
    const sql = postgres(url, { ...quiet, ...options });
    let actual: Record<string, Outcome>;
    try {
      actual = await drizzleProgram(sql);
    } finally {
      await sql.end();
    }
    assert.deepEqual(Object.keys(actual), Object.keys(want));
    const differences: string[] = [];
    for (const step of Object.keys(want)) {
      try {
        assert.deepStrictEqual(actual[step], want[step]);
      } catch (e) {
        differences.push(`${step}:\n${(e as Error).message}`);
      }
    }
    assert.equal(differences.length, 0, differences.join("\n\n"));
  });
}
