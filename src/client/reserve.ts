/**
 * `sql.reserve()`: a connection taken from the pool for one caller alone, with
 * its own `sql`, until released.
 */
import type { ResultState } from "../query/result.ts";
import type { Pool } from "./pool.ts";
import type { ClientSettings } from "./runner.ts";
import { makeTag, type SqlTag } from "./sql.ts";

/**
 * A connection reserved for one caller until released.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * await using reserved = await sql.reserve();
 * // Session-scoped work must stay on one connection: take and release the lock there.
 * await reserved`select pg_advisory_lock(${42})`;
 * await reserved`update jobs set taken = true where id = ${7}`;
 * await reserved`select pg_advisory_unlock(${42})`;
 * ```
 */
export interface ReservedSql extends SqlTag {
  /** Returns the connection to the pool. */
  release(): void;
  /** Releases the connection. */
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * Reserves a connection and builds the `sql` whose requests go to it alone: the one a result
 * completed on (`at`, its `state`) when the pool can hand that one out now, else any.
 */
export async function reserveConnection(
  pool: Pool,
  settings: ClientSettings,
  at?: ResultState,
): Promise<ReservedSql> {
  const conn = (at !== undefined ? pool.reserveAt(at.pid, at.secret) : null) ??
    await pool.reserve();
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    pool.release(conn);
  };
  return Object.defineProperties(makeTag(conn, settings), {
    release: { value: release },
    [Symbol.asyncDispose]: { value: () => Promise.resolve(release()) },
  }) as ReservedSql;
}
