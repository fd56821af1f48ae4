// Tests of the test harness itself, without the driver: raw protocol bytes and psql.
import assert from "node:assert/strict";
import { join } from "node:path";
import { type ClusterInfo, findPgBin, run, type TestUser } from "./harness/cluster.ts";
import { clientTool } from "./harness/server_bin.ts";
import { hasClusters, plainCluster, tlsCluster } from "./harness/env.ts";

function clusterTest(
  name: string,
  c: ClusterInfo | undefined,
  fn: (c: ClusterInfo) => Promise<void>,
) {
  Deno.test({
    name: `harness: ${name}`,
    ignore: !hasClusters || !c,
    fn: () => fn(c as ClusterInfo),
  });
}

/** psql, for checking the clusters with libpq: from the server's folder, the installed one, PATH. */
const psqlExe = (() => {
  const exe = clientTool(findPgBin(), "psql");
  try {
    return new Deno.Command(exe, { args: ["--version"], stdout: "null", stderr: "null" })
        .outputSync().success
      ? exe
      : null;
  } catch {
    return null;
  }
})();
if (psqlExe === null && hasClusters) {
  console.log(
    "harness_test: the psql checks skipped: no psql (PostgreSQL's client package; " +
      "the npm server builds have none)",
  );
}

/** A cluster test that runs psql: ignored where there is none. */
const psqlTest = (
  name: string,
  c: ClusterInfo | undefined,
  fn: (c: ClusterInfo) => Promise<void>,
) => clusterTest(name, psqlExe === null ? undefined : c, fn);

const clusters = [["tls", tlsCluster()], ["plain", plainCluster()]] as const;
const unixPath = (c: ClusterInfo) => join(c.socketDir, `.s.PGSQL.${c.port}`);

async function readAtLeast(conn: Deno.Conn, n: number): Promise<Uint8Array> {
  const out = new Uint8Array(1024);
  let len = 0;
  while (len < n) {
    const got = await conn.read(out.subarray(len));
    if (got === null) break;
    len += got;
  }
  return out.subarray(0, len);
}

function int32s(...values: number[]): Uint8Array {
  const buf = new Uint8Array(values.length * 4);
  values.forEach((v, i) => new DataView(buf.buffer).setInt32(i * 4, v));
  return buf;
}

/** SSLRequest: length 8, code 80877103; the server replies with a single 'S' or 'N'. */
async function sslRequest(conn: Deno.Conn): Promise<string> {
  await conn.write(int32s(8, 80877103));
  return new TextDecoder().decode(await readAtLeast(conn, 1));
}

/** Sends a StartupMessage; returns the first AuthenticationRequest code, or "E" for an error. */
async function authCode(conn: Deno.Conn, user: string): Promise<number | "E"> {
  const body = new TextEncoder().encode(`user\0${user}\0database\0postgres\0\0`);
  const msg = new Uint8Array(8 + body.length);
  msg.set(int32s(msg.length, 196608));
  msg.set(body, 8);
  await conn.write(msg);
  const reply = await readAtLeast(conn, 9);
  if (reply[0] === 0x45) return "E"; // 'E' ErrorResponse
  assert.equal(String.fromCharCode(reply[0]), "R");
  return new DataView(reply.buffer, reply.byteOffset).getInt32(5);
}

const tcp = (c: ClusterInfo) => Deno.connect({ hostname: c.host, port: c.port });

async function tlsConnect(c: ClusterInfo, hostname: string, caCert: string): Promise<Deno.TlsConn> {
  const conn = await tcp(c);
  assert.equal(await sslRequest(conn), "S");
  const tls = await Deno.startTls(conn, { hostname, caCerts: [caCert] });
  try {
    await tls.handshake();
  } catch (e) {
    tls.close();
    throw e;
  }
  return tls;
}

for (const [name, c] of clusters) {
  clusterTest(
    `${name}: SSLRequest answers ${name === "tls" ? "S" : "N"} over TCP`,
    c,
    async (c) => {
      const conn = await tcp(c);
      try {
        assert.equal(await sslRequest(conn), c.ssl ? "S" : "N");
      } finally {
        conn.close();
      }
    },
  );

  // PostgreSQL never offers TLS on a unix socket, whatever the ssl setting.
  clusterTest(`${name}: SSLRequest answers N over the unix socket`, c, async (c) => {
    const conn = await Deno.connect({ transport: "unix", path: unixPath(c) });
    try {
      assert.equal(await sslRequest(conn), "N");
    } finally {
      conn.close();
    }
  });

  // AuthenticationRequest codes: 0 ok (trust), 3 cleartext, 5 md5, 10 SASL (SCRAM).
  const expected = {
    trust: 0,
    password: 3,
    md5: 5,
    scram: 10,
    sslonly: "E",
    cert: "E",
    certfull: "E",
  } as const;
  for (const via of ["tcp", "unix"] as const) {
    clusterTest(`${name}: pg_hba methods per user over ${via} without TLS`, c, async (c) => {
      for (const [kind, code] of Object.entries(expected)) {
        const conn = via === "tcp"
          ? await tcp(c)
          : await Deno.connect({ transport: "unix", path: unixPath(c) });
        try {
          const user = c.users[kind as keyof typeof expected].user;
          assert.equal(await authCode(conn, user), code, `${user} over ${via}`);
        } finally {
          conn.close();
        }
      }
    });
  }

  psqlTest(`${name}: psql logs in with the right password, not a wrong one`, c, async (c) => {
    for (const kind of ["password", "md5", "scram"] as const) {
      const u = c.users[kind];
      assert.equal(await psql(c, u, u.password, "disable"), u.user);
      await assert.rejects(
        psql(c, u, u.password + "x", "disable"),
        /password authentication failed/,
      );
    }
    // trust ignores the password entirely
    const t = c.users.trust;
    assert.equal(await psql(c, t, "wrong", "disable"), t.user);
  });

  psqlTest(`${name}: md5 user stored as md5, others as SCRAM`, c, async (c) => {
    const sql = "SELECT rolname || ' ' || CASE WHEN rolpassword LIKE 'md5%' THEN 'md5' " +
      "WHEN rolpassword LIKE 'SCRAM-SHA-256$%' THEN 'scram' ELSE '?' END " +
      "FROM pg_authid WHERE rolname LIKE 'pgpipe%' ORDER BY 1";
    assert.deepEqual((await psql(c, c.users.trust, "", "disable", sql)).split("\n"), [
      "pgpipe_cert scram",
      "pgpipe_certfull scram",
      "pgpipe_md5 md5",
      "pgpipe_password scram",
      "pgpipe_scram scram",
      "pgpipe_sslonly scram",
      "pgpipe_trust scram",
    ]);
    assert.equal(
      await psql(c, c.users.trust, "", "disable", "SHOW server_version_num"),
      `${c.version}`,
    );
  });
}

const tls = tlsCluster();

clusterTest(
  "tls: certificate verifies for localhost and 127.0.0.1, not with otherCaCert",
  tls,
  async (c) => {
    assert.ok(c.caCert && c.otherCaCert && c.caCertPath);
    assert.equal(await Deno.readTextFile(c.caCertPath), c.caCert);
    for (const host of ["localhost", "127.0.0.1"]) (await tlsConnect(c, host, c.caCert)).close();
    await assert.rejects(tlsConnect(c, "localhost", c.otherCaCert), /UnknownIssuer/);
    await assert.rejects(tlsConnect(c, "example.com", c.caCert), /not valid for name/);
  },
);

clusterTest("tls: sslonly user gets SCRAM over TLS", tls, async (c) => {
  const conn = await tlsConnect(c, "localhost", c.caCert as string);
  try {
    assert.equal(await authCode(conn, c.users.sslonly.user), 10);
  } finally {
    conn.close();
  }
});

psqlTest("tls: sslonly user logs in with psql over TLS, is rejected without", tls, async (c) => {
  const u = c.users.sslonly;
  const verify = `sslmode=verify-full sslrootcert=${c.caCertPath}`;
  assert.equal(await psql(c, u, u.password, verify), u.user);
  await assert.rejects(psql(c, u, u.password + "x", verify), /password authentication failed/);
  await assert.rejects(psql(c, u, u.password, "disable"), /pg_hba.conf rejects connection/);
});

psqlTest(
  "tls: psql (libpq) logs in with client certificates: cert alone, and SCRAM with clientcert=verify-full",
  tls,
  async (c) => {
    const certs = c.clientCerts!;
    const withCert = (name: keyof typeof certs) =>
      `sslmode=verify-full sslrootcert=${c.caCertPath} sslcert=${certs[name].certPath} ` +
      `sslkey=${certs[name].keyPath}`;
    assert.equal(await psql(c, c.users.cert, "", withCert("cert")), c.users.cert.user);
    await assert.rejects(
      psql(c, c.users.cert, "", withCert("nobody")),
      /certificate authentication failed/,
    );
    const full = c.users.certfull;
    assert.equal(await psql(c, full, full.password, withCert("certfull")), full.user);
    // A certificate for another user: the server hides why ("password authentication failed").
    await assert.rejects(psql(c, full, full.password, withCert("cert")), /authentication failed/);
    await assert.rejects(
      psql(
        c,
        full,
        full.password,
        `sslmode=verify-full sslrootcert=${c.caCertPath}`,
      ),
      /certificate/,
    );
  },
);

psqlTest("plain: sslonly user cannot log in", plainCluster(), async (c) => {
  const u = c.users.sslonly;
  await assert.rejects(psql(c, u, u.password, "disable"), /pg_hba.conf rejects connection/);
  await assert.rejects(psql(c, u, u.password, "require"), /does not support SSL/);
});

/** Runs one query through psql over TCP and returns its unaligned output. */
function psql(
  c: ClusterInfo,
  u: TestUser,
  password: string,
  sslmode: string,
  sql = "SELECT current_user",
): Promise<string> {
  const exe = psqlExe ?? "psql";
  const ssl = sslmode.includes("=") ? sslmode : `sslmode=${sslmode}`;
  const conninfo = `host=${c.host} port=${c.port} dbname=${c.database} user=${u.user} ` +
    `${ssl} connect_timeout=10`;
  return run(exe, ["-X", "-w", "-A", "-t", "-d", conninfo, "-c", sql], {
    env: { PGPASSWORD: password, PGCLIENTENCODING: "UTF8" },
    timeoutMs: 15_000,
  }).then((out) => out.trim());
}

Deno.test("harness: an unhandled rejection fails the test run, even from a passing test", async () => {
  const fixture = new URL("./fixtures/unhandled_rejection.ts", import.meta.url).pathname;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["test", "--no-check", fixture],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  assert.notEqual(out.code, 0, text);
  assert.match(text, /nobody handles this/);
});
