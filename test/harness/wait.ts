// Waiting in tests, in one place: for a promise with a deadline (a hang fails the test instead of
// stalling the suite), and for what a test cannot be told about directly, by polling it.
// None of these proves that something did NOT happen: a test proves that by an event that must
// follow it (a round trip queued behind it, a server-side record, a message the other side sends
// next), never by waiting a time margin.
import type { Sql } from "../../mod.ts";

/** What `until` and `poll` resolve to: the probe's first truthy answer. */
export type Truthy<T> = Exclude<T, false | 0 | "" | null | undefined>;

/** Resolves as `p` does; rejects naming `what` if it has not settled within `ms` (a hang). */
export async function within<T>(p: PromiseLike<T>, ms: number, what: string): Promise<T> {
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

/**
 * Sleeps `ms`. Only where time itself is what a test drives (a password function that takes a
 * while, an outage that lasts, a slow consumer), never to let something happen or not.
 */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Asks `probe` every `every` ms until it answers something truthy, and resolves to that answer;
 * undefined once `ms` have passed without one (for a report that counts it rather than fails).
 */
export async function poll<T>(
  probe: () => T | PromiseLike<T>,
  ms = 10_000,
  every = 10,
): Promise<Truthy<T> | undefined> {
  const deadline = Date.now() + ms;
  for (;;) {
    const answer = await probe();
    if (answer) return answer as Truthy<T>;
    if (Date.now() >= deadline) return undefined;
    await delay(every);
  }
}

/**
 * Waits until `probe` answers something truthy (asked every `every` ms), and resolves to that
 * answer; fails naming `what` after `ms`.
 */
export async function until<T>(
  what: string,
  probe: () => T | PromiseLike<T>,
  ms = 10_000,
  every = 10,
): Promise<Truthy<T>> {
  const answer = await poll(probe, ms, every);
  if (answer === undefined) throw new Error(`${what}: not within ${ms} ms`);
  return answer;
}

/**
 * Whether `p` has settled by now: its own callbacks (and those of anything already settled
 * before it) have had their turn once this resolves.
 */
export async function settledYet(p: PromiseLike<unknown>): Promise<boolean> {
  let settled = false;
  const mark = () => settled = true;
  Promise.resolve(p).then(mark, mark);
  await delay(0);
  return settled;
}

/** Waits until backend `pid` is inside pg_sleep: a cancel landing now stops that statement. */
export async function untilSleeping(admin: Sql, pid: number): Promise<void> {
  await until(`backend ${pid} in pg_sleep`, async () => {
    const [{ n }] = await admin`
      select count(*)::int as n from pg_stat_activity
      where pid = ${pid} and state = 'active' and wait_event = 'PgSleep'`;
    return n > 0;
  });
}

/**
 * Waits until backend `pid` waits for an advisory lock (one `admin`'s session holds): a statement
 * that stays there until the test lets it go, where a short `pg_sleep` could end unseen.
 */
export async function untilLocked(admin: Sql, pid: number): Promise<void> {
  await until(`backend ${pid} waiting for an advisory lock`, async () => {
    const [{ n }] = await admin`
      select count(*)::int as n from pg_stat_activity
      where pid = ${pid} and wait_event_type = 'Lock' and wait_event = 'advisory'`;
    return n > 0;
  });
}

/** Waits until a statement whose text holds `marker` runs on another backend than `admin`'s. */
export async function untilRunning(admin: Sql, marker: string): Promise<void> {
  await until(`a running statement with ${marker}`, async () => {
    const [{ n }] = await admin`
      select count(*)::int as n from pg_stat_activity
      where state = 'active' and query like ${"%" + marker + "%"} and pid <> pg_backend_pid()`;
    return n > 0;
  });
}

/**
 * Waits until backend `pid`'s latest statement (running or done) holds `marker` in its text: a
 * server-side record that everything the client wrote before that statement has arrived.
 */
export async function untilRan(admin: Sql, pid: number, marker: string): Promise<void> {
  await until(`backend ${pid} running a statement with ${marker}`, async () => {
    const [row] = await admin`select query from pg_stat_activity where pid = ${pid}`;
    return String(row?.query ?? "").includes(marker);
  });
}
