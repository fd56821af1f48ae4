// Stacks (a driver, an ORM over a driver...) compared on the same cases, in rounds with the
// starting stack rotated, for the orm and parsers suites: each case is timed between its
// Meter's start and end, with the CPU it cost this process and the server's processes, and
// checks its answers outside that span; the table gives medians, middle halves and ratios. The
// Meter is the bench's one stopwatch: the latency suite times its cases with it too.
import { benchUrl, isQuick, sslOf } from "./env.ts";
import { cpuMs, serverCpuMs } from "./cpu.ts";
import { fmt, formatRatio, type Report } from "./report.ts";
import { percentile, rotated } from "./stats.ts";

/** The slice of the postgres.js API pgpipe and postgres.js both give the suites. */
export interface Sql {
  (strings: TemplateStringsArray, ...values: unknown[]): PromiseLike<Record<string, unknown>[]>;
  end(options?: { timeout?: number }): Promise<void>;
}
export type Factory = (url: string, options: Record<string, unknown>) => Sql;

/** A client of `factory` on the bench's database with a pool of `max`. */
export const clientOf = (factory: Factory, max: number, options: Record<string, unknown> = {}) =>
  factory(benchUrl(), { max, ssl: sslOf(benchUrl()), onnotice: () => {}, ...options });

/** Untimed runs of each case on each stack before the rounds. */
export const WARMUP = isQuick() ? 3 : 10;

/** One timed run: wall ms, and CPU ms of this process and of the server's processes. */
export interface Sample {
  ms: number;
  clientMs: number;
  serverMs: number;
}

/** Where a case's timed part starts and ends; reads the CPU on both sides around it. */
export class Meter {
  #t0 = 0;
  #c0 = 0;
  #s0 = 0;
  sample: Sample | undefined;
  constructor(readonly postmaster: number | undefined) {}
  #server = () => this.postmaster === undefined ? NaN : serverCpuMs(this.postmaster);
  start(): void {
    this.#s0 = this.#server();
    this.#c0 = cpuMs() ?? NaN;
    this.#t0 = performance.now();
  }
  end(): void {
    const ms = performance.now() - this.#t0;
    const clientMs = (cpuMs() ?? NaN) - this.#c0;
    this.sample = { ms, clientMs, serverMs: this.#server() - this.#s0 };
  }
}

/** A workload: its name, the queries one run sends, and one run (timed between t.start/end). */
export interface Case<C> {
  name: string;
  queries: number;
  run(c: C, round: number, t: Meter): Promise<void>;
}

/** A way to run the cases: its name, and how to open it with a pool of `max`. */
export interface Stack<C> {
  name: string;
  open(max: number): Promise<{ c: C; close(): Promise<unknown> }>;
}

/** Stacks compared on the same cases, with each pool size. */
export interface Group<C> {
  title: string;
  stacks: Stack<C>[];
  cases: Case<C>[];
  pools: number[];
  rounds: number;
}

/** Samples by `pool/stack/case`. */
export type Results = Map<string, Sample[]>;
const key = (pool: number, stack: string, kase: string) => `${pool}/${stack}/${kase}`;

/** Opens every stack of a group per pool, warms each case up, then runs rotated rounds. */
export async function runGroup<C>(
  g: Group<C>,
  postmaster: number | undefined,
  log: (s: string) => void,
): Promise<Results> {
  const results: Results = new Map();
  for (const pool of g.pools) {
    const open = [];
    try {
      for (const s of g.stacks) open.push({ name: s.name, ...(await s.open(pool)) });
      for (const o of open) {
        for (const k of g.cases) {
          for (let i = 0; i < WARMUP; i++) await k.run(o.c, -1 - i, new Meter(undefined));
        }
      }
      await rotated(g.rounds, open, async (o, round) => {
        for (const k of g.cases) {
          const t = new Meter(postmaster);
          await k.run(o.c, round, t);
          const at = key(pool, o.name, k.name);
          results.set(at, [...results.get(at) ?? [], t.sample!]);
        }
      });
    } finally {
      await Promise.allSettled(open.map((o) => o.close()));
    }
    log(`${g.title}, pool ${pool}: ${g.rounds} rounds done`);
  }
  return results;
}

const pick = (xs: Sample[], f: (s: Sample) => number, p = 50) => percentile(xs.map(f), p);
/** "1 connection", "10 connections". */
export const conns = (pool: number) => `${pool} connection${pool === 1 ? "" : "s"}`;

/** The median ms of a stack on a case. */
export const medianMs = (r: Results, pool: number, stack: string, kase: string) =>
  pick(r.get(key(pool, stack, kase))!, (s) => s.ms);

/**
 * A group's table: per case and pool, each stack's median ms and middle half, its speed-up
 * over `peer` (peer's ms / its ms), and CPU µs per query on each side. Given `prefix`, each
 * speed-up is also the summary's ratio `PREFIX(stack): case, N connections` against `peer`.
 */
export function groupTable<C>(
  report: Report,
  g: Group<C>,
  r: Results,
  peer: string,
  vs: string,
  prefix?: (stack: string) => string,
) {
  const rows: string[][] = [];
  for (const k of g.cases) {
    for (const pool of g.pools) {
      const base = medianMs(r, pool, peer, k.name);
      for (const s of g.stacks) {
        const xs = r.get(key(pool, s.name, k.name))!;
        const ms = pick(xs, (x) => x.ms);
        const us = (f: (s: Sample) => number) => fmt((pick(xs, f) * 1000) / k.queries, 1);
        if (prefix && s.name !== peer) {
          report.ratio(`${prefix(s.name)}: ${k.name}, ${conns(pool)}`, peer, base / ms);
        }
        rows.push([
          k.name,
          String(pool),
          s.name,
          fmt(ms, 2),
          `${fmt(pick(xs, (x) => x.ms, 25), 2)}-${fmt(pick(xs, (x) => x.ms, 75), 2)}`,
          s.name === peer ? "1.00x" : formatRatio(base / ms),
          us((x) => x.clientMs),
          us((x) => x.serverMs),
        ]);
      }
    }
  }
  report.table(
    `${g.title} (median of ${g.rounds} rotated rounds)`,
    `case | pool | stack | ms | middle half | ${vs} | client CPU µs/query | server CPU µs/query`,
    rows,
  );
}

/** What the CPU columns of groupTable count. */
export const CPU_NOTE = `Client CPU: this process, all threads; server CPU: every PostgreSQL ` +
  `process; both per query of the case, read around the timed part only.`;
