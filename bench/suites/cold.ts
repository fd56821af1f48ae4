// Suite 5: cold start, as a Deno Deploy isolate sees it: a fresh process imports the driver,
// creates a client and runs its first query. Each driver runs in alternation, many times, and
// the medians are compared.
//
// First as before: pgpipe and postgres.js, default options, the plain URL (trust). Then where
// users live: SCRAM, plaintext and TLS (sslmode=require), on loopback and through the latency
// proxy (5 ms each way by default), for pgpipe (without the CA, and a first start with it: node:tls; direct TLS with the CA: native),
// postgres.js and Bun.sql. A figure is the time from creating the client to the first answer;
// the proxy's extra time over loopback, divided by its round trip, is the round trips the start
// costs on a real link. psql (libpq) is timed the same way, as the reference: its whole process
// is timed, and its start on loopback subtracted like pgpipe's. Each TLS start also runs once
// through a flight recorder, which shows the key shares each client's ClientHello carries,
// whether the server answered with a HelloRetryRequest, and what each round trip carries. Last,
// on PostgreSQL 18 (from the test harness's server packages), the same starts, and
// sslnegotiation=direct against the SSLRequest.
import { startCluster } from "../../test/harness/cluster.ts";
import { clientTool } from "../../test/harness/server_bin.ts";
import { findBun } from "../peers/bun.ts";
import { suiteDrivers } from "../peers/drivers.ts";
import postgres from "../../mod.ts";
import { isQuick, numberFlag, plainBenchUrl } from "../shared/env.ts";
import { seenRow, seeStart } from "../shared/login_flights.ts";
import { startDelayProxyWorker } from "../shared/proxy.ts";
import { emitReport, fmt, type Measure, type Ratio, type Table } from "../shared/report.ts";
import { median } from "../shared/stats.ts";

const url = plainBenchUrl();
const runs = isQuick() ? 5 : 20;
const startRuns = isQuick() ? 3 : 10;
const delay = numberFlag("delay", "PGPIPE_BENCH_DELAY", 5);
const probes = new URL("../probes/", import.meta.url).pathname;
/** The drivers the probe knows, and where each is imported from. */
const PROBED = ["pgpipe", "postgres.js", "deno-postgres"];
const drivers = (await suiteDrivers()).filter((d) => PROBED.includes(d.name));
const names = drivers.map((d) => d.name);
const specifiers = new Map(drivers.map((d) => [d.name, d.specifier]));

interface Sample {
  /** From process start to the answer (Deno's own start-up excluded). */
  importToAnswer: number;
  /** From creating the client to the answer. */
  createdToAnswer: number;
  /** The whole process, Deno's start included. */
  wall: number;
}

const bun = await findBun((line) => console.log(`cold: ${line}`));

/** psql, when the machine has it: libpq's cold start is the reference. */
const psql = await (async () => {
  const path = clientTool(null, "psql");
  try {
    return (await new Deno.Command(path, { args: ["--version"], stdout: "null" }).output()).success
      ? path
      : null;
  } catch {
    return null;
  }
})();

/**
 * One fresh process: `client` is pgpipe, pgpipe-ca, postgres.js, deno-postgres, Bun.sql or
 * psql. psql's figures are its whole process (`-c 'select 1'`; GSSAPI encryption off, so its
 * first message is the SSLRequest): the start on loopback, subtracted, takes its own start out.
 */
async function once(client: string, target: string): Promise<Sample> {
  const t0 = performance.now();
  if (client === "psql") {
    const out = await new Deno.Command(psql!, {
      args: ["-X", "-A", "-t", "-c", "select 1 as x", target],
      env: { PGGSSENCMODE: "disable" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const wall = performance.now() - t0;
    const answer = new TextDecoder().decode(out.stdout).trim();
    if (out.code !== 0 || answer !== "1") {
      throw new Error(`psql: ${answer} ${new TextDecoder().decode(out.stderr)}`);
    }
    return { importToAnswer: wall, createdToAnswer: wall, wall };
  }
  const command = client === "Bun.sql"
    ? new Deno.Command((bun as { path: string }).path, {
      args: [`${probes}cold_bun.ts`, target],
      stdout: "piped",
      stderr: "piped",
    })
    : new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        "--no-lock",
        `${probes}cold.ts`,
        client,
        target,
        specifiers.get(client === "pgpipe-ca" ? "pgpipe" : client)!,
      ],
      stdout: "piped",
      stderr: "piped",
    });
  const out = await command.output();
  const wall = performance.now() - t0;
  if (out.code !== 0) throw new Error(`${client}: ${new TextDecoder().decode(out.stderr)}`);
  const r = JSON.parse(new TextDecoder().decode(out.stdout).trim().split("\n").pop()!);
  return { ...r, wall };
}

// ---------------------------------------------------------------------------------------------
// 1. Default options, plain URL

const samples = new Map<string, Sample[]>(names.map((n) => [n, []]));
for (let i = 0; i < runs; i++) {
  for (const n of names) samples.get(n)!.push(await once(n, url));
}
const med = (n: string) => ({
  wall: median(samples.get(n)!.map((s) => s.wall)),
  inner: median(samples.get(n)!.map((s) => s.importToAnswer)),
});
const ratios: Ratio[] = [];
const measures: Measure[] = [];
const tables: Table[] = [];
const notes: string[] = [
  "Every driver uses its default options with the same URL (sslmode=disable); pgpipe and postgres.js fetch array types on connect.",
];
for (const peer of names) {
  if (peer === "pgpipe" || !names.includes("pgpipe")) continue;
  ratios.push({
    suite: "cold",
    label: "cold start: import, connect, first query (in process)",
    peer,
    value: med(peer).inner / med("pgpipe").inner,
  });
}
tables.push({
  title: `Cold start: fresh process, import, connect, first query (median of ${runs})`,
  head: ["driver", "import to first answer (ms)", "whole process incl. Deno start (ms)"],
  rows: names.map((n) => [n, fmt(med(n).inner, 1), fmt(med(n).wall, 1)]),
});

// ---------------------------------------------------------------------------------------------
// 2. SCRAM, plaintext and TLS, loopback and through the proxy

/** The URL of `base` through 127.0.0.1:port with the given sslmode (and more parameters). */
function via(base: string, port: number, params: Record<string, string>): string {
  const u = new URL(base);
  u.hostname = "127.0.0.1";
  u.port = String(port);
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  return u.toString();
}

interface Start {
  client: string;
  scenario: string;
  params: Record<string, string>;
}

/** Medians of created→answer on loopback and through the proxy, and the round trips between. */
async function starts(
  base: string,
  list: Start[],
  server: { hostname: string; port: number },
): Promise<Map<Start, { loopback: number; link: number; trips: number }>> {
  const proxy = await startDelayProxyWorker(server, delay);
  const times = new Map(list.map((s) => [s, { loopback: [] as number[], link: [] as number[] }]));
  try {
    for (let i = 0; i < startRuns; i++) {
      for (const s of list) {
        const t = times.get(s)!;
        t.loopback.push((await once(s.client, via(base, server.port, s.params))).createdToAnswer);
        t.link.push((await once(s.client, via(base, proxy.port, s.params))).createdToAnswer);
      }
    }
  } finally {
    await proxy.close();
  }
  const out = new Map<Start, { loopback: number; link: number; trips: number }>();
  for (const [s, t] of times) {
    const loopback = median(t.loopback);
    const link = median(t.link);
    out.set(s, { loopback, link, trips: (link - loopback) / (2 * delay) });
  }
  return out;
}

const scramUrl = Deno.env.get("PGPIPE_BENCH_SCRAM_URL");
const server = (() => {
  const u = new URL(url);
  return { hostname: u.hostname, port: Number(u.port || 5432) };
})();
const hasCa = Deno.env.get("PGPIPE_BENCH_CA") !== undefined;
const peers = ["postgres.js", ...("path" in bun ? ["Bun.sql"] : [])].filter((p) =>
  p === "Bun.sql" || names.includes(p)
);
if (!("path" in bun)) notes.push(`skipped Bun.sql: no bun binary (${bun.reason})`);
/** Clients timed beside the peers but not compared in ratios: libpq is the protocol's reference. */
const references = psql === null ? [] : ["psql"];
if (psql === null) notes.push("skipped psql (the libpq reference): no psql binary");

/** A start's client as the tables name it. */
function label(s: Start): string {
  const who = s.client === "pgpipe-ca"
    ? "pgpipe (CA)"
    : s.client === "pgpipe" && s.params.sslmode === "require"
    ? "pgpipe (node:tls)"
    : s.client;
  return s.params.sslnegotiation === "direct" ? `${who}, sslnegotiation=direct` : who;
}

/** One table row per start: client, scenario, loopback and link ms, round trips on the link. */
function startRows(result: Awaited<ReturnType<typeof starts>>): string[][] {
  return [...result].map(([s, r]) => [
    label(s),
    s.scenario,
    fmt(r.loopback, 1),
    fmt(r.link, 1),
    fmt(r.trips, 1),
  ]);
}

/** The TLS starts of `list` on the wire, once each through a flight recorder on loopback. */
async function onTheWire(
  base: string,
  list: Start[],
  server: { hostname: string; port: number },
  major: number,
): Promise<string[][]> {
  const rows: string[][] = [];
  for (const s of list) {
    if (s.params.sslmode === "disable") continue;
    const seen = await seeStart(server, (port) => once(s.client, via(base, port, s.params)));
    rows.push([label(s), String(major), ...seenRow(seen)]);
  }
  return rows;
}

/** The server's major version. */
async function serverMajor(base: string): Promise<number> {
  const sql = postgres(base, { max: 1, onnotice: () => {} });
  try {
    const [{ v }] = await sql`select current_setting('server_version_num')::int as v`;
    return Math.floor(v / 10000);
  } finally {
    await sql.end();
  }
}

/** The rows of the table of TLS starts on the wire, for every server. */
const wire: string[][] = [];

if (scramUrl === undefined) {
  notes.push("The SCRAM and TLS starts need the bench's own server (no PGPIPE_BENCH_SCRAM_URL).");
} else {
  const list: Start[] = [];
  for (const [scenario, sslmode] of [["plaintext", "disable"], ["TLS", "require"]]) {
    const params = { sslmode };
    list.push({ client: "pgpipe", scenario, params });
    if (sslmode === "require" && hasCa) list.push({ client: "pgpipe-ca", scenario, params });
    for (const p of [...peers, ...references]) list.push({ client: p, scenario, params });
  }
  const result = await starts(scramUrl, list, server);
  wire.push(...await onTheWire(scramUrl, list, server, await serverMajor(scramUrl)));
  tables.push({
    title: `Cold start with SCRAM: client created to first answer (ms, median of ${startRuns}), ` +
      `loopback and through the proxy (${delay} ms each way)`,
    head: ["client", "link", "loopback", `proxy`, "round trips on the link"],
    rows: startRows(result),
  });
  const get = (client: string, scenario: string) =>
    [...result].find(([s]) => s.client === client && s.scenario === scenario)?.[1];
  for (
    const [client, scenario] of [
      ["pgpipe", "plaintext"],
      ["pgpipe", "TLS"],
      ["pgpipe-ca", "TLS"],
    ]
  ) {
    const r = get(client, scenario);
    if (!r) continue;
    const who = label({ client, scenario, params: {} });
    measures.push(
      {
        suite: "cold",
        label: `${who}, SCRAM over ${scenario}: client created to first answer, loopback`,
        against: "fresh process",
        value: r.loopback,
        unit: "ms",
      },
      {
        suite: "cold",
        label: `${who}, SCRAM over ${scenario}: round trips through the ${delay} ms proxy`,
        against: "loopback",
        value: r.trips,
        unit: "RTT",
      },
    );
    for (const p of peers) {
      const theirs = get(p, scenario);
      if (!theirs || client === "pgpipe-ca") continue;
      ratios.push(
        {
          suite: "cold",
          label: `SCRAM over ${scenario}, created to first answer, loopback`,
          peer: p,
          value: theirs.loopback / r.loopback,
        },
        {
          suite: "cold",
          label: `SCRAM over ${scenario}, created to first answer, ${delay} ms proxy`,
          peer: p,
          value: theirs.link / r.link,
        },
      );
    }
  }
  notes.push(
    "Round trips on the link: (median through the proxy - median on loopback) / " +
      `${2 * delay} ms. Deno's first TLS handshake in a process costs tens of ms of local ` +
      "time whatever the API; it is in both, so it cancels out of the round trips but not out " +
      "of the loopback figure.",
  );
}

// ---------------------------------------------------------------------------------------------
// 3. PostgreSQL 18: direct TLS, and the same starts against a server that offers X25519

if (scramUrl !== undefined && hasCa && Deno.env.get("PGPIPE_BENCH_PG18") !== "0") {
  try {
    const pg18 = await startCluster({ ssl: true, name: "bench18", pg: "18" });
    try {
      const scram = pg18.users.scram;
      const base = `postgres://${scram.user}:${
        encodeURIComponent(scram.password)
      }@127.0.0.1:${pg18.port}/${pg18.database}`;
      Deno.env.set("PGPIPE_BENCH_CA", pg18.caCertPath!); // the children read it: this cluster's CA
      const required = { sslmode: "require" };
      const list: Start[] = [
        { client: "pgpipe-ca", scenario: "SSLRequest", params: required },
        {
          client: "pgpipe-ca",
          scenario: "direct",
          params: { sslmode: "require", sslnegotiation: "direct" },
        },
        // The same starts as on the bench's server, for the comparison across versions.
        ...["pgpipe", ...peers, ...references].map((client) => ({
          client,
          scenario: "SSLRequest",
          params: required,
        })),
      ];
      const at = { hostname: "127.0.0.1", port: pg18.port };
      const major = Math.floor(pg18.version / 10000);
      const result = await starts(base, list, at);
      wire.push(...await onTheWire(base, list, at, major));
      tables.push({
        title: `Cold start on PostgreSQL ${major}, TLS + SCRAM: the SSLRequest against ` +
          `sslnegotiation=direct, and the same starts as above (ms, median of ${startRuns})`,
        head: ["client", "negotiation", "loopback", "proxy", "round trips on the link"],
        rows: startRows(result),
      });
      const direct = [...result].find(([s]) => s.scenario === "direct")?.[1];
      if (direct) {
        measures.push({
          suite: "cold",
          label: `pgpipe (CA: native TLS), SCRAM over TLS, sslnegotiation=direct on 18: ` +
            `round trips through the ${delay} ms proxy`,
          against: "loopback",
          value: direct.trips,
          unit: "RTT",
        });
      }
    } finally {
      await pg18.stop();
    }
  } catch (e) {
    notes.push(`skipped direct TLS on PostgreSQL 18: ${(e as Error).message.split("\n")[0]}`);
  }
}

if (wire.length > 0) {
  tables.push({
    title: "TLS + SCRAM starts on the wire: one start per client and server through a flight " +
      "recorder on loopback",
    head: [
      "client",
      "PostgreSQL",
      "key shares in the ClientHello",
      "server's first answer",
      "round trips",
      "what each round trip carries",
    ],
    rows: wire,
  });
  notes.push(
    "On the wire: a round trip is a client flight the next server flight answers, up to the " +
      "first answer (the Terminate after it is left out). Encrypted flights are named by their " +
      "place in a SCRAM login. PostgreSQL up to 17 offers one key exchange group " +
      "(ssl_ecdh_curve, prime256v1 by default); a ClientHello with only an X25519 share gets a " +
      "HelloRetryRequest, one round trip more. 18 also offers X25519 (ssl_groups). Deno's TLS " +
      "(rustls) sends one X25519 share and has no option to choose; libpq (OpenSSL 3.0) does " +
      "the same. pgpipe's node:tls path teaches node:tls a secp256r1 share first " +
      "(src/connection/transport/tls_group.ts), which every PostgreSQL takes at once.",
  );
}

await emitReport({ suite: "cold", tables, ratios, measures, notes });
