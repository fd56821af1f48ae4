// The speed-ups pgpipe aims for against its peers, and the few absolute limits it aims to stay
// under (the project's speed targets). They are printed next to the measured figures so a reader
// can judge them; the bench never fails on them (numbers from a shared 2-core machine are too
// noisy to gate on).

/** A goal: pgpipe at least `min` times faster than `peer` on a case. */
export interface Target {
  suite: string;
  /** Which cases it applies to. */
  applies: (label: string) => boolean;
  /** A goal for a suite's TLS twin (its labels end in " (TLS)"); others apply to plaintext only. */
  tls?: true;
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
    applies: (l) => l === "pipelined q/s in a transaction, share of libpq's pipeline",
    peer: "pgbench",
    min: 0.75,
    text: "pipelined queries in a transaction on one connection >= 75% of libpq's pipeline " +
      "(pgbench, one Sync per 1,000)",
  },
  {
    suite: "throughput",
    applies: (l) => l === "serial latency (mean)",
    peer: "postgres.js",
    min: 1.3,
    text: "serial latency (one query after another) >= 1.3x postgres.js",
  },
  {
    suite: "throughput",
    applies: (l) => l === "serial select 1, default pool (TLS)",
    tls: true,
    peer: "Bun.sql",
    min: 1,
    text: "with TLS (sslmode=require), serial `select 1` at least as fast as Bun.sql on Bun",
  },
  {
    suite: "throughput",
    applies: (l) => l === "500 in flight, default pool (TLS)",
    tls: true,
    peer: "Bun.sql",
    min: 1.2,
    text: "with TLS, 500 queries in flight on the default pool >= 1.2x Bun.sql on Bun",
  },
  {
    suite: "throughput",
    applies: (l) => l.startsWith("pipelined q/s, 1 connection, share of plain TCP"),
    tls: true,
    peer: "pgpipe (plaintext)",
    min: 0.9,
    text: "pipelined throughput over TLS >= 0.9 of the same over plain TCP",
  },
  {
    suite: "http",
    applies: (l) => l.startsWith("req/s,"),
    peer: "postgres.js",
    min: 1.5,
    text: "HTTP handler (100 rows per request as JSON) >= 1.5x postgres.js, with 1 and with 4 " +
      "connections",
  },
  {
    suite: "http",
    applies: (l) => l === "req/s, 1 connection",
    peer: "Bun.sql",
    min: 1,
    text: "the same HTTP handler with 1 connection at least as fast as Bun.sql on Bun",
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
    applies: (l) => l.startsWith("load ") && l.includes("binary COPY vs psql's binary \\copy"),
    peer: "psql",
    min: 0.9,
    text: "bulk load of either bench table (binary COPY) >= 0.9 of psql's binary \\copy of the " +
      "same rows (the server's pace)",
  },
  {
    suite: "bulk",
    applies: (l) => l.startsWith("load ") && l.includes("binary COPY vs COPY text"),
    peer: "postgres.js",
    min: 2,
    text: "bulk load of either bench table (binary COPY) >= 2x postgres.js's COPY text",
  },
  {
    suite: "bulk",
    applies: (l) => l.startsWith("read ") && l.includes("copyTo vs cursor(1000)"),
    peer: "postgres.js",
    min: 2,
    text: "bulk read of either bench table (copyTo) >= 2x postgres.js's cursor(1000)",
  },
  {
    suite: "bulk",
    applies: (l) => l.startsWith("load ") && l.includes("copy_records_to_table"),
    peer: "asyncpg",
    min: 1,
    text: "bulk load at least asyncpg's copy_records_to_table on the same machine",
  },
];

/**
 * A goal on an absolute amount rather than a ratio: pgpipe's measured `value` at most `max`
 * (e.g. microseconds of overhead per query over a raw socket).
 */
export interface Limit {
  suite: string;
  applies: (label: string) => boolean;
  /** A limit for a suite's TLS twin; others apply to plaintext figures only. */
  tls?: true;
  max: number;
  unit: string;
  text: string;
}

export const LIMITS: readonly Limit[] = [
  {
    suite: "cold",
    applies: (l) => /SCRAM over TLS: client created to first answer, loopback$/.test(l),
    max: 80,
    unit: "ms",
    text: "cold start with TLS + SCRAM on loopback <= 80 ms from creating the client to the " +
      "first answer, Deno's first TLS handshake included",
  },
  {
    suite: "cold",
    applies: (l) => /SCRAM over plaintext: client created to first answer, loopback$/.test(l),
    max: 15,
    unit: "ms",
    text: "cold start with SCRAM over plain TCP on loopback <= 15 ms",
  },
  {
    suite: "telemetry",
    applies: (l) => l.startsWith("telemetry on: extra CPU per pipelined query"),
    max: 2,
    unit: "µs",
    text: "telemetry on: at most 2 µs of CPU per query in the pipelined case",
  },
  {
    suite: "cold",
    applies: (l) =>
      /SCRAM over TLS: round trips through/.test(l) && !l.includes("sslnegotiation=direct"),
    max: 5.5,
    unit: "RTT",
    text: "cold start with TLS + SCRAM through the proxy <= 5.5 network round trips",
  },
  {
    suite: "cold",
    applies: (l) => l.includes("sslnegotiation=direct") && l.includes("round trips"),
    max: 4.5,
    unit: "RTT",
    text: "the same with sslnegotiation=direct on PostgreSQL 18 <= 4.5 round trips",
  },
  {
    suite: "throughput",
    applies: (l) => l.startsWith("serial select 1: TLS cost per round trip"),
    tls: true,
    max: 35,
    unit: "µs",
    text: "TLS costs pgpipe at most 35 µs per serial round trip over plain TCP",
  },
  {
    suite: "throughput",
    applies: (l) => l.startsWith("serial select 1: pgpipe on node:tls, overhead over"),
    tls: true,
    max: 5,
    unit: "µs",
    text: "where pgpipe runs on node:tls, its own cost over a raw node:tls round trip <= 5 µs",
  },
  {
    suite: "bulk",
    applies: (l) => l.startsWith("peak RSS, copyFrom") || l.startsWith("peak RSS, copyTo"),
    max: 150,
    unit: "MiB",
    text: "peak RSS < 150 MiB (Deno's baseline included) loading or reading 500,000 rows of " +
      "either bulk table",
  },
  {
    suite: "latency",
    applies: (l) => l === "insert n=200 (5 ms each way), pgpipe",
    max: 12,
    unit: "ms",
    text: "200 concurrent inserts in a transaction through the 5 ms-each-way proxy <= 12 ms " +
      "(one round trip and the server's work)",
  },
  {
    suite: "throughput",
    applies: (l) => l.startsWith("serial select 1: pgpipe overhead over the raw ping-pong"),
    max: 10,
    unit: "µs",
    text: "serial `select 1`: pgpipe's overhead over a raw socket ping-pong of the same bytes " +
      "<= 10 µs per query",
  },
];

/** The limit for a measured amount, if one is set. */
export function limitFor(suite: string, label: string): Limit | undefined {
  const tls = isTlsLabel(label);
  return LIMITS.find((t) => t.suite === suite && (t.tls === true) === tls && t.applies(label));
}

/** A figure of a suite's TLS twin: plaintext goals do not apply to it (the issue sets its own). */
const isTlsLabel = (label: string) => label.endsWith(" (TLS)");

/** Every goal as the report lists it. */
export function targetTexts(): string[] {
  return [...TARGETS.map((t) => t.text), ...LIMITS.map((t) => t.text)];
}

/** The target for a measured ratio, if one is set. */
export function targetFor(suite: string, label: string, peer: string): Target | undefined {
  const tls = isTlsLabel(label);
  return TARGETS.find((t) =>
    t.suite === suite && t.peer === peer && (t.tls === true) === tls && t.applies(label)
  );
}
