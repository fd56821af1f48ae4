// The driver suite's workloads through a proxy that adds network delay (default 5 ms each
// way, `--delay=5`). On loopback a round trip costs microseconds, so pipelining hardly shows;
// across regions it costs milliseconds, and a driver that sends n queries one round trip at a
// time pays n of them where a pipelining driver pays about one.
import { type Adapter, type Driver, insertMany, selectMany } from "../peers/drivers.ts";
import { suiteDrivers, type Timer } from "../peers/drivers.ts";
import { ask } from "../shared/ask.ts";
import { benchUrl, hostPort, isQuick, proxyDelay, via } from "../shared/env.ts";
import { startDelayProxyWorker } from "../shared/proxy.ts";
import { fmt, formatRatio, Report } from "../shared/report.ts";
import { Meter } from "../shared/stacks.ts";
import { median } from "../shared/stats.ts";

const url = benchUrl();
const delayMs = proxyDelay();
const ITERATIONS = isQuick() ? 2 : 5;
/** The insert case whose floor is one round trip and the work (and its label). */
const FLOOR_ROWS = 200;
/** Per case and driver: stop repeating (keeping at least one sample) once this much time went. */
const CASE_BUDGET_MS = isQuick() ? 5_000 : 20_000;
const types = await ask(url, "select count(*)::int from pg_type") as number;

/** A case: its label, and its workload with the timer around the part that is timed. */
type Case = [label: string, run: (a: Adapter, driver: string, t: Timer) => Promise<void>];

const CASES: Case[] = [
  ...[1, 10, 50].map((n): Case => [`select n=${n}`, (a, d, t) => selectMany(a, d, n, types, t)]),
  ...[1, 10, 100, 200].map((n): Case => [`insert n=${n}`, (a, d, t) => insertMany(a, d, n, t)]),
  // A query issued while 100 others are in flight must not wait for their answers: it should
  // cost about one round trip, not two (a write hold that kept it back until answers came did).
  ["1 query behind 100", async (a, driver, t) => {
    t.start();
    const first = Array.from({ length: 100 }, (_, k) => a.selectInt(k));
    await new Promise((r) => setTimeout(r, 1));
    const last = await a.selectInt(100);
    t.end();
    const answers = await Promise.all(first);
    if (last !== 100 || answers.some((x, k) => x !== k)) {
      throw new Error(`${driver}: wrong answers to select $1::int`);
    }
  }],
];

/** One warm-up run (statements get prepared), then the median ms of up to ITERATIONS runs. */
async function time([, run]: Case, a: Adapter, driver: string): Promise<number> {
  const once = async () => {
    const t = new Meter(undefined);
    await run(a, driver, t);
    return t.sample!.ms;
  };
  await once();
  const samples: number[] = [];
  const stop = performance.now() + CASE_BUDGET_MS;
  while (samples.length < ITERATIONS && (samples.length === 0 || performance.now() < stop)) {
    samples.push(await once());
  }
  return median(samples);
}

/** Each case's median ms on `driver` connected to `target`, in CASES' order. */
async function medians(driver: Driver, target: string, cases = CASES): Promise<number[]> {
  await using a = await driver.connect(target);
  const out: number[] = [];
  for (const c of cases) {
    out.push(await time(c, a, driver.name));
    if (target !== url) console.log(`latency: ${driver.name}: ${c[0]}: ${fmt(out.at(-1)!, 1)} ms`);
  }
  return out;
}

const drivers = await suiteDrivers();
/** Per driver, each case's median through the proxy. */
const ms: number[][] = [];
{
  await using proxy = await startDelayProxyWorker(hostPort(url), delayMs);
  for (const d of drivers) ms.push(await medians(d, via(url, proxy.port)));
}
/** pgpipe's insert n=1 and n=FLOOR_ROWS straight to the server (no proxy), for the floor below. */
const inserts = [1, FLOOR_ROWS].map((n) => CASES.find(([label]) => label === `insert n=${n}`)!);
const direct = await medians(drivers[0], url, inserts);

const report = new Report("latency");
const peers = drivers.slice(1);
const vs = (i: number, p: number) => ms[p + 1][i] / ms[0][i];
for (const [i, [label]] of CASES.entries()) {
  for (const [p, peer] of peers.entries()) {
    report.ratio(`${label} (${delayMs} ms each way)`, peer.name, vs(i, p));
  }
}
report.table(
  `Through a ${delayMs} ms-each-way proxy (median ms of ${ITERATIONS} runs)`,
  ["case", ...drivers.map((d) => `${d.name} ms`), ...peers.map((p) => `pgpipe vs ${p.name}`)],
  CASES.map(([label], i) => [
    label,
    ...drivers.map((_, d) => fmt(ms[d][i], 1)),
    ...peers.map((_, p) => formatRatio(vs(i, p))),
  ]),
);
const at = (label: string) => ms[0][CASES.findIndex(([l]) => l === label)];
const [one, many] = [at("insert n=1"), at(`insert n=${FLOOR_ROWS}`)];
// One round trip as this proxy gives it (insert n=1 through it), plus the extra time the
// server and client take for the other inserts on loopback: what a single round trip allows.
const floor = one + direct[1] - direct[0];
const against = `one round trip + the work: ${fmt(floor, 1)} ms`;
report.measure(`insert n=${FLOOR_ROWS} (${delayMs} ms each way), pgpipe`, against, many, "ms");
const [oneMs, loopback] = [fmt(one, 1), `${fmt(direct[1], 2)} - ${fmt(direct[0], 2)} ms`];
const rtt = 2 * delayMs;
report.note(
  `One round trip through the proxy costs at least ${rtt} ms; n queries sent one round trip at a time cost at least n x ${rtt} ms.`,
  `insert n=${FLOOR_ROWS}'s floor: insert n=1 through the proxy (${oneMs} ms: one round trip and the proxy's own timer slack) plus the time ${FLOOR_ROWS} inserts take beyond one on loopback (${loopback}).`,
);
await report.emit();
