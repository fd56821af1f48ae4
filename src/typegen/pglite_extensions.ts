/**
 * The extensions a project's migrations create, loaded into the in-process PGlite before they
 * run: PGlite has PostgreSQL's contrib extensions (`pgcrypto`, `uuid-ossp`, `citext`, ...), but
 * each must be given to it at start, and `create extension` alone fails with "is not available".
 */
import type { MigrationStatement } from "./migrations.ts";

/**
 * PGlite's contrib modules, as `npm:@electric-sql/pglite@0.5.16/contrib/<module>` (the PGlite
 * pglite.ts loads) exports them: the module's file name is also the name of its export.
 */
const CONTRIB = new Set([
  "amcheck",
  "auto_explain",
  "bloom",
  "btree_gin",
  "btree_gist",
  "citext",
  "cube",
  "dict_int",
  "dict_xsyn",
  "earthdistance",
  "file_fdw",
  "fuzzystrmatch",
  "hstore",
  "intarray",
  "isn",
  "lo",
  "ltree",
  "moddatetime",
  "pageinspect",
  "pg_buffercache",
  "pg_freespacemap",
  "pg_stat_statements",
  "pg_surgery",
  "pg_trgm",
  "pg_visibility",
  "pg_walinspect",
  "pgcrypto",
  "seg",
  "tablefunc",
  "tcn",
  "tsm_system_rows",
  "tsm_system_time",
  "unaccent",
  "uuid_ossp",
]);

/** Where the contrib modules are. Loaded by a name the module graph cannot see, as pglite.ts does. */
const CONTRIB_MODULES = "npm:@electric-sql/pglite@0.5.16/contrib/";

/** `create extension [if not exists] name`, the name quoted or not. */
const CREATE_EXTENSION = /\bcreate\s+extension\s+(?:if\s+not\s+exists\s+)?(?:"([^"]+)"|([\w-]+))/gi;

/**
 * The contrib modules the statements create an extension of (`uuid-ossp` is the module
 * `uuid_ossp`), each once. Other extensions (PostGIS, pgvector) are not PGlite's contrib: their
 * `create extension` fails as it would on a server without them.
 */
export function contribExtensionsOf(statements: readonly MigrationStatement[]): string[] {
  const found = new Set<string>();
  for (const { text } of statements) {
    for (const m of text.matchAll(CREATE_EXTENSION)) {
      const module = (m[1] ?? m[2]).toLowerCase().replaceAll("-", "_");
      if (CONTRIB.has(module)) found.add(module);
    }
  }
  return [...found];
}

/** PGlite's `extensions` option for these contrib modules: each loaded now. */
export async function loadContribExtensions(
  modules: readonly string[],
): Promise<Record<string, unknown>> {
  const extensions: Record<string, unknown> = {};
  for (const module of modules) {
    const loaded = await import(CONTRIB_MODULES + module);
    extensions[module] = loaded[module];
  }
  return extensions;
}
