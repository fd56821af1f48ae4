// The speed-ups issues 3 and 8 ask pgpipe to reach against postgres.js. They are printed next to the
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
    text: "insert n=200 >= 3.5x postgres.js",
  },
  {
    suite: "driver",
    applies: (l) => l === "insert n=1",
    peer: "postgres.js",
    min: 1.1,
    text: "insert n=1 >= 1.1x postgres.js",
  },
  {
    suite: "driver",
    applies: (l) => selectN(l) >= 10,
    peer: "postgres.js",
    min: 1.5,
    text: "select n>=10 >= 1.5x postgres.js",
  },
  {
    suite: "throughput",
    applies: (l) => l === "pipelined q/s, 1 connection",
    peer: "postgres.js",
    min: 2,
    text: "pipelined q/s >= 2x postgres.js",
  },
  {
    suite: "throughput",
    applies: (l) => l === "serial latency (mean)",
    peer: "postgres.js",
    min: 1.3,
    text: "serial latency >= 1.3x postgres.js",
  },
  {
    suite: "cold",
    applies: (l) => l.startsWith("cold start:"),
    peer: "postgres.js",
    min: 1,
    text: "cold start no slower than postgres.js",
  },
];

/** The target for a measured ratio, if an issue set one. */
export function targetFor(suite: string, label: string, peer: string): Target | undefined {
  return TARGETS.find((t) => t.suite === suite && t.peer === peer && t.applies(label));
}
