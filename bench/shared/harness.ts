// What the bench borrows from the test harness (test/harness/), named in this one file: the bench
// needs the same throwaway servers, server binaries and wire recorders the tests do, and keeping
// a second copy would let the two drift. No other bench file imports test/, and nothing here goes
// unused (test/bench_layout_test.ts checks both): what the bench depends on there reads at a glance.

/** The throwaway cluster bench/run.ts starts (TLS on, SCRAM and trust users), and cold's PG 18. */
export { type Cluster, startCluster } from "../../test/harness/cluster.ts";
/** The server's binaries (Debian's, else the npm package) and its client programs (psql, pgbench). */
export { clientTool, findPgBin } from "../../test/harness/server_bin.ts";
/** A loopback relay that records each side's flights: pingpong's captured bytes, cold's trips. */
export { flightRecorder } from "../../test/harness/flights.ts";
/** Reads a recorded TLS handshake: the ClientHello's key shares, a HelloRetryRequest. */
export { keyExchange } from "../../test/harness/tls_hello.ts";
/** A loopback OTLP receiver and the environment that points Deno's exporter at it (telemetry). */
export { otelEnv, startOtlpReceiver } from "../../test/harness/otlp_receiver.ts";
