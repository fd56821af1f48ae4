// The server side of SCRAM-SHA-256 and -PLUS (RFC 5802, RFC 5929's tls-server-end-point), for a
// fake server to offer what PostgreSQL never does (only -PLUS, say): it offers the mechanisms it
// is told, checks the client's proof and its channel binding against the server's certificate,
// and proves itself; then the startup goes on as a real server's would.
import { auth, cstr, encoder, errorResponse, type Peer, STARTUP_OK } from "./fake_server.ts";

const decoder = new TextDecoder();

/** What a client did in one exchange. */
export interface ScramOutcome {
  /** The mechanism it chose. */
  mechanism: string;
  /** Its GS2 header (`p=tls-server-end-point,,`, `y,,` or `n,,`). */
  gs2: string;
  /** Whether its proof and channel binding were right (then the session started). */
  ok: boolean;
}

/** Base64 of `bytes`. */
export const b64 = (bytes: Uint8Array): string => btoa(String.fromCharCode(...bytes));

async function hmac(key: Uint8Array, data: string): Promise<Uint8Array> {
  const k = await crypto.subtle.importKey(
    "raw",
    key.slice(),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  return new Uint8Array(await crypto.subtle.sign("HMAC", k, encoder.encode(data)));
}

async function sha256(bytes: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes.slice()));
}

/**
 * RFC 5802 §3 from the server's side: the proof it expects and the signature it sends (checked
 * against RFC 7677's test vector in auth_test.ts).
 */
export async function scramExpect(
  password: string,
  salt: Uint8Array,
  iterations: number,
  authMessage: string,
): Promise<{ clientProof: string; serverSignature: string }> {
  const key = await crypto.subtle.importKey(
    "raw",
    encoder.encode(password),
    "PBKDF2",
    false,
    ["deriveBits"],
  );
  const salted = new Uint8Array(
    await crypto.subtle.deriveBits(
      { name: "PBKDF2", hash: "SHA-256", salt: salt.slice(), iterations },
      key,
      256,
    ),
  );
  const clientKey = await hmac(salted, "Client Key");
  const clientSignature = await hmac(await sha256(clientKey), authMessage);
  const proof = clientKey.map((b, i) => b ^ clientSignature[i]);
  const serverSignature = await hmac(await hmac(salted, "Server Key"), authMessage);
  return { clientProof: b64(proof), serverSignature: b64(serverSignature) };
}

/** The DER of a PEM certificate. */
export function derOf(pem: string): Uint8Array {
  const body = pem.replace(/-----[^-]+-----/g, "").replace(/\s+/g, "");
  return Uint8Array.from(atob(body), (c) => c.charCodeAt(0));
}

/** The attribute `name` of a SCRAM message (`r`, `c`, `p`...). */
function attribute(message: string, name: string): string | undefined {
  for (const part of message.split(",")) {
    if (part.startsWith(`${name}=`)) return part.slice(name.length + 1);
  }
  return undefined;
}

/**
 * Runs one SCRAM exchange on `peer` (its startup message read): offers `offer`, and with a right
 * proof and binding sends SASLFinal and the rest of a startup (the session is then ready for
 * queries); otherwise a FATAL 28P01. `certificate` is the server's (DER, signed with SHA-256 or
 * an ECDSA/RSA hash that maps to it), which a -PLUS client must have bound to.
 */
export async function scramExchange(
  peer: Peer,
  o: { offer: readonly string[]; password: string; certificate: Uint8Array },
): Promise<ScramOutcome> {
  await peer.send(auth(10, ...o.offer.map(cstr), cstr("")));
  const initial = await peer.message();
  if (initial.type !== "p") throw new Error(`expected SASLInitialResponse, got ${initial.type}`);
  const end = initial.body.indexOf(0);
  const mechanism = decoder.decode(initial.body.subarray(0, end));
  const clientFirst = decoder.decode(initial.body.subarray(end + 5));
  const afterFlag = clientFirst.indexOf(",");
  const gs2End = clientFirst.indexOf(",", afterFlag + 1) + 1;
  const gs2 = clientFirst.slice(0, gs2End);
  const bare = clientFirst.slice(gs2End);
  const salt = crypto.getRandomValues(new Uint8Array(16));
  const serverFirst = `r=${attribute(bare, "r")}fake-server-nonce,s=${b64(salt)},i=4096`;
  await peer.send(auth(11, encoder.encode(serverFirst)));
  const final = await peer.message();
  if (final.type !== "p") throw new Error(`expected SASLResponse, got ${final.type}`);
  const clientFinal = decoder.decode(final.body);
  const withoutProof = clientFinal.slice(0, clientFinal.lastIndexOf(",p="));
  // What `c=` must carry: the GS2 header, and with `p` the certificate's hash.
  const bound = gs2.startsWith("p=tls-server-end-point,")
    ? await sha256(o.certificate)
    : new Uint8Array(0);
  const binding = new Uint8Array([...encoder.encode(gs2), ...bound]);
  const plusAsked = mechanism === "SCRAM-SHA-256-PLUS";
  const mechanismOk = o.offer.includes(mechanism) && plusAsked === gs2.startsWith("p=");
  const authMessage = `${bare},${serverFirst},${withoutProof}`;
  const expected = await scramExpect(o.password, salt, 4096, authMessage);
  const ok = mechanismOk && attribute(clientFinal, "c") === b64(binding) &&
    attribute(clientFinal, "p") === expected.clientProof;
  if (!ok) {
    await peer.send(errorResponse("28P01", "SCRAM authentication failed"));
    peer.close();
    return { mechanism, gs2, ok };
  }
  await peer.send(auth(12, encoder.encode(`v=${expected.serverSignature}`)));
  await peer.send(STARTUP_OK);
  return { mechanism, gs2, ok };
}
