/**
 * SCRAM-SHA-256 (RFC 5802, RFC 7677) client steps, on Web Crypto only.
 *
 * Usage: `start()` gives the client-first message; `respond(serverFirst)` the
 * client-final message; `verify(serverFinal)` checks the server's signature,
 * which proves the server knew the password too.
 */

const encoder = new TextEncoder();

/** Thrown when the server's SCRAM messages are malformed or its proof is wrong. */
export class ScramError extends Error {
  /** Describes what was wrong with the exchange. */
  constructor(message: string) {
    super(message);
    this.name = "ScramError";
  }
}

function base64(bytes: Uint8Array): string {
  let s = "";
  for (let i = 0; i < bytes.length; i++) s += String.fromCharCode(bytes[i]);
  return btoa(s);
}

function unbase64(text: string): Uint8Array {
  const s = atob(text);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

function attributes(message: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of message.split(",")) {
    const eq = part.indexOf("=");
    if (eq === 1) out.set(part[0], part.slice(2));
  }
  return out;
}

async function hmac(key: Uint8Array, data: Uint8Array | string): Promise<Uint8Array> {
  const k = await crypto.subtle.importKey(
    "raw",
    key as Uint8Array<ArrayBuffer>,
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const bytes = typeof data === "string" ? encoder.encode(data) : data;
  return new Uint8Array(await crypto.subtle.sign("HMAC", k, bytes as Uint8Array<ArrayBuffer>));
}

function xor(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length);
  for (let i = 0; i < a.length; i++) out[i] = a[i] ^ b[i];
  return out;
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i] ^ b[i];
  return diff === 0;
}

/** What a password, salt and iteration count derive to; all a SCRAM exchange needs of them. */
interface ScramKeys {
  clientKey: Uint8Array;
  storedKey: Uint8Array;
  serverKey: Uint8Array;
}

/**
 * Keys derived this process, by a digest of (password, salt, iterations): a pool's later
 * connections (and reconnections) skip the 4,096 PBKDF2 rounds. A changed password, or a
 * server that stored a new one (a new salt), simply derives afresh. Bounded: cleared when full.
 */
const derived = new Map<string, Promise<ScramKeys>>();
const MAX_DERIVED = 64;

async function keysFor(password: string, salt: string, iterations: number): Promise<ScramKeys> {
  const normalized = encoder.encode(password.normalize("NFKC"));
  const id = base64(
    new Uint8Array(
      await crypto.subtle.digest(
        "SHA-256",
        encoder.encode(`${iterations},${salt},${base64(normalized)}`) as Uint8Array<ArrayBuffer>,
      ),
    ),
  );
  let keys = derived.get(id);
  if (keys === undefined) {
    if (derived.size >= MAX_DERIVED) derived.clear();
    keys = derive(normalized, salt, iterations);
    derived.set(id, keys);
    keys.catch(() => derived.delete(id));
  }
  return await keys;
}

async function derive(password: Uint8Array, salt: string, iterations: number): Promise<ScramKeys> {
  const key = await crypto.subtle.importKey(
    "raw",
    password as Uint8Array<ArrayBuffer>,
    "PBKDF2",
    false,
    ["deriveBits"],
  );
  const salted = new Uint8Array(
    await crypto.subtle.deriveBits(
      {
        name: "PBKDF2",
        hash: "SHA-256",
        salt: unbase64(salt) as Uint8Array<ArrayBuffer>,
        iterations,
      },
      key,
      256,
    ),
  );
  const clientKey = await hmac(salted, "Client Key");
  const storedKey = new Uint8Array(
    await crypto.subtle.digest("SHA-256", clientKey as Uint8Array<ArrayBuffer>),
  );
  return { clientKey, storedKey, serverKey: await hmac(salted, "Server Key") };
}

/** One SCRAM-SHA-256 exchange for one password. */
export class ScramClient {
  #password: string;
  #nonce: string;
  #clientFirstBare: string;
  #serverSignature: Uint8Array | null = null;

  /** `nonce` is for tests; by default 18 random bytes are used. */
  constructor(password: string, nonce?: string) {
    this.#password = password;
    this.#nonce = nonce ?? base64(crypto.getRandomValues(new Uint8Array(18)));
    // The user name is taken from the startup message, so it is left empty here.
    this.#clientFirstBare = `n=,r=${this.#nonce}`;
  }

  /** The client-first message (no channel binding). */
  start(): string {
    return `n,,${this.#clientFirstBare}`;
  }

  /** Computes the client-final message from the server-first message. */
  async respond(serverFirst: string): Promise<string> {
    const attrs = attributes(serverFirst);
    const nonce = attrs.get("r");
    const salt = attrs.get("s");
    const iterations = Number(attrs.get("i"));
    if (!nonce || !nonce.startsWith(this.#nonce) || nonce.length === this.#nonce.length) {
      throw new ScramError("SCRAM server nonce does not extend the client nonce");
    }
    if (!salt || !Number.isInteger(iterations) || iterations < 1) {
      throw new ScramError("SCRAM server-first message is malformed");
    }
    const { clientKey, storedKey, serverKey } = await keysFor(this.#password, salt, iterations);
    const withoutProof = `c=biws,r=${nonce}`;
    const authMessage = `${this.#clientFirstBare},${serverFirst},${withoutProof}`;
    const clientSignature = await hmac(storedKey, authMessage);
    this.#serverSignature = await hmac(serverKey, authMessage);
    return `${withoutProof},p=${base64(xor(clientKey, clientSignature))}`;
  }

  /** Checks the server-final message; throws unless the server proved the password. */
  verify(serverFinal: string): void {
    const attrs = attributes(serverFinal);
    const error = attrs.get("e");
    if (error) throw new ScramError(`SCRAM authentication failed: ${error}`);
    const v = attrs.get("v");
    if (!v || !this.#serverSignature || !equalBytes(unbase64(v), this.#serverSignature)) {
      throw new ScramError("SCRAM server signature does not match: the server is not trusted");
    }
  }
}
