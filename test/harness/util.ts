// Small test helpers shared by several test files (waiting: wait.ts).

/** Runs `fn` with environment variables set (undefined: unset), restoring them afterwards. */
export async function withEnv(
  vars: Record<string, string | undefined>,
  fn: () => unknown,
): Promise<void> {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, Deno.env.get(k)]));
  const apply = (v: Record<string, string | undefined>) => {
    for (const [k, val] of Object.entries(v)) {
      val === undefined ? Deno.env.delete(k) : Deno.env.set(k, val);
    }
  };
  apply(vars);
  try {
    await fn();
  } finally {
    apply(saved);
  }
}

/** The server's version as a number (180004 for 18.4), for what differs by version. */
export async function serverVersion(
  sql: (strings: TemplateStringsArray) => PromiseLike<readonly Record<string, unknown>[]>,
): Promise<number> {
  const [row] = await sql`select current_setting('server_version_num')::int as v`;
  return row.v as number;
}
