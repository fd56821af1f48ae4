/** Reads the SQL text of a `sql.file` query when it runs. */
import { QueryError } from "../errors.ts";

/**
 * Reads `path` as UTF-8. A missing or unreadable file rejects with Deno's own
 * error; a missing `--allow-read` permission with a `QueryError`
 * (`FILE_PERMISSION`) that says which flag is needed.
 */
export async function readQueryFile(path: string | URL): Promise<string> {
  try {
    return await Deno.readTextFile(path);
  } catch (e) {
    const denied = e instanceof Deno.errors.PermissionDenied || e instanceof Deno.errors.NotCapable;
    if (!denied) throw e;
    const err = new QueryError(
      "FILE_PERMISSION",
      `sql.file cannot read ${String(path)}: run with --allow-read (${(e as Error).message})`,
    );
    (err as { cause?: unknown }).cause = e;
    throw err;
  }
}
