// Suite 1, run with `deno bench`: one connection per driver, n queries issued at once, pgpipe as
// the baseline of every group. This is where pipelining shows even on loopback: a driver that
// waits for each answer before sending the next query pays n round trips instead of one.
// Every iteration checks its answers, so a fast but wrong driver cannot win.
import { type Adapter, pgTypeCount, suiteDrivers } from "../peers/drivers.ts";
import { TEARDOWN_GROUP } from "../shared/bench_json.ts";
import { benchUrl, isQuick } from "../shared/env.ts";

const SELECT_NS = [1, 5, 10, 50, 100, 200];
const INSERT_NS = [1, 10, 50, 100, 200];
const TYPED_ROWS = 10_000;

const quick = isQuick();
const url = benchUrl();

// The row count `select * from pg_type` must return, asked once with count(*).
const expectedTypes = await pgTypeCount(url);

// One connection per driver, opened (and warmed up) before any bench runs.
const clients: { name: string; adapter: Adapter }[] = [];
for (const driver of await suiteDrivers()) {
  clients.push({ name: driver.name, adapter: await driver.connect(url) });
}

/**
 * Warm-up and measured iterations per bench. With explicit timers (b.start/b.end) deno bench
 * runs about this many (it may add a few), so they size the run: cheap cases get many
 * iterations to average out the noise of a shared machine, costly ones (n x 600 rows) fewer.
 */
function iterations(kind: "select" | "insert", n: number): { warmup: number; n: number } {
  if (quick) return { warmup: 2, n: 3 };
  if (kind === "insert") return { warmup: 20, n: 200 };
  return n <= 10 ? { warmup: 10, n: 100 } : n <= 50 ? { warmup: 3, n: 20 } : { warmup: 2, n: 10 };
}

for (const n of SELECT_NS) {
  for (const [i, { name, adapter }] of clients.entries()) {
    Deno.bench({
      name,
      group: `select n=${n}`,
      baseline: i === 0,
      ...iterations("select", n),
      async fn(b) {
        b.start();
        const counts = await Promise.all(Array.from({ length: n }, () => adapter.selectPgType()));
        b.end();
        for (const c of counts) {
          if (c !== expectedTypes) {
            throw new Error(`${name}: select * from pg_type gave ${c} rows, not ${expectedTypes}`);
          }
        }
      },
    });
  }
}

// One query of 10,000 rows of everyday types (timestamps, floats, dates): decoding, not the wire.
for (const [i, { name, adapter }] of clients.entries()) {
  Deno.bench({
    name,
    group: `select ${TYPED_ROWS} typed rows`,
    baseline: i === 0,
    ...(quick ? { warmup: 2, n: 3 } : { warmup: 5, n: 50 }),
    async fn(b) {
      b.start();
      const rows = await adapter.selectTyped(TYPED_ROWS);
      b.end();
      if (rows !== TYPED_ROWS) throw new Error(`${name}: ${rows} typed rows, not ${TYPED_ROWS}`);
    },
  });
}

for (const n of INSERT_NS) {
  for (const [i, { name, adapter }] of clients.entries()) {
    Deno.bench({
      name,
      group: `insert n=${n}`,
      baseline: i === 0,
      ...iterations("insert", n),
      async fn(b) {
        // begin, create table, the count and the rollback happen outside the timed part.
        await adapter.rolledBack(async (tx) => {
          await tx.createInsertTable();
          b.start();
          await Promise.all(
            Array.from({ length: n }, (_, k) => tx.insertRow(`row ${k}`, k % 2 === 0, k)),
          );
          b.end();
          const count = await tx.countInserted();
          if (count !== n) throw new Error(`${name}: ${n} inserts left ${count} rows`);
        });
      },
    });
  }
}

// deno bench has no after-all hook; benches run in registration order, so this last one closes
// every connection (its first call does; warm-up and later calls find nothing left to close).
Deno.bench({
  name: "close connections",
  group: TEARDOWN_GROUP,
  warmup: 1,
  n: 1,
  async fn() {
    const open = clients.splice(0);
    await Promise.all(open.map((c) => c.adapter.close()));
  },
});
