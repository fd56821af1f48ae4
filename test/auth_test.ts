// Authentication against the test clusters (every pg_hba method over TCP, TLS and the unix
// socket), plus fake servers for what a real one will not do: stay silent, send garbage, ask
// for an unsupported method, or fake its SCRAM proof. The sslmode matrix is in tls_test.ts.
import assert from "node:assert/strict";
import { ConnectionError, type Options, PostgresError } from "../mod.ts";
import type { ClusterInfo } from "./harness/cluster.ts";
import { plainCluster, tlsCluster } from "./harness/env.ts";
import {
  assertConnectionError,
  assertPostgresError,
  clusterTest,
  failure,
  session,
} from "./harness/connect.ts";
import { ScramClient } from "../src/protocol/scram.ts";
import {
  auth,
  concat,
  cstr,
  errorResponse,
  message,
  type Peer,
  SSL_REQUEST,
  withServer,
} from "./harness/fake_server.ts";
import { delay, poll } from "./harness/wait.ts";
import { b64, scramExpect } from "./harness/scram_server.ts";

// ---------------------------------------------------------------------------------------------
// Helpers

/** The password must not leak through the message, the cause chain or inspection. */
function assertNoSecret(e: unknown, secret: string): void {
  const shown = [String(e), Deno.inspect(e, { depth: 10 })];
  for (let c: unknown = e; c instanceof Error; c = c.cause) shown.push(c.message);
  for (const text of shown) assert.ok(!text.includes(secret), `the error reveals the password`);
}

type Method = "trust" | "password" | "md5" | "scram";
const METHODS: readonly Method[] = ["trust", "password", "md5", "scram"];

const tls = tlsCluster();
const plain = plainCluster();
/** The TLS cluster when there is one: every transport (TCP, TLS, unix) is available there. */
const any = tls ?? plain;

type Via = "tcp" | "tls" | "unix";

function target(c: ClusterInfo, via: Via, user: string, password?: string): Options {
  return {
    host: via === "unix" ? c.socketDir : c.host,
    port: c.port,
    database: c.database,
    user,
    ...(password === undefined ? {} : { password }),
    ssl: via === "tls" ? "require" : "disable",
  };
}

// ---------------------------------------------------------------------------------------------
// 1. The auth matrix against real servers

for (const via of ["tcp", "tls", "unix"] as const) {
  const c = via === "tls" ? tls : any;
  for (const method of METHODS) {
    clusterTest(`auth: ${method} over ${via}`, c, async (c) => {
      const u = c.users[method];
      const s = await session(target(c, via, u.user, u.password));
      assert.deepEqual(s, { user: u.user, ssl: via === "tls" });
    });
  }
}

clusterTest("auth: sslonly user over TLS connects", tls, async (c) => {
  const u = c.users.sslonly;
  assert.deepEqual(await session(target(c, "tls", u.user, u.password)), {
    user: u.user,
    ssl: true,
  });
});

for (const via of ["tcp", "unix"] as const) {
  clusterTest(`auth: sslonly user without TLS (${via}) is rejected with 28000`, any, async (c) => {
    const u = c.users.sslonly;
    const e = assertPostgresError(await failure(target(c, via, u.user, u.password)), "28000");
    assertNoSecret(e, u.password);
  });
}

for (const method of ["password", "md5", "scram"] as const) {
  for (const via of ["tcp", "tls"] as const) {
    clusterTest(`auth: wrong ${method} password over ${via} fails with 28P01`, tls, async (c) => {
      const u = c.users[method];
      const wrong = `${u.password}-wrong`;
      const e = assertPostgresError(await failure(target(c, via, u.user, wrong)), "28P01");
      assertNoSecret(e, wrong);
      assertNoSecret(e, u.password);
    });
  }
}

clusterTest(
  "auth: trust ignores a wrong password and never calls a password function",
  any,
  async (c) => {
    const u = c.users.trust;
    let calls = 0;
    const password = () => {
      calls++;
      return "not used";
    };
    assert.equal((await session({ ...target(c, "tcp", u.user), password })).user, u.user);
    assert.equal(calls, 0);
    assert.equal((await session(target(c, "tcp", u.user, "wrong"))).user, u.user);
  },
);

for (const method of ["password", "md5", "scram"] as const) {
  clusterTest(`auth: ${method} with the password from a sync or async function`, any, async (c) => {
    const u = c.users[method];
    let calls = 0;
    const asyncPassword = async () => {
      calls++;
      await delay(5);
      return u.password;
    };
    const s = await session({ ...target(c, "tcp", u.user), password: asyncPassword });
    assert.equal(s.user, u.user);
    assert.equal(calls, 1);
    const sync = await session({ ...target(c, "tcp", u.user), password: () => u.password });
    assert.equal(sync.user, u.user);
  });
}

for (const method of ["password", "md5", "scram"] as const) {
  clusterTest(
    `auth: ${method} without a password fails with AUTH_FAILED`,
    any,
    async (c) => {
      const u = c.users[method];
      // A function resolving to nothing is "no password" whatever PGPASSWORD says.
      const none = () => undefined as unknown as string;
      const e = await failure({ ...target(c, "tcp", u.user), password: none });
      assertConnectionError(e, "AUTH_FAILED");
      if (Deno.env.get("PGPASSWORD") === undefined) {
        assertConnectionError(await failure(target(c, "tcp", u.user)), "AUTH_FAILED");
      }
    },
  );
}

clusterTest("auth: non-ASCII passwords work for scram, md5 and cleartext", any, async (c) => {
  for (const method of ["scram", "md5", "password"] as const) {
    const u = c.users[method];
    assert.ok(u.password.includes("\u00e9"), "the harness password should contain é");
    assert.equal((await session(target(c, "tcp", u.user, u.password))).user, u.user);
  }
});

clusterTest(
  "auth: scram normalizes the password (SASLprep), so NFD é works too",
  any,
  async (c) => {
    const u = c.users.scram;
    const nfd = u.password.normalize("NFD");
    assert.notEqual(nfd, u.password);
    assert.equal((await session(target(c, "tcp", u.user, nfd))).user, u.user);
  },
);

for (const method of ["password", "md5", "scram"] as const) {
  clusterTest(`auth: ${method} via a URL with a percent-encoded password`, any, async (c) => {
    const u = c.users[method];
    const url = `postgres://${u.user}:${encodeURIComponent(u.password)}@${c.host}:${c.port}/` +
      `${c.database}?sslmode=disable`;
    assert.ok(url.includes("%C3%A9") && url.includes("%3A"), url);
    assert.deepEqual(await session(url), { user: u.user, ssl: false });
  });
}

clusterTest("auth: URL with a unix socket directory in ?host=", any, async (c) => {
  const u = c.users.scram;
  const url = `postgres://${u.user}:${encodeURIComponent(u.password)}@/${c.database}` +
    `?host=${encodeURIComponent(c.socketDir)}&port=${c.port}`;
  assert.deepEqual(await session(url), { user: u.user, ssl: false });
});

clusterTest("auth: URL with a wrong percent-encoded password fails with 28P01", any, async (c) => {
  const u = c.users.md5;
  const wrong = `${u.password}\u00e9`;
  const url = `postgres://${u.user}:${encodeURIComponent(wrong)}@${c.host}:${c.port}/` +
    `${c.database}?sslmode=disable`;
  const e = assertPostgresError(await failure(url), "28P01");
  assertNoSecret(e, wrong);
  assertNoSecret(e, encodeURIComponent(wrong));
});

// ---------------------------------------------------------------------------------------------
// 3. Nothing hangs: unreachable servers and fake servers

const encoder = new TextEncoder();
const decoder = new TextDecoder();

const local = (port: number, extra: Options = {}): Options => ({
  host: "127.0.0.1",
  port,
  user: "fake",
  database: "fake",
  password: "fake-secret",
  ssl: "disable",
  connect_timeout: 5,
  ...extra,
});

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

async function timed<T>(fn: () => Promise<T>): Promise<[T, number]> {
  const t0 = performance.now();
  const value = await fn();
  return [value, performance.now() - t0];
}

for (const ssl of ["disable", "prefer", "verify-full"] as const) {
  Deno.test(`connect: nothing listening on the port → ECONNREFUSED quickly (ssl=${ssl})`, async () => {
    const [e, ms] = await timed(() => failure(local(freePort(), { ssl, connect_timeout: 10 })));
    const err = assertConnectionError(e, "ECONNREFUSED");
    assert.equal(err.port !== undefined, true);
    assert.ok(ms < 3000, `took ${ms} ms`);
  });
}

Deno.test("connect: a unix socket directory without a server → ENOENT", async () => {
  const dir = await Deno.makeTempDir({ prefix: "pgpipe-nosock-" });
  try {
    const [e, ms] = await timed(() => failure(local(5432, { host: dir })));
    assertConnectionError(e, "ENOENT");
    assert.ok(ms < 3000, `took ${ms} ms`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("connect: a server that never answers the startup → CONNECT_TIMEOUT, socket closed", async () => {
  await withServer(async (peer) => {
    await peer.startup();
    return await peer.closedWithin(3000);
  }, async (server) => {
    const [e, ms] = await timed(() => failure(local(server.port, { connect_timeout: 1 })));
    assertConnectionError(e, "CONNECT_TIMEOUT");
    assert.ok(ms >= 900 && ms < 3000, `took ${ms} ms`);
    assert.equal(await server.results[0], true, "the driver should close its socket on timeout");
  });
});

/** Reads the SSLRequest; answers 'S' (then stays silent: a stalled TLS handshake) or nothing. */
function stallTls(answer: boolean) {
  return async (peer: Peer) => {
    assert.equal(await peer.int32(), 8);
    assert.equal(await peer.int32(), SSL_REQUEST);
    if (answer) await peer.send(encoder.encode("S"));
    return await peer.closedWithin(2000);
  };
}

const stalls = [
  ["the SSLRequest", false],
  ["the TLS handshake", true],
] as const;

for (const [what, answer] of stalls) {
  for (const ssl of ["prefer", "require", "verify-full"] as const) {
    Deno.test(`connect: a server stalling ${what} → CONNECT_TIMEOUT (ssl=${ssl})`, async () => {
      await withServer(stallTls(answer), async (server) => {
        const [e, ms] = await timed(() => failure(local(server.port, { ssl, connect_timeout: 1 })));
        assertConnectionError(e, "CONNECT_TIMEOUT");
        assert.ok(ms >= 900 && ms < 3000, `took ${ms} ms`);
      });
    });
  }
}

// A timeout while the server stalls the SSL answer must close the socket at once.
Deno.test("connect: CONNECT_TIMEOUT while the server stalls the SSLRequest closes the socket", async () => {
  for (const ssl of ["prefer", "verify-full"] as const) {
    await withServer(stallTls(false), async (server) => {
      assertConnectionError(
        await failure(local(server.port, { ssl, connect_timeout: 1 })),
        "CONNECT_TIMEOUT",
      );
      assert.equal(await server.results[0], true, `ssl=${ssl}: socket left open`);
    });
  }
});

/** The sockets and files this process holds open (Linux). */
function openFds(): number {
  return [...Deno.readDirSync("/proc/self/fd")].length;
}

// A timeout while the server stalls the TLS handshake: Deno keeps the socket of a native
// handshake cut short until that handshake ends (the server giving up its side: PostgreSQL's
// authentication_timeout), so the next attempts to that server, for a while, go through
// node:tls, whose socket the timeout closes at once. Nothing is left once the server gave up.
Deno.test({
  name: "connect: CONNECT_TIMEOUT while the server stalls the TLS handshake leaves no socket",
  ignore: Deno.build.os !== "linux",
  async fn() {
    for (const ssl of ["prefer", "verify-full"] as const) {
      const before = openFds();
      await withServer(async (peer, index) => {
        assert.equal(await peer.int32(), 8);
        assert.equal(await peer.int32(), SSL_REQUEST);
        await peer.send(encoder.encode("S"));
        const closed = await peer.closedWithin(1500);
        peer.close(); // the server gives up its side
        return { index, closed };
      }, async (server) => {
        for (let attempt = 0; attempt < 2; attempt++) {
          const [e, ms] = await timed(() =>
            failure(local(server.port, { ssl, connect_timeout: 1 }))
          );
          assertConnectionError(e, "CONNECT_TIMEOUT");
          assert.ok(ms >= 900 && ms < 3000, `took ${ms} ms`);
        }
        const [, second] = await Promise.all(server.results) as { closed: boolean }[];
        assert.equal(second.closed, true, `ssl=${ssl}: the node:tls attempt left its socket open`);
      });
      await poll(() => openFds() <= before, 2000); // a socket being closed may take a moment
      const after = openFds();
      assert.ok(after <= before, `ssl=${ssl}: ${after - before} descriptors left open`);
    }
  },
});

for (const ssl of ["require", "verify-ca", "verify-full"] as const) {
  Deno.test(`connect: a failed TLS handshake → SSL_FAILED, socket closed (ssl=${ssl})`, async () => {
    await withServer(async (peer) => {
      await peer.take(8);
      await peer.send(encoder.encode("S"));
      await peer.take(5); // the ClientHello's record header
      // Not a TLS record: the client's handshake must fail, and it must hang up.
      await peer.send(encoder.encode("hello world, this is not TLS at all"));
      return await peer.closedWithin(2000);
    }, async (server) => {
      const [e, ms] = await timed(() => failure(local(server.port, { ssl, connect_timeout: 10 })));
      assertConnectionError(e, "SSL_FAILED");
      assert.ok(ms < 3000, `took ${ms} ms`);
      assert.equal(await server.results[0], true, "the driver should close its socket");
    });
  });
}

// CVE-2021-23222: bytes sent with the one-byte SSL answer would be read as if they came through
// TLS (or, after 'N', before the client asked). They must be refused, never used.
for (const [answer, ssl] of [["S", "require"], ["S", "verify-full"], ["N", "prefer"]] as const) {
  Deno.test(`connect: data after the SSL answer '${answer}' is refused (ssl=${ssl})`, async () => {
    await withServer(async (peer) => {
      await peer.take(8);
      // One write, so the answer and the injected message arrive together.
      await peer.send(concat(encoder.encode(answer), auth(0), message("Z", encoder.encode("I"))));
      return await peer.closedWithin(2000);
    }, async (server) => {
      const e = await failure(local(server.port, { ssl }));
      assertConnectionError(e, "PROTOCOL_VIOLATION");
      assert.equal(await server.results[0], true, "the driver should close its socket");
    });
  });
}

Deno.test("connect: prefer falls back to plain when the TLS handshake fails", async () => {
  await withServer(async (peer) => {
    const first = await peer.int32();
    if (first === 8 && await peer.int32() === SSL_REQUEST) {
      await peer.send(encoder.encode("S"));
      await peer.take(5); // the ClientHello's record header, on the socket that asked
      await peer.send(encoder.encode("hello world, this is not TLS at all"));
      return "tls";
    }
    // The retry: a plain StartupMessage (protocol 3.0), no SSLRequest.
    assert.equal(await peer.int32(), 196608);
    await peer.send(concat(auth(0), errorResponse("XX999", "plain retry arrived")));
    return "plain";
  }, async (server) => {
    const e = await failure(local(server.port, { ssl: "prefer" }));
    assert.ok(e instanceof PostgresError && e.code === "XX999", `${e}`);
    assert.deepEqual(await Promise.all(server.results), ["tls", "plain"]);
  });
});

Deno.test("connect: a server that answers the startup with garbage → ConnectionError, no hang", async () => {
  await withServer(async (peer) => {
    await peer.startup();
    await peer.send(encoder.encode("hello world"));
    return await peer.closedWithin(3000);
  }, async (server) => {
    const [e, ms] = await timed(() => failure(local(server.port, { connect_timeout: 10 })));
    assertConnectionError(e, ["PROTOCOL_VIOLATION", "CONNECTION_CLOSED"]);
    assert.ok(ms < 3000, `took ${ms} ms`);
    assert.equal(await server.results[0], true, "the driver should close its socket");
  });
});

Deno.test("connect: a server that answers the SSLRequest with garbage → ConnectionError, no hang", async () => {
  await withServer(async (peer) => {
    await peer.take(8);
    await peer.send(encoder.encode("hello world"));
    return await peer.closedWithin(3000);
  }, async (server) => {
    const [e, ms] = await timed(() =>
      failure(local(server.port, { ssl: "prefer", connect_timeout: 10 }))
    );
    assert.ok(e instanceof ConnectionError, `${e}`);
    assert.ok(ms < 3000, `took ${ms} ms`);
    assert.equal(await server.results[0], true, "the driver should close its socket");
  });
});

Deno.test("connect: a server that hangs up right after accepting → ConnectionError", async () => {
  await withServer((peer) => {
    peer.conn.close();
    return Promise.resolve();
  }, async (server) => {
    for (const ssl of ["disable", "prefer"] as const) {
      const [e, ms] = await timed(() => failure(local(server.port, { ssl, connect_timeout: 10 })));
      assert.ok(e instanceof ConnectionError, `${e}`);
      assert.ok(ms < 3000, `took ${ms} ms`);
    }
  });
});

Deno.test("connect: a server asking for GSSAPI → AUTH_UNSUPPORTED", async () => {
  await withServer(async (peer) => {
    const params = await peer.startup();
    assert.equal(params.get("user"), "fake");
    await peer.send(auth(7));
    return await peer.closedWithin(3000);
  }, async (server) => {
    const e = assertConnectionError(await failure(local(server.port)), "AUTH_UNSUPPORTED");
    assert.match(e.message, /GSSAPI/);
    assert.equal(await server.results[0], true);
  });
});

Deno.test("connect: a server offering SCRAM-SHA-256-PLUS without TLS → PROTOCOL_VIOLATION (libpq's rule), nothing sent", async () => {
  await withServer(async (peer) => {
    await peer.startup();
    await peer.send(auth(10, cstr("SCRAM-SHA-256-PLUS"), cstr("SCRAM-SHA-256"), cstr("")));
    return await peer.closedWithin(3000);
  }, async (server) => {
    const e = assertConnectionError(
      await failure(local(server.port, { password: "secret" })),
      "PROTOCOL_VIOLATION",
    );
    assert.match(e.message, /SCRAM-SHA-256-PLUS over a connection without TLS/);
    assert.equal(await server.results[0], true, "the client hung up without answering");
  });
});

Deno.test("connect: a FATAL error during startup is a PostgresError with its code", async () => {
  await withServer(async (peer) => {
    await peer.startup();
    await peer.send(errorResponse("53300", "sorry, too many clients already"));
    peer.conn.close();
  }, async (server) => {
    assertPostgresError(await failure(local(server.port)), "53300");
  });
});

// ---------------------------------------------------------------------------------------------
// 4. SCRAM: the server must prove it knows the password

function unb64(text: string): Uint8Array {
  return Uint8Array.from(atob(text), (ch) => ch.charCodeAt(0));
}

// RFC 7677 §3 test vector.
const RFC = {
  password: "pencil",
  clientNonce: "rOprNGfwEbeRWgbNEkqO",
  serverFirst: "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0," +
    "s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
  withoutProof: "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
  proof: "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
  serverFinal: "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
};

const rfcExpect = (clientFirstBare: string) =>
  scramExpect(
    RFC.password,
    unb64("W22ZaJ0SNY7soEsUEjb6gQ=="),
    4096,
    `${clientFirstBare},${RFC.serverFirst},${RFC.withoutProof}`,
  );

Deno.test("scram: the test's server-side computation reproduces RFC 7677", async () => {
  const { clientProof, serverSignature } = await rfcExpect(`n=user,r=${RFC.clientNonce}`);
  assert.equal(clientProof, RFC.proof);
  assert.equal(`v=${serverSignature}`, RFC.serverFinal);
});

Deno.test("scram: ScramClient follows RFC 7677 (with the empty user name pgpipe sends)", async () => {
  const client = new ScramClient(RFC.password, { nonce: RFC.clientNonce });
  // PostgreSQL takes the user from the startup message; the SCRAM user name is left empty.
  assert.equal(client.start(), `n,,n=,r=${RFC.clientNonce}`);
  const expected = await rfcExpect(`n=,r=${RFC.clientNonce}`);
  assert.equal(
    await client.respond(RFC.serverFirst),
    `${RFC.withoutProof},p=${expected.clientProof}`,
  );
  client.verify(`v=${expected.serverSignature}`);
  // The RFC's own server signature is for "n=user", so it must not verify here.
  assert.throws(() => client.verify(RFC.serverFinal), /signature/);
});

Deno.test("scram: verify() refuses tampered, missing and error server-final messages", async () => {
  const client = new ScramClient(RFC.password, { nonce: RFC.clientNonce });
  assert.throws(() => client.verify(RFC.serverFinal), /signature/, "before respond()");
  await client.respond(RFC.serverFirst);
  const { serverSignature } = await rfcExpect(`n=,r=${RFC.clientNonce}`);
  const sig = unb64(serverSignature);
  sig[0] ^= 1;
  assert.throws(() => client.verify(`v=${b64(sig)}`), /signature/);
  assert.throws(() => client.verify(`v=${b64(sig.subarray(1))}`), /signature/);
  assert.throws(() => client.verify(""), /signature/);
  assert.throws(() => client.verify("e=invalid-proof"), /invalid-proof/);
  client.verify(`v=${serverSignature}`);
});

Deno.test("scram: respond() refuses a server nonce that does not extend the client's", async () => {
  const client = new ScramClient(RFC.password, { nonce: RFC.clientNonce });
  await assert.rejects(client.respond("r=somethingElse,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"));
  await assert.rejects(client.respond(`r=${RFC.clientNonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096`));
  await assert.rejects(client.respond(`r=${RFC.clientNonce}x,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=0`));
});

interface ScramServerPlan {
  /** The password the fake server knows. */
  password: string;
  /** What to send as SASLFinal, given the correct server signature. */
  final?: (signature: string) => string;
  /** Replace the server nonce suffix (to break the nonce rule). */
  nonce?: (clientNonce: string) => string;
  /** Skip SASLFinal and go straight to AuthenticationOk (the client's next move is not read). */
  skipFinal?: boolean;
}

/**
 * A fake SCRAM-SHA-256 server. It checks the client's proof, then sends SASLFinal per the plan,
 * then AuthenticationOk and a FATAL XX999: reaching XX999 means the client accepted the server.
 * Resolves to whether the client's proof was right and whether it hung up before AuthOk.
 */
function scramServer(plan: ScramServerPlan) {
  return async (peer: Peer) => {
    await peer.startup();
    await peer.send(auth(10, cstr("SCRAM-SHA-256"), cstr("")));
    const first = await peer.message();
    assert.equal(first.type, "p");
    const mechanismEnd = first.body.indexOf(0);
    assert.equal(decoder.decode(first.body.subarray(0, mechanismEnd)), "SCRAM-SHA-256");
    const clientFirst = decoder.decode(first.body.subarray(mechanismEnd + 5));
    assert.ok(clientFirst.startsWith("n,,"), clientFirst);
    const clientFirstBare = clientFirst.slice(3);
    const clientNonce = /(?:^|,)r=([^,]*)/.exec(clientFirstBare)![1];
    const salt = crypto.getRandomValues(new Uint8Array(16));
    const nonce = plan.nonce ? plan.nonce(clientNonce) : `${clientNonce}serverpart`;
    const serverFirst = `r=${nonce},s=${b64(salt)},i=4096`;
    await peer.send(auth(11, encoder.encode(serverFirst)));
    const final = await peer.message();
    assert.equal(final.type, "p");
    const clientFinal = decoder.decode(final.body);
    const withoutProof = clientFinal.slice(0, clientFinal.lastIndexOf(",p="));
    const proof = clientFinal.slice(clientFinal.lastIndexOf(",p=") + 3);
    const expected = await scramExpect(
      plan.password,
      salt,
      4096,
      `${clientFirstBare},${serverFirst},${withoutProof}`,
    );
    const proofOk = proof === expected.clientProof;
    if (!plan.skipFinal) {
      const text = plan.final
        ? plan.final(expected.serverSignature)
        : `v=${expected.serverSignature}`;
      await peer.send(auth(12, encoder.encode(text)));
    }
    // What the client does next tells: having accepted the signature it sends its queries
    // (they wait for no ReadyForQuery); having refused it, it closes the connection.
    const hungUp = plan.skipFinal
      ? false
      : await peer.segment().then((r) => r === null, () => true);
    if (!hungUp) {
      await peer.send(concat(auth(0), errorResponse("XX999", "the client accepted the server")));
    }
    return { proofOk, hungUp };
  };
}

const SCRAM_PASSWORD = "fake-s\u00e9cret:1";

function tamper(signature: string): string {
  const bytes = unb64(signature);
  bytes[bytes.length - 1] ^= 0x80;
  return b64(bytes);
}

Deno.test("scram: a fake server with the right signature gets past authentication", async () => {
  await withServer(scramServer({ password: SCRAM_PASSWORD }), async (server) => {
    const e = await failure(local(server.port, { password: SCRAM_PASSWORD }));
    assertPostgresError(e, "XX999");
    assert.deepEqual(await server.results[0], { proofOk: true, hungUp: false });
  });
});

Deno.test("scram: a wrong server signature in SASLFinal → AUTH_FAILED", async () => {
  await withServer(
    scramServer({ password: SCRAM_PASSWORD, final: (sig) => `v=${tamper(sig)}` }),
    async (server) => {
      const e = assertConnectionError(
        await failure(local(server.port, { password: SCRAM_PASSWORD })),
        "AUTH_FAILED",
      );
      assertNoSecret(e, SCRAM_PASSWORD);
      assert.deepEqual(await server.results[0], { proofOk: true, hungUp: true });
    },
  );
});

Deno.test("scram: a server that does not know the password cannot impersonate one", async () => {
  // The server accepts any proof but can only sign with the password it knows.
  await withServer(scramServer({ password: "something else" }), async (server) => {
    const e = assertConnectionError(
      await failure(local(server.port, { password: SCRAM_PASSWORD })),
      "AUTH_FAILED",
    );
    assertNoSecret(e, SCRAM_PASSWORD);
    assert.deepEqual(await server.results[0], { proofOk: false, hungUp: true });
  });
});

Deno.test("scram: SASLFinal with e=... → AUTH_FAILED", async () => {
  await withServer(
    scramServer({ password: SCRAM_PASSWORD, final: () => "e=invalid-proof" }),
    async (server) => {
      const e = assertConnectionError(
        await failure(local(server.port, { password: SCRAM_PASSWORD })),
        "AUTH_FAILED",
      );
      assert.match(e.message, /invalid-proof/);
    },
  );
});

Deno.test("scram: AuthenticationOk without SASLFinal is refused", async () => {
  await withServer(
    scramServer({ password: SCRAM_PASSWORD, skipFinal: true }),
    async (server) => {
      const e = await failure(local(server.port, { password: SCRAM_PASSWORD }));
      assertConnectionError(e, ["PROTOCOL_VIOLATION", "AUTH_FAILED"]);
      assert.equal((await server.results[0] as { proofOk: boolean }).proofOk, true);
    },
  );
});

Deno.test("scram: a server nonce not extending the client nonce → AUTH_FAILED", async () => {
  await withServer(
    scramServer({ password: SCRAM_PASSWORD, nonce: () => "0123456789abcdef" }),
    async (server) => {
      assertConnectionError(
        await failure(local(server.port, { password: SCRAM_PASSWORD })),
        "AUTH_FAILED",
      );
    },
  );
});
