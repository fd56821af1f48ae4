// Review checks of b78ad08: a new connection's first queries go ahead of fetch_types' catalog
// query, and one that returns a user-defined type keeps its rows until the catalog is answered.
import assert from "node:assert/strict";
import postgres from "./harness/postgres.ts";
import { databaseUrl } from "./harness/env.ts";
import { SERVER_PROCESS, serverTest, SEVERAL_SESSIONS } from "./harness/pglite_mode.ts";

const url = databaseUrl();
const quiet = { onnotice: () => {} };

async function withTone(fn: () => Promise<void>): Promise<void> {
  {
    await using a = postgres(url, { max: 1, ...quiet, fetch_types: false });
    await a`drop type if exists pgpipe_hold_tone cascade`;
    await a`create type pgpipe_hold_tone as enum ('low', 'high')`;
  }
  try {
    await fn();
  } finally {
    await using a = postgres(url, { max: 1, ...quiet, fetch_types: false });
    await a`drop type if exists pgpipe_hold_tone cascade`;
  }
}

const TONES = "select array['low', 'high']::pgpipe_hold_tone[] as t, 'low'::pgpipe_hold_tone as e";

serverTest(
  SERVER_PROCESS,
  "fetch_types hold: rows kept for the catalog still settle when the connection dies behind them",
  async () => {
    await withTone(async () => {
      await using sql = postgres(url, { max: 1, ...quiet });
      const first = sql.unsafe(TONES + " where $1::int = 1", [1]).execute();
      const killer = sql`select pg_terminate_backend(pg_backend_pid())`.execute();
      const [a, b] = await Promise.allSettled([first, killer]);
      assert.equal(a.status, "fulfilled", String((a as PromiseRejectedResult).reason));
      assert.equal((a as PromiseFulfilledResult<Record<string, unknown>[]>).value[0].e, "low");
      assert.equal(b.status, "rejected");
      // The client reconnects and the types come with the next connection.
      const [row] = await sql.unsafe(TONES);
      assert.deepEqual(row.t, ["low", "high"]);
    });
  },
);

Deno.test(
  "fetch_types hold: values(), raw(), describe() ahead of the catalog; a transaction right after",
  async () => {
    await withTone(async () => {
      await using sql = postgres(url, { max: 1, ...quiet });
      const q = () => sql.unsafe(TONES + " where $1::int = 1", [1]);
      const [v, r, d] = await Promise.all([q().values(), q().raw(), q().describe()]);
      assert.deepEqual(v[0], [["low", "high"], "low"]);
      assert.equal(new TextDecoder().decode(r[0][1] as Uint8Array), "low");
      assert.equal(d.columns.length, 2);
    });
    await withTone(async () => {
      await using sql = postgres(url, { max: 1, ...quiet });
      // The first answer comes before the catalog's: the transaction starts behind it.
      await sql`select 1 as one`;
      const row = await sql.begin(async (tx) => {
        const [row] = await tx.unsafe(TONES + " where $1::int = 1", [1]);
        return row;
      });
      assert.deepEqual(row.t, ["low", "high"]);
      const [again] = await sql.unsafe(TONES + " where $1::int = 1", [1]);
      assert.deepEqual(again.t, ["low", "high"]);
    });
  },
);

serverTest(
  SEVERAL_SESSIONS,
  "fetch_types hold: several connections, prepare: false, end() while rows are kept",
  async () => {
    await withTone(async () => {
      for (const prepare of [true, false]) {
        const sql = postgres(url, { max: 3, prepare, ...quiet });
        const runs = Array.from(
          { length: 9 },
          (_, i) => sql.unsafe(TONES + " where $1::int = $1", [i]).execute(),
        );
        const ended = sql.end();
        const rows = await Promise.all(runs);
        await ended;
        for (const [row] of rows) {
          assert.deepEqual(row.t, ["low", "high"]);
          assert.equal(row.e, "low");
        }
      }
    });
  },
);

Deno.test("fetch_types hold: first queries that fill the pipeline still decode user arrays", async () => {
  await withTone(async () => {
    // More first queries than the pipeline takes: the catalog query waits in the backlog
    // behind the last of them, and those already in the pipeline answer before it is sent.
    await using sql = postgres(url, { max: 1, max_pipeline: 2, ...quiet });
    const rows = await Promise.all(
      Array.from({ length: 4 }, (_, i) => sql.unsafe(TONES + " where $1::int = $1", [i])),
    );
    for (const [row] of rows) assert.deepEqual(row.t, ["low", "high"]);
  });
});
