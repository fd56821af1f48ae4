/**
 * Tests that play the attacker: a server that is not the one the user meant (its own certificate,
 * which `sslmode=require` does not check) asks for a cleartext password, an MD5 hash, SCRAM
 * without channel binding, or nothing at all. Under `channel_binding=require` or
 * `require_auth=scram-sha-256` the password (or any SCRAM proof) never leaves the process: the
 * assertions read the bytes the fake server received. Also: secrets in errors, `debug`,
 * telemetry and `sql.options`.
 */
import assert from "node:assert/strict";
import postgres, { ConnectionError, type Options } from "../mod.ts";
import { CertDir, noOpenssl, type Pair } from "./harness/certs.ts";
import { type CertPem, makeTestCerts } from "./harness/cluster_certs.ts";
import {
  auth,
  concat,
  cstr,
  encoder,
  fakeServer,
  type Peer,
  readyForQuery,
} from "./harness/fake_server.ts";
import { fakeTlsServer } from "./harness/fake_tls_server.ts";
import { plainCluster } from "./harness/env.ts";
import { run } from "./harness/cluster.ts";

const PASSWORD = "never-leaves:\u00e9-7f3a";
const decoder = new TextDecoder();

/** The types of the frontend messages in `bytes` (what the client sent after its startup). */
function messageTypes(bytes: Uint8Array): string[] {
  const types: string[] = [];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let at = 0; at + 5 <= bytes.length; at += 1 + view.getInt32(at + 1)) {
    types.push(String.fromCharCode(bytes[at]));
  }
  return types;
}

/** What the attacker asks for after the startup message. */
const REQUESTS: Record<string, Uint8Array> = {
  "a cleartext password": auth(3),
  "an MD5 hash": auth(5, Uint8Array.of(1, 2, 3, 4)),
  "SCRAM without channel binding": auth(10, cstr("SCRAM-SHA-256"), cstr("")),
  "no authentication": concat(auth(0), readyForQuery()),
};

/** How the error names what the server asked for. */
const NAMED: Record<string, RegExp> = {
  "a cleartext password": /asked for a cleartext password/,
  "an MD5 hash": /asked for an MD5 password hash/,
  "no authentication": /accepted the connection without authentication/,
};

/** A server that sends `request` after the startup message and keeps all the client sends. */
function attacker(request: Uint8Array) {
  return async (peer: Peer) => {
    await peer.startup();
    await peer.send(request);
    return await peer.rest(3000);
  };
}

/**
 * The attacker's own certificate, for localhost and 127.0.0.1, signed by a CA the client was never
 * given (made with WebCrypto: these tests need no openssl).
 */
let attackerCert: Promise<CertPem> | undefined;
function attackerPair(): Promise<CertPem> {
  return attackerCert ??= makeTestCerts({}).then((c) => ({ cert: c.serverCert, key: c.serverKey }));
}

/** A folder for the certificates only openssl makes (an expired one). */
let certs: CertDir | undefined;
async function certDir(): Promise<CertDir> {
  return certs ??= await CertDir.create("pgpipe-attacker-");
}

/** Connects as a victim would, counting calls of the password function; returns the error. */
async function victim(
  port: number,
  extra: Options,
): Promise<{ error: unknown; calls: number }> {
  let calls = 0;
  const sql = postgres({
    host: "127.0.0.1",
    port,
    user: "victim",
    database: "app",
    password: () => {
      calls++;
      return PASSWORD;
    },
    connect_timeout: 5,
    onnotice: () => {},
    ...extra,
  });
  let error: unknown;
  try {
    await sql`select 1`;
  } catch (e) {
    error = e;
  } finally {
    await sql.end({ timeout: 0 });
  }
  return { error, calls };
}

/** The client refused, sent no password message and never computed a password. */
function assertNothingLeft(
  outcome: { error: unknown; calls: number },
  received: { closed: boolean; bytes: Uint8Array },
  rule: RegExp,
): void {
  const e = outcome.error;
  assert.ok(e instanceof ConnectionError, `${e}`);
  assert.equal(e.code, "AUTH_REFUSED", e.message);
  assert.match(e.message, rule);
  assert.match(e.message, /nothing was sent/);
  assert.ok(received.closed, "the client hung up");
  assert.deepEqual(messageTypes(received.bytes), [], "no message after the startup");
  assert.ok(!decoder.decode(received.bytes).includes(PASSWORD));
  assert.equal(outcome.calls, 0, "the password function was never called");
}

for (const transport of ["TLS (sslmode=require)", "plain TCP"] as const) {
  const tls = transport.startsWith("TLS");
  const serve = async (request: Uint8Array) => {
    if (!tls) return fakeServer(attacker(request));
    const pair = await attackerPair();
    return await fakeTlsServer(attacker(request), { cert: pair.cert, key: pair.key });
  };
  const ssl = tls ? "require" : "prefer"; // the plain fake answers the SSLRequest with N

  for (const [asked, request] of Object.entries(REQUESTS)) {
    Deno.test(`attacker over ${transport} asks for ${asked}: channel_binding=require sends nothing`, async () => {
      const server = await serve(request);
      try {
        const outcome = await victim(server.port, { ssl, channel_binding: "require" });
        const received = await server.results[0] as { closed: boolean; bytes: Uint8Array };
        assertNothingLeft(outcome, received, /channel_binding=require/);
        if (!tls) {
          assert.match(
            (outcome.error as Error).message,
            /not encrypted|cannot be bound|without SCRAM/,
          );
        }
      } finally {
        await server.close();
      }
    });

    if (asked === "SCRAM without channel binding") continue; // SCRAM is what it allows
    Deno.test(`attacker over ${transport} asks for ${asked}: require_auth=scram-sha-256 sends nothing`, async () => {
      const server = await serve(request);
      try {
        const outcome = await victim(server.port, { ssl, require_auth: "scram-sha-256" });
        const received = await server.results[0] as { closed: boolean; bytes: Uint8Array };
        assertNothingLeft(outcome, received, /require_auth=scram-sha-256/);
        assert.match((outcome.error as Error).message, NAMED[asked]);
      } finally {
        await server.close();
      }
    });
  }
}

Deno.test("attacker: require_auth negations (!password,!md5) refuse the cleartext request and name it", async () => {
  const server = fakeServer(attacker(REQUESTS["a cleartext password"]));
  try {
    const outcome = await victim(server.port, { ssl: "disable", require_auth: "!password,!md5" });
    const received = await server.results[0] as { closed: boolean; bytes: Uint8Array };
    assertNothingLeft(
      outcome,
      received,
      /asked for a cleartext password, which require_auth=!password,!md5/,
    );
  } finally {
    await server.close();
  }
});

Deno.test("attacker: without a policy the same cleartext request gets the password (the default libpq keeps)", async () => {
  // The control for the tests above: their fake server does receive the password when allowed.
  const server = fakeServer(attacker(REQUESTS["a cleartext password"]));
  try {
    const outcome = await victim(server.port, { ssl: "disable", connect_timeout: 1 });
    const received = await server.results[0] as { closed: boolean; bytes: Uint8Array };
    assert.deepEqual(messageTypes(received.bytes).slice(0, 1), ["p"]);
    assert.ok(decoder.decode(received.bytes).includes(PASSWORD));
    assert.equal(outcome.calls, 1);
  } finally {
    await server.close();
  }
});

Deno.test("attacker: SCRAM under require_auth=scram-sha-256 sends a proof, never the password", async () => {
  const server = fakeServer(async (peer) => {
    await peer.startup();
    await peer.send(auth(10, cstr("SCRAM-SHA-256"), cstr("")));
    const first = await peer.message();
    const clientFirst = decoder.decode(first.body.subarray(first.body.indexOf(0) + 5));
    const nonce = /r=([^,]*)/.exec(clientFirst)![1];
    await peer.send(auth(11, encoder.encode(`r=${nonce}attacker,s=${btoa("salt-salt")},i=4096`)));
    return { first: first.body, rest: await peer.rest(3000) };
  });
  try {
    const outcome = await victim(server.port, {
      ssl: "disable",
      require_auth: "scram-sha-256",
      connect_timeout: 1,
    });
    const { first, rest } = await server.results[0] as {
      first: Uint8Array;
      rest: { bytes: Uint8Array };
    };
    const all = decoder.decode(concat(first, rest.bytes));
    assert.match(all, /c=biws,r=.*,p=/, "the client-final message with its proof");
    assert.ok(!all.includes(PASSWORD));
    // Nor does the error the client gets quote the proof.
    const proof = /,p=([A-Za-z0-9+/=]+)/.exec(all)![1];
    const e = outcome.error as Error;
    for (const text of [e.message, String(e), Deno.inspect(e), JSON.stringify(e)]) {
      assert.ok(!text.includes(proof) && !text.includes(PASSWORD), text);
    }
    // The attacker cannot sign: the client hangs up at SASLFinal's absence (the connect timeout)
    // or on the connection closing; either way it never accepted the server.
    assert.ok(outcome.error instanceof Error);
  } finally {
    await server.close();
  }
});

Deno.test({
  name:
    "attacker with an Ed25519 certificate (no tls-server-end-point hash) offering -PLUS: the default channel_binding=prefer sends nothing",
  ignore: noOpenssl,
  fn: async () => {
    // Such a relay cannot be bound to; SCRAM without binding (`n`) would reach the real server,
    // which accepts it, and the relay would hold an authenticated session.
    const dir = (await certDir()).dir;
    await run("openssl", [
      "req",
      "-x509",
      "-newkey",
      "ed25519",
      "-nodes",
      "-keyout",
      "ed.key",
      "-subj",
      "/CN=localhost",
      "-days",
      "1",
      "-out",
      "ed.crt",
    ], { cwd: dir });
    const pair = {
      cert: await Deno.readTextFile(`${dir}/ed.crt`),
      key: await Deno.readTextFile(`${dir}/ed.key`),
    };
    const offer = auth(10, cstr("SCRAM-SHA-256-PLUS"), cstr("SCRAM-SHA-256"), cstr(""));
    const server = await fakeTlsServer(attacker(offer), pair);
    try {
      const outcome = await victim(server.port, { ssl: "require" });
      const received = await server.results[0] as { closed: boolean; bytes: Uint8Array };
      assertNothingLeft(outcome, received, /defines no tls-server-end-point hash/);
    } finally {
      await server.close();
    }
  },
});

Deno.test("attacker: channel_binding=require with sslmode=disable is refused at postgres()", () => {
  assert.throws(
    () => postgres("postgres://u@h/d?sslmode=disable&channel_binding=require"),
    /channel_binding=require needs TLS, and sslmode is disable/,
  );
});

// An unload listener must finish synchronously: an async remove would be cut short.
addEventListener("unload", () => certs?.removeSync());

/** A fake TLS server on `pair` that only completes the handshake; the client's error. */
async function handshakeWith(pair: Pair, options: Options, direct: boolean): Promise<unknown> {
  const server = await fakeTlsServer(async (peer) => {
    await peer.startup();
    return await peer.rest(2000);
  }, { cert: pair.cert, key: pair.key, direct });
  try {
    return (await victim(server.port, options)).error;
  } finally {
    await server.close();
  }
}

Deno.test({
  name:
    "attacker: under verify-full, a certificate for another host and an expired one are SSL_FAILED on both TLS paths",
  ignore: noOpenssl,
  fn: async () => {
    const certs = await certDir();
    const ca = await certs.ca("victims-ca", "a CA the victim trusts");
    const otherHost = await certs.leaf("other-host", ca, {
      cn: "db.example.com",
      names: ["db.example.com"],
    });
    const expired = await certs.leaf("expired", ca, {
      cn: "localhost",
      names: ["localhost", "127.0.0.1"],
      expired: true,
    });
    // A first connection with an SSLRequest takes node:tls; direct TLS under verify-full stays
    // native (Deno.startTls). Deno's node:tls names an expired certificate "unable to verify the
    // first certificate"; rustls says "certificate expired".
    const cases = [[otherHost, /not in the cert's list|NotValidForName|name/i], [
      expired,
      /expired|unable to verify/i,
    ]] as const;
    for (const [pair, pattern] of cases) {
      for (const direct of [false, true]) {
        const e = await handshakeWith(pair, {
          ssl: { mode: "verify-full", ca: ca.cert },
          sslnegotiation: direct ? "direct" : "postgres",
        }, direct);
        assert.ok(e instanceof ConnectionError, `${e}`);
        assert.equal(e.code, "SSL_FAILED", `${e.message} (direct: ${direct})`);
        assert.match(e.message, pattern);
        assert.ok(!e.message.includes(PASSWORD));
      }
    }
  },
});

/** A tracer provider that keeps every name, attribute, event and status as text. */
function recordingTracer(seen: string[]) {
  const text = (value: unknown) =>
    seen.push(typeof value === "string" ? value : JSON.stringify(value));
  return {
    getTracer: () => ({
      startSpan: (name: string, options?: { attributes?: Record<string, unknown> }) => {
        text(name);
        text(options?.attributes ?? {});
        return {
          setAttribute: (k: string, v: unknown) => void text({ [k]: v }),
          setAttributes: (a: Record<string, unknown>) => void text(a),
          addEvent: (n: string, a?: Record<string, unknown>) => void text({ [n]: a ?? {} }),
          setStatus: (s: unknown) => void text(s),
          end: () => {},
        };
      },
    }),
  };
}

Deno.test({
  name:
    "secrets: no password in debug output, telemetry, errors or sql.options, with SCRAM, MD5 and cleartext against a real server",
  ignore: plainCluster() === undefined,
  fn: async () => {
    const c = plainCluster()!;
    for (const kind of ["scram", "md5", "password"] as const) {
      const u = c.users[kind];
      const seen: string[] = [];
      const url = `postgres://${u.user}:${
        encodeURIComponent(u.password)
      }@${c.host}:${c.port}/${c.database}`;
      const options: Options = {
        ssl: "disable",
        onnotice: () => {},
        debug: (...args: unknown[]) => void seen.push(JSON.stringify(args)),
        telemetry: { tracerProvider: recordingTracer(seen) },
      };
      const sql = postgres(url, options);
      await sql`select ${"a parameter"}::text as x`;
      await assert.rejects(sql`select 1 / ${0}::int`);
      seen.push(Deno.inspect(sql.options, { depth: 10 }), JSON.stringify(sql.options));
      await sql.end();
      const wrong = postgres(
        url.replace(encodeURIComponent(u.password), "wrong-password-123"),
        options,
      );
      const e = await wrong`select 1`.then(() => new Error("connected"), (e) => e as Error);
      await wrong.end();
      seen.push(String(e), e.message, JSON.stringify(e), Deno.inspect(e));
      assert.ok(seen.some((s) => s.includes("a parameter")), "the recorders did record");
      for (const s of seen) {
        assert.ok(!s.includes(u.password), `${kind}: the password in ${s.slice(0, 200)}`);
        assert.ok(
          !s.includes("wrong-password-123"),
          `${kind}: the wrong password in ${s.slice(0, 200)}`,
        );
      }
    }
  },
});
