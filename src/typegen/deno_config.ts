/**
 * The project's nearest deno.json (or deno.jsonc), from a folder upwards: typegen reads its
 * `typegen` key (the options that change a row's shape) and its `imports` (a bare name that
 * points at pgpipe).
 */
import { dirname, join } from "node:path";

/** A parsed configuration file and the folder it is in. */
export interface DenoConfig {
  dir: string;
  json: Record<string, unknown>;
}

const found = new Map<string, DenoConfig | null>();

/** The nearest deno.json(c) from `dir` upwards, or null; each folder is read once. */
export function nearestDenoConfig(dir: string): DenoConfig | null {
  const known = found.get(dir);
  if (known !== undefined) return known;
  let config: DenoConfig | null = null;
  for (const name of ["deno.json", "deno.jsonc"]) {
    let text: string;
    try {
      text = Deno.readTextFileSync(join(dir, name));
    } catch {
      continue;
    }
    // deno.jsonc's whole-line and block comments.
    const json = JSON.parse(text.replace(/^\s*\/\/.*$/gm, "").replace(/\/\*[\s\S]*?\*\//g, ""));
    config = { dir, json: typeof json === "object" && json !== null ? json : {} };
    break;
  }
  if (config === null && dirname(dir) !== dir) config = nearestDenoConfig(dirname(dir));
  found.set(dir, config);
  return config;
}
