/**
 * One round trip spared on the first `node:tls` handshake with PostgreSQL 17 and older.
 *
 * Those servers offer one key exchange group (`ssl_ecdh_curve`, prime256v1 by default; X25519
 * cannot be set), and Deno's TLS sends a single X25519 key share with no option to choose, so the
 * server answers the first ClientHello with a HelloRetryRequest and the handshake takes one round
 * trip more. Deno's `node:tls` keeps, for the whole process and per server name, the group a
 * server chose (rustls's key-exchange hint) and sends that share first next time. So before the
 * first real handshake with a host, {@link preferP256} teaches it secp256r1: an in-memory
 * handshake with a stand-in that asks for a secp256r1 share (HelloRetryRequest), answers the
 * second ClientHello with a ServerHello, and ends. Nothing leaves the process, nothing from the
 * stand-in is trusted, and the real handshake verifies the server as before; its ServerHello then
 * replaces the hint with the group the server really chose. Every PostgreSQL accepts a secp256r1
 * share (18's default groups are X25519:prime256v1), and secp256r1 is the group 17 and older pick
 * anyway.
 *
 * The stand-in teaches only when the ClientHello carries exactly one share, X25519 (Deno's
 * default today): a client that already sends secp256r1 needs nothing, and one that sends a
 * post-quantum hybrid must not be steered away from it. Deno's native TLS (`Deno.startTls`) has
 * no such memory (a fresh configuration per connection), so this helps `node:tls` only.
 */
import type * as tls from "node:tls";
import type { Duplex } from "node:stream";
import { streamModule, tlsModule } from "../../builtins.ts";

/** TLS codes: the handshake record type, two handshake messages, three extensions. */
export const HANDSHAKE_RECORD = 0x16;
export const CLIENT_HELLO = 1;
export const SERVER_HELLO = 2;
export const SUPPORTED_GROUPS = 10;
const SUPPORTED_VERSIONS = 43;
export const KEY_SHARE = 51;
const X25519 = 0x001d;
const SECP256R1 = 0x0017;
const TLS_AES_128_GCM_SHA256 = 0x1301;

/** RFC 8446 4.1.3: the random that makes a ServerHello a HelloRetryRequest. */
export const HRR_RANDOM = hex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c");

/**
 * A valid secp256r1 public key for the stand-in's ServerHello: the curve's generator, uncompressed.
 * No key is agreed with it (the stand-in ends before any encrypted byte).
 */
const P256_POINT = hex(
  "04" + "6b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296" +
    "4fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5",
);

/**
 * How long the in-memory handshake may take before it is dropped: it takes about 1 ms (tens of ms
 * the first time in a process, rustls starting up), and the real handshake waits for it.
 */
const TEACH_MS = 250;

function hex(text: string): Uint8Array {
  return Uint8Array.from(text.match(/../g)!, (h) => parseInt(h, 16));
}

const u16 = (b: Uint8Array, at: number) => (b[at] << 8) | b[at + 1];

/** A ClientHello body's session id and extensions (type → data), or null when malformed. */
export function clientHelloFields(
  body: Uint8Array,
): { sessionId: Uint8Array; extensions: Map<number, Uint8Array> } | null {
  let at = 2 + 32; // legacy_version, random
  if (at >= body.length) return null;
  const sessionId = body.subarray(at + 1, at + 1 + body[at]);
  at += 1 + body[at];
  if (at + 2 > body.length) return null;
  at += 2 + u16(body, at); // cipher suites
  if (at >= body.length) return null;
  at += 1 + body[at]; // compression methods
  if (at + 2 > body.length) return null;
  const extensions = new Map<number, Uint8Array>();
  const end = Math.min(body.length, at + 2 + u16(body, at));
  for (let p = at + 2; p + 4 <= end; p += 4 + u16(body, p + 2)) {
    extensions.set(u16(body, p), body.subarray(p + 4, p + 4 + u16(body, p + 2)));
  }
  return { sessionId, extensions };
}

/** The groups of a ClientHello's key_share extension, in order. */
export function keyShareGroups(data: Uint8Array): number[] {
  const groups: number[] = [];
  for (let p = 2; p + 4 <= data.length; p += 4 + u16(data, p + 2)) groups.push(u16(data, p));
  return groups;
}

/** The groups of a supported_groups extension, in order. */
export function supportedGroups(data: Uint8Array): number[] {
  const groups: number[] = [];
  for (let p = 2; p + 2 <= data.length; p += 2) groups.push(u16(data, p));
  return groups;
}

/** A ServerHello (or HelloRetryRequest) record echoing `sessionId`, with `keyShare`'s data. */
function serverHello(random: Uint8Array, sessionId: Uint8Array, keyShare: Uint8Array): Uint8Array {
  const extensions = [
    ...[0, SUPPORTED_VERSIONS, 0, 2, 3, 4], // TLS 1.3
    ...[0, KEY_SHARE, keyShare.length >> 8, keyShare.length & 0xff, ...keyShare],
  ];
  const body = [
    ...[3, 3, ...random, sessionId.length, ...sessionId],
    ...[TLS_AES_128_GCM_SHA256 >> 8, TLS_AES_128_GCM_SHA256 & 0xff, 0],
    ...[extensions.length >> 8, extensions.length & 0xff, ...extensions],
  ];
  const message = [SERVER_HELLO, 0, body.length >> 8, body.length & 0xff, ...body];
  return Uint8Array.from([
    HANDSHAKE_RECORD,
    3,
    3,
    message.length >> 8,
    message.length & 0xff,
    ...message,
  ]);
}

/** The stand-in server: a duplex that answers ClientHellos as the module doc says, then ends. */
function standIn(): Duplex {
  let pending = new Uint8Array(0);
  let hellos = 0;
  return new (streamModule().Duplex)({
    read() {},
    write(chunk: Uint8Array, _encoding, done) {
      const joined = new Uint8Array(pending.length + chunk.length);
      joined.set(pending);
      joined.set(chunk, pending.length);
      pending = joined;
      while (pending.length >= 5 && pending.length >= 5 + u16(pending, 3)) {
        const record = pending.subarray(5, 5 + u16(pending, 3));
        const type = pending[0];
        pending = pending.slice(5 + record.length);
        if (type !== HANDSHAKE_RECORD || record[0] !== CLIENT_HELLO) continue;
        const answer = answerHello(record.subarray(4), hellos++);
        if (answer !== null) this.push(answer);
        if (answer === null || hellos === 2) this.push(null);
      }
      done();
    },
  });
}

/**
 * The stand-in's answer to the `index`th ClientHello (its body): a HelloRetryRequest for
 * secp256r1 to the first if it carries X25519 alone and supports secp256r1, a ServerHello with a
 * secp256r1 share to the second; null to decline.
 */
export function answerHello(body: Uint8Array, index: number): Uint8Array | null {
  const fields = clientHelloFields(body);
  if (fields === null) return null;
  const shares = keyShareGroups(fields.extensions.get(KEY_SHARE) ?? new Uint8Array(0));
  if (index === 0) {
    const groups = supportedGroups(fields.extensions.get(SUPPORTED_GROUPS) ?? new Uint8Array(0));
    if (shares.length !== 1 || shares[0] !== X25519 || !groups.includes(SECP256R1)) return null;
    return serverHello(HRR_RANDOM, fields.sessionId, Uint8Array.of(0, SECP256R1));
  }
  if (shares.length !== 1 || shares[0] !== SECP256R1) return null;
  const share = [0, SECP256R1, 0, P256_POINT.length, ...P256_POINT];
  return serverHello(
    crypto.getRandomValues(new Uint8Array(32)),
    fields.sessionId,
    Uint8Array.from(share),
  );
}

/** The hosts (and verification policy: node:tls keeps a hint store per policy) taught so far. */
const taught = new Map<string, Promise<void>>();

/**
 * Teaches node:tls to send a secp256r1 share first to the host `options` names (once per process,
 * host and `rejectUnauthorized`). `options` are those of the real `tls.connect`, without the
 * socket, so the hint lands where that connection looks. Never rejects.
 */
export function preferP256(options: tls.ConnectionOptions): Promise<void> {
  const key = `${options.servername ?? options.host}\n${options.rejectUnauthorized !== false}`;
  let done = taught.get(key);
  if (done === undefined) {
    done = teach(options);
    taught.set(key, done);
  }
  return done;
}

function teach(options: tls.ConnectionOptions): Promise<void> {
  return new Promise((resolve) => {
    let socket: tls.TLSSocket | undefined;
    const end = () => {
      clearTimeout(timer);
      socket?.destroy();
      resolve();
    };
    const timer = setTimeout(end, TEACH_MS);
    try {
      socket = tlsModule().connect({ ...options, socket: standIn() });
      // The stand-in ends mid-handshake: an error or a close is the expected outcome. `on`, not
      // `once`: a second error event without a listener would throw.
      socket.on("error", end);
      socket.once("close", end);
      socket.once("secureConnect", end);
    } catch {
      end();
    }
  });
}
