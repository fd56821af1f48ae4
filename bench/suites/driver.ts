// Run with `deno bench`: one connection per driver, n queries issued at once, pgpipe as
// the baseline of every group. This is where pipelining shows even on loopback: a driver that
// waits for each answer before sending the next query pays n round trips instead of one.
// Every iteration checks its answers, so a fast but wrong driver cannot win.
import { type Adapter, insertMany, selectMany, suiteDrivers } from "../peers/drivers.ts";
import { ask } from "../shared/ask.ts";
import { TEARDOWN_GROUP } from "../shared/bench_json.ts";
import { benchUrl, isQuick } from "../shared/env.ts";

const TYPED_ROWS = 10_000;
const quick = isQuick();
/** Time one bench of a driver that runs its n queries one after another may take (ms). */
const SERIAL_BUDGET_MS = quick ? 1_500 : 6_000;
const url = benchUrl();
const types = await ask(url, "select count(*)::int from pg_type") as number;

/** The mean ms of a few serial `select * from pg_type` and `select $1::int` (as an insert). */
type Serial = Record<"select" | "insert", number>;
async function serialCost(adapter: Adapter): Promise<Serial> {
  const mean = async (once: () => Promise<unknown>) => {
    await once();
    const t0 = performance.now();
    for (let i = 0; i < 5; i++) await once();
    return (performance.now() - t0) / 5;
  };
  const select = await mean(() => adapter.selectPgType());
  return { select, insert: await mean(() => adapter.selectInt(1)) };
}

// One connection per driver, opened (and warmed up) before any bench runs; for a driver that
// runs its queries one at a time, the ms of one query by kind.
type Client = { name: string; adapter: Adapter; serial: Serial | null };
const clients: Client[] = [];
for (const { name, pipelines, connect } of await suiteDrivers(undefined, { against: true })) {
  const adapter = await connect(url);
  clients.push({ name, adapter, serial: pipelines ? null : await serialCost(adapter) });
}

/**
 * Warm-up and measured iterations per bench. With explicit timers (b.start/b.end) deno bench
 * runs about this many (it may add a few), so they size the run: cheap cases get many
 * iterations to average out the noise of a shared machine, costly ones (n x 600 rows) fewer.
 * A driver without pipelining pays n round trips per iteration (deno-postgres, whose extended
 * queries also wait ~40 ms each for the kernel's delayed ACK): its iterations are cut to what
 * SERIAL_BUDGET_MS allows, at least 3 (1 in a quick run).
 */
function iterations(kind: "select" | "insert", n: number, serial: Client["serial"]) {
  const [warmup, usual] = quick
    ? [2, 3]
    : kind === "insert"
    ? [20, 200]
    : n <= 10
    ? [10, 100]
    : n <= 50
    ? [3, 20]
    : [2, 10];
  if (serial === null) return { warmup, n: usual };
  const fits = Math.floor(SERIAL_BUDGET_MS / (n * serial[kind]));
  return { warmup: Math.min(warmup, 1), n: Math.max(quick ? 1 : 3, Math.min(usual, fits)) };
}

/** A bench per driver in `group`, pgpipe first: the baseline (deno bench awaits async fns only). */
function group(group: string, runs: (c: Client) => Omit<Deno.BenchDefinition, "name">) {
  for (const [i, c] of clients.entries()) {
    Deno.bench({ name: c.name, group, baseline: i === 0, ...runs(c) });
  }
}

for (const n of [1, 5, 10, 50, 100, 200]) {
  group(`select n=${n}`, ({ name, adapter, serial }) => ({
    ...iterations("select", n, serial),
    fn: async (b) => await selectMany(adapter, name, n, types, b),
  }));
}

// One query of 10,000 rows of everyday types (timestamps, floats, dates): decoding, not the wire.
group(`select ${TYPED_ROWS} typed rows`, ({ name, adapter }) => ({
  ...(quick ? { warmup: 2, n: 3 } : { warmup: 5, n: 50 }),
  async fn(b) {
    b.start();
    const rows = await adapter.selectTyped(TYPED_ROWS);
    b.end();
    if (rows !== TYPED_ROWS) throw new Error(`${name}: ${rows} typed rows, not ${TYPED_ROWS}`);
  },
}));

for (const n of [1, 10, 50, 100, 200]) {
  group(`insert n=${n}`, ({ name, adapter, serial }) => ({
    ...iterations("insert", n, serial),
    fn: async (b) => await insertMany(adapter, name, n, b),
  }));
}

// deno bench has no after-all hook; benches run in registration order, so this last one closes
// every connection (its first call does; warm-up and later calls find nothing left to close).
Deno.bench({
  name: "close connections",
  group: TEARDOWN_GROUP,
  warmup: 1,
  n: 1,
  async fn() {
    await Promise.all(clients.splice(0).map((c) => c.adapter.close()));
  },
});
