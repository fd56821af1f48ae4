/**
 * The typegen command line: flags, the `typegen` key of the nearest deno.json for the options
 * that change a row's shape, where the schema comes from, and the exit code.
 */
import { parseArgs } from "node:util";
import { resolve } from "node:path";
import { nearestDenoConfig } from "./deno_config.ts";
import { NoSourceFiles, sourceFiles } from "./files.ts";
import type { Describer, SchemaSource, TypegenOptions } from "./model.ts";
import { runTypegen } from "./run.ts";

/** Opens a describer on a schema (describer.ts's `openDescriber`). */
export type OpenDescriber = (
  source: SchemaSource,
  options: TypegenOptions,
) => Promise<Describer>;

/** The text `--help` prints. */
export const USAGE = `Usage: typegen [options] FILE...

Writes each pgpipe query's row and parameter types into the source, as the sql tag's type
arguments (sql<{ id: number; name: string | null }[], [number]>\`...\`), from the schema.
FILE may be files, folders and globs (.ts, .tsx, .js and their kin). Queries built at run time
(sql(name), helpers, fragments chosen by a condition, sql.unsafe) and a query after a
// typegen-ignore comment are listed and left alone; in .js files nothing is written.

The schema, one of:
  --migrations DIR   apply DIR's .sql files, in name order, to an in-process PGlite
  --database URL     describe against this server (else DATABASE_URL, else the PG* variables)

Options:
  --check            write nothing; exit 1 when an annotation differs or a query fails
  --transform NAME   the client's column-name transform: camel, pascal or kebab
  --bigint           int8 is a bigint (the client's bigint option)
  --help             this text

The nearest deno.json may hold the defaults under "typegen":
  { "typegen": { "migrations": "migrations", "transform": "camel", "bigint": true } }

Exit codes: 0 done (or up to date), 1 a query failed or (with --check) an annotation differs,
2 bad usage (a FILE that names no source file too).`;

/** The `typegen` key of the nearest deno.json(c) from `cwd` upwards, with its folder. */
function configFrom(cwd: string): { dir: string; values: Record<string, unknown> } | undefined {
  const config = nearestDenoConfig(resolve(cwd));
  const values = config?.json.typegen;
  return config !== null && typeof values === "object" && values !== null
    ? { dir: config.dir, values: values as Record<string, unknown> }
    : undefined;
}

/** libpq's variables that name a server when no URL is given. */
const LIBPQ_VARIABLES = ["PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE"];

/** Thrown for bad usage: its message is printed with a pointer to --help, exit code 2. */
class UsageError extends Error {}

/**
 * Runs the command with `args`; returns the exit code. `print` and `printError` receive lines.
 */
export async function typegenMain(
  args: readonly string[],
  open: OpenDescriber,
  print: (line: string) => void = (l) => console.log(l),
  printError: (line: string) => void = (l) => console.error(l),
  cwd: string = Deno.cwd(),
): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...args],
      allowPositionals: true,
      options: {
        migrations: { type: "string" },
        database: { type: "string" },
        check: { type: "boolean" },
        transform: { type: "string" },
        bigint: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (e) {
    printError(`typegen: ${(e as Error).message}; see --help`);
    return 2;
  }
  const flags = parsed.values;
  if (flags.help) {
    print(USAGE);
    return 0;
  }
  let source: SchemaSource;
  const options: TypegenOptions = {};
  try {
    const config = configFrom(cwd);
    const fromConfig = (key: string) => config?.values[key];
    const transform = flags.transform ?? fromConfig("transform");
    if (transform !== undefined) {
      if (transform !== "camel" && transform !== "pascal" && transform !== "kebab") {
        throw new UsageError(`--transform takes camel, pascal or kebab, not ${transform}`);
      }
      options.transform = transform;
    }
    const bigint = flags.bigint ?? fromConfig("bigint");
    if (bigint === true) options.bigint = true;
    const configMigrations = fromConfig("migrations");
    const env = (name: string) => Deno.env.get(name);
    if (flags.migrations !== undefined && flags.database !== undefined) {
      throw new UsageError("give --migrations or --database, not both");
    }
    if (flags.migrations !== undefined) source = { migrations: resolve(cwd, flags.migrations) };
    else if (flags.database !== undefined) source = { database: flags.database };
    else if (typeof configMigrations === "string") {
      source = { migrations: resolve(config!.dir, configMigrations) };
    } else if (env("DATABASE_URL")) source = { database: env("DATABASE_URL") };
    else if (LIBPQ_VARIABLES.some((v) => env(v) !== undefined)) source = { database: undefined };
    else {
      throw new UsageError(
        "no schema: give --migrations DIR (your .sql migrations, applied to PGlite in memory) " +
          "or --database URL (or set DATABASE_URL)",
      );
    }
    if (parsed.positionals.length === 0) {
      throw new UsageError("no files: give the files, folders or globs to scan");
    }
    // Before the schema is opened: a path that names nothing is a mistake in the command.
    sourceFiles(parsed.positionals, cwd);
  } catch (e) {
    if (!(e instanceof UsageError || e instanceof NoSourceFiles)) throw e;
    printError(`typegen: ${e.message}; see --help`);
    return 2;
  }
  let describer: Describer;
  try {
    describer = await open(source, options);
  } catch (e) {
    printError(`typegen: cannot open the schema: ${(e as Error).message}`);
    return 1;
  }
  try {
    const report = await runTypegen({
      files: parsed.positionals,
      check: flags.check === true,
      describer,
      cwd,
      print,
    });
    return report.failed > 0 || (flags.check === true && report.differing.length > 0) ? 1 : 0;
  } catch (e) {
    printError(`typegen: ${(e as Error).message}`);
    return 1;
  } finally {
    await describer.close();
  }
}
