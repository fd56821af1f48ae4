/**
 * libpq's connection service file: `service=name` (or `PGSERVICE`) picks a `[name]` section of
 * `key=value` lines holding libpq keywords. The section is looked for in `servicefile` (libpq
 * 18, or `PGSERVICEFILE`), else `~/.pg_service.conf`, then in `$PGSYSCONFDIR/pg_service.conf`;
 * the first file holding it is the one read. Its values come after the URL's and the options'
 * and before the environment's, as in libpq.
 */
import { env } from "./environment.ts";

/** The files a service is looked for in, in order, and whether each was named explicitly. */
function candidates(servicefile: string | undefined): { path: string; named: boolean }[] {
  const out: { path: string; named: boolean }[] = [];
  const home = env("HOME");
  if (servicefile !== undefined) out.push({ path: servicefile, named: true });
  else if (home) out.push({ path: `${home}/.pg_service.conf`, named: false });
  const sysconf = env("PGSYSCONFDIR");
  if (sysconf) out.push({ path: `${sysconf}/pg_service.conf`, named: false });
  return out;
}

/** A file's text, or undefined when it does not exist (then the next file is tried). */
function readIfThere(path: string, named: boolean): string | undefined {
  try {
    return Deno.readTextFileSync(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound && !named) return undefined;
    const hint = e instanceof Deno.errors.NotCapable ? ` (grant --allow-read=${path})` : "";
    throw new TypeError(`cannot read service file ${path}: ${(e as Error).message}${hint}`);
  }
}

/**
 * The `[name]` section of a service file's text, or undefined when it has none. Each key must be
 * one `isKeyword` accepts (a libpq keyword); a nested `service` is refused, as in libpq.
 */
function serviceSection(
  text: string,
  name: string,
  path: string,
  isKeyword: (key: string) => boolean,
): Map<string, string> | undefined {
  let section: Map<string, string> | undefined;
  let inside = false;
  const lines = text.split(/\r?\n/);
  for (let n = 0; n < lines.length; n++) {
    const line = lines[n].trim();
    if (line === "" || line.startsWith("#")) continue;
    if (line.startsWith("[")) {
      if (section !== undefined) break; // the section ended
      inside = line === `[${name}]`;
      if (inside) section = new Map();
      continue;
    }
    if (!inside) continue;
    const eq = line.indexOf("=");
    const key = eq === -1 ? line : line.slice(0, eq).trim();
    const where = `service file ${path}, line ${n + 1}`;
    if (eq === -1) throw new TypeError(`${where}: expected key=value`);
    if (key === "service" || key === "servicefile") {
      throw new TypeError(`${where}: nested service specifications are not supported`);
    }
    if (!isKeyword(key)) throw new TypeError(`${where}: "${key}" is not a libpq keyword`);
    section!.set(key, line.slice(eq + 1).trim());
  }
  return section;
}

/** The keywords service `name` gives; throws when no file defines it. */
export function readService(
  name: string,
  servicefile: string | undefined,
  isKeyword: (key: string) => boolean,
): Map<string, string> {
  const files = candidates(servicefile);
  for (const { path, named } of files) {
    const text = readIfThere(path, named);
    if (text === undefined) continue;
    const section = serviceSection(text, name, path, isKeyword);
    if (section !== undefined) return section;
  }
  const looked = files.length === 0
    ? "no service file (HOME is not set)"
    : files.map((f) => f.path).join(", ");
  throw new TypeError(`definition of service "${name}" not found (looked in ${looked})`);
}
