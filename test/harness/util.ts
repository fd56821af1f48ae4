// Small test helpers shared by several test files.
import type { Sql } from "../../mod.ts";

/** Fails the test instead of hanging when `p` does not settle within `ms`. */
export async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, limit]);
  } finally {
    clearTimeout(timer);
  }
}

/** Polls `done` every few ms for up to `ms`; whether it became true. */
export async function eventually(done: () => boolean, ms = 5000): Promise<boolean> {
  const stop = Date.now() + ms;
  while (!done() && Date.now() < stop) await new Promise((r) => setTimeout(r, 5));
  return done();
}

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

/** Waits until backend `pid` is inside pg_sleep: a cancel landing now stops that statement. */
export async function untilSleeping(admin: Sql, pid: number): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    const [{ n }] = await admin`
      select count(*)::int as n from pg_stat_activity
      where pid = ${pid} and state = 'active' and wait_event = 'PgSleep'`;
    if (n > 0) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`backend ${pid} never started its pg_sleep`);
}
