// The speed-ups pgpipe aims for against postgres.js (the project's speed targets). They are printed next to the
// measured ratios so a reader can judge them; the bench never fails on them (numbers from a
// shared 2-core machine are too noisy to gate on).

/** A goal: pgpipe at least `min` times faster than `peer` on a case. */
export interface Target {
  suite: string;
  /** Which cases it applies to. */
  applies: (label: string) => boolean;
  peer: string;
  min: number;
  /** How the goal reads in the report. */
  text: string;
}

const selectN = (label: string) => Number(/^select n=(\d+)$/.exec(label)?.[1] ?? 0);

export const TARGETS: readonly Target[] = [
  {
    suite: "driver",
    applies: (l) => l === "insert n=200",
    peer: "postgres.js",
    min: 3.5,
    text: "pipelined inserts (insert n=200, one connection) >= 3.5x postgres.js",
  },
  {
    suite: "driver",
    applies: (l) => l === "insert n=1",
    peer: "postgres.js",
    min: 1.1,
    text: "a single insert round trip (insert n=1) >= 1.1x postgres.js",
  },
  {
    suite: "driver",
    applies: (l) => selectN(l) >= 10,
    peer: "postgres.js",
    min: 1.5,
    text: "concurrent selects (select n>=10, one connection) >= 1.5x postgres.js",
  },
  {
    suite: "throughput",
    applies: (l) => l === "pipelined q/s, 1 connection",
    peer: "postgres.js",
    min: 2,
    text: "pipelined throughput (queries/s on one connection) >= 2x postgres.js",
  },
  {
    suite: "throughput",
    applies: (l) => l === "serial latency (mean)",
    peer: "postgres.js",
    min: 1.3,
    text: "serial latency (one query after another) >= 1.3x postgres.js",
  },
  {
    suite: "cold",
    applies: (l) => l.startsWith("cold start:"),
    peer: "postgres.js",
    min: 1,
    text: "cold start (import, connect, first query) no slower than postgres.js",
  },
  {
    suite: "bulk",
    applies: (l) => l.startsWith("load ") && l.includes("binary COPY vs the best other way"),
    peer: "postgres.js",
    min: 5,
    text: "bulk load (binary COPY) >= 5x postgres.js's best way (multi-row inserts or COPY text)",
  },
  {
    suite: "bulk",
    applies: (l) => l.startsWith("load ") && l.includes("copy_records_to_table"),
    peer: "asyncpg",
    min: 1,
    text: "bulk load at least asyncpg's copy_records_to_table on the same machine",
  },
];

/** The target for a measured ratio, if one is set. */
export function targetFor(suite: string, label: string, peer: string): Target | undefined {
  return TARGETS.find((t) => t.suite === suite && t.peer === peer && t.applies(label));
}
