/**
 * The source files typegen reads, from the command line's files, folders and globs: `.ts`,
 * `.tsx`, `.mts`, `.js`, `.jsx` and `.mjs` files (not `.d.ts`); folders are walked, leaving out
 * `node_modules` and hidden folders.
 */
import { join, relative, resolve, sep } from "node:path";

const SOURCE = /\.(?:[cm]?ts|tsx|[cm]?js|jsx)$/;

/** Whether a path names a source file typegen reads. */
function isSource(path: string): boolean {
  return SOURCE.test(path) && !/\.d\.[cm]?ts$/.test(path);
}

/** Every source file under a folder, sorted. */
function walk(dir: string): string[] {
  const out: string[] = [];
  for (const entry of Deno.readDirSync(dir)) {
    if (entry.name.startsWith(".") || entry.name === "node_modules") continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory) out.push(...walk(path));
    else if (entry.isFile && isSource(entry.name)) out.push(path);
  }
  return out.sort();
}

/** A glob (`*`, `**`, `?`, `{a,b}`) as a regular expression over `/`-separated paths. */
export function globToRegExp(glob: string): RegExp {
  let re = "";
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (c === "*" && glob[i + 1] === "*") {
      // `**/` matches no folder or any number of them.
      if (glob[i + 2] === "/") {
        re += "(?:.*/)?";
        i += 2;
      } else {
        re += ".*";
        i++;
      }
    } else if (c === "*") re += "[^/]*";
    else if (c === "?") re += "[^/]";
    else if (c === "{") {
      const close = glob.indexOf("}", i);
      const options = glob.slice(i + 1, close).split(",");
      re += `(?:${options.map((o) => o.replace(/[.+^$()|[\]\\]/g, "\\$&")).join("|")})`;
      i = close;
    } else re += c.replace(/[.+^$()|[\]\\]/g, "\\$&");
  }
  return new RegExp(`^${re}$`);
}

/** A file to scan: its absolute path, and how messages name it (as given, or under a folder given). */
export interface SourcePath {
  path: string;
  display: string;
}

/**
 * An argument that names no source file: a path that does not exist, a folder without source
 * files, a glob that matches none. In CI, a stale path would otherwise make `--check` pass having
 * checked nothing.
 */
export class NoSourceFiles extends Error {
  constructor(readonly argument: string, reason: string) {
    super(`${argument}: ${reason}`);
    this.name = "NoSourceFiles";
  }
}

/**
 * The files the arguments name, each once, in order: a file as it is (whatever its extension),
 * a folder's source files, a glob's matches (from its longest folder without a wildcard). Throws
 * {@link NoSourceFiles} for an argument that names none.
 */
export function sourceFiles(args: readonly string[], cwd = Deno.cwd()): SourcePath[] {
  const out: SourcePath[] = [];
  const seen = new Set<string>();
  const add = (path: string) => {
    if (seen.has(path)) return;
    seen.add(path);
    const rel = relative(cwd, path);
    out.push({ path, display: rel.startsWith("..") ? path : rel });
  };
  const statOf = (arg: string, path: string) => {
    try {
      return Deno.statSync(path);
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) throw new NoSourceFiles(arg, "no such file or folder");
      throw e;
    }
  };
  for (const arg of args) {
    let named: string[];
    if (/[*?{]/.test(arg)) {
      const parts = arg.split(/[\\/]/);
      const fixed = parts.findIndex((p) => /[*?{]/.test(p));
      const base = resolve(cwd, parts.slice(0, fixed).join("/") || ".");
      const pattern = globToRegExp(parts.slice(fixed).join("/"));
      const exists = statOf(arg, base).isDirectory;
      named = (exists ? walk(base) : []).filter((file) =>
        pattern.test(relative(base, file).split(sep).join("/"))
      );
      if (named.length === 0) throw new NoSourceFiles(arg, "the pattern matches no source file");
    } else {
      const path = resolve(cwd, arg);
      named = statOf(arg, path).isDirectory ? walk(path) : [path];
      if (named.length === 0) throw new NoSourceFiles(arg, "the folder holds no source file");
    }
    named.forEach(add);
  }
  return out;
}
