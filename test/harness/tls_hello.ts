/**
 * What a TLS 1.3 handshake's first flights say about key exchange, read from the bytes a flight
 * recorder saw (`flights.ts`): the groups a ClientHello supports and sends key shares for, and
 * whether the server answered with a HelloRetryRequest (a ServerHello whose random is RFC 8446's
 * fixed value) because it wants a share the client did not send, one more round trip before the
 * handshake can finish. Also a name for each client flight, so a report can say which round
 * trips a client spends ("goodbye" for the Terminate or close_notify that ends the connection).
 */
import {
  CLIENT_HELLO,
  clientHelloFields,
  HANDSHAKE_RECORD,
  HRR_RANDOM,
  KEY_SHARE,
  keyShareGroups,
  SERVER_HELLO,
  SUPPORTED_GROUPS,
  supportedGroups,
} from "../../src/connection/transport/tls_group.ts";
import { type Flight, frontendTypes } from "./flights.ts";

/** Names of the TLS named groups clients offer (RFC 8446, RFC 7919, the ML-KEM hybrids). */
const GROUPS: Record<number, string> = {
  0x0017: "secp256r1",
  0x0018: "secp384r1",
  0x0019: "secp521r1",
  0x001d: "x25519",
  0x001e: "x448",
  0x0100: "ffdhe2048",
  0x0101: "ffdhe3072",
  0x0102: "ffdhe4096",
  0x0103: "ffdhe6144",
  0x0104: "ffdhe8192",
  0x11eb: "secp256r1mlkem768",
  0x11ec: "x25519mlkem768",
  0x11ed: "secp384r1mlkem1024",
  0x6399: "x25519kyber768draft00",
};

function groupName(code: number): string {
  return GROUPS[code] ?? `0x${code.toString(16).padStart(4, "0")}`;
}

/** A ClientHello's key exchange offer. */
export interface ClientOffer {
  /** supported_groups, in the client's order of preference. */
  groups: string[];
  /** The groups the client sent a key share for. */
  shares: string[];
}

/** The server's first handshake answer. */
export interface ServerAnswer {
  /** Whether it is a HelloRetryRequest. */
  retry: boolean;
  /** The group it picked (for a HelloRetryRequest, the one it asks a share for). */
  group: string | null;
}

/** The key exchange of one connection, and a name for each of its client flights. */
export interface KeyExchange {
  /** The first ClientHello's offer (null: no TLS, or unreadable). */
  offer: ClientOffer | null;
  /** The server's answer to it. */
  answer: ServerAnswer | null;
  /** Each client flight, named: each is one round trip (the last waits for the answer). */
  flights: string[];
}

const u16 = (b: Uint8Array, at: number) => (b[at] << 8) | b[at + 1];

/** Whether `b` starts with a TLS record header (handshake, alert, CCS or application data). */
function isTls(b: Uint8Array, at = 0): boolean {
  return b.length >= at + 5 && b[at] >= 0x14 && b[at] <= 0x17 && b[at + 1] === 3;
}

/** Where TLS starts in a flight: after PostgreSQL's SSLRequest (client) or its "S" (server). */
function tlsStart(b: Uint8Array): number {
  if (isTls(b)) return 0;
  if (b[0] === 0x53 && isTls(b, 1)) return 1;
  if (b.length >= 8 && u16(b, 0) === 0 && u16(b, 2) === 8 && isTls(b, 8)) return 8;
  return -1;
}

/** The handshake messages in the TLS records of `b` from `at` (type and body), in order. */
function handshakes(b: Uint8Array, at: number): { type: number; body: Uint8Array }[] {
  const payload: number[] = [];
  for (; at + 5 <= b.length && isTls(b, at);) {
    const length = u16(b, at + 3);
    if (b[at] === HANDSHAKE_RECORD) payload.push(...b.subarray(at + 5, at + 5 + length));
    else if (payload.length > 0) break; // the cleartext handshake ends where encryption starts
    at += 5 + length;
  }
  const out: { type: number; body: Uint8Array }[] = [];
  for (let p = 0; p + 4 <= payload.length;) {
    const size = (payload[p + 1] << 16) | (payload[p + 2] << 8) | payload[p + 3];
    out.push({ type: payload[p], body: Uint8Array.from(payload.slice(p + 4, p + 4 + size)) });
    p += 4 + size;
  }
  return out;
}

/** The extensions of a hello body, whose block starts at `at` (its 2-byte length). */
function extensions(body: Uint8Array, at: number): Map<number, Uint8Array> {
  const out = new Map<number, Uint8Array>();
  const end = Math.min(body.length, at + 2 + u16(body, at));
  for (let p = at + 2; p + 4 <= end;) {
    const length = u16(body, p + 2);
    out.set(u16(body, p), body.subarray(p + 4, p + 4 + length));
    p += 4 + length;
  }
  return out;
}

function readOffer(b: Uint8Array): ClientOffer {
  const ext = clientHelloFields(b)?.extensions;
  const none = new Uint8Array(0);
  return {
    groups: supportedGroups(ext?.get(SUPPORTED_GROUPS) ?? none).map(groupName),
    shares: keyShareGroups(ext?.get(KEY_SHARE) ?? none).map(groupName),
  };
}

function readAnswer(b: Uint8Array): ServerAnswer {
  const retry = HRR_RANDOM.every((v, i) => b[2 + i] === v);
  let at = 2 + 32;
  at += 1 + b[at]; // session id
  at += 2 + 1; // cipher suite, compression method
  const ks = extensions(b, at).get(KEY_SHARE);
  return { retry, group: ks && ks.length >= 2 ? groupName(u16(ks, 0)) : null };
}

/**
 * Whether an encrypted flight only ends the connection: every record holds at most 5 bytes of
 * plaintext (TLS 1.3 adds a content type byte and a 16-byte tag), which is a Terminate message
 * or a close_notify alert. Any query is longer.
 */
function isGoodbye(b: Uint8Array): boolean {
  for (let at = 0; at < b.length; at += 5 + u16(b, at + 3)) {
    if (!isTls(b, at) || u16(b, at + 3) > 5 + 1 + 16) return false;
  }
  return true;
}

/** The first message of `type` in a flight's cleartext handshake records, or null. */
function handshakeIn(bytes: Uint8Array, type: number): Uint8Array | null {
  const at = tlsStart(bytes);
  if (at < 0) return null;
  return handshakes(bytes, at).find((h) => h.type === type)?.body ?? null;
}

/**
 * The key exchange of one recorded connection: the first ClientHello, the server flight that
 * answers it, and every client flight named. Flights after the handshake are encrypted; they are
 * named by size, the report says what a login sends in them.
 */
export function keyExchange(flights: Flight[]): KeyExchange {
  let offer: ClientOffer | null = null;
  let answer: ServerAnswer | null = null;
  let hellos = 0;
  const names: string[] = [];
  for (let i = 0; i < flights.length; i++) {
    const f = flights[i];
    if (f.from !== "client") continue;
    const hello = handshakeIn(f.bytes, CLIENT_HELLO);
    if (hello !== null) {
      if (hellos === 0) {
        offer = readOffer(hello);
        const next = flights.slice(i + 1).find((g) => g.from === "server");
        const server = next ? handshakeIn(next.bytes, SERVER_HELLO) : null;
        answer = server ? readAnswer(server) : null;
      }
      const lead = tlsStart(f.bytes) === 8 ? "SSLRequest+" : "";
      names.push(`${lead}ClientHello${hellos++ > 0 ? " again" : ""}`);
    } else if (isTls(f.bytes)) {
      names.push(isGoodbye(f.bytes) ? "goodbye" : `encrypted ${f.bytes.length} B`);
    } else {
      names.push(frontendTypes(f.bytes).map((t) => t === "ssl" ? "SSLRequest" : t).join("+"));
    }
  }
  return { offer, answer, flights: names };
}
