/**
 * A folder of SQL migrations, as the describer applies it to an in-process PGlite: the `.sql`
 * files directly in the folder, in name order (Drizzle Kit's `0000_name.sql`, `0001_...`, or any
 * other tool's numbered files, numbers compared by value; Drizzle's `meta/` folder, other files
 * and the `.down.sql` halves of reversible migrations are ignored) and Drizzle Kit 1's folders
 * (`<timestamp>_name/migration.sql`), each split at Drizzle Kit's `--> statement-breakpoint`
 * lines into statements run one after another.
 */
import { join } from "node:path";

/**
 * Drizzle Kit writes this between the statements of one migration, on a line of its own or
 * after a statement's semicolon; Drizzle's migrator splits at it wherever it is, and so does this.
 */
const BREAKPOINT = "--> statement-breakpoint";

/** One piece of a migration file, run as one simple-protocol query. */
export interface MigrationStatement {
  /** The file's path, as the folder was given joined with its name. */
  file: string;
  /** 1-based index of the piece in its file (the statement Drizzle Kit numbers). */
  index: number;
  /** 1-based line of the file where the piece starts. */
  line: number;
  /** The SQL of the piece (it may hold several statements, run by the simple protocol). */
  text: string;
}

/**
 * A migration that failed: which file and statement, where, and the server's message.
 *
 * @example
 * ```ts
 * import { MigrationError, openDescriber } from "./describer.ts";
 * try {
 *   await openDescriber({ migrations: "./drizzle" }, {});
 * } catch (e) {
 *   if (e instanceof MigrationError) console.error(`${e.file}:${e.line}: ${e.message}`);
 * }
 * ```
 */
export class MigrationError extends Error {
  /** The migration file. */
  readonly file: string;
  /** 1-based index of the failing statement in the file (pieces between breakpoints). */
  readonly statement: number;
  /** 1-based line of the file the server's error points at (or where the statement starts). */
  readonly line: number;
  /** Builds the message `file:line: statement N: ...`. */
  constructor(at: MigrationStatement, line: number, reason: string, cause?: unknown) {
    super(`${at.file}:${line}: statement ${at.index}: ${reason}`, { cause });
    this.name = "MigrationError";
    this.file = at.file;
    this.statement = at.index;
    this.line = line;
  }
}

/** A reversible migration's undo half (sqlx, golang-migrate, node-pg-migrate's SQL files). */
const DOWN = /\.down\.sql$/i;

/** Drizzle Kit 1's layout: a folder per migration (`20250101120000_name/`) holding this file. */
const FOLDER_MIGRATION = "migration.sql";

/**
 * Compares names with runs of digits by their value, so `V2__a.sql` comes before `V10__b.sql`
 * (Flyway's numbering) while zero-padded names (`0002_`, timestamps) keep their plain order.
 */
function byNumberedName(a: string, b: string): number {
  const split = (s: string) => s.match(/\d+|\D+/g) ?? [];
  const x = split(a);
  const y = split(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    if (x[i] === y[i]) continue;
    const digits = /^\d/.test(x[i]) && /^\d/.test(y[i]);
    if (digits && BigInt(x[i]) !== BigInt(y[i])) return BigInt(x[i]) < BigInt(y[i]) ? -1 : 1;
    return x[i] < y[i] ? -1 : 1;
  }
  return x.length - y.length;
}

/**
 * The migrations of `dir`, as paths relative to it, in the order they are applied: the `.sql`
 * files directly in it (an undo half, `.down.sql`, left out), and each folder's `migration.sql`
 * (Drizzle Kit 1), ordered by name with numbers compared by value.
 */
async function migrationFiles(dir: string): Promise<string[]> {
  const names: { sortKey: string; path: string }[] = [];
  for await (const entry of Deno.readDir(dir)) {
    const name = entry.name;
    if (entry.isFile && name.toLowerCase().endsWith(".sql") && !DOWN.test(name)) {
      names.push({ sortKey: name, path: name });
    } else if (entry.isDirectory) {
      const inside = join(dir, name, FOLDER_MIGRATION);
      const isFile = await Deno.stat(inside).then((i) => i.isFile, () => false);
      if (isFile) names.push({ sortKey: name, path: join(name, FOLDER_MIGRATION) });
    }
  }
  return names.sort((a, b) => byNumberedName(a.sortKey, b.sortKey)).map((n) => n.path);
}

/** Splits one file's text at Drizzle Kit's breakpoints; pieces with no SQL are left out. */
function splitMigration(file: string, sqlText: string): MigrationStatement[] {
  const out: MigrationStatement[] = [];
  let line = 1;
  let index = 0;
  let rest = sqlText;
  for (;;) {
    const at = rest.indexOf(BREAKPOINT);
    const piece = at === -1 ? rest : rest.slice(0, at);
    index++;
    if (piece.trim() !== "") out.push({ file, index, line, text: piece });
    if (at === -1) return out;
    line += countLines(rest.slice(0, at + BREAKPOINT.length));
    rest = rest.slice(at + BREAKPOINT.length);
  }
}

/** How many line ends `s` holds. */
function countLines(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) === 10) n++;
  return n;
}

/** The line of the file a server's 1-based character position in `at.text` falls on. */
export function lineOfPosition(at: MigrationStatement, position: number | undefined): number {
  if (position === undefined || !(position >= 1)) return at.line;
  return at.line + countLines(at.text.slice(0, position - 1));
}

/** Every statement of every migration of `dir`, in the order they are applied. */
export async function readMigrations(dir: string): Promise<MigrationStatement[]> {
  const out: MigrationStatement[] = [];
  for (const name of await migrationFiles(dir)) {
    const path = join(dir, name);
    out.push(...splitMigration(path, await Deno.readTextFile(path)));
  }
  return out;
}
