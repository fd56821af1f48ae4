// Cold start, as a Deno Deploy isolate sees it: a fresh process imports the driver,
// creates a client and runs its first query; each driver in alternation, many times, medians
// compared. First with default options and the plain URL (trust); then where users live: SCRAM,
// plaintext and TLS (sslmode=require), on loopback and through the latency proxy (5 ms each way
// by default), for pgpipe (without the CA, and a first start with it: node:tls; direct TLS with
// the CA: native), postgres.js and Bun.sql. A figure is the time from creating the client to the
// first answer; the proxy's extra time over loopback, divided by its round trip, is the round
// trips the start costs on a real link. psql (libpq), the reference, is timed as a whole process,
// its start on loopback subtracted like pgpipe's. Each TLS start also runs once through a flight
// recorder, which shows the key shares each ClientHello carries, whether the server answered
// with a HelloRetryRequest, and what each round trip carries. Last, on PostgreSQL 18 (from the
// test harness's server packages), the same starts, and sslnegotiation=direct against SSLRequest.
import { findBun } from "../peers/bun.ts";
import { suiteDrivers } from "../peers/drivers.ts";
import { ask } from "../shared/ask.ts";
import { hostPort, isQuick, plainBenchUrl, proxyDelay, via } from "../shared/env.ts";
import { clientTool, startCluster } from "../shared/harness.ts";
import { seenStart } from "../shared/login_flights.ts";
import { probe, run, spawn } from "../shared/probe.ts";
import { startDelayProxyWorker } from "../shared/proxy.ts";
import { fmt, Report } from "../shared/report.ts";
import { Samples } from "../shared/stats.ts";

const url = plainBenchUrl();
const [runs, startRuns] = isQuick() ? [5, 3] : [20, 10];
const delay = proxyDelay();
const fmt1 = (x: number) => fmt(x, 1);
/** The drivers the probe knows, and where each is imported from. */
const drivers = await suiteDrivers(["pgpipe", "postgres.js", "deno-postgres"]);
const names = drivers.map((d) => d.name);
const specifiers = new Map(drivers.map((d) => [d.name, d.specifier]));
const specifierOf = (client: string) => specifiers.get(client.replace("-ca", "")) ?? "";
/** The peers compared with pgpipe in ratios (none where pgpipe is not run). */
const others = names.filter((n) => n !== "pgpipe" && names.includes("pgpipe"));
const bun = await findBun((line) => console.log(`cold: ${line}`));
/** psql, when the machine has it: libpq's cold start is the reference. */
const psqlPath = clientTool(null, "psql");
const psql = await run(psqlPath, ["--version"]).then(() => psqlPath, () => null);

/** A start in ms: process start (Deno's own excluded) or client creation to answer; the process. */
type Sample = { importToAnswer: number; createdToAnswer: number; wall: number };

/**
 * One fresh process: `client` is pgpipe, pgpipe-ca, postgres.js, deno-postgres, Bun.sql or
 * psql. psql's figures are its whole process (`-c 'select 1'`; GSSAPI encryption off, so its
 * first message is the SSLRequest): the start on loopback, subtracted, takes its own start out.
 * With `import`, the probe imports `client` (`empty`: nothing) and exits, no connection.
 */
async function once(client: string, target: string, ...mode: ["import"] | []): Promise<Sample> {
  const t0 = performance.now();
  if (client === "psql") {
    const args = ["-X", "-A", "-t", "-c", "select 1 as x", target];
    const out = await spawn(psql!, args, { env: { PGGSSENCMODE: "disable" } });
    const wall = performance.now() - t0;
    if (out.code !== 0 || out.stdout.trim() !== "1") {
      throw new Error(`psql: ${out.stdout.trim()} ${out.stderr}`);
    }
    return { importToAnswer: wall, createdToAnswer: wall, wall };
  }
  const r = client === "Bun.sql"
    ? await probe<Sample>("cold_bun.ts", [target], { runtime: (bun as { path: string }).path })
    : await probe<Sample>("cold.ts", [client, target, specifierOf(client), ...mode]);
  return { ...r, wall: performance.now() - t0 };
}

// ------------------------------------------------------ 1. Default options, plain URL

const [wall, inner] = [new Samples(), new Samples()];
for (let i = 0; i < runs; i++) {
  for (const n of names) {
    const s = await once(n, url);
    wall.add(n, s.wall);
    inner.add(n, s.importToAnswer);
  }
}
const report = new Report("cold");
report.note(
  "Every driver uses its default options with the same URL (sslmode=disable); pgpipe and postgres.js fetch array types on connect.",
);
for (const peer of others) {
  const label = "cold start: import, connect, first query (in process)";
  report.ratio(label, peer, inner.median(peer) / inner.median("pgpipe"));
}
report.table(
  `Cold start: fresh process, import, connect, first query (median of ${runs})`,
  "driver | import to first answer (ms) | whole process incl. Deno start (ms)",
  names.map((n) => [n, fmt(inner.median(n), 1), fmt(wall.median(n), 1)]),
);

// ---------------------------------- 1b. The import alone, over an empty Deno script

const EMPTY = "empty Deno script";
const [importWall, importIn] = [new Samples(), new Samples()];
for (let i = 0; i < runs; i++) {
  importWall.add(EMPTY, (await once("empty", url, "import")).wall);
  for (const n of names) {
    const s = await once(n, url, "import");
    importWall.add(n, s.wall);
    importIn.add(n, s.importToAnswer);
  }
}
const emptyWall = importWall.median(EMPTY);
const over = (n: string) => importWall.median(n) - emptyWall;
for (const peer of others) {
  const label = "cold import over an empty Deno script (whole process)";
  report.ratio(label, peer, over(peer) / over("pgpipe"));
}
report.table(
  `Cold import: a fresh process imports the driver and exits, beside an empty Deno script (median of ${runs}, alternating)`,
  "script | whole process (ms) | over the empty script (ms) | import in process (ms)",
  [
    [EMPTY, fmt(emptyWall, 1), "0", "-"],
    ...names.map((n) => [n, ...[importWall.median(n), over(n), importIn.median(n)].map(fmt1)]),
  ],
);

// -------------------------------- 2. SCRAM, plaintext and TLS, loopback and through the proxy

/** A start: which client, the scenario a table names, the URL's parameters. */
type Start = { client: string; scenario: string; params: Record<string, string> };
/** Per start: medians of created→answer on loopback and through the proxy; the round trips. */
type Starts = Map<Start, { loopback: number; link: number; trips: number }>;
type Server = { hostname: string; port: number };

/** Runs each start on loopback and through the proxy, alternating, startRuns times. */
async function starts(base: string, list: Start[], server: Server): Promise<Starts> {
  await using proxy = await startDelayProxyWorker(server, delay);
  const [loopback, link] = [new Samples(), new Samples()];
  for (let i = 0; i < startRuns; i++) {
    for (const [k, s] of list.entries()) {
      const time = async (port: number) =>
        (await once(s.client, via(base, port, s.params))).createdToAnswer;
      loopback.add(String(k), await time(server.port));
      link.add(String(k), await time(proxy.port));
    }
  }
  return new Map(list.map((s, k) => {
    const [l, p] = [loopback.median(String(k)), link.median(String(k))];
    return [s, { loopback: l, link: p, trips: (p - l) / (2 * delay) }];
  }));
}

const scramUrl = Deno.env.get("PGPIPE_BENCH_SCRAM_URL");
const server = hostPort(url);
const hasCa = Deno.env.get("PGPIPE_BENCH_CA") !== undefined;
const peers = [...names.filter((n) => n === "postgres.js"), ...("path" in bun ? ["Bun.sql"] : [])];
if ("skip" in bun) report.note(bun.skip);
/** Clients timed beside the peers but not compared in ratios: libpq is the protocol's reference. */
const references = psql === null ? [] : ["psql"];
if (psql === null) report.note("skipped psql (the libpq reference): no psql binary");

/** A start's client as the tables name it. */
function label(s: Start): string {
  const tls = s.params.sslmode === "require" ? "pgpipe (node:tls)" : "pgpipe";
  const who = { "pgpipe-ca": "pgpipe (CA)", pgpipe: tls }[s.client] ?? s.client;
  return s.params.sslnegotiation === "direct" ? `${who}, sslnegotiation=direct` : who;
}

/** One table row per start: client, scenario, loopback and link ms, round trips on the link. */
const startRows = (result: Starts) =>
  [...result].map(([s, r]) => [label(s), s.scenario, ...[r.loopback, r.link, r.trips].map(fmt1)]);

/** The rows of the table of TLS starts on the wire, for every server. */
const wire: string[][] = [];

/** Each TLS start of `list` once through a flight recorder on loopback, into `wire`. */
async function onTheWire(base: string, list: Start[], server: Server, major: number) {
  for (const s of list.filter((s) => s.params.sslmode !== "disable")) {
    const seen = await seenStart(server, (port) => once(s.client, via(base, port, s.params)));
    wire.push([label(s), String(major), ...seen]);
  }
}

/** The SCRAM starts on the bench's server: their table, measures against the limits, ratios. */
async function scramStarts(scramUrl: string): Promise<void> {
  const list: Start[] = [];
  for (const [scenario, sslmode] of [["plaintext", "disable"], ["TLS", "require"]]) {
    const params = { sslmode };
    list.push({ client: "pgpipe", scenario, params });
    if (sslmode === "require" && hasCa) list.push({ client: "pgpipe-ca", scenario, params });
    for (const p of [...peers, ...references]) list.push({ client: p, scenario, params });
  }
  const result = await starts(scramUrl, list, server);
  const version = await ask(scramUrl, "select current_setting('server_version_num')::int");
  await onTheWire(scramUrl, list, server, Math.floor(version as number / 1e4));
  report.table(
    `Cold start with SCRAM: client created to first answer (ms, median of ${startRuns}), loopback and through the proxy (${delay} ms each way)`,
    "client | link | loopback | proxy | round trips on the link",
    startRows(result),
  );
  const get = (client: string, scenario: string) =>
    [...result].find(([s]) => s.client === client && s.scenario === scenario)?.[1];
  const ours = [["pgpipe", "plaintext"], ["pgpipe", "TLS"], ["pgpipe-ca", "TLS"]];
  for (const [client, scenario] of ours) {
    const r = get(client, scenario);
    if (!r) continue;
    const over = `${label({ client, scenario, params: {} })}, SCRAM over ${scenario}`;
    const first = `${over}: client created to first answer, loopback`;
    report.measure(first, "fresh process", r.loopback, "ms");
    const trips = `${over}: round trips through the ${delay} ms proxy`;
    report.measure(trips, "loopback", r.trips, "RTT");
    for (const p of peers) {
      const theirs = get(p, scenario);
      if (!theirs || client === "pgpipe-ca") continue;
      const at = `SCRAM over ${scenario}, created to first answer`;
      report.ratio(`${at}, loopback`, p, theirs.loopback / r.loopback);
      report.ratio(`${at}, ${delay} ms proxy`, p, theirs.link / r.link);
    }
  }
  const rtt = 2 * delay;
  report.note(
    `Round trips on the link: (median through the proxy - median on loopback) / ${rtt} ms. Deno's first TLS handshake in a process costs tens of ms of local time whatever the API; it is in both, so it cancels out of the round trips but not out of the loopback figure.`,
  );
}

// ------- 3. PostgreSQL 18: direct TLS, and the same starts against a server that offers X25519

async function directOn18(): Promise<void> {
  const pg18 = await startCluster({ ssl: true, name: "bench18", pg: "18" });
  try {
    const { user, password } = pg18.users.scram;
    const secret = encodeURIComponent(password);
    const base = `postgres://${user}:${secret}@127.0.0.1:${pg18.port}/${pg18.database}`;
    Deno.env.set("PGPIPE_BENCH_CA", pg18.caCertPath!); // the children read it: this cluster's CA
    const required = { sslmode: "require" };
    const direct = { ...required, sslnegotiation: "direct" };
    const viaRequest = (client: string) => ({ client, scenario: "SSLRequest", params: required });
    const list: Start[] = [
      viaRequest("pgpipe-ca"),
      { client: "pgpipe-ca", scenario: "direct", params: direct },
      // The same starts as on the bench's server, for the comparison across versions.
      ...["pgpipe", ...peers, ...references].map(viaRequest),
    ];
    const at = { hostname: "127.0.0.1", port: pg18.port };
    const major = Math.floor(pg18.version / 10000);
    const result = await starts(base, list, at);
    await onTheWire(base, list, at, major);
    report.table(
      `Cold start on PostgreSQL ${major}, TLS + SCRAM: the SSLRequest against sslnegotiation=direct, and the same starts as above (ms, median of ${startRuns})`,
      "client | negotiation | loopback | proxy | round trips on the link",
      startRows(result),
    );
    const trips = [...result].find(([s]) => s.scenario === "direct")?.[1].trips;
    if (trips !== undefined) {
      const label =
        `pgpipe (CA: native TLS), SCRAM over TLS, sslnegotiation=direct on 18: round trips through the ${delay} ms proxy`;
      report.measure(label, "loopback", trips, "RTT");
    }
  } finally {
    await pg18.stop();
  }
}

if (scramUrl === undefined) {
  report.note("The SCRAM and TLS starts need the bench's own server (no PGPIPE_BENCH_SCRAM_URL).");
} else {
  await scramStarts(scramUrl);
  if (hasCa && Deno.env.get("PGPIPE_BENCH_PG18") !== "0") {
    await directOn18().catch((e) =>
      report.note(`skipped direct TLS on PostgreSQL 18: ${(e as Error).message.split("\n")[0]}`)
    );
  }
}

if (wire.length > 0) {
  report.table(
    "TLS + SCRAM starts on the wire: one start per client and server through a flight recorder on loopback",
    "client | PostgreSQL | key shares in the ClientHello | server's first answer | round trips | what each round trip carries",
    wire,
  );
  report.note(
    "On the wire: a round trip is a client flight the next server flight answers, up to the first answer (the Terminate after it is left out). Encrypted flights are named by their place in a SCRAM login. PostgreSQL up to 17 offers one key exchange group (ssl_ecdh_curve, prime256v1 by default); a ClientHello with only an X25519 share gets a HelloRetryRequest, one round trip more. 18 also offers X25519 (ssl_groups). Deno's TLS (rustls) sends one X25519 share and has no option to choose; libpq (OpenSSL 3.0) does the same. pgpipe's node:tls path teaches node:tls a secp256r1 share first (src/connection/transport/tls_group.ts), which every PostgreSQL takes at once.",
  );
}

await report.emit();
