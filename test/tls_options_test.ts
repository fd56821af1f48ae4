/**
 * libpq's TLS and connection keywords against the TLS cluster: SCRAM-SHA-256-PLUS on each TLS
 * path pgpipe has, client certificates (pg_hba `cert` and `clientcert=verify-full`), `hostaddr`,
 * `sslsni=0`, the `ssl` object's `servername`, the TLS version bounds and TCP keep-alive, each
 * with the TLS path it takes; and a relay that terminates TLS, which channel binding defeats.
 */
import assert from "node:assert/strict";
import * as net from "node:net";
import * as tls from "node:tls";
import postgres, { ConnectionError, type Options, PostgresError } from "../mod.ts";
import { clientHelloFields, HANDSHAKE_RECORD } from "../src/connection/transport/tls_group.ts";
import type { TestUser } from "./harness/cluster.ts";
import { CertDir, noOpenssl } from "./harness/certs.ts";
import { flightRecorder } from "./harness/flights.ts";
import { tlsCluster } from "./harness/env.ts";
import { withEnv } from "./harness/util.ts";
import { failure, quiet } from "./harness/connect.ts";

const c = tlsCluster();
const ignore = c === undefined;

/** Options for `u` on the TLS cluster (host and port overridable). */
function as(u: TestUser, extra: Options = {}): Options {
  return {
    host: "localhost",
    port: c!.port,
    user: u.user,
    password: u.password,
    database: c!.database,
    connect_timeout: 10,
    ...quiet,
    ...extra,
  };
}

/** Runs one session: its TLS path and what pg_stat_ssl says of it. */
async function session(options: Options | string) {
  const sql = typeof options === "string" ? postgres(options, quiet) : postgres(options);
  try {
    const result = await sql`select ssl, version, client_dn, current_user as user
      from pg_stat_ssl where pid = pg_backend_pid()`;
    return { path: result.state?.tls, ...result[0] } as {
      path: string | null | undefined;
      ssl: boolean;
      version: string;
      client_dn: string | null;
      user: string;
    };
  } finally {
    await sql.end();
  }
}

// ---------------------------------------------------------------------------------------------
// Channel binding

Deno.test({
  name:
    "channel_binding=require: SCRAM-SHA-256-PLUS against PostgreSQL on node:tls, first and later connections, with and without a CA",
  ignore,
  fn: async () => {
    const u = c!.users.scram;
    for (const ssl of ["require", { mode: "verify-full" as const, ca: c!.caCert! }] as const) {
      for (let i = 0; i < 2; i++) {
        const s = await session(as(u, { ssl, channel_binding: "require" }));
        assert.deepEqual([s.path, s.ssl, s.user], ["node", true, u.user], JSON.stringify(ssl));
      }
    }
  },
});

Deno.test({
  name:
    "channel_binding=require over a user's socket (node:tls over it) and over direct TLS (PostgreSQL 17+)",
  ignore,
  fn: async () => {
    const u = c!.users.scram;
    const socket = () =>
      new Promise<net.Socket>((resolve, reject) => {
        const s = net.connect({ host: c!.host, port: c!.port });
        s.once("connect", () => resolve(s));
        s.once("error", reject);
      });
    const viaSocket = await session(as(u, { ssl: "require", channel_binding: "require", socket }));
    assert.deepEqual([viaSocket.path, viaSocket.user], ["node", u.user]);
    if (c!.version >= 170000) {
      const direct = await session(
        as(u, { ssl: "require", sslnegotiation: "direct", channel_binding: "require" }),
      );
      assert.deepEqual([direct.path, direct.user], ["node", u.user]);
    }
  },
});

Deno.test({
  name:
    "channel_binding=prefer (the default) binds on node:tls and stays native where verified; disable never binds",
  ignore,
  fn: async () => {
    const u = c!.users.scram;
    const p = flightRecorder({ hostname: c!.host, port: c!.port });
    try {
      // A port of its own: this process has learned nothing of it yet.
      const full = as(u, {
        host: "127.0.0.1",
        port: p.port,
        ssl: { mode: "verify-full", ca: c!.caCert! },
      });
      assert.equal((await session(full)).path, "node", "the first connection, which binds");
      assert.equal((await session(full)).path, "native", "later ones: native, SCRAM unbound (n)");
      const off = await session({ ...full, channel_binding: "disable" });
      assert.equal(off.user, u.user);
    } finally {
      await p.close();
    }
  },
});

/**
 * A relay that terminates TLS with its own certificate and opens its own TLS to the server,
 * passing the bytes on both ways: the server sees the relay's TLS, the client the relay's
 * certificate. A client that does not verify the server connects through it unless it binds.
 */
async function tlsRelay(pair: { cert: string; key: string }) {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    sockets.add(client);
    client.once("data", () => {
      // The client's SSLRequest: agree, then run TLS with the relay's own certificate.
      client.write(new TextEncoder().encode("S"));
      const front = new tls.TLSSocket(client, { isServer: true, cert: pair.cert, key: pair.key });
      const up = net.connect({ host: c!.host, port: c!.port });
      sockets.add(up);
      up.once("connect", () => up.write(Uint8Array.of(0, 0, 0, 8, 4, 210, 22, 47)));
      up.once("data", () => {
        const back = tls.connect({ socket: up, rejectUnauthorized: false });
        front.pipe(back).pipe(front);
        back.on("error", () => front.destroy());
        front.on("error", () => back.destroy());
      });
      up.on("error", () => client.destroy());
    });
  });
  server.listen(0, "127.0.0.1");
  await new Promise((r) => server.once("listening", r));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}

Deno.test({
  name:
    "a relay that terminates TLS (a MITM under sslmode=require): SCRAM through it works unbound, and fails bound, at PostgreSQL's own check",
  ignore: ignore || noOpenssl,
  fn: async () => {
    const certs = await CertDir.create("pgpipe-relay-");
    try {
      const ca = await certs.ca("relay-ca");
      const pair = await certs.leaf("relay", ca, {
        cn: "localhost",
        names: ["localhost", "127.0.0.1"],
      });
      const relay = await tlsRelay(pair);
      try {
        const u = c!.users.scram;
        const through = (extra: Options) =>
          as(u, { host: "127.0.0.1", port: relay.port, ssl: "require", ...extra });
        // Unbound, the relay passes SCRAM on: it could read every query.
        const unbound = await session(through({ channel_binding: "disable" }));
        assert.equal(unbound.user, u.user);
        // Bound (prefer, on node:tls), the client binds to the relay's certificate and the server
        // to its own: PostgreSQL refuses the proof.
        const e = await failure(through({}));
        assert.ok(e instanceof PostgresError, `${e}`);
        assert.equal(e.code, "28000");
        assert.match(e.message, /channel binding/i);
        // require: the same, and never unbound.
        const strict = await failure(through({ channel_binding: "require" }));
        assert.ok(strict instanceof PostgresError, `${strict}`);
        assert.equal(strict.code, "28000");
      } finally {
        await relay.close();
      }
    } finally {
      await certs.remove();
    }
  },
});

Deno.test({
  name:
    "channel_binding=require with sslmode=allow: the plain attempt is refused before anything is sent, the TLS one binds",
  ignore,
  fn: async () => {
    const u = c!.users.scram;
    const s = await session(as(u, { ssl: "allow", channel_binding: "require" }));
    assert.deepEqual([s.ssl, s.path, s.user], [true, "node", u.user]);
  },
});

// ---------------------------------------------------------------------------------------------
// Client certificates

/** The cluster's client certificate files for `name`, as options. */
function certFiles(name: "cert" | "certfull" | "nobody"): Options {
  const f = c!.clientCerts![name];
  return { sslcert: f.certPath, sslkey: f.keyPath };
}

Deno.test({
  name:
    "client certificates: pg_hba cert and clientcert=verify-full, from files and from PEM text, on node:tls",
  ignore,
  fn: async () => {
    const verify = { ssl: { mode: "verify-full" as const, ca: c!.caCert! } };
    const cert = await session(
      as(c!.users.cert, { ...verify, ...certFiles("cert"), password: undefined }),
    );
    assert.deepEqual([cert.path, cert.user, cert.client_dn], [
      "node",
      c!.users.cert.user,
      `/CN=${c!.users.cert.user}`,
    ]);
    const full = await session(as(c!.users.certfull, { ...verify, ...certFiles("certfull") }));
    assert.deepEqual([full.path, full.user], ["node", c!.users.certfull.user]);
    // postgres.js's ssl object, PEM text (Deno Deploy has no files).
    const f = c!.clientCerts!.cert;
    const text = await session(as(c!.users.cert, {
      password: undefined,
      ssl: {
        ca: c!.caCert!,
        cert: await Deno.readTextFile(f.certPath),
        key: await Deno.readTextFile(f.keyPath),
      },
    }));
    assert.equal(text.user, c!.users.cert.user);
    // A later connection stays on node:tls (native TLS cannot send a certificate).
    assert.equal(
      (await session(as(c!.users.certfull, { ...verify, ...certFiles("certfull") }))).path,
      "node",
    );
    if (c!.version >= 170000) {
      const direct = await session(as(c!.users.cert, {
        ...verify,
        ...certFiles("cert"),
        password: undefined,
        sslnegotiation: "direct",
      }));
      assert.equal(direct.user, c!.users.cert.user);
    }
  },
});

Deno.test({
  name:
    "client certificates: an encrypted key with sslpassword; the wrong certificate, none, or sslcertmode=disable are the server's refusal",
  ignore: ignore || noOpenssl,
  fn: async () => {
    const certs = await CertDir.create("pgpipe-clientkey-");
    try {
      const f = c!.clientCerts!.cert;
      const key = await Deno.readTextFile(f.keyPath);
      const pair = {
        certPath: f.certPath,
        keyPath: f.keyPath,
        cert: await Deno.readTextFile(f.certPath),
        key,
      };
      const encrypted = await certs.key(pair, "pkcs8-enc", "k3y-pass");
      const verify = { ssl: { mode: "verify-full" as const, ca: c!.caCert! }, password: undefined };
      const ok = await session(
        as(c!.users.cert, {
          ...verify,
          sslcert: pair.cert,
          sslkey: encrypted,
          sslpassword: "k3y-pass",
        }),
      );
      assert.equal(ok.user, c!.users.cert.user);
      for (
        const extra of [certFiles("nobody"), {}, {
          ...certFiles("cert"),
          sslcertmode: "disable" as const,
        }]
      ) {
        const e = await failure(as(c!.users.cert, { ...verify, ...extra }));
        assert.ok(e instanceof PostgresError, `${e}`);
        assert.equal(e.code, "28000", e.message);
      }
      const full = await failure(as(c!.users.certfull, { ssl: verify.ssl, ...certFiles("cert") }));
      assert.ok(full instanceof PostgresError && full.code === "28P01", `${full}`);
    } finally {
      await certs.remove();
    }
  },
});

Deno.test({
  name:
    "client certificates found as libpq finds them: sslcert with the default key, sslkey with the default certificate, a missing sslcert file is none",
  ignore,
  fn: async () => {
    const f = c!.clientCerts!.cert;
    const home = await Deno.makeTempDir({ prefix: "pgpipe-certhome-" });
    const dir = `${home}/.postgresql`;
    const ssl = { mode: "verify-full" as const, ca: c!.caCert! };
    try {
      await Deno.mkdir(dir);
      await withEnv({ HOME: home, PGSSLCERT: undefined, PGSSLKEY: undefined }, async () => {
        // sslcert alone: its key is ~/.postgresql/postgresql.key.
        await Deno.writeTextFile(`${dir}/postgresql.key`, await Deno.readTextFile(f.keyPath), {
          mode: 0o600,
        });
        const cert = as(c!.users.cert, { ssl, password: undefined });
        const keyDefault = await session({ ...cert, sslcert: f.certPath });
        assert.deepEqual([keyDefault.user, keyDefault.client_dn], [
          c!.users.cert.user,
          `/CN=${c!.users.cert.user}`,
        ]);
        await Deno.remove(`${dir}/postgresql.key`);
        // sslkey alone: its certificate is ~/.postgresql/postgresql.crt.
        await Deno.copyFile(f.certPath, `${dir}/postgresql.crt`);
        assert.equal((await session({ ...cert, sslkey: f.keyPath })).user, c!.users.cert.user);
        // A certificate file that does not exist: none is sent (nor its key read), and a user
        // the server asks no certificate of connects.
        const none = await session(
          as(c!.users.scram, {
            ssl,
            sslcert: `${home}/missing.crt`,
            sslkey: `${home}/missing.key`,
          }),
        );
        assert.deepEqual([none.user, none.client_dn], [c!.users.scram.user, null]);
      });
    } finally {
      await Deno.remove(home, { recursive: true });
    }
  },
});

// ---------------------------------------------------------------------------------------------
// hostaddr, servername, sslsni

Deno.test({
  name: "hostaddr: connects to the address, verifies the host name, on both TLS paths",
  ignore,
  fn: async () => {
    const u = c!.users.scram;
    const p = flightRecorder({ hostname: c!.host, port: c!.port });
    try {
      const url = `postgres://${u.user}:${encodeURIComponent(u.password)}@localhost:${p.port}/` +
        `${c!.database}?hostaddr=127.0.0.1&sslmode=verify-full&sslrootcert=${
          encodeURIComponent(c!.caCertPath!)
        }`;
      assert.equal((await session(url)).path, "node");
      assert.equal((await session(url)).path, "native");
      // A name the resolver does not know: hostaddr alone is connected to.
      const unknown = url.replace("@localhost:", "@db.invalid:").replace("verify-full", "require");
      assert.equal((await session(unknown)).user, u.user);
      // verify-full checks the name given, not the address: db.invalid is not in the certificate.
      const wrong = url.replace("@localhost:", "@db.invalid:");
      for (let i = 0; i < 2; i++) {
        const e = await failure(wrong);
        assert.ok(e instanceof ConnectionError && e.code === "SSL_FAILED", `${e}`);
      }
    } finally {
      await p.close();
    }
  },
});

/** Whether the ClientHello in the bytes carries a server name (SNI, extension 0). */
function sentServerName(bytes: Uint8Array): boolean {
  for (let at = 0; at + 5 <= bytes.length;) {
    const length = (bytes[at + 3] << 8) | bytes[at + 4];
    if (bytes[at] === HANDSHAKE_RECORD && bytes[at + 5] === 1) {
      const fields = clientHelloFields(bytes.subarray(at + 9, at + 5 + length));
      return fields?.extensions.has(0) ?? false;
    }
    at += 5 + length;
  }
  throw new Error("no ClientHello in these bytes");
}

Deno.test({
  name:
    "sslsni=0 sends no server name and still verifies it (node:tls); the default sends it; ssl.servername names what is verified",
  ignore,
  fn: async () => {
    const u = c!.users.scram;
    const p = flightRecorder({ hostname: c!.host, port: c!.port });
    try {
      const base = as(u, { port: p.port, ssl: { mode: "verify-full", ca: c!.caCert! } });
      const hello = (i: number) => p.connections[i].filter((f) => f.from === "client")[1].bytes;
      assert.equal((await session({ ...base, sslsni: 0 })).path, "node");
      assert.equal(sentServerName(hello(0)), false);
      await session(base);
      assert.equal(sentServerName(hello(1)), true);
      const e = await failure({
        ...base,
        sslsni: 0,
        ssl: { ca: c!.caCert!, servername: "db.invalid" },
      });
      assert.ok(e instanceof ConnectionError && e.code === "SSL_FAILED", `${e}`);
      // servername: connect to 127.0.0.1, verify (and send) localhost. The path memory knows
      // localhost on this port from the sessions above (it keys on the name verified): native.
      const named = {
        ...base,
        host: "127.0.0.1",
        ssl: { ca: c!.caCert!, servername: "localhost" },
      };
      const paths = [(await session(named)).path, (await session(named)).path];
      assert.deepEqual(paths, ["native", "native"]);
      const wrong = await failure({ ...named, ssl: { ca: c!.caCert!, servername: "db.invalid" } });
      assert.ok(wrong instanceof ConnectionError && wrong.code === "SSL_FAILED", `${wrong}`);
    } finally {
      await p.close();
    }
  },
});

// ---------------------------------------------------------------------------------------------
// TLS versions, keep-alive

Deno.test({
  name: "ssl_min_protocol_version / ssl_max_protocol_version pin the TLS version (node:tls)",
  ignore,
  fn: async () => {
    const u = c!.users.trust;
    const twelve = await session(as(u, { ssl: "require", ssl_max_protocol_version: "TLSv1.2" }));
    assert.deepEqual([twelve.version, twelve.path], ["TLSv1.2", "node"]);
    const thirteen = await session(as(u, { ssl: "require", ssl_min_protocol_version: "TLSv1.3" }));
    assert.deepEqual([thirteen.version, thirteen.path], ["TLSv1.3", "node"]);
    const url = `postgres://${u.user}@localhost:${c!.port}/${c!.database}?sslmode=require` +
      "&ssl_min_protocol_version=TLSv1.2&ssl_max_protocol_version=TLSv1.2";
    assert.equal((await session(url)).version, "TLSv1.2");
  },
});

/** The keep-alive timer `ss` shows for the client end of the session's socket, in seconds. */
async function keepaliveOf(sql: ReturnType<typeof postgres>): Promise<string> {
  const [{ port }] =
    await sql`select client_port as port from pg_stat_activity where pid = pg_backend_pid()`;
  const out = await new Deno.Command("ss", {
    args: ["-tnoH", "state", "established", `( sport = :${port} )`],
    stdout: "piped",
  }).output();
  return new TextDecoder().decode(out.stdout);
}

/** ss (iproute2), which shows a socket's keepalive timer. */
const hasSs = (() => {
  try {
    return new Deno.Command("ss", { args: ["-V"], stdout: "null", stderr: "null" }).outputSync()
      .success;
  } catch {
    return false;
  }
})();
if (!ignore && !hasSs) {
  console.log(
    "tls_options_test: the keepalives test skipped: no ss (Debian: apt-get install iproute2)",
  );
}

Deno.test({
  name:
    "keepalives: on by default (the system's idle time), keepalives_idle sets it, keepalives=0 turns it off",
  ignore: ignore || !hasSs,
  fn: async () => {
    const u = c!.users.trust;
    for (
      const [extra, pattern] of [
        [{}, /timer:\(keepalive,/],
        [{ keepalives_idle: 17 }, /timer:\(keepalive,1[67]sec/],
        [{ keepalives: 0 as const }, /^(?![\s\S]*keepalive)/],
      ] as const
    ) {
      for (const ssl of ["disable", "require"] as const) {
        const sql = postgres(as(u, { ssl, ...extra }));
        try {
          assert.match(await keepaliveOf(sql), pattern, `${JSON.stringify(extra)} ${ssl}`);
        } finally {
          await sql.end();
        }
      }
    }
  },
});
