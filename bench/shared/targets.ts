// The speed-ups pgpipe aims for against its peers, and the few absolute limits it aims to stay
// under (the project's speed targets). They are printed next to the measured figures so a reader
// can judge them; the bench never fails on them (numbers from a shared 2-core machine are too
// noisy to gate on).

/** Which of a suite's labels a goal applies to. */
type Applies = RegExp | ((label: string) => boolean);

/** What a ratio and a limit have in common. */
interface Goal {
  suite: string;
  applies: (label: string) => boolean;
  /**
   * A goal for a suite's TLS twin (its labels end in " (TLS)"), or for both twins; others apply
   * to plaintext only.
   */
  tls?: true | "both";
  /** How the goal reads in the report. */
  text: string;
}

/** A goal: pgpipe at least `min` times faster than `peer` on a case. */
export interface Target extends Goal {
  peer: string;
  min: number;
}

/**
 * A goal on an absolute amount rather than a ratio: pgpipe's measured `value` at most `max`
 * (e.g. microseconds of overhead per query over a raw socket).
 */
export interface Limit extends Goal {
  max: number;
  unit: string;
}

/** A goal's suite and labels; `.says(text)` completes it (the suite name ends in -tls for a TLS goal). */
function goal<T>(suite: string, applies: Applies, rest: T) {
  const tls = suite.endsWith("-tls");
  const test = applies instanceof RegExp ? (l: string) => applies.test(l) : applies;
  return {
    says: (text: string): Goal & T => ({
      suite: suite.replace(/-tls$/, ""),
      applies: test,
      ...(tls ? { tls: true as const } : {}),
      text,
      ...rest,
    }),
  };
}
const ratio = (suite: string, applies: Applies, peer: string, min: number) =>
  goal(suite, applies, { peer, min });
const limit = (suite: string, applies: Applies, max: number, unit: string) =>
  goal(suite, applies, { max, unit });

/** The same goal for a suite and its TLS twin. */
const alsoTls = <T extends Goal>(g: T): T => ({ ...g, tls: "both" });
/** A label of a case on one connection, in either twin. */
const oneConnection = (cases: string) => new RegExp(`^${cases}, 1 connection( \\(TLS\\))?$`);

const selectN = (label: string) => Number(/^select n=(\d+)$/.exec(label)?.[1] ?? 0);

export const TARGETS: readonly Target[] = [
  ratio("driver", /^insert n=200$/, "postgres.js", 3.5)
    .says("pipelined inserts (insert n=200, one connection) >= 3.5x postgres.js"),
  ratio("driver", /^insert n=1$/, "postgres.js", 1.1)
    .says("a single insert round trip (insert n=1) >= 1.1x postgres.js"),
  ratio("driver", (l) => selectN(l) >= 10, "postgres.js", 1.5)
    .says("concurrent selects (select n>=10, one connection) >= 1.5x postgres.js"),
  ratio("throughput", /^pipelined q\/s, 1 connection$/, "postgres.js", 2)
    .says("pipelined throughput (queries/s on one connection) >= 2x postgres.js"),
  ratio(
    "throughput",
    /^pipelined q\/s in a transaction, share of libpq's pipeline$/,
    "pgbench",
    0.75,
  )
    .says(
      "pipelined queries in a transaction on one connection >= 75% of libpq's pipeline " +
        "(pgbench, one Sync per 1,000)",
    ),
  ratio("throughput", /^serial latency \(mean\)$/, "postgres.js", 1.3)
    .says("serial latency (one query after another) >= 1.3x postgres.js"),
  ratio("throughput-tls", /^serial select 1, default pool \(TLS\)$/, "Bun.sql", 1)
    .says("with TLS (sslmode=require), serial `select 1` at least as fast as Bun.sql on Bun"),
  ratio("throughput-tls", /^500 in flight, default pool \(TLS\)$/, "Bun.sql", 1.2)
    .says("with TLS, 500 queries in flight on the default pool >= 1.2x Bun.sql on Bun"),
  ratio(
    "throughput-tls",
    /^pipelined q\/s, 1 connection, share of plain TCP/,
    "pgpipe (plaintext)",
    0.9,
  )
    .says("pipelined throughput over TLS >= 0.9 of the same over plain TCP"),
  ratio("http", /^req\/s,/, "postgres.js", 1.5)
    .says(
      "HTTP handler (100 rows per request as JSON) >= 1.5x postgres.js, with 1 and with 4 " +
        "connections",
    ),
  ratio("http", /^req\/s, 1 connection$/, "Bun.sql", 1)
    .says("the same HTTP handler with 1 connection at least as fast as Bun.sql on Bun"),
  ratio("cold", /^cold start:/, "postgres.js", 1)
    .says("cold start (import, connect, first query) no slower than postgres.js"),
  ratio("bulk", /^load .*binary COPY vs the best other way/, "postgres.js", 5)
    .says("bulk load (binary COPY) >= 5x postgres.js's best way (multi-row inserts or COPY text)"),
  ratio("bulk", /^load .*binary COPY vs psql's binary \\copy/, "psql", 0.9)
    .says(
      "bulk load of either bench table (binary COPY) >= 0.9 of psql's binary \\copy of the " +
        "same rows (the server's pace)",
    ),
  ratio("bulk", /^load .*binary COPY vs COPY text/, "postgres.js", 2)
    .says("bulk load of either bench table (binary COPY) >= 2x postgres.js's COPY text"),
  ratio("bulk", /^read .*copyTo vs cursor\(1000\)/, "postgres.js", 2)
    .says("bulk read of either bench table (copyTo) >= 2x postgres.js's cursor(1000)"),
  ratio("bulk", /^load .*copy_records_to_table/, "asyncpg", 1)
    .says("bulk load at least asyncpg's copy_records_to_table on the same machine"),
  ratio("pglite", /^50 concurrent selects$/, "PGlite query()", 8)
    .says("over PGlite, 50 concurrent selects >= 8x PGlite's own query() (one call for them all)"),
  ratio("pglite", /^200 concurrent inserts$/, "PGlite query()", 4)
    .says("over PGlite, 200 concurrent inserts >= 4x PGlite's own query()"),
  ratio("pglite", /^10,000 typed rows/, "PGlite query()", 1)
    .says("over PGlite, a 10,000-row typed result no slower than PGlite's own query()"),
  alsoTls(
    ratio(
      "orm",
      oneConnection("Drizzle: (50 concurrent selects|200 concurrent inserts)"),
      "postgres.js",
      4,
    )
      .says(
        "Drizzle over pgpipe >= 4x Drizzle over postgres.js on 50 concurrent selects and 200 " +
          "concurrent inserts (one connection; plaintext and TLS)",
      ),
  ),
  alsoTls(
    ratio(
      "orm",
      oneConnection("Drizzle: relational findMany, two nested levels"),
      "postgres.js",
      1.1,
    )
      .says("Drizzle's relational findMany (two nested levels) >= 1.1x over postgres.js"),
  ),
  alsoTls(
    ratio("orm", oneConnection("Drizzle HTTP: req/s"), "postgres.js", 1.3)
      .says("a Deno.serve handler answering 100 rows through Drizzle >= 1.3x over postgres.js"),
  ),
  alsoTls(
    ratio(
      "orm",
      oneConnection("Kysely, pgpipe's dialect: .*"),
      "kysely-postgres-js + postgres.js",
      3,
    )
      .says(
        "Kysely on pgpipe's dialect >= 3x Kysely on kysely-postgres-js over postgres.js " +
          "(100 concurrent selects, 200 concurrent inserts, one connection)",
      ),
  ),
];

export const LIMITS: readonly Limit[] = [
  limit("cold", /SCRAM over TLS: client created to first answer, loopback$/, 80, "ms")
    .says(
      "cold start with TLS + SCRAM on loopback <= 80 ms from creating the client to the " +
        "first answer, Deno's first TLS handshake included",
    ),
  limit("cold", /SCRAM over plaintext: client created to first answer, loopback$/, 15, "ms")
    .says("cold start with SCRAM over plain TCP on loopback <= 15 ms"),
  limit("telemetry", /^telemetry on: extra CPU per pipelined query/, 2, "µs")
    .says("telemetry on: at most 2 µs of CPU per query in the pipelined case"),
  limit(
    "cold",
    (l) => /SCRAM over TLS: round trips/.test(l) && !/sslnegotiation=direct/.test(l),
    5.5,
    "RTT",
  )
    .says("cold start with TLS + SCRAM through the proxy <= 5.5 network round trips"),
  limit("cold", /sslnegotiation=direct.*round trips/, 4.5, "RTT")
    .says("the same with sslnegotiation=direct on PostgreSQL 18 <= 4.5 round trips"),
  limit("throughput-tls", /^serial select 1: TLS cost per round trip/, 35, "µs")
    .says("TLS costs pgpipe at most 35 µs per serial round trip over plain TCP"),
  limit("throughput-tls", /^serial select 1: pgpipe on node:tls, overhead over/, 5, "µs")
    .says("where pgpipe runs on node:tls, its own cost over a raw node:tls round trip <= 5 µs"),
  limit("bulk", /^peak RSS, copy(From|To)/, 150, "MiB")
    .says(
      "peak RSS < 150 MiB (Deno's baseline included) loading or reading 500,000 rows of " +
        "either bulk table",
    ),
  limit("latency", /^insert n=200 \(5 ms each way\), pgpipe$/, 12, "ms")
    .says(
      "200 concurrent inserts in a transaction through the 5 ms-each-way proxy <= 12 ms " +
        "(one round trip and the server's work)",
    ),
  limit("throughput", /^serial select 1: pgpipe overhead over the raw ping-pong/, 10, "µs")
    .says(
      "serial `select 1`: pgpipe's overhead over a raw socket ping-pong of the same bytes " +
        "<= 10 µs per query",
    ),
];

/** A figure of a suite's TLS twin: plaintext goals do not apply to it (the issue sets its own). */
const isTlsLabel = (label: string) => label.endsWith(" (TLS)");

/** Whether a goal applies to a figure of the plaintext suite (tls false) or of its TLS twin. */
const twins = (g: Goal, tls: boolean) => g.tls === "both" || (g.tls === true) === tls;

/** The limit for a measured amount, if one is set. */
export function limitFor(suite: string, label: string): Limit | undefined {
  const tls = isTlsLabel(label);
  return LIMITS.find((t) => t.suite === suite && twins(t, tls) && t.applies(label));
}

/** The target for a measured ratio, if one is set. */
export function targetFor(suite: string, label: string, peer: string): Target | undefined {
  const tls = isTlsLabel(label);
  return TARGETS.find((t) =>
    t.suite === suite && t.peer === peer && twins(t, tls) && t.applies(label)
  );
}

/** Every goal as the report lists it. */
export function targetTexts(): string[] {
  return [...TARGETS, ...LIMITS].map((t) => t.text);
}
