// deno-lint-ignore-file no-import-prefix -- npm packages are test-only imports, pinned here
/**
 * Drizzle ORM over pgpipe: one program written for postgres.js (test/orm/drizzle_program.ts,
 * covering drizzle-orm/postgres-js 0.45's surface) runs over postgres.js 3.4.9 and over pgpipe
 * against the same server; every step must give the same outcome, to the types of the values.
 */
import assert from "node:assert/strict";
import postgresJs from "npm:postgres@3.4.9";
import postgres, { type Options } from "../mod.ts";
import { pglite } from "../pglite.ts";
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

/** An outcome without the server's source locations (`routine`, `file`, `line` of errors). */
function withoutSource(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutSource);
  if (value === null || typeof value !== "object" || value instanceof Date) return value;
  return Object.fromEntries(
    Object.entries(value).filter(([k]) => k !== "routine" && k !== "file" && k !== "line")
      .map(([k, v]) => [k, withoutSource(v)]),
  );
}

/**
 * Runs the program over `sql` (ended after) and compares it, step by step, to postgres.js's run;
 * `across` compares without the server's source locations (another PostgreSQL version's).
 */
async function sameAsPostgresJs(sql: ReturnType<typeof postgres>, across = false): Promise<void> {
  const reference = await expected();
  const want = across ? withoutSource(reference) as Record<string, Outcome> : reference;
  assert.deepEqual(failures(want), [], "the program runs cleanly over postgres.js");
  let actual: Record<string, Outcome>;
  try {
    actual = await drizzleProgram(sql);
  } finally {
    await sql.end();
  }
  if (across) actual = withoutSource(actual) as Record<string, Outcome>;
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
}

for (const [name, options] of variants) {
  Deno.test(`drizzle: a program written for postgres.js gives its results over pgpipe, ${name}`, async () => {
    await sameAsPostgresJs(postgres(url, { ...quiet, ...options }));
  });
}

// PGlite is PostgreSQL 18 whatever the server is: its errors name other C routines.
Deno.test("drizzle: the same program over postgres(pglite()), PostgreSQL in this process, gives postgres.js's results on the server", async () => {
  await sameAsPostgresJs(postgres(pglite(undefined, quiet)), true);
});
