/**
 * Channel binding: tls-server-end-point's hash per certificate signature algorithm (checked
 * against openssl's digest of the certificate), and the GS2 header rules the client follows for
 * each offer (`p` when it binds, `y` only when it could but no -PLUS was offered, `n` otherwise),
 * with the refusals of channel_binding=require; and a fake TLS server that offers only
 * SCRAM-SHA-256-PLUS (PostgreSQL always offers both), which every connection must bind to,
 * whichever TLS path the process learned for it.
 */
import assert from "node:assert/strict";
import postgres, { type Options, type TlsPath } from "../mod.ts";
import { FakeSession } from "./harness/fake_server.ts";
import { fakeTlsServer } from "./harness/fake_tls_server.ts";
import { makeTestCerts } from "./harness/cluster_certs.ts";
import { derOf, scramExchange, type ScramOutcome } from "./harness/scram_server.ts";
import { Authenticator, type AuthIO, type AuthPolicy } from "../src/connection/authentication.ts";
import { endPointHash, tlsServerEndPoint } from "../src/protocol/channel_binding.ts";
import { ScramClient } from "../src/protocol/scram.ts";
import { Writer } from "../src/protocol/writer.ts";
import { ConnectionError } from "../mod.ts";
import { run } from "./harness/cluster.ts";
import { CertDir, noOpenssl } from "./harness/certs.ts";

/** A self-signed certificate made with `args` (key options) and `digest`, as DER. */
async function certificate(dir: CertDir, name: string, keyArgs: string[], digest?: string) {
  await run("openssl", [
    "req",
    "-x509",
    "-config",
    "ca.cnf",
    ...keyArgs,
    "-nodes",
    "-keyout",
    `${name}.key`,
    "-subj",
    `/CN=${name}`,
    ...(digest ? [`-${digest}`] : []),
    "-days",
    "1",
    "-outform",
    "DER",
    "-out",
    `${name}.der`,
  ], { cwd: dir.dir });
  return await Deno.readFile(`${dir.dir}/${name}.der`);
}

/** openssl's digest of a file, as bytes (its hex output, read back). */
async function opensslDigest(dir: CertDir, name: string, hash: string): Promise<Uint8Array> {
  const hex = (await run("openssl", ["dgst", `-${hash}`, "-r", `${name}.der`], { cwd: dir.dir }))
    .split(" ")[0];
  return Uint8Array.from(hex.match(/../g)!, (h) => parseInt(h, 16));
}

Deno.test({
  name:
    "tls-server-end-point: the hash of the certificate's signature algorithm, SHA-256 for SHA-1, none for Ed25519",
  ignore: noOpenssl,
  fn: async () => {
    const dir = await CertDir.create("pgpipe-cb-");
    try {
      const cases: [string, string[], string | undefined, string | undefined][] = [
        [
          "ecdsa256",
          ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"],
          "sha256",
          "sha256",
        ],
        [
          "ecdsa384",
          ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:secp384r1"],
          "sha384",
          "sha384",
        ],
        ["rsa256", ["-newkey", "rsa:2048"], "sha256", "sha256"],
        ["rsa512", ["-newkey", "rsa:2048"], "sha512", "sha512"],
        ["rsa-sha1", ["-newkey", "rsa:2048"], "sha1", "sha256"],
        [
          "pss384",
          [
            "-newkey",
            "rsa-pss",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-sigopt",
            "rsa_padding_mode:pss",
          ],
          "sha384",
          "sha384",
        ],
        ["ed25519", ["-newkey", "ed25519"], undefined, undefined],
      ];
      for (const [name, keyArgs, digest, expected] of cases) {
        const der = await certificate(dir, name, keyArgs, digest);
        assert.equal(endPointHash(der), expected?.replace("sha", "SHA-"), name);
        const data = await tlsServerEndPoint(der);
        if (expected === undefined) assert.equal(data, null, name);
        else assert.deepEqual(data, await opensslDigest(dir, name, expected), name);
      }
      assert.equal(endPointHash(Uint8Array.of(0x30, 0x82, 0xff)), undefined, "truncated DER");
    } finally {
      await dir.remove();
    }
  },
});

/** An AuthIO that records what the client sends. */
function stubIO(o: { encrypted: boolean; certificate: Uint8Array | null; verified?: boolean }) {
  const sent: Uint8Array[] = [];
  let writer = new Writer(1024);
  const io: AuthIO = {
    writer: () => writer,
    flush: () => {
      sent.push(writer.buf.slice(0, writer.length));
      writer = new Writer(1024);
      return Promise.resolve();
    },
    ride: () => {},
    serverVerified: o.verified ?? false,
    encrypted: o.encrypted,
    serverCertificate: o.certificate,
  };
  return { io, sent };
}

/** The AuthenticationSASL body offering `mechanisms`. */
function saslRequest(...mechanisms: string[]): { buf: Uint8Array; start: number; end: number } {
  const body = new TextEncoder().encode(`\0\0\0\x0a${mechanisms.map((m) => `${m}\0`).join("")}\0`);
  return { buf: body, start: 0, end: body.length };
}

/** The mechanism and GS2 header of a SASLInitialResponse the client sent. */
function initial(bytes: Uint8Array): { mechanism: string; gs2: string } {
  const body = new TextDecoder().decode(bytes.subarray(5));
  const mechanism = body.slice(0, body.indexOf("\0"));
  const data = body.slice(body.indexOf("\0") + 5);
  return { mechanism, gs2: data.slice(0, data.indexOf("n=,r=")) };
}

Deno.test({
  name:
    "GS2 header: p binds to -PLUS, y only when the server offered no -PLUS, n when this connection cannot bind",
  ignore: noOpenssl,
  fn: async () => {
    const dir = await CertDir.create("pgpipe-gs2-");
    try {
      const cert = await certificate(dir, "server", [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
      ], "sha256");
      const ed = await certificate(dir, "ed", ["-newkey", "ed25519"]);
      const both = ["SCRAM-SHA-256-PLUS", "SCRAM-SHA-256"];
      const cases: [string, string[], boolean, Uint8Array | null, AuthPolicy, string, string][] = [
        [
          "TLS, certificate, both offered",
          both,
          true,
          cert,
          {},
          "SCRAM-SHA-256-PLUS",
          "p=tls-server-end-point,,",
        ],
        [
          "TLS, certificate, no -PLUS offered",
          ["SCRAM-SHA-256"],
          true,
          cert,
          {},
          "SCRAM-SHA-256",
          "y,,",
        ],
        [
          "TLS, no certificate (native path), both offered",
          both,
          true,
          null,
          {},
          "SCRAM-SHA-256",
          "n,,",
        ],
        [
          "TLS, no certificate, no -PLUS",
          ["SCRAM-SHA-256"],
          true,
          null,
          {},
          "SCRAM-SHA-256",
          "n,,",
        ],
        // A certificate shown but not hashable: the client could bind (this stack shows
        // certificates), so a server that hides -PLUS hears `y`, which a real server refuses.
        [
          "TLS, Ed25519 certificate, no -PLUS",
          ["SCRAM-SHA-256"],
          true,
          ed,
          {},
          "SCRAM-SHA-256",
          "y,,",
        ],
        ["no TLS", ["SCRAM-SHA-256"], false, null, {}, "SCRAM-SHA-256", "n,,"],
        [
          "channel_binding=disable",
          both,
          true,
          cert,
          { channelBinding: "disable" },
          "SCRAM-SHA-256",
          "n,,",
        ],
        [
          "channel_binding=require",
          both,
          true,
          cert,
          { channelBinding: "require" },
          "SCRAM-SHA-256-PLUS",
          "p=tls-server-end-point,,",
        ],
      ];
      for (const [what, offered, encrypted, certificate, policy, mechanism, gs2] of cases) {
        const { io, sent } = stubIO({ encrypted, certificate });
        const auth = new Authenticator(io, "u", "pw", policy);
        const { buf, start, end } = saslRequest(...offered);
        await auth.request(10, buf, start, end);
        assert.deepEqual(initial(sent[0]), { mechanism, gs2 }, what);
      }
      // -PLUS offered and a certificate that cannot be bound to: `n` is safe only where TLS
      // verified the server; on an unverified connection whoever holds that certificate could
      // relay the exchange to the real server, which accepts `n`. So nothing is sent.
      const verified = stubIO({ encrypted: true, certificate: ed, verified: true });
      await new Authenticator(verified.io, "u", "pw").request(10, ...saslArgs(both));
      assert.deepEqual(initial(verified.sent[0]), { mechanism: "SCRAM-SHA-256", gs2: "n,," });
      const unverified = stubIO({ encrypted: true, certificate: ed });
      let called = 0;
      const auth = new Authenticator(unverified.io, "u", () => {
        called++;
        return "pw";
      });
      await assert.rejects(auth.request(10, ...saslArgs(both)), (e: unknown) => {
        assert.ok(e instanceof ConnectionError);
        assert.equal(e.code, "AUTH_REFUSED");
        assert.match(e.message, /defines no tls-server-end-point hash and TLS did not verify/);
        return true;
      });
      assert.deepEqual([unverified.sent.length, called], [0, 0]);
    } finally {
      await dir.remove();
    }
  },
});

/** `saslRequest`'s parts, as `Authenticator.request` takes them after the code. */
function saslArgs(mechanisms: string[]): [Uint8Array, number, number] {
  const { buf, start, end } = saslRequest(...mechanisms);
  return [buf, start, end];
}

Deno.test("AuthenticationSASL with no mechanism, or none pgpipe has: AUTH_UNSUPPORTED, nothing sent", async () => {
  for (
    const [offered, pattern] of [
      [[], /offers no mechanism/],
      [["SCRAM-SHA-1", "X-UNKNOWN"], /offers SASL mechanisms SCRAM-SHA-1, X-UNKNOWN/],
    ] as const
  ) {
    const { io, sent } = stubIO({ encrypted: false, certificate: null });
    await assert.rejects(
      new Authenticator(io, "u", "pw").request(10, ...saslArgs([...offered])),
      (e: unknown) => {
        assert.ok(e instanceof ConnectionError);
        assert.equal(e.code, "AUTH_UNSUPPORTED");
        assert.match(e.message, pattern);
        return true;
      },
    );
    assert.equal(sent.length, 0);
  }
});

Deno.test({
  name:
    "channel_binding=require refuses before sending: no TLS, no -PLUS offered, a TLS path without the certificate",
  ignore: noOpenssl,
  fn: async () => {
    const dir = await CertDir.create("pgpipe-cbreq-");
    try {
      const cert = await certificate(dir, "server", [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
      ], "sha256");
      const ed = await certificate(dir, "ed", ["-newkey", "ed25519"]);
      const cases: [string[], boolean, Uint8Array | null, RegExp][] = [
        [["SCRAM-SHA-256"], false, null, /not encrypted/],
        [["SCRAM-SHA-256"], true, cert, /does not offer SCRAM-SHA-256-PLUS/],
        [
          ["SCRAM-SHA-256-PLUS", "SCRAM-SHA-256"],
          true,
          null,
          /cannot show the server's certificate/,
        ],
        [["SCRAM-SHA-256-PLUS", "SCRAM-SHA-256"], true, ed, /defines no tls-server-end-point hash/],
      ];
      for (const [offered, encrypted, certificate, pattern] of cases) {
        const { io, sent } = stubIO({ encrypted, certificate });
        let called = 0;
        const auth = new Authenticator(io, "u", () => {
          called++;
          return "pw";
        }, { channelBinding: "require" });
        const { buf, start, end } = saslRequest(...offered);
        await assert.rejects(auth.request(10, buf, start, end), (e: unknown) => {
          assert.ok(e instanceof ConnectionError);
          assert.equal(e.code, "AUTH_REFUSED");
          assert.match(e.message, pattern);
          return true;
        });
        assert.equal(sent.length, 0);
        assert.equal(called, 0);
      }
    } finally {
      await dir.remove();
    }
  },
});

Deno.test("SCRAM-SHA-256-PLUS: c= carries the GS2 header and the binding data (RFC 5802 §7)", async () => {
  const data = Uint8Array.of(1, 2, 3, 250);
  const client = new ScramClient("pw", { nonce: "abc", binding: { flag: "p", data } });
  assert.equal(client.mechanism, "SCRAM-SHA-256-PLUS");
  assert.equal(client.start(), "p=tls-server-end-point,,n=,r=abc");
  const final = await client.respond(`r=abcdef,s=${btoa("salt")},i=4096`);
  const c = /^c=([^,]*)/.exec(final)![1];
  const bytes = Uint8Array.from(atob(c), (ch) => ch.charCodeAt(0));
  const header = new TextEncoder().encode("p=tls-server-end-point,,");
  assert.deepEqual(bytes.subarray(0, header.length), header);
  assert.deepEqual(bytes.subarray(header.length), data);
  const y = new ScramClient("pw", { nonce: "abc", binding: { flag: "y" } });
  assert.equal(y.start(), "y,,n=,r=abc");
  assert.match(await y.respond(`r=abcdef,s=${btoa("salt")},i=4096`), /^c=eSws,/);
});

// ---------------------------------------------------------------------------------------------
// A server that offers only SCRAM-SHA-256-PLUS

const PLUS_ONLY = ["SCRAM-SHA-256-PLUS"];
const BOTH = ["SCRAM-SHA-256-PLUS", "SCRAM-SHA-256"];

/**
 * A fake TLS server (a certificate for localhost from a CA the clients trust, so it passes
 * Deno's native check too) that offers `offer(index)` to its `index`th connection and serves
 * queries once SCRAM succeeded. Resolves to it and the client options that reach it.
 */
async function scramServer(offer: (index: number) => string[], direct = false) {
  const certs = await makeTestCerts({});
  const certificate = derOf(certs.serverCert);
  const server = await fakeTlsServer(async (peer, index) => {
    await peer.startup();
    const outcome = await scramExchange(peer, { offer: offer(index), password: "pw", certificate });
    if (outcome.ok) await new FakeSession().serve(peer);
    return outcome;
  }, { cert: certs.serverCert, key: certs.serverKey, direct });
  const options: Options = {
    host: "localhost",
    port: server.port,
    user: "u",
    password: "pw",
    database: "d",
    ssl: { mode: "verify-full", ca: certs.ca },
    ...(direct ? { sslnegotiation: "direct" as const } : {}),
    connect_timeout: 5,
    max: 1,
    onnotice: () => {},
  };
  return { server, options };
}

/** One client's first query: the TLS path its connection took (or the error). */
async function pathOf(options: Options): Promise<TlsPath | null | undefined | Error> {
  const sql = postgres(options);
  try {
    return (await sql`select 1 as x`).state?.tls;
  } catch (e) {
    return e as Error;
  } finally {
    await sql.end({ timeout: 0 });
  }
}

/** What each connection the server accepted did: its outcome, or "refused" if it never finished. */
async function outcomes(results: Promise<unknown>[]): Promise<(string | ScramOutcome)[]> {
  return await Promise.all(
    results.map((r) =>
      r.then((o) => {
        const { mechanism, gs2, ok } = o as ScramOutcome;
        return { mechanism, gs2: gs2.split(",")[0], ok } as ScramOutcome;
      }, () => "left before SCRAM")
    ),
  );
}

const bound = { mechanism: "SCRAM-SHA-256-PLUS", gs2: "p=tls-server-end-point", ok: true };

Deno.test("a server offering only SCRAM-SHA-256-PLUS: every connection binds; the first (node:tls) keeps later ones off native TLS", async () => {
  const { server, options } = await scramServer(() => PLUS_ONLY);
  try {
    const paths = [];
    for (let i = 0; i < 3; i++) paths.push(await pathOf(options));
    assert.deepEqual(paths, ["node", "node", "node"]);
    assert.deepEqual(await outcomes(server.results), [bound, bound, bound]);
    // channel_binding=disable cannot bind on any path: refused once, not opened again.
    const e = await pathOf({ ...options, channel_binding: "disable" });
    assert.ok(e instanceof ConnectionError && e.code === "AUTH_UNSUPPORTED", String(e));
    assert.match(e.message, /offers only SCRAM-SHA-256-PLUS, and channel_binding=disable/);
    assert.equal(server.results.length, 4);
  } finally {
    await server.close();
  }
});

Deno.test("a server that turns to SCRAM-SHA-256-PLUS only after native TLS was learned for it: the native connection meeting it is opened again on node:tls, once", async () => {
  // Both at first: the first connection binds on node:tls and learns that native TLS verifies.
  const { server, options } = await scramServer((index) => index === 0 ? BOTH : PLUS_ONLY);
  try {
    const paths = [];
    for (let i = 0; i < 3; i++) paths.push(await pathOf(options));
    assert.deepEqual(paths, ["node", "node", "node"]);
    // The second client's native connection left before SCRAM (it cannot bind; nothing sent),
    // its new one bound; the third went to node:tls at once.
    assert.deepEqual(await outcomes(server.results), [bound, "left before SCRAM", bound, bound]);
  } finally {
    await server.close();
  }
});

Deno.test("a server offering only SCRAM-SHA-256-PLUS over direct TLS, whose first connection is native: opened again on node:tls", async () => {
  const { server, options } = await scramServer(() => PLUS_ONLY, true);
  try {
    assert.deepEqual([await pathOf(options), await pathOf(options)], ["node", "node"]);
    assert.deepEqual(await outcomes(server.results), ["left before SCRAM", bound, bound]);
  } finally {
    await server.close();
  }
});
