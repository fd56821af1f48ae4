/**
 * PgBouncer in transaction mode in front of the test cluster: with
 * `prepare: false` every query is a self-contained Parse/Bind/Execute/Sync
 * segment on the unnamed statement, so pipelining stays on through the pooler.
 */
import assert from "node:assert/strict";
import postgres, { PostgresError } from "../mod.ts";
import { plainCluster, tlsCluster } from "./harness/env.ts";
import { findPgbouncer, startPgbouncer } from "./harness/pgbouncer.ts";

const bin = findPgbouncer();
const cluster = plainCluster() ?? tlsCluster();
if (bin === null) {
  console.log("pgbouncer_test: skipped: pgbouncer is not installed (apt-get install pgbouncer)");
}

Deno.test({
  name:
    "PgBouncer transaction mode, prepare: false: 1,000 concurrent pipelined queries on one connection are all correct",
  ignore: bin === null || cluster === undefined,
  async fn() {
    const c = cluster!;
    const user = c.users.trust.user;
    const bouncer = await startPgbouncer({ server: { host: c.host, port: c.port }, users: [user] });
    try {
      await using sql = postgres({
        host: bouncer.host,
        port: bouncer.port,
        user,
        database: c.database,
        prepare: false,
        max: 1, // every query shares one client connection: they can only be pipelined
        onnotice: () => {},
      });
      const N = 1000;
      const queries = Array.from({ length: N }, (_, i) => {
        switch (i % 4) {
          case 0:
            return sql`select ${i}::int as i, ${"s" + i}::text as s`.execute();
          case 1:
            return sql`select ${i}::int8 * 2 as n`.execute();
          case 2:
            return sql`select count(*)::int as n from generate_series(1, ${i}::int)`.execute();
          case 3:
            // Errors stay within their own Sync segment.
            return i % 100 === 3
              ? sql`select 1 / ${0}::int as x`.execute()
              : sql`select ${[i, i + 1]}::int[] as a`.execute();
        }
      });
      // Meanwhile, transactions on another client: each holds one server connection throughout.
      await using txs = postgres({
        host: bouncer.host,
        port: bouncer.port,
        user,
        database: c.database,
        prepare: false,
        max: 2,
        onnotice: () => {},
      });
      const transactions = Array.from({ length: 20 }, (_, i) =>
        txs.begin((tx) => [
          tx`select txid_current()::text as t`,
          tx`select txid_current()::text as t, ${i}::int as i`,
        ]));
      // Both awaited at once, so a transaction that fails while the queries run is this test's
      // failure, not an unhandled rejection that takes the whole file down.
      const [outcomes, done] = await Promise.all([
        Promise.allSettled(queries),
        Promise.all(transactions),
      ]);
      for (const [i, [[a], [b]]] of done.entries()) {
        assert.equal(a.t, b.t, "both statements of a transaction ran on one server connection");
        assert.equal(b.i, i);
      }
      for (const [i, o] of outcomes.entries()) {
        if (i % 4 === 3 && i % 100 === 3) {
          assert.equal(o.status, "rejected", `query ${i}`);
          const e = (o as PromiseRejectedResult).reason;
          assert.ok(e instanceof PostgresError && e.code === "22012", String(e));
          continue;
        }
        assert.equal(o.status, "fulfilled", `query ${i}: ${(o as PromiseRejectedResult).reason}`);
        const v = (o as PromiseFulfilledResult<unknown>).value as Record<string, unknown>[];
        switch (i % 4) {
          case 0:
            assert.deepEqual({ ...v[0] }, { i, s: "s" + i });
            break;
          case 1:
            assert.equal(v[0].n, String(i * 2));
            break;
          case 2:
            assert.equal(v[0].n, i);
            break;
          default:
            assert.deepEqual(v[0].a, [i, i + 1]);
        }
      }
      // The unnamed statement only: nothing was left prepared on the servers behind PgBouncer.
      const [{ n }] = await sql`select count(*)::int as n from pg_prepared_statements`;
      assert.equal(n, 0);
    } finally {
      await bouncer.stop();
    }
  },
});
