/**
 * SCRAM-SHA-256 and SCRAM-SHA-256-PLUS (RFC 5802, RFC 7677, RFC 5929's tls-server-end-point)
 * client steps, on Web Crypto only.
 *
 * Usage: `start()` gives the client-first message; `respond(serverFirst)` the
 * client-final message; `verify(serverFinal)` checks the server's signature,
 * which proves the server knew the password too.
 *
 * The GS2 header's flag says what the client does about channel binding: `p` binds to the
 * server certificate's hash (the -PLUS mechanism), `y` says the client could bind but the server
 * offered no -PLUS mechanism (a server that did offer one then refuses the exchange: a
 * downgrade), and `n` says the client cannot bind on this connection.
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

/**
 * What a SCRAM exchange does about channel binding: `n`, the client cannot bind on this
 * connection; `y`, it could but the server offered no -PLUS mechanism; `p`, SCRAM-SHA-256-PLUS
 * bound with tls-server-end-point to `data`, the hash of the server's certificate.
 */
export type ChannelBinding =
  | { flag: "n" }
  | { flag: "y" }
  | { flag: "p"; data: Uint8Array };

/** The client key and server key given instead of a password (libpq's `scram_client_key`). */
export interface ScramKeyPair {
  clientKey: Uint8Array;
  serverKey: Uint8Array;
}

/** What the client proves itself with: a password, or the keys derived from it. */
export type ScramSecret = string | ScramKeyPair;

/** The keys of a given key pair: the stored key is the client key's hash (RFC 5802 §3). */
async function givenKeys(pair: ScramKeyPair): Promise<ScramKeys> {
  const storedKey = new Uint8Array(
    await crypto.subtle.digest("SHA-256", pair.clientKey as Uint8Array<ArrayBuffer>),
  );
  return { clientKey: pair.clientKey, storedKey, serverKey: pair.serverKey };
}

/** One SCRAM-SHA-256 exchange for one password (or key pair). */
export class ScramClient {
  #secret: ScramSecret;
  #nonce: string;
  #gs2: string;
  #binding: Uint8Array;
  #clientFirstBare: string;
  #serverSignature: Uint8Array | null = null;

  /**
   * `binding` defaults to `n` (no channel binding); `nonce` is for tests (by default 18 random
   * bytes are used).
   */
  constructor(secret: ScramSecret, options: { binding?: ChannelBinding; nonce?: string } = {}) {
    this.#secret = secret;
    this.#nonce = options.nonce ?? base64(crypto.getRandomValues(new Uint8Array(18)));
    const binding = options.binding ?? { flag: "n" };
    this.#gs2 = binding.flag === "p" ? "p=tls-server-end-point,," : `${binding.flag},,`;
    this.#binding = binding.flag === "p" ? binding.data : new Uint8Array(0);
    // The user name is taken from the startup message, so it is left empty here.
    this.#clientFirstBare = `n=,r=${this.#nonce}`;
  }

  /** The SASL mechanism this exchange runs: SCRAM-SHA-256, or -PLUS when it binds. */
  get mechanism(): string {
    return this.#gs2.startsWith("p") ? "SCRAM-SHA-256-PLUS" : "SCRAM-SHA-256";
  }

  /** The client-first message. */
  start(): string {
    return `${this.#gs2}${this.#clientFirstBare}`;
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
    const { clientKey, storedKey, serverKey } = typeof this.#secret === "string"
      ? await keysFor(this.#secret, salt, iterations)
      : await givenKeys(this.#secret);
    // c=: the GS2 header again, with the channel binding data after it when binding.
    const header = encoder.encode(this.#gs2);
    const cbind = new Uint8Array(header.length + this.#binding.length);
    cbind.set(header);
    cbind.set(this.#binding, header.length);
    const withoutProof = `c=${base64(cbind)},r=${nonce}`;
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
