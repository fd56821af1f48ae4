/**
 * Runs test/orm/drizzle_program.ts over pgpipe through `@pgpipe/pgpipe/drizzle` and its migrator,
 * in a process of its own whose module graph holds no postgres.js: the program's outcomes are
 * printed as tagged JSON (see outcome_codec.ts) for test/orm_drizzle_test.ts to compare with
 * postgres.js's. Drizzle's own postgres-js driver could not even load here (it imports
 * postgres.js, which this process cannot resolve), so a clean run shows that nothing needed it.
 *
 * Usage: deno run -A test/orm/drizzle_subpath_run.ts <database url> [<pgpipe options as JSON>]
 */
import postgres, { type Options } from "../../mod.ts";
import { drizzle } from "../../drizzle.ts";
import { migrate } from "../../drizzle_migrator.ts";
import { drizzleProgram } from "./drizzle_program.ts";
import { taggedSteps } from "./outcome_codec.ts";

const [url, options = "{}"] = Deno.args;
const sql = postgres(url, { onnotice: () => {}, ...JSON.parse(options) as Options });
try {
  const outcomes = await drizzleProgram(sql, { drizzle, migrate });
  console.log(JSON.stringify(taggedSteps(outcomes)));
} finally {
  await sql.end();
}
