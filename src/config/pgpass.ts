/**
 * The password file libpq reads: `passfile` (or `PGPASSFILE`), else `~/.pgpass`, lines of
 * `hostname:port:database:username:password` with `*` wildcards and `\\`
 * escapes. Like libpq it is ignored when group or others can read it, and,
 * without `--allow-read`/`--allow-env`, it is simply absent.
 */
import { env } from "./environment.ts";

/** What a password is looked up for. */
export interface PgpassTarget {
  host: string;
  port: number;
  database: string;
  user: string;
}

/** Splits one line into its fields, honouring `\:` and `\\`. */
function fields(line: string): string[] {
  const out: string[] = [];
  let field = "";
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (c === "\\" && i + 1 < line.length) field += line[++i];
    else if (c === ":" && out.length < 4) {
      out.push(field);
      field = "";
    } else field += c;
  }
  out.push(field);
  return out;
}

/** The password for `target` from the text of a password file, if a line matches. */
export function matchPgpass(text: string, target: PgpassTarget): string | undefined {
  // A unix socket matches "localhost", as in libpq.
  const host = target.host.startsWith("/") ? "localhost" : target.host;
  const wanted = [host, String(target.port), target.database, target.user];
  for (const raw of text.split(/\r?\n/)) {
    if (raw === "" || raw.startsWith("#")) continue;
    const f = fields(raw);
    if (f.length !== 5) continue;
    if (wanted.every((w, i) => f[i] === "*" || f[i] === w)) return f[4];
  }
  return undefined;
}

/**
 * Reads the password file (`passfile`, else `~/.pgpass`) and returns the matching password, or
 * undefined.
 */
export async function readPgpass(
  target: PgpassTarget,
  passfile?: string,
): Promise<string | undefined> {
  const home = env("HOME");
  const path = passfile ?? (home ? `${home}/.pgpass` : undefined);
  if (path === undefined) return undefined;
  try {
    const info = await Deno.stat(path);
    if (!info.isFile) return undefined;
    if (info.mode !== null && (info.mode & 0o077) !== 0) {
      console.warn(`pgpipe: password file ${path} is readable by group or others; ignoring it`);
      return undefined;
    }
    return matchPgpass(await Deno.readTextFile(path), target);
  } catch {
    return undefined; // missing, unreadable or not permitted: as if there were none
  }
}
