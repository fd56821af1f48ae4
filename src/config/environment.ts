/**
 * The environment, as libpq reads it: `PG*` variables (and `USER`, `HOME`). Without
 * `--allow-env` every variable is simply unset, so a client built from a URL needs no permission.
 */

/** The variable's value, or undefined when it is unset or may not be read. */
export function env(name: string): string | undefined {
  try {
    return Deno.env.get(name);
  } catch {
    return undefined;
  }
}

/** The value of the first of `names` that is set (an empty value counts as set). */
export function firstEnv(names: readonly string[]): string | undefined {
  for (const name of names) {
    const value = env(name);
    if (value !== undefined) return value;
  }
  return undefined;
}
