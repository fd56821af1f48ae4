// Helpers shared by the connection tests: connect and report the session, or expect failure.
import assert from "node:assert/strict";
import postgres, { ConnectionError, type Options, PostgresError } from "../../mod.ts";
import type { ClusterInfo } from "./cluster.ts";
import { hasClusters } from "./env.ts";
import { onPglite, recordSkip } from "./pglite_mode.ts";

/** Options that silence server notices in tests. */
export const quiet = { onnotice: () => {} };

/** Who a session authenticated as and whether it is encrypted. */
export interface Session {
  user: string;
  ssl: boolean;
}

/** Connects, asks who we are and whether TLS is on, and always ends the client. */
export async function session(target: Options | string, extra: Options = {}): Promise<Session> {
  const sql = typeof target === "string"
    ? postgres(target, { ...quiet, ...extra })
    : postgres({ ...quiet, ...target, ...extra });
  try {
    const [row] = await sql`
      select current_user::text as who,
        coalesce((select ssl from pg_stat_ssl where pid = pg_backend_pid()), false)::text as ssl`;
    return { user: row.who as string, ssl: row.ssl === "true" };
  } finally {
    await sql.end();
  }
}

/** Connects and runs a query that must fail; returns the error. Always ends the client. */
export async function failure(target: Options | string, extra: Options = {}): Promise<unknown> {
  const sql = typeof target === "string"
    ? postgres(target, { ...quiet, ...extra })
    : postgres({ ...quiet, ...target, ...extra });
  try {
    await sql`select 1`;
  } catch (e) {
    return e;
  } finally {
    await sql.end();
  }
  assert.fail("expected the connection to fail");
}

/** Asserts a ConnectionError with one of the given codes. */
export function assertConnectionError(e: unknown, code: string | string[]): ConnectionError {
  assert.ok(e instanceof ConnectionError, `expected a ConnectionError, got ${e}`);
  const codes = Array.isArray(code) ? code : [code];
  assert.ok(codes.includes(e.code), `expected ${codes.join(" or ")}, got ${e.code}: ${e.message}`);
  return e;
}

/** Asserts a PostgresError with the given SQLSTATE. */
export function assertPostgresError(e: unknown, code: string): PostgresError {
  assert.ok(e instanceof PostgresError, `expected a PostgresError, got ${e}`);
  assert.equal(e.code, code, e.message);
  return e;
}

/** A test that needs cluster `c` from the runner; ignored (not failed) without it. */
export function clusterTest(
  name: string,
  c: ClusterInfo | undefined,
  fn: (c: ClusterInfo) => Promise<void>,
): void {
  if (onPglite) recordSkip(name, "needs the test clusters (their users, TLS, pg_hba)");
  Deno.test({ name, ignore: !hasClusters || !c, fn: () => fn(c!) });
}
