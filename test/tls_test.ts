// Every sslmode against the TLS cluster and the plain cluster, with libpq's semantics:
// which modes encrypt, which verify the chain, which verify the host name, and which fall back.
import assert from "node:assert/strict";
import postgres, { type Options, PostgresError, type SslOption, type TlsPath } from "../mod.ts";
import type { ClusterInfo } from "./harness/cluster.ts";
import { hasClusters, plainCluster, tlsCluster } from "./harness/env.ts";
import { flightRecorder } from "./harness/flights.ts";
import { keyExchange } from "./harness/tls_hello.ts";
import { answerHello } from "../src/connection/transport/tls_group.ts";
import { wouldPassNatively } from "../src/connection/transport/node_tls.ts";
import { tapProxy } from "./harness/tap_proxy.ts";
import { delay, until, untilRan } from "./harness/wait.ts";
import { withEnv } from "./harness/util.ts";
import { assertConnectionError, clusterTest, failure, quiet, session } from "./harness/connect.ts";

const tls = tlsCluster();
const plain = plainCluster();

/** The trust user (or another) over TCP with the given ssl option. */
function via(c: ClusterInfo, ssl: SslOption, host = c.host, kind: "trust" | "sslonly" = "trust") {
  const u = c.users[kind];
  return {
    host,
    port: c.port,
    database: c.database,
    user: u.user,
    password: u.password,
    ssl,
    connect_timeout: 10,
  } satisfies Options;
}

const ca = (c: ClusterInfo) => c.caCert!;
const otherCa = (c: ClusterInfo) => c.otherCaCert!;

// ---------------------------------------------------------------------------------------------
// Against the TLS cluster

const tlsExpect = [
  ["disable", false], // never tries TLS
  ["allow", false], // plain first, and plain succeeds
  ["prefer", true],
  ["require", true],
] as const;

for (const [mode, encrypted] of tlsExpect) {
  clusterTest(
    `tls cluster: sslmode=${mode} → ${encrypted ? "" : "un"}encrypted`,
    tls,
    async (c) => {
      const u = c.users.trust;
      assert.deepEqual(await session(via(c, mode)), { user: u.user, ssl: encrypted });
      // The URL form means the same.
      const url = `postgres://${u.user}@${c.host}:${c.port}/${c.database}?sslmode=${mode}`;
      assert.deepEqual(await session(url), { user: u.user, ssl: encrypted });
    },
  );
}

clusterTest("tls cluster: ssl: true is require, ssl: false is disable", tls, async (c) => {
  assert.equal((await session(via(c, true))).ssl, true);
  assert.equal((await session(via(c, false))).ssl, false);
});

clusterTest(
  "tls cluster: verify-ca with the right CA (host 127.0.0.1) → encrypted",
  tls,
  async (c) => {
    assert.equal((await session(via(c, { mode: "verify-ca", ca: ca(c) }))).ssl, true);
  },
);

for (const host of ["localhost", "127.0.0.1"]) {
  clusterTest(
    `tls cluster: verify-full with the right CA (host ${host}) → encrypted`,
    tls,
    async (c) => {
      assert.equal((await session(via(c, { mode: "verify-full", ca: ca(c) }, host))).ssl, true);
    },
  );
}

clusterTest("tls cluster: { ca } alone means verify-full; ca may be a list", tls, async (c) => {
  assert.equal((await session(via(c, { ca: ca(c) }, "localhost"))).ssl, true);
  assert.equal((await session(via(c, { ca: [otherCa(c), ca(c)] }, "localhost"))).ssl, true);
});

clusterTest("tls cluster: verify-full via URL with sslrootcert", tls, async (c) => {
  const u = c.users.trust;
  const url = `postgres://${u.user}@localhost:${c.port}/${c.database}` +
    `?sslmode=verify-full&sslrootcert=${encodeURIComponent(c.caCertPath!)}`;
  assert.deepEqual(await session(url), { user: u.user, ssl: true });
});

for (const mode of ["verify-ca", "verify-full"] as const) {
  clusterTest(`tls cluster: ${mode} with an unrelated CA → SSL_FAILED`, tls, async (c) => {
    const host = mode === "verify-full" ? "localhost" : c.host;
    assertConnectionError(await failure(via(c, { mode, ca: otherCa(c) }, host)), "SSL_FAILED");
  });
  clusterTest(`tls cluster: ${mode} with the system roots → SSL_FAILED`, tls, async (c) => {
    const host = mode === "verify-full" ? "localhost" : c.host;
    assertConnectionError(await failure(via(c, mode, host)), "SSL_FAILED");
  });
}

clusterTest("tls cluster: require with a CA verifies the chain, as libpq does", tls, async (c) => {
  assert.equal((await session(via(c, { mode: "require", ca: ca(c) }))).ssl, true);
  assertConnectionError(await failure(via(c, { mode: "require", ca: otherCa(c) })), "SSL_FAILED");
});

clusterTest(
  "tls cluster: a root certificate makes prefer and allow verify the chain too, as libpq does",
  tls,
  async (c) => {
    // prefer: a chain to the CA → TLS; to no CA given → the handshake fails, and prefer goes on
    // plain, as libpq's does after a failed handshake.
    assert.equal((await session(via(c, { mode: "prefer", ca: ca(c) }))).ssl, true);
    assert.equal((await session(via(c, { mode: "prefer", ca: otherCa(c) }))).ssl, false);
    const u = c.users.trust;
    const url = (root: string) =>
      `postgres://${u.user}@${c.host}:${c.port}/${c.database}?sslmode=prefer&sslrootcert=` +
      encodeURIComponent(root);
    assert.equal((await session(url(c.caCertPath!))).ssl, true);
    assert.equal((await session(url(otherCa(c)))).ssl, false);
    // allow: the sslonly user refuses the plain attempt; the TLS one checks the chain.
    assert.equal(
      (await session(via(c, { mode: "allow", ca: ca(c) }, c.host, "sslonly"))).ssl,
      true,
    );
    assertConnectionError(
      await failure(via(c, { mode: "allow", ca: otherCa(c) }, c.host, "sslonly")),
      "SSL_FAILED",
    );
    // libpq's default root file counts as given, under the default sslmode (prefer).
    const home = await Deno.makeTempDir({ prefix: "pgpipe-roothome-" });
    try {
      await Deno.mkdir(`${home}/.postgresql`);
      await Deno.writeTextFile(`${home}/.postgresql/root.crt`, otherCa(c));
      await withEnv({ HOME: home, PGSSLMODE: undefined, PGSSLROOTCERT: undefined }, async () => {
        const plain = `postgres://${u.user}@${c.host}:${c.port}/${c.database}`;
        assert.equal((await session(plain)).ssl, false, "prefer with root.crt: verified, refused");
        assertConnectionError(await failure(via(c, "allow", c.host, "sslonly")), "SSL_FAILED");
      });
    } finally {
      await Deno.remove(home, { recursive: true });
    }
  },
);

clusterTest("tls cluster: prefer and require do not verify the certificate", tls, async (c) => {
  for (const mode of ["prefer", "require"] as const) {
    // A host name the certificate does not name and no CA: still encrypted, not verified.
    assert.equal((await session(via(c, mode, "localhost"))).ssl, true);
  }
});

clusterTest(
  "tls cluster: allow with the sslonly user → plain is rejected, TLS retry works",
  tls,
  async (c) => {
    const u = c.users.sslonly;
    assert.deepEqual(await session(via(c, "allow", c.host, "sslonly")), {
      user: u.user,
      ssl: true,
    });
  },
);

clusterTest("tls cluster: prefer with the sslonly user → TLS at once", tls, async (c) => {
  assert.equal((await session(via(c, "prefer", c.host, "sslonly"))).ssl, true);
});

clusterTest("tls cluster: disable with the sslonly user → 28000", tls, async (c) => {
  const e = await failure(via(c, "disable", c.host, "sslonly"));
  assert.ok(e instanceof PostgresError && e.code === "28000", `${e}`);
});

clusterTest(
  "tls cluster: the unix socket never uses TLS, even with require (libpq)",
  tls,
  async (c) => {
    assert.equal((await session(via(c, "require", c.socketDir))).ssl, false);
  },
);

// ---------------------------------------------------------------------------------------------
// Which TLS implementation a connection runs on (result.state.tls): Deno's native TLS wherever
// its check (chain and host name, the default roots plus the CA given) passes, node:tls where
// only a weaker check that the sslmode allows would.

/** The TLS path of a fresh client's connection, and whether the server sees TLS. */
async function pathOf(options: Options | string): Promise<{ tls: TlsPath | null; ssl: boolean }> {
  const sql = typeof options === "string"
    ? postgres(options, quiet)
    : postgres({ ...quiet, ...options });
  try {
    const result = await sql`
      select coalesce((select ssl from pg_stat_ssl where pid = pg_backend_pid()), false) as ssl`;
    return { tls: result.state!.tls, ssl: result[0].ssl as boolean };
  } finally {
    await sql.end();
  }
}

Deno.test({
  name: "tls path: a process's first connection to a server takes node:tls (no HelloRetryRequest " +
    "from PostgreSQL 17 and older), later ones native wherever the certificate verifies",
  ignore: !hasClusters || !tls,
  async fn() {
    const c = tls!;
    // A port of its own, so no earlier test taught pgpipe anything about this server.
    const p = flightRecorder({ hostname: c.host, port: c.port });
    try {
      const at = (o: Options) => ({ ...o, port: p.port });
      const node = { tls: "node", ssl: true };
      const native = { tls: "native", ssl: true };
      const full = at(via(c, { mode: "verify-full", ca: ca(c) }, "localhost"));
      assert.deepEqual(await pathOf(full), node);
      assert.deepEqual(await pathOf(full), native);
      assert.deepEqual(await pathOf(full), native);
      // 127.0.0.1 with the CA is another server to the path memory: first node:tls again.
      assert.deepEqual(await pathOf(at(via(c, { mode: "verify-ca", ca: ca(c) }))), node);
      assert.deepEqual(await pathOf(at(via(c, { mode: "verify-ca", ca: ca(c) }))), native);
      assert.deepEqual(await pathOf(at(via(c, { mode: "require", ca: ca(c) }))), native);
      // prefer with a CA checks nothing, but the certificate verifies: still native.
      assert.deepEqual(await pathOf(at(via(c, { mode: "prefer", ca: ca(c) }))), native);
      const u = c.users.trust;
      const url = `postgres://${u.user}@localhost:${p.port}/${c.database}` +
        `?sslmode=verify-full&sslrootcert=${encodeURIComponent(c.caCertPath!)}`;
      assert.deepEqual(await pathOf(url), native);
      assert.equal(p.connections.length, 8, "one connection each: no failed attempt");
    } finally {
      await p.close();
    }
  },
});

Deno.test({
  name: "tls path: a first connection whose certificate node:tls refuses but the native check " +
    "accepts (a root Deno trusts beside the CA given) → native, as later connections",
  ignore: !hasClusters || !tls,
  async fn() {
    const c = tls!;
    // DENO_CERT puts the test CA among Deno's default roots, which the native check trusts
    // beside the CA given (the unrelated one here); node:tls trusts only the CA given.
    const dir = await Deno.makeTempDir();
    try {
      const script = `${dir}/first.ts`;
      await Deno.writeTextFile(
        script,
        `import postgres from ${JSON.stringify(new URL("../mod.ts", import.meta.url).href)};
const paths = [];
for (let i = 0; i < 2; i++) {
  const sql = postgres(${
          JSON.stringify(via(c, { mode: "verify-full", ca: otherCa(c) }, "localhost"))
        });
  paths.push((await sql\`select 1\`).state.tls);
  await sql.end();
}
console.log(JSON.stringify(paths));`,
      );
      const out = await new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", "--no-lock", script],
        env: { DENO_CERT: c.caCertPath! },
        stdout: "piped",
        stderr: "piped",
      }).output();
      assert.ok(out.success, new TextDecoder().decode(out.stderr));
      assert.deepEqual(JSON.parse(new TextDecoder().decode(out.stdout)), ["native", "native"]);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
    // Without that root, the same client fails (node:tls's error, naming the host).
    const e = assertConnectionError(
      await failure(via(c, { mode: "verify-full", ca: otherCa(c) }, "localhost")),
      "SSL_FAILED",
    );
    assert.match(e.message, /localhost/);
  },
});

Deno.test({
  name: "tls path: prefer's first connection to a server without TLS goes on plain on the same " +
    "socket, and later ones too",
  ignore: !hasClusters || !plain,
  async fn() {
    const c = plain!;
    const p = flightRecorder({ hostname: c.host, port: c.port });
    try {
      const options = { ...via(c, "prefer"), port: p.port };
      assert.deepEqual(await pathOf(options), { tls: null, ssl: false });
      assert.equal(p.connections.length, 1, "no second connect after the server's N");
      assert.deepEqual(await pathOf(options), { tls: null, ssl: false });
      assert.equal(p.connections.length, 2);
    } finally {
      await p.close();
    }
  },
});

clusterTest("tls path: plain connections say null", tls, async (c) => {
  assert.deepEqual(await pathOf(via(c, "disable")), { tls: null, ssl: false });
  assert.deepEqual(await pathOf(via(c, "require", c.socketDir)), { tls: null, ssl: false });
});

clusterTest("tls path: prefer against a server without TLS → plain, null", plain, async (c) => {
  assert.deepEqual(await pathOf(via(c, "prefer")), { tls: null, ssl: false });
});

// Over native TLS a query sent while others are in flight is flushed one turn of the event loop
// later (connection.ts, #scheduleFlush): each must still leave, get its own answer, and fail alone.
clusterTest("native TLS, pipelined: queries sent while others are in flight", tls, async (c) => {
  const sql = postgres({ ...quiet, ...via(c, { mode: "require", ca: ca(c) }), max: 1 });
  try {
    const slow = sql`select pg_sleep(0.05), 'slow' as x`;
    let next = 0;
    const answers: unknown[] = [];
    // 20 lanes of 15: each lane's next query goes out while the other lanes' are in flight.
    await Promise.all(Array.from({ length: 20 }, async () => {
      while (next < 300) {
        const i = next++;
        answers[i] = i === 150
          ? await sql`select 1/0`.catch((e) => e instanceof PostgresError ? e.code : e)
          : (await sql`select ${i}::int as i`)[0].i;
      }
    }));
    assert.deepEqual(answers, Array.from({ length: 300 }, (_, i) => i === 150 ? "22012" : i));
    const [row] = await slow;
    assert.equal(row.x, "slow");
    const inTx = await sql.begin((tx) =>
      Promise.all(
        Array.from({ length: 50 }, async (_, i) => (await tx`select ${i}::int as i`)[0].i),
      )
    );
    assert.deepEqual(inTx, Array.from({ length: 50 }, (_, i) => i));
    const last = await sql`select 1 as one`;
    assert.equal(last.state!.tls, "native");
  } finally {
    await sql.end();
  }
});

// The deferred flush must need no answer to fire: with every answer held back by the proxy, a
// burst sent while 100 queries are unanswered still leaves, and in one write (one TLS record).
clusterTest(
  "native TLS: a burst sent while answers are held back leaves at once, in one write",
  tls,
  async (c) => {
    const u = c.users.trust;
    await using proxy = tapProxy(`postgres://${u.user}@${c.host}:${c.port}/${c.database}`, {
      ssl: { mode: "require", ca: ca(c) },
      connect_timeout: 10,
    });
    const { sql, state } = proxy;
    await sql`select 1`; // a process's first connection to a target is node:tls (transport.ts)
    proxy.drop();
    const [{ pid }] = await sql`select pg_backend_pid() as pid`.catch(() =>
      sql`select pg_backend_pid() as pid`
    );
    assert.equal((await sql`select 1`).state!.tls, "native");
    await using admin = postgres({ ...quiet, ...via(c, { mode: "require", ca: ca(c) }), max: 1 });
    let open!: () => void;
    state.gate = new Promise<void>((resolve) => open = resolve);
    state.recording = true;
    // The last query of each group has a text of its own: the server running it proves that all
    // the group's bytes passed the proxy, which counts a chunk before it forwards it.
    const group = (from: number, n: number, mark: string) =>
      Array.from(
        { length: n },
        (_, i) =>
          (i < n - 1
            ? sql`select ${from + i}::int as x`
            : sql.unsafe(`select $1::int as x, '${mark}' as m`, [from + i])).execute(),
      );
    const first = group(0, 100, "first");
    await untilRan(admin, pid, "'first'");
    const before = state.chunks;
    // No answer passes the gate: the burst must leave without one.
    const burst = group(100, 50, "burst");
    await untilRan(admin, pid, "'burst'");
    const chunks = state.chunks - before;
    state.gate = null;
    open();
    const rows = await Promise.all([...first, ...burst]);
    // 50 queries of ~60 bytes: one write, one TLS record (TCP may split a segment, rarely).
    assert.ok(chunks >= 1 && chunks <= 2, `expected one write, the proxy saw ${chunks} chunks`);
    assert.deepEqual(rows.map((r) => r[0].x), Array.from({ length: 150 }, (_, i) => i));
  },
);

// Over native TLS a connection with nothing in flight reads again only once the next write is
// under way, or one turn of the event loop later (connection.ts, #idleRead): serial queries must
// get their answers, and an idle connection must still read what the server sends unasked (a
// notification, the FATAL of a terminated backend) without a query to wake it.
clusterTest(
  "native TLS, idle: serial answers, notifications and a terminated backend",
  tls,
  async (c) => {
    const options = { ...quiet, ...via(c, { mode: "require", ca: ca(c) }), max: 1 };
    // A process's first connection to a server may take node:tls to learn the native check's
    // verdict: settle that first, so the clients below run native.
    const first = postgres(options);
    await first`select 1`;
    await first.end();
    const sql = postgres(options);
    const admin = postgres(options);
    try {
      assert.equal((await sql`select 1`).state!.tls, "native");
      for (let i = 0; i < 200; i++) assert.equal((await sql`select ${i}::int as i`)[0].i, i);
      const got: string[] = [];
      await sql.listen("pgpipe_idle_native", (x) => got.push(x));
      await admin.notify("pgpipe_idle_native", "one");
      await until("the notification read by the idle listening connection", () => got.length > 0);
      assert.deepEqual(got, ["one"]);
      // The shared connection is idle now: the server ends its backend. It must notice by reading
      // (not at its next query, which would then fail), so that query runs on a new connection.
      const [{ pid }] = await sql`select pg_backend_pid() as pid`;
      await admin`select pg_terminate_backend(${pid})`;
      await until("the terminated backend gone", async () => {
        const [{ n }] =
          await admin`select count(*)::int as n from pg_stat_activity where pid = ${pid}`;
        return n === 0;
      });
      // Its FATAL and end of stream are on their way to the idle connection, which reads them
      // without a query to wake it: a query after them runs on a new connection.
      await delay(50);
      const after = await sql`select pg_backend_pid() as pid`;
      assert.notEqual(after[0].pid, pid);
      assert.equal(after.state!.tls, "native");
    } finally {
      await Promise.all([sql.end(), admin.end()]);
    }
  },
);

Deno.test({
  name: "tls path: require without a CA → node:tls at once (no native attempt to fail), " +
    "and what it learned keeps later connections there",
  ignore: !hasClusters || !tls,
  async fn() {
    const c = tls!;
    // A port of its own, so no earlier test taught pgpipe anything about this server.
    const p = flightRecorder({ hostname: c.host, port: c.port });
    try {
      const options = { ...via(c, "require"), port: p.port };
      assert.deepEqual(await pathOf(options), { tls: "node", ssl: true });
      assert.equal(p.connections.length, 1, "one connection: no native attempt first");
      // The default roots do not cover the test CA: the native check would fail, so node:tls.
      assert.deepEqual(await pathOf(options), { tls: "node", ssl: true });
      assert.equal(p.connections.length, 2);
      // A client that gives the CA is another case: its first connection is node:tls too (as
      // every first one), and its native check passes for the next.
      const withCa = { ...options, ssl: { mode: "require", ca: ca(c) } } as const;
      assert.deepEqual(await pathOf(withCa), { tls: "node", ssl: true });
      assert.deepEqual(await pathOf(withCa), { tls: "native", ssl: true });
      assert.equal(p.connections.length, 4);
    } finally {
      await p.close();
    }
  },
});

clusterTest(
  "tls on the wire: a verified SCRAM start sends its queries with SCRAM's final message, an " +
    "unverified one after the server's signature; a HelloRetryRequest costs one more flight",
  tls,
  async (c) => {
    const { user, password } = c.users.scram;
    const starts: { ssl: SslOption; path: TlsPath; encrypted: number; warm?: true }[] = [
      // Finished+startup, SCRAM first, SCRAM final+queries: the first connection (node:tls)
      // and a later one (native).
      { ssl: { mode: "require", ca: ca(c) }, path: "node", encrypted: 3 },
      { ssl: { mode: "require", ca: ca(c) }, path: "native", encrypted: 3, warm: true },
      // The same, but the queries wait for the server's signature: a flight of their own.
      { ssl: "require", path: "node", encrypted: 4 },
    ];
    for (const { ssl, path, encrypted, warm } of starts) {
      const rec = flightRecorder({ hostname: c.host, port: c.port });
      const options = { ...quiet, ...via(c, ssl), port: rec.port, user, password, max: 1 };
      // A connection first when the start to record is a later one.
      if (warm) await pathOf(options);
      const sql = postgres(options);
      try {
        const [a, b] = await Promise.all([sql`select 1 as x`, sql`select 2 as x`]);
        assert.deepEqual([a[0].x, b[0].x, a.state?.tls], [1, 2, path]);
      } finally {
        await sql.end();
        await rec.close();
      }
      assert.equal(rec.connections.length, warm ? 2 : 1, `${path}: one connection`);
      const { offer, answer, flights } = keyExchange(rec.connections.at(-1)!);
      assert.ok(offer !== null && answer !== null, `${path}: a ClientHello and its answer`);
      assert.ok(offer.shares.length > 0 && offer.shares.every((g) => offer.groups.includes(g)));
      // TLS 1.3: the server asks for another share exactly when it picked a group without one.
      assert.equal(answer.retry, !offer.shares.includes(answer.group!), `${path}: ${answer.group}`);
      const hellos = answer.retry ? ["ClientHello", "ClientHello again"] : ["ClientHello"];
      // sql.end()'s Terminate, after the answers, may or may not reach the recorder before it
      // closes: it is not a round trip.
      const trips = flights.filter((f) => f !== "goodbye");
      assert.deepEqual(
        trips.map((f) => f.startsWith("encrypted") ? "encrypted" : f),
        ["SSLRequest", ...hellos, ...Array(encrypted).fill("encrypted")],
        path,
      );
    }
  },
);

for (const verified of [false, true]) {
  clusterTest(
    `tls on the wire: a fresh process's first ${verified ? "CA-verified" : "unverified"} start ` +
      "goes on node:tls with a secp256r1 share, so no server (PostgreSQL 17 and older offer only " +
      `prime256v1) answers with a HelloRetryRequest${
        verified ? ", and sends its queries with SCRAM's final message" : ""
      }`,
    tls,
    async (c) => {
      const { user, password } = c.users.scram;
      const rec = flightRecorder({ hostname: c.host, port: c.port });
      try {
        // A fresh process: pgpipe and node:tls have learned nothing about the server yet.
        const url = `postgres://${user}:${encodeURIComponent(password)}@127.0.0.1:${rec.port}/` +
          `${c.database}?sslmode=require`;
        const probe = new URL("../bench/probes/cold.ts", import.meta.url).pathname;
        const out = await new Deno.Command(Deno.execPath(), {
          args: [
            "run",
            "-A",
            "--no-lock",
            probe,
            verified ? "pgpipe-ca" : "pgpipe",
            url,
            new URL("../mod.ts", import.meta.url).href,
          ],
          env: verified ? { PGPIPE_BENCH_CA: c.caCertPath! } : {},
          stdout: "piped",
          stderr: "piped",
        }).output();
        assert.ok(out.success, new TextDecoder().decode(out.stderr));
      } finally {
        await rec.close();
      }
      assert.equal(rec.connections.length, 1);
      const { offer, answer, flights } = keyExchange(rec.connections[0]);
      // Deno's native TLS sends X25519 alone: secp256r1 is the taught node:tls.
      assert.deepEqual(offer?.shares, ["secp256r1"]);
      assert.deepEqual(answer, { retry: false, group: "secp256r1" });
      // Finished+startup, SCRAM first, SCRAM final (+ the query when verified), the query.
      assert.deepEqual(
        flights.filter((f) => f !== "goodbye").map((f) => f.startsWith("encrypted") ? "enc" : f),
        ["SSLRequest", "ClientHello", ...Array(verified ? 3 : 4).fill("enc")],
      );
    },
  );
}

/** A TLS 1.3 ClientHello record with these supported groups and key shares (32-byte keys). */
function clientHello(groups: number[], shares: number[]): Uint8Array {
  const u16 = (n: number) => [n >> 8, n & 0xff];
  const list = groups.flatMap(u16);
  const entries = shares.flatMap((g) => [...u16(g), ...u16(32), ...Array(32).fill(7)]);
  const extensions = [
    ...[...u16(10), ...u16(list.length + 2), ...u16(list.length), ...list],
    ...[...u16(51), ...u16(entries.length + 2), ...u16(entries.length), ...entries],
  ];
  const sessionId = Array(32).fill(9);
  const body = [
    ...[3, 3, ...Array(32).fill(1), sessionId.length, ...sessionId],
    ...[0, 2, 0x13, 0x01, 1, 0],
    ...[...u16(extensions.length), ...extensions],
  ];
  const message = [1, 0, ...u16(body.length), ...body];
  return Uint8Array.from([0x16, 3, 1, ...u16(message.length), ...message]);
}

Deno.test("tls_group: the stand-in asks for secp256r1 only from a ClientHello with X25519 alone", () => {
  const [x25519, p256, hybrid] = [0x001d, 0x0017, 0x11ec];
  const answer = (hello: Uint8Array, index: number) => {
    const reply = answerHello(hello.subarray(9), index);
    return reply === null ? null : keyExchange([
      { from: "client", bytes: hello },
      { from: "server", bytes: reply },
    ]).answer;
  };
  assert.deepEqual(answer(clientHello([x25519, p256], [x25519]), 0), {
    retry: true,
    group: "secp256r1",
  });
  assert.deepEqual(answer(clientHello([x25519, p256], [p256]), 1), {
    retry: false,
    group: "secp256r1",
  });
  // A post-quantum hybrid share is never steered away from; a client that already sends
  // secp256r1, or cannot, needs nothing.
  assert.equal(answer(clientHello([hybrid, x25519, p256], [hybrid, x25519]), 0), null);
  assert.equal(answer(clientHello([x25519, p256], [p256]), 0), null);
  assert.equal(answer(clientHello([x25519], [x25519]), 0), null);
  assert.equal(answer(Uint8Array.of(0x16, 3, 1, 0, 4, 1, 0, 0, 0), 0), null);
});

// ---------------------------------------------------------------------------------------------
// sslnegotiation=direct: the TLS handshake at once, with ALPN "postgresql" (PostgreSQL 17+). The
// same tests run on every version: success from 17, a clear SSL_NOT_SUPPORTED before.

clusterTest(
  "sslnegotiation=direct: TLS at once on 17+, SSL_NOT_SUPPORTED before",
  tls,
  async (c) => {
    // Through a recorder, on a port of its own: the first byte shows whether an SSLRequest went.
    const rec = flightRecorder({ hostname: c.host, port: c.port });
    try {
      const options = (ssl: SslOption) => ({
        ...via(c, ssl, "127.0.0.1"),
        port: rec.port,
        sslnegotiation: "direct" as const,
      });
      const verified = options({ mode: "verify-full", ca: ca(c) });
      if (c.version >= 170000) {
        assert.deepEqual(await pathOf(verified), { tls: "native", ssl: true });
        // Without the CA: node:tls at once, still direct (ALPN on node:tls too).
        assert.deepEqual(await pathOf(options("require")), { tls: "node", ssl: true });
        assert.deepEqual(await pathOf(options("require")), { tls: "node", ssl: true });
        assert.equal(rec.connections.length, 3, "one connection each");
      } else {
        for (const ssl of [{ mode: "verify-full", ca: ca(c) }, "require"] as const) {
          const e = assertConnectionError(await failure(options(ssl)), "SSL_NOT_SUPPORTED");
          assert.match(e.message, /sslnegotiation=direct needs PostgreSQL 17/);
        }
      }
    } finally {
      await rec.close();
    }
    for (const flights of rec.connections) {
      // A TLS record (handshake: 0x16), never an SSLRequest (its length, 0x00 0x00 0x00 0x08).
      assert.equal(flights[0].from, "client");
      assert.equal(flights[0].bytes[0], 0x16, "the ClientHello comes first");
    }
  },
);

clusterTest("sslnegotiation=direct: refused with a mode that may go plain (libpq)", tls, (c) => {
  for (const mode of ["disable", "allow", "prefer"] as const) {
    assert.throws(
      () => postgres({ ...via(c, mode), sslnegotiation: "direct" }),
      /sslnegotiation=direct needs sslmode require, verify-ca or verify-full/,
    );
  }
  return Promise.resolve();
});

// ---------------------------------------------------------------------------------------------
// Host name checks through another loopback address: a proxy on 127.0.0.2 forwards to the
// server on 127.0.0.1, so the certificate (localhost, 127.0.0.1) does not name the host we dial.

function canListenOn(hostname: string): boolean {
  try {
    Deno.listen({ hostname, port: 0 }).close();
    return true;
  } catch {
    return false;
  }
}

/** Linux routes all of 127/8 to loopback; elsewhere 127.0.0.2 may not exist. */
const ALT_HOST = "127.0.0.2";
const altHostWorks = canListenOn(ALT_HOST);

function altTest(name: string, fn: (c: ClusterInfo, port: number) => Promise<void>): void {
  Deno.test({
    name,
    ignore: !hasClusters || !tls || !altHostWorks,
    async fn() {
      const c = tls!;
      const p = flightRecorder({ hostname: c.host, port: c.port }, ALT_HOST);
      try {
        await fn(c, p.port);
      } finally {
        await p.close();
      }
    },
  });
}

altTest(
  "tls cluster: verify-full to a host the certificate does not name → SSL_FAILED, on the " +
    "first connection (node:tls) as on later ones",
  async (c, port) => {
    const options = { ...via(c, { mode: "verify-full", ca: ca(c) }, ALT_HOST), port };
    for (let i = 0; i < 2; i++) {
      const e = assertConnectionError(await failure(options), "SSL_FAILED");
      assert.match(String(e.cause ?? e.message), /not valid for|NotValidForName|altnames/i);
      assert.ok(e.message.includes(ALT_HOST), e.message);
    }
  },
);

altTest(
  "tls cluster: verify-ca to a host the certificate does not name → encrypted (node:tls)",
  async (c, port) => {
    const s = await pathOf({ ...via(c, { mode: "verify-ca", ca: ca(c) }, ALT_HOST), port });
    assert.deepEqual(s, { tls: "node", ssl: true });
    // The chain is still checked.
    assertConnectionError(
      await failure({ ...via(c, { mode: "verify-ca", ca: otherCa(c) }, ALT_HOST), port }),
      "SSL_FAILED",
    );
  },
);

// ---------------------------------------------------------------------------------------------
// Against the plain cluster

for (const mode of ["disable", "allow", "prefer"] as const) {
  clusterTest(`plain cluster: sslmode=${mode} → unencrypted`, plain, async (c) => {
    assert.deepEqual(await session(via(c, mode)), { user: c.users.trust.user, ssl: false });
  });
}

for (const mode of ["require", "verify-ca", "verify-full"] as const) {
  clusterTest(`plain cluster: sslmode=${mode} → SSL_NOT_SUPPORTED`, plain, async (c) => {
    // A CA is given so that only the server's refusal can be the reason.
    const e = assertConnectionError(
      await failure(via(c, { mode, ca: tls?.caCert ?? "" }, "127.0.0.1")),
      "SSL_NOT_SUPPORTED",
    );
    assert.equal(e.port, c.port);
    assertConnectionError(await failure(via(c, mode, "localhost")), "SSL_NOT_SUPPORTED");
  });
}

clusterTest(
  "plain cluster: allow with the sslonly user → rejected on both attempts (28000)",
  plain,
  async (c) => {
    const e = await failure(via(c, "allow", c.host, "sslonly"));
    assert.ok(e instanceof PostgresError && e.code === "28000", `${e}`);
  },
);

// ---------------------------------------------------------------------------------------------
// A server that stops offering TLS (ssl=off and a reload). pgpipe remembers per host:port that
// TLS was offered; that memory must never make prefer fail. A proxy on one port forwards to the
// TLS cluster, then to the plain cluster, so the same endpoint answers "S" and later "N" without
// changing either shared cluster's settings.

Deno.test({
  name: "prefer: an endpoint that stopped offering TLS → plain, not SSL_NOT_SUPPORTED",
  ignore: !hasClusters || !tls || !plain,
  async fn() {
    const to = { hostname: tls!.host, port: tls!.port };
    const p = flightRecorder(to); // dials `to` afresh for each client
    try {
      const before = await session({ ...via(tls!, "prefer"), port: p.port });
      assert.deepEqual(before, { user: tls!.users.trust.user, ssl: true });
      to.port = plain!.port;
      // The first connection after the switch is the one a stale memory would break.
      const after = await session({ ...via(plain!, "prefer"), port: p.port });
      assert.deepEqual(after, { user: plain!.users.trust.user, ssl: false });
      // TLS coming back is picked up again.
      to.port = tls!.port;
      assert.equal((await session({ ...via(tls!, "prefer"), port: p.port })).ssl, true);
    } finally {
      await p.close();
    }
  },
});

Deno.test("wouldPassNatively: a certificate naming the host only in its CN stays on node:tls (rustls reads no CN)", () => {
  const socket = (cert: Record<string, unknown>, authorized = true) => ({
    authorized,
    getPeerCertificate: () => cert as never,
  });
  const cn = { subject: { CN: "db.example.com" } };
  assert.equal(wouldPassNatively(socket(cn), "db.example.com"), false);
  const san = { ...cn, subjectaltname: "DNS:db.example.com" };
  assert.equal(wouldPassNatively(socket(san), "db.example.com"), true);
  assert.equal(wouldPassNatively(socket(san), "other.example.com"), false);
  assert.equal(wouldPassNatively(socket(san, false), "db.example.com"), false);
  const ip = { subject: {}, subjectaltname: "IP Address:127.0.0.1" };
  assert.equal(wouldPassNatively(socket(ip), "127.0.0.1"), true);
});
