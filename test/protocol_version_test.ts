// What differs by protocol version: `max_protocol_version` asks for 3.2 (PostgreSQL 18's longer
// cancel key), a server that speaks only 3.0 answers NegotiateProtocolVersion and the connection
// goes on with 3.0; a broken negotiation is a PROTOCOL_VIOLATION, never a hang. Against fake
// servers for the bytes, and against the real one (whatever `deno task test --pg=N` started) for
// the behaviour; PostgreSQL 18's oauth method on a cluster of its own.
import assert from "node:assert/strict";
import postgres, { ConnectionError, type Options, PostgresError } from "./harness/postgres.ts";
import { startCluster } from "./harness/cluster.ts";
import { assertConnectionError, failure, quiet } from "./harness/connect.ts";
import { databaseUrl, plainCluster, tlsCluster } from "./harness/env.ts";
import {
  auth,
  concat,
  cstr,
  errorResponse,
  fakeClient,
  FakeSession,
  int32,
  message,
  readyForQuery,
  STARTUP_OK,
  withServer,
} from "./harness/fake_server.ts";
import { tapProxy } from "./harness/tap_proxy.ts";
import { serverVersion, withEnv } from "./harness/util.ts";
import { until, untilRunning, within } from "./harness/wait.ts";
import { CANCEL, serverTest } from "./harness/pglite_mode.ts";

const PROTOCOL_3_0 = 196608;
const PROTOCOL_3_2 = 196610;
const CANCEL_REQUEST_CODE = 80877102;

const negotiate = (version: number, ...options: string[]) =>
  message("v", int32(version), int32(options.length), ...options.map(cstr));
const keyData = (pid: number, key: Uint8Array) => message("K", int32(pid), key);
const bytes = (n: number) => Uint8Array.from({ length: n }, (_, i) => (i * 37 + 11) & 0xff);

/** The CancelRequests among recorded frontend chunks. */
function cancelRequests(chunks: readonly Uint8Array[]): Uint8Array[] {
  return chunks.filter((c) =>
    c.length >= 16 && new DataView(c.buffer, c.byteOffset).getInt32(4) === CANCEL_REQUEST_CODE
  );
}

// ---------------------------------------------------------------------------------------------
// The option

Deno.test("max_protocol_version: 3.0 by default; 3.2 or latest from the option, the URL or PGMAXPROTOCOLVERSION; anything else refused at once", async () => {
  const cases: [Options, string, number, string | undefined][] = [
    [{}, "", PROTOCOL_3_0, undefined],
    [{ max_protocol_version: "3.2" }, "", PROTOCOL_3_2, undefined],
    [{ max_protocol_version: "latest" }, "", PROTOCOL_3_2, undefined],
    [{}, "?max_protocol_version=3.2", PROTOCOL_3_2, undefined],
    [{ max_protocol_version: "3.0" }, "?max_protocol_version=3.2", PROTOCOL_3_0, undefined],
    [{}, "", PROTOCOL_3_2, "3.2"],
    [{}, "?max_protocol_version=3.0", PROTOCOL_3_0, "latest"],
  ];
  for (const [options, url, asked, env] of cases) {
    const connect = () =>
      withServer(async (peer) => {
        const params = await peer.startup(asked);
        await peer.send(STARTUP_OK);
        // It is a protocol setting, never a startup parameter.
        assert.equal(params.has("max_protocol_version"), false);
        await new FakeSession().serve(peer);
        return true;
      }, async (server) => {
        const sql = postgres(`postgres://fake@127.0.0.1:${server.port}/fake${url}`, {
          ssl: "disable",
          fetch_types: false,
          connect_timeout: 2,
          ...quiet,
          ...options,
        });
        assert.deepEqual([...await sql`select 1`], [{ x: "ok" }]);
        await sql.end();
        assert.equal(await server.results[0], true, `${JSON.stringify(options)} ${url} ${env}`);
      });
    await withEnv({ PGMAXPROTOCOLVERSION: env }, connect);
  }
  for (const bad of ["3.1", "3", "4.0", "", 3.2]) {
    assert.throws(
      () => postgres({ max_protocol_version: bad as never }),
      (e) => e instanceof TypeError && /max_protocol_version/.test(e.message),
    );
  }
});

// ---------------------------------------------------------------------------------------------
// Negotiation, byte by byte

/**
 * Asks a fake server for 3.2; it answers the startup with `startup` (up to ReadyForQuery), then
 * holds a query until the client cancels it. Returns the CancelRequests it received.
 */
async function cancelAfter(startup: Uint8Array): Promise<Uint8Array[]> {
  const cancels: Uint8Array[] = [];
  let received!: () => void;
  const running = new Promise<void>((r) => received = r);
  await withServer(async (peer, index) => {
    if (index > 0) {
      cancels.push(await peer.take(await peer.int32() - 4));
      return;
    }
    await peer.startup(PROTOCOL_3_2);
    await peer.send(startup);
    await peer.segment();
    received();
    await until("a CancelRequest", () => cancels.length > 0, 5000);
    await peer.send(
      concat(errorResponse("57014", "canceling statement", "ERROR"), readyForQuery()),
    );
    await peer.closedWithin(3000);
  }, async (server) => {
    await using sql = fakeClient(server.port, { max_protocol_version: "3.2", fetch_types: false });
    const q = sql`select pg_sleep(10)`;
    q.execute();
    await within(running, 5000, "the query reaching the server");
    q.cancel();
    await assert.rejects(q, (e) => e instanceof PostgresError && e.code === "57014");
  });
  return cancels;
}

Deno.test("NegotiateProtocolVersion: asked for 3.2, a 3.0 server says so; the connection goes on with 3.0 and its 4-byte key", async () => {
  const cancels = await cancelAfter(
    concat(negotiate(PROTOCOL_3_0), auth(0), keyData(9, bytes(4)), readyForQuery()),
  );
  assert.deepEqual(cancels, [concat(int32(CANCEL_REQUEST_CODE), int32(9), bytes(4))]);
});

Deno.test("protocol 3.2: a 32-byte cancel key (PostgreSQL 18's) goes whole into the CancelRequest", async () => {
  const cancels = await cancelAfter(concat(auth(0), keyData(77, bytes(32)), readyForQuery()));
  assert.deepEqual(cancels, [concat(int32(CANCEL_REQUEST_CODE), int32(77), bytes(32))]);
});

const brokenNegotiations: [string, number, Uint8Array, RegExp][] = [
  [
    "a protocol option pgpipe never asked for",
    PROTOCOL_3_2,
    negotiate(PROTOCOL_3_0, "_pq_.compression"),
    /_pq_\.compression/,
  ],
  ["the very version asked for", PROTOCOL_3_2, negotiate(PROTOCOL_3_2), /3\.2/],
  ["a newer version than asked for", PROTOCOL_3_0, negotiate(PROTOCOL_3_2), /3\.2/],
  ["another major version", PROTOCOL_3_2, negotiate(2 << 16), /2\.0/],
  ["twice", PROTOCOL_3_2, concat(negotiate(PROTOCOL_3_0), negotiate(PROTOCOL_3_0)), /twice/],
  ["truncated", PROTOCOL_3_2, message("v", int32(PROTOCOL_3_0)), /truncated/],
  [
    "an option list shorter than its count",
    PROTOCOL_3_2,
    message("v", int32(PROTOCOL_3_0), int32(3), cstr("_pq_.a")),
    /truncated/,
  ],
  ["a 32-byte key under 3.0", PROTOCOL_3_0, keyData(1, bytes(32)), /32-byte key/],
  ["a 3-byte key under 3.2", PROTOCOL_3_2, keyData(1, bytes(3)), /3-byte key/],
  ["a 257-byte key under 3.2", PROTOCOL_3_2, keyData(1, bytes(257)), /257-byte key/],
];
for (const [what, asked, answer, pattern] of brokenNegotiations) {
  Deno.test(`NegotiateProtocolVersion: ${what} → PROTOCOL_VIOLATION, socket closed`, async () => {
    await withServer(async (peer) => {
      await peer.startup(asked);
      await peer.send(concat(answer, auth(0), keyData(1, bytes(4)), readyForQuery()));
      const closed = await peer.closedWithin(3000);
      peer.close(); // a client that went on would otherwise wait for an answer for ever
      return closed;
    }, async (server) => {
      const options = { max_protocol_version: asked === PROTOCOL_3_2 ? "3.2" : "3.0" } as const;
      const e = assertConnectionError(
        await failure(`postgres://fake@127.0.0.1:${server.port}/fake`, {
          ssl: "disable",
          connect_timeout: 3,
          ...options,
        }),
        "PROTOCOL_VIOLATION",
      );
      assert.match(e.message, pattern);
      assert.equal(await server.results[0], true, "the driver should close its socket");
    });
  });
}

// ---------------------------------------------------------------------------------------------
// On the real server

const url = (() => {
  try {
    return databaseUrl();
  } catch {
    return undefined;
  }
})();

serverTest(CANCEL, {
  name:
    "max_protocol_version 3.2 on the test server: 18 gives a 32-byte cancel key, older ones negotiate 3.0; queries and cancel work either way",
  ignore: url === undefined,
  async fn() {
    for (const asked of ["3.0", "3.2"]) {
      const target = new URL(url!);
      target.searchParams.set("max_protocol_version", asked);
      target.searchParams.set("sslmode", "disable");
      await using tap = tapProxy(target.toString());
      await using watcher = postgres(url!, { max: 1, ...quiet });
      const version = await serverVersion(tap.sql);
      const q = tap.sql`select pg_sleep(10) as "protocol version test"`;
      q.execute();
      await untilRunning(watcher, "protocol version test");
      tap.state.recording = true;
      q.cancel();
      await assert.rejects(q, (e) => e instanceof PostgresError && e.code === "57014");
      tap.state.recording = false;
      const keyLength = asked === "3.2" && version >= 180000 ? 32 : 4;
      const cancels = cancelRequests(tap.state.bytes);
      assert.equal(cancels.length, 1, `${asked}: one CancelRequest`);
      assert.equal(cancels[0].length, 12 + keyLength, `${asked} on ${version}: key length`);
      assert.deepEqual([...await tap.sql`select 1 as one`], [{ one: 1 }], "still usable");
    }
  },
});

const clusterVersion = (tlsCluster() ?? plainCluster())?.version ?? 0;

Deno.test({
  name:
    "PostgreSQL 18's oauth method: AUTH_UNSUPPORTED naming OAUTHBEARER at once, not a hang (on 18 and later)",
  ignore: clusterVersion < 180000,
  async fn() {
    const cluster = await startCluster({ name: "oauth" });
    try {
      const hba = `${cluster.dataDir}/pg_hba.conf`;
      await Deno.writeTextFile(
        hba,
        "host all pgpipe_oauth 127.0.0.1/32 oauth issuer=https://issuer.invalid scope=openid\n" +
          await Deno.readTextFile(hba),
      );
      // The validator is loaded only once a client answers; pgpipe must stop before that.
      await Deno.writeTextFile(
        `${cluster.dataDir}/postgresql.conf`,
        "\noauth_validator_libraries = 'pgpipe_no_such_validator'\n",
        { append: true },
      );
      const admin = `postgres://postgres@127.0.0.1:${cluster.port}/postgres?sslmode=disable`;
      {
        await using sql = postgres(admin, { max: 1, ...quiet });
        await sql`create role pgpipe_oauth login`;
        await sql`select pg_reload_conf()`;
      }
      // The reload is a signal: until the postmaster has read the file, trust lets the user in.
      const as = `postgres://pgpipe_oauth@127.0.0.1:${cluster.port}/postgres?sslmode=disable`;
      let t0 = 0;
      const e = await until(
        "the reloaded pg_hba.conf",
        async () => {
          t0 = performance.now();
          await using sql = postgres(as, { connect_timeout: 10, ...quiet });
          return await sql`select 1`.then(() => undefined, (err) => err);
        },
        10_000,
        100,
      );
      assert.ok(e instanceof ConnectionError, String(e));
      assert.equal(e.code, "AUTH_UNSUPPORTED");
      assert.match(e.message, /OAUTHBEARER/);
      assert.ok(performance.now() - t0 < 5000, "at once, not at connect_timeout");
    } finally {
      await cluster.stop();
    }
  },
});
