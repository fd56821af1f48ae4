// Suite 3: the suite-1 workloads through a proxy that adds network delay (default 5 ms each
// way, `--delay=5`). On loopback a round trip costs microseconds, so pipelining hardly shows;
// across regions it costs milliseconds, and a driver that sends n queries one round trip at a
// time pays n of them where a pipelining driver pays about one.
import {
  type Adapter,
  ask,
  insertMany,
  selectMany,
  stopwatch,
  suiteDrivers,
  type Timer,
} from "../peers/drivers.ts";
import { benchUrl, hostPort, isQuick, numberFlag, via } from "../shared/env.ts";
import { startDelayProxyWorker } from "../shared/proxy.ts";
import { fmt, formatRatio, Report } from "../shared/report.ts";
import { median } from "../shared/stats.ts";

const quick = isQuick();
const url = benchUrl();
const delayMs = numberFlag("delay", "PGPIPE_BENCH_DELAY", 5);
const SELECT_NS = [1, 10, 50];
const INSERT_NS = [1, 10, 100, 200];
const ITERATIONS = quick ? 2 : 5;
/** The insert case that libpq's pipeline (pgbench) also runs, as the floor. */
const FLOOR_ROWS = 200;
/** Per case and driver: stop repeating (keeping at least one sample) once this much time went. */
const CASE_BUDGET_MS = quick ? 5_000 : 20_000;

interface Case {
  label: string;
  /** Runs the workload once; resolves to the milliseconds of its timed part. */
  once(a: Adapter, driver: string): Promise<number>;
}

/** A case timed by a stopwatch around its workload's timed part. */
const timed = (
  label: string,
  run: (a: Adapter, driver: string, t: Timer) => Promise<void>,
): Case => ({
  label,
  once: async (a, driver) => {
    const t = stopwatch();
    await run(a, driver, t);
    return t.ms;
  },
});

function cases(types: number): Case[] {
  return [
    ...SELECT_NS.map((n) => timed(`select n=${n}`, (a, d, t) => selectMany(a, d, n, types, t))),
    ...INSERT_NS.map((n) => timed(`insert n=${n}`, (a, d, t) => insertMany(a, d, n, t))),
    // A query issued while 100 others are in flight must not wait for their answers: it should
    // cost about one round trip, not two (a write hold that kept it back until answers came did).
    timed("1 query behind 100", async (a, driver, t) => {
      t.start();
      const first = Array.from({ length: 100 }, (_, k) => a.selectInt(k));
      await new Promise((r) => setTimeout(r, 1));
      const last = await a.selectInt(100);
      t.end();
      const answers = await Promise.all(first);
      if (last !== 100 || answers.some((x, k) => x !== k)) {
        throw new Error(`${driver}: wrong answers to select $1::int`);
      }
    }),
  ];
}

/** One warm-up run (statements get prepared), then the median of up to ITERATIONS runs. */
async function time(c: Case, a: Adapter, driver: string): Promise<number> {
  await c.once(a, driver);
  const samples: number[] = [];
  const stop = performance.now() + CASE_BUDGET_MS;
  while (samples.length < ITERATIONS && (samples.length === 0 || performance.now() < stop)) {
    samples.push(await c.once(a, driver));
  }
  return median(samples);
}

async function main(): Promise<void> {
  const drivers = await suiteDrivers();
  const types = await ask(url, "select count(*)::int from pg_type") as number;
  const proxy = await startDelayProxyWorker(hostPort(url), delayMs);
  const all = cases(types);
  // medians[caseIndex][driverIndex], in milliseconds
  const medians: number[][] = all.map(() => []);
  // pgpipe's insert n=1 and n=FLOOR_ROWS straight to the server (no proxy), for the floor below.
  const direct: number[] = [];
  try {
    for (const [d, driver] of drivers.entries()) {
      const a = await driver.connect(via(url, proxy.port));
      try {
        for (const [i, c] of all.entries()) {
          medians[i][d] = await time(c, a, driver.name);
          console.log(`latency: ${driver.name}: ${c.label}: ${fmt(medians[i][d], 1)} ms`);
        }
      } finally {
        await a.close();
      }
    }
    const a = await drivers[0].connect(url);
    try {
      for (const n of [1, FLOOR_ROWS]) {
        const c = all.find((x) => x.label === `insert n=${n}`)!;
        direct.push(await time(c, a, drivers[0].name));
      }
    } finally {
      await a.close();
    }
  } finally {
    await proxy.close();
  }

  const report = new Report("latency");
  const peers = drivers.slice(1);
  const vs = (i: number, p: number) => medians[i][p + 1] / medians[i][0];
  for (const [i, c] of all.entries()) {
    for (const [p, peer] of peers.entries()) {
      report.ratio(`${c.label} (${delayMs} ms each way)`, peer.name, vs(i, p));
    }
  }
  report.table(
    `Through a ${delayMs} ms-each-way proxy (median ms of ${ITERATIONS} runs)`,
    ["case", ...drivers.map((d) => `${d.name} ms`), ...peers.map((p) => `pgpipe vs ${p.name}`)],
    all.map((c, i) => [
      c.label,
      ...drivers.map((_, d) => fmt(medians[i][d], 1)),
      ...peers.map((_, p) => formatRatio(vs(i, p))),
    ]),
  );
  const one = all.findIndex((c) => c.label === "insert n=1");
  const many = all.findIndex((c) => c.label === `insert n=${FLOOR_ROWS}`);
  // One round trip as this proxy gives it (insert n=1 through it), plus the extra time the
  // server and client take for the other inserts on loopback: what a single round trip allows.
  const floor = medians[one][0] + direct[1] - direct[0];
  report.measure(
    `insert n=${FLOOR_ROWS} (${delayMs} ms each way), pgpipe`,
    `one round trip + the work: ${fmt(floor, 1)} ms`,
    medians[many][0],
    "ms",
  );
  report.note(
    `One round trip through the proxy costs at least ${2 * delayMs} ms; n queries sent one ` +
      `round trip at a time cost at least n x ${2 * delayMs} ms.`,
    `insert n=${FLOOR_ROWS}'s floor: insert n=1 through the proxy (${
      fmt(medians[one][0], 1)
    } ms: one round trip and the proxy's own timer slack) plus the time ${FLOOR_ROWS} inserts ` +
      `take beyond one on loopback (${fmt(direct[1], 2)} - ${fmt(direct[0], 2)} ms).`,
  );
  await report.emit();
}

await main();
