/**
 * Escaped identifiers: `sql("users")` splices `"users"` into the query text.
 * Identifiers cannot be parameters, so they are quoted instead.
 */
import { QueryError } from "../errors.ts";

/** Rejects awaiting a helper or identifier, which is a mistake for `sql\`...\``. */
export function notTagged(): never {
  throw new QueryError(
    "NOT_TAGGED_CALL",
    "sql(...) makes an identifier or helper to interpolate into a query; run queries with sql`...`",
  );
}

function invalid(name: unknown, why: string): QueryError {
  const shown = typeof name === "string" ? JSON.stringify(name) : typeof name;
  return new QueryError("INVALID_IDENTIFIER", `invalid identifier ${shown}: ${why}`);
}

/**
 * Quotes a name as postgres.js does: `"` is doubled and a dot separates quoted
 * parts, so `public.users` becomes `"public"."users"`.
 *
 * @throws {QueryError} `INVALID_IDENTIFIER` for a non-string, an empty name or
 * part, or a NUL character (the server would reject or misread them).
 */
export function escapeIdentifier(name: unknown): string {
  if (typeof name !== "string") throw invalid(name, "identifiers must be strings");
  if (name.includes("\0")) throw invalid(name, "it contains a NUL character");
  const parts = name.split(".");
  let out = "";
  for (let i = 0; i < parts.length; i++) {
    if (parts[i] === "") throw invalid(name, "an identifier (or a dotted part) cannot be empty");
    out += (i === 0 ? '"' : '."') + parts[i].replaceAll('"', '""') + '"';
  }
  return out;
}

/**
 * An escaped identifier made by `sql(name)`, spliced into the query text.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * const table = sql("public.users"); // "public"."users"
 * await sql`select * from ${table}`;
 * ```
 */
export class Identifier {
  /** The quoted SQL text. */
  readonly text: string;

  /** Made by `sql(name)`; throws `INVALID_IDENTIFIER` for an unusable name. */
  constructor(name: unknown) {
    this.text = escapeIdentifier(name);
  }

  /** An identifier is not a query: awaiting it throws `NOT_TAGGED_CALL`. */
  then(): never {
    return notTagged();
  }

  /** Throws `NOT_TAGGED_CALL`, as `then` does. */
  catch(): never {
    return notTagged();
  }

  /** Throws `NOT_TAGGED_CALL`, as `then` does. */
  finally(): never {
    return notTagged();
  }
}
