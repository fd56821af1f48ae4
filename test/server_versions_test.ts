// Statements whose shape differs by server version, on whatever version `deno task test --pg=N`
// started: MERGE (15+) and MERGE ... RETURNING (17+) report their command, count and rows like
// any other statement, pipelined and in a transaction; an older server refuses them cleanly and
// the connection goes on.
import assert from "node:assert/strict";
import postgres, { PostgresError, type Sql } from "./harness/postgres.ts";
import { databaseUrl } from "./harness/env.ts";
import { serverVersion } from "./harness/util.ts";

const url = (() => {
  try {
    return databaseUrl();
  } catch {
    return undefined;
  }
})();

function versionTest(name: string, fn: (sql: Sql, version: number) => Promise<void>): void {
  Deno.test({
    name: `server versions: ${name}`,
    ignore: url === undefined,
    async fn() {
      await using sql = postgres(url!, { max: 1, onnotice: () => {} });
      await fn(sql, await serverVersion(sql));
    },
  });
}

/** A fresh `stock` table: (sku, qty), two rows. */
async function stock(sql: Sql): Promise<void> {
  await sql`create temp table stock (sku text primary key, qty int not null)`;
  await sql`insert into stock values ('a', 1), ('b', 2)`;
}

versionTest(
  "MERGE ... RETURNING (17+): rows with merge_action(), command MERGE and its count, pipelined and in a transaction",
  async (sql, version) => {
    await stock(sql);
    const incoming = sql`(values ('a', 10), ('c', 30)) as incoming(sku, qty)`;
    const merge = () =>
      sql`merge into stock s using ${incoming} on s.sku = incoming.sku
      when matched then update set qty = s.qty + incoming.qty
      when not matched then insert values (incoming.sku, incoming.qty)
      returning merge_action() as action, s.sku, s.qty`;
    if (version < 170000) {
      // RETURNING on MERGE is new in 17 (MERGE itself in 15): a syntax error, nothing changed.
      await assert.rejects(merge(), (e) => e instanceof PostgresError && e.code === "42601");
      assert.deepEqual([...await sql`select count(*)::int as n from stock`], [{ n: 2 }]);
      return;
    }
    // Pipelined with its neighbours: each gets its own answer.
    const [before, merged, after] = await Promise.all([
      sql`select count(*)::int as n from stock`,
      merge(),
      sql`select sum(qty)::int as total from stock`,
    ]);
    assert.deepEqual([...before], [{ n: 2 }]);
    assert.equal(merged.command, "MERGE");
    assert.equal(merged.count, 2);
    assert.deepEqual(
      [...merged].sort((x, y) => String(x.sku).localeCompare(String(y.sku))),
      [{ action: "UPDATE", sku: "a", qty: 11 }, { action: "INSERT", sku: "c", qty: 30 }],
    );
    assert.deepEqual(merged.columns?.map((c) => c.name), ["action", "sku", "qty"]);
    assert.deepEqual([...after], [{ total: 43 }]);
    // In a transaction (its queries share a Sync), next to another query; rolled back with it.
    let inside: unknown[] = [];
    const rollback = new Error("roll back");
    await assert.rejects(
      sql.begin(async (tx) => {
        const [rows, [{ n }]] = await Promise.all([
          tx`merge into stock s using (values ('b', 1)) as d(sku, qty) on s.sku = d.sku
          when matched then delete returning merge_action() as action, s.sku`,
          tx`select count(*)::int as n from stock`,
        ]);
        assert.equal(n, 2, "the delete is seen by the query after it");
        inside = [...rows];
        throw rollback;
      }),
      (e) => e === rollback,
    );
    assert.deepEqual(inside, [{ action: "DELETE", sku: "b" }]);
    assert.deepEqual([...await sql`select qty from stock where sku = 'b'`], [{ qty: 2 }]);
  },
);

versionTest(
  "MERGE (15+): command MERGE with its count; before 15 a clean syntax error",
  async (sql, version) => {
    await stock(sql);
    const merge = sql`merge into stock s using (values ('a', 5), ('z', 9)) as d(sku, qty)
    on s.sku = d.sku
    when matched then update set qty = d.qty
    when not matched then insert values (d.sku, d.qty)`;
    if (version < 150000) {
      await assert.rejects(merge, (e) => e instanceof PostgresError && e.code === "42601");
    } else {
      const result = await merge;
      assert.equal(result.command, "MERGE");
      assert.equal(result.count, 2);
      assert.equal(result.length, 0);
    }
    assert.deepEqual([...await sql`select 1 as still`], [{ still: 1 }], "the connection goes on");
  },
);
