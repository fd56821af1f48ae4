// The speed-ups pgpipe aims for against its peers, and the few absolute limits it aims to stay
// under (the project's speed targets). They are printed next to the measured figures so a reader
// can judge them; the bench never fails on them (numbers from a shared 2-core machine are too
// noisy to gate on).

/**
 * The goals, one a line: the suite (`-tls` for its TLS twin, whose labels end in " (TLS)"; the
 * others apply to plaintext only), a pattern of its figures' labels, then `>= MIN PEER` (pgpipe at
 * least MIN times faster than PEER) or `<= MAX UNIT` (an amount of pgpipe's at most MAX), and how
 * the goal reads. Targets first, then limits.
 */
const GOALS = `
driver | ^insert n=200$ | >= 3.5 postgres.js | pipelined inserts (insert n=200, one connection) >= 3.5x postgres.js
driver | ^insert n=1$ | >= 1.1 postgres.js | a single insert round trip (insert n=1) >= 1.1x postgres.js
driver | ^select n=[1-9]\\d+$ | >= 1.5 postgres.js | concurrent selects (select n>=10, one connection) >= 1.5x postgres.js
throughput | ^pipelined q/s, 1 connection$ | >= 2 postgres.js | pipelined throughput (queries/s on one connection) >= 2x postgres.js
throughput | ^pipelined q/s in a transaction, share of libpq's pipeline$ | >= 0.75 pgbench | pipelined queries in a transaction on one connection >= 75% of libpq's pipeline (pgbench, one Sync per 1,000)
throughput | ^serial latency \\(mean\\)$ | >= 1.3 postgres.js | serial latency (one query after another) >= 1.3x postgres.js
throughput-tls | ^serial select 1, default pool \\(TLS\\)$ | >= 1 Bun.sql | with TLS (sslmode=require), serial \`select 1\` at least as fast as Bun.sql on Bun
throughput-tls | ^500 in flight, default pool \\(TLS\\)$ | >= 1.2 Bun.sql | with TLS, 500 queries in flight on the default pool >= 1.2x Bun.sql on Bun
throughput-tls | ^pipelined q/s, 1 connection, share of plain TCP | >= 0.9 pgpipe (plaintext) | pipelined throughput over TLS >= 0.9 of the same over plain TCP
http | ^req/s, | >= 1.5 postgres.js | HTTP handler (100 rows per request as JSON) >= 1.5x postgres.js, with 1 and with 4 connections
http | ^req/s, 1 connection$ | >= 1 Bun.sql | the same HTTP handler with 1 connection at least as fast as Bun.sql on Bun
cold | ^cold start: | >= 1 postgres.js | cold start (import, connect, first query) no slower than postgres.js
bulk | ^load .*binary COPY vs the best other way | >= 5 postgres.js | bulk load (binary COPY) >= 5x postgres.js's best way (multi-row inserts or COPY text)
bulk | ^load .*binary COPY vs psql's binary \\\\copy | >= 0.9 psql | bulk load of either bench table (binary COPY) >= 0.9 of psql's binary \\copy of the same rows (the server's pace)
bulk | ^load .*binary COPY vs COPY text | >= 2 postgres.js | bulk load of either bench table (binary COPY) >= 2x postgres.js's COPY text
bulk | ^read .*copyTo vs cursor\\(1000\\) | >= 2 postgres.js | bulk read of either bench table (copyTo) >= 2x postgres.js's cursor(1000)
bulk | ^load .*copy_records_to_table | >= 1 asyncpg | bulk load at least asyncpg's copy_records_to_table on the same machine
pglite | ^50 concurrent selects$ | >= 8 PGlite query() | over PGlite, 50 concurrent selects >= 8x PGlite's own query() (one call for them all)
pglite | ^200 concurrent inserts$ | >= 4 PGlite query() | over PGlite, 200 concurrent inserts >= 4x PGlite's own query()
pglite | ^10,000 typed rows | >= 1 PGlite query() | over PGlite, a 10,000-row typed result no slower than PGlite's own query()
orm | ^Drizzle: (50 concurrent selects|200 concurrent inserts), 1 connection$ | >= 4 postgres.js | Drizzle over pgpipe >= 4x Drizzle over postgres.js on 50 concurrent selects and 200 concurrent inserts (one connection)
orm-tls | ^Drizzle: (50 concurrent selects|200 concurrent inserts), 1 connection \\(TLS\\)$ | >= 4 postgres.js | with TLS, Drizzle over pgpipe >= 4x Drizzle over postgres.js on 50 concurrent selects and 200 concurrent inserts (one connection)
orm | ^Drizzle: relational findMany, two nested levels, 1 connection$ | >= 1.1 postgres.js | Drizzle's relational findMany (two nested levels) >= 1.1x over postgres.js (one connection)
orm-tls | ^Drizzle: relational findMany, two nested levels, 1 connection \\(TLS\\)$ | >= 1.1 postgres.js | with TLS, Drizzle's relational findMany (two nested levels) >= 1.1x over postgres.js (one connection)
orm_http | ^Drizzle HTTP: req/s, 1 connection$ | >= 1.3 postgres.js | a Deno.serve handler answering 100 rows through Drizzle >= 1.3x over postgres.js (one connection)
orm_http-tls | ^Drizzle HTTP: req/s, 1 connection \\(TLS\\)$ | >= 1.3 postgres.js | with TLS, the Drizzle handler >= 1.3x over postgres.js (one connection)
orm | ^Kysely, pgpipe's dialect: .*, 1 connection$ | >= 3 kysely-postgres-js + postgres.js | Kysely on pgpipe's dialect >= 3x Kysely on kysely-postgres-js over postgres.js (100 concurrent selects, 200 concurrent inserts, one connection)
orm-tls | ^Kysely, pgpipe's dialect: .*, 1 connection \\(TLS\\)$ | >= 3 kysely-postgres-js + postgres.js | with TLS, Kysely on pgpipe's dialect >= 3x Kysely on kysely-postgres-js over postgres.js (one connection)
cold | SCRAM over TLS: client created to first answer, loopback$ | <= 80 ms | cold start with TLS + SCRAM on loopback <= 80 ms from creating the client to the first answer, Deno's first TLS handshake included
cold | SCRAM over plaintext: client created to first answer, loopback$ | <= 15 ms | cold start with SCRAM over plain TCP on loopback <= 15 ms
telemetry | ^telemetry on: extra CPU per pipelined query | <= 2 µs | telemetry on: at most 2 µs of CPU per query in the pipelined case
cold | ^(?!.*sslnegotiation=direct).*SCRAM over TLS: round trips | <= 5.5 RTT | cold start with TLS + SCRAM through the proxy <= 5.5 network round trips
cold | sslnegotiation=direct.*round trips | <= 4.5 RTT | the same with sslnegotiation=direct on PostgreSQL 18 <= 4.5 round trips
throughput-tls | ^serial select 1: TLS cost per round trip | <= 35 µs | TLS costs pgpipe at most 35 µs per serial round trip over plain TCP
throughput-tls | ^serial select 1: pgpipe on node:tls, overhead over | <= 5 µs | where pgpipe runs on node:tls, its own cost over a raw node:tls round trip <= 5 µs
bulk | ^peak RSS, copy(From|To) | <= 150 MiB | peak RSS < 150 MiB (Deno's baseline included) loading or reading 500,000 rows of either bulk table
latency | ^insert n=200 \\(5 ms each way\\), pgpipe$ | <= 12 ms | 200 concurrent inserts in a transaction through the 5 ms-each-way proxy <= 12 ms (one round trip and the server's work)
throughput | ^serial select 1: pgpipe overhead over the raw ping-pong | <= 10 µs | serial \`select 1\`: pgpipe's overhead over a raw socket ping-pong of the same bytes <= 10 µs per query
`;

/** A goal: a ratio's (`min`, `peer`) or a limit's (`max`, `unit`), for a suite's labels. */
export type Goal = {
  suite: string;
  tls: boolean;
  pattern: RegExp;
  text: string;
  min?: number;
  peer?: string;
  max?: number;
  unit?: string;
};

const goals: Goal[] = GOALS.trim().split("\n").map((line) => {
  const [suite, pattern, goal, text] = line.split(" | ");
  const [, op, value, rest] = /^(>=|<=) ([\d.]+) (.+)$/.exec(goal)!;
  const [key, amount] = op === ">=" ? ["peer", "min"] : ["unit", "max"];
  return {
    suite: suite.replace(/-tls$/, ""),
    tls: suite.endsWith("-tls"),
    pattern: new RegExp(pattern),
    text,
    [key]: rest,
    [amount]: Number(value),
  };
});

/** The goal for a figure of `suite` labelled `label`: a ratio's, given its peer, else a limit's. */
const find = (suite: string, label: string, peer?: string) =>
  goals.find((g) =>
    g.suite === suite && g.tls === label.endsWith(" (TLS)") && g.pattern.test(label) &&
    g.peer === peer
  );
export const targetFor = (suite: string, label: string, peer: string) =>
  find(suite, label, peer) as Goal & { min: number } | undefined;
export const limitFor = (suite: string, label: string) =>
  find(suite, label) as Goal & { max: number; unit: string } | undefined;

/** Every goal as the report lists it. */
export const targetTexts = () => goals.map((g) => g.text);
