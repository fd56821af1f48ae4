/**
 * Answering the server's authentication requests (cleartext, MD5, SCRAM-SHA-256 and -PLUS)
 * under the client's policy (`require_auth`, `channel_binding`, auth_policy.ts). Every check runs
 * before anything secret is computed or sent: a server asking for a method the policy excludes
 * gets an AUTH_REFUSED error and no password, hash or SCRAM proof, and the password function is
 * not even called.
 *
 * Queries ride (`AuthIO.ride`) behind the last message the server needs: the password message,
 * or SCRAM's client-final message when TLS already proved the server's identity; otherwise the
 * server's SCRAM signature must be checked first (an impostor would see the queries).
 */
import { Auth, cstrEnd, utf8 } from "../protocol/backend.ts";
import * as fe from "../protocol/frontend.ts";
import { md5Password } from "../protocol/md5.ts";
import type { ChannelBinding, ScramClient, ScramKeyPair } from "../protocol/scram.ts";
import type { Writer } from "../protocol/writer.ts";
import { ConnectionError } from "../errors.ts";
import type { AuthMethod, ChannelBindingMode, RequireAuth } from "../protocol/auth_policy.ts";

/**
 * A password, or a function that supplies one when the server asks.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres({ password: async () => (await fetch("https://vault.internal/pg")).text() });
 * ```
 */
export type PasswordSource = string | (() => string | Promise<string>) | undefined;

/** How the client lets a server authenticate it. */
export interface AuthPolicy {
  /** The methods `require_auth` allows; undefined: any. */
  requireAuth?: RequireAuth;
  /** libpq's `channel_binding`; `prefer` when not given. */
  channelBinding?: ChannelBindingMode;
  /** libpq's `scram_client_key` and `scram_server_key`: SCRAM uses them instead of a password. */
  scramKeys?: ScramKeyPair;
}

/** What authentication needs from the connection. */
export interface AuthIO {
  /** The writer to encode outgoing messages into. */
  writer(): Writer;
  /** Sends what is in the writer. */
  flush(): Promise<void>;
  /** What the writer holds is the last message the server needs: queries may follow it. */
  ride(): void;
  /** Whether TLS verified the server's identity (a chain and host name check passed). */
  readonly serverVerified: boolean;
  /** Whether the connection is encrypted (TLS). */
  readonly encrypted: boolean;
  /**
   * The server's TLS certificate (DER), for channel binding; null when not encrypted or when
   * the TLS path cannot show it.
   */
  readonly serverCertificate: Uint8Array | null;
  /**
   * The server offers only SCRAM-SHA-256-PLUS over TLS: its later connections should take a TLS
   * path that shows the certificate. True when this connection's path cannot show it but a new
   * connection's would (the connection is then opened again, see {@link bindsElsewhere}).
   */
  onlyBindingOffered?(): boolean;
}

/** The AUTH_UNSUPPORTED errors that a new connection, on a path showing the certificate, avoids. */
const elsewhere = new WeakSet<object>();

/**
 * Whether `e` refused a server that offers only SCRAM-SHA-256-PLUS because this connection's TLS
 * path could not show the certificate, while a new connection's path will: nothing secret was
 * sent, and the start is tried once more.
 */
export function bindsElsewhere(e: unknown): boolean {
  return typeof e === "object" && e !== null && elsewhere.has(e);
}

/** What the server asked for, in words, by method. */
const ASKED: Record<AuthMethod, string> = {
  password: "a cleartext password",
  md5: "an MD5 password hash",
  "scram-sha-256": "SCRAM-SHA-256",
  gss: "GSSAPI",
  sspi: "SSPI",
  oauth: "OAuth",
  none: "no authentication",
};

/** The methods of the request codes pgpipe does not answer. */
const UNANSWERED: Record<number, { method?: AuthMethod; name: string }> = {
  [Auth.KerberosV5]: { name: "Kerberos V5" },
  [Auth.GSS]: { method: "gss", name: "GSSAPI" },
  [Auth.GSSContinue]: { method: "gss", name: "GSSAPI" },
  [Auth.SSPI]: { method: "sspi", name: "SSPI" },
};

function violation(message: string): ConnectionError {
  return new ConnectionError("PROTOCOL_VIOLATION", message);
}

function refused(message: string): ConnectionError {
  return new ConnectionError("AUTH_REFUSED", `${message}; nothing was sent`);
}

async function resolvePassword(source: PasswordSource, method: string): Promise<string> {
  let value: unknown = source;
  if (typeof source === "function") {
    try {
      value = await source();
    } catch (e) {
      throw new ConnectionError(
        "AUTH_FAILED",
        `the password function failed: ${(e as Error)?.message ?? e}`,
        { cause: e },
      );
    }
  }
  if (typeof value !== "string") {
    throw new ConnectionError(
      "AUTH_FAILED",
      `the server asked for a password (${method}) but none was given`,
    );
  }
  return value;
}

/** Why the client cannot bind to a TLS connection (its certificate, or the lack of one). */
function unbindable(certificate: Uint8Array | null): string {
  return certificate === null
    ? "this TLS connection cannot show the server's certificate to bind to"
    : "the server certificate's signature algorithm defines no tls-server-end-point hash";
}

/** The mechanisms of an AuthenticationSASL message. */
function mechanisms(buf: Uint8Array, start: number, end: number): string[] {
  const out: string[] = [];
  for (let at = start + 4; at < end && buf[at] !== 0;) {
    const stop = cstrEnd(buf, at, end);
    out.push(utf8(buf, at, stop));
    at = stop + 1;
  }
  return out;
}

/**
 * SCRAM and channel binding, imported when a server first asks for SASL: a program that never
 * authenticates by SCRAM (trust, a pooler's own login) never loads them. Not when a connection
 * with a password starts: every connection has one (the .pgpass reader, called only if asked).
 */
const scramModule = () => import("../protocol/scram.ts");
const bindingModule = () => import("../protocol/channel_binding.ts");

/** One connection's authentication: the server's requests answered in turn. */
export class Authenticator {
  #io: AuthIO;
  #user: string;
  #password: PasswordSource;
  #policy: AuthPolicy;
  #scram: ScramClient | null = null;
  /** Whether any method ran (else AuthenticationOk means the server asked for nothing). */
  #asked = false;
  /** Whether a SCRAM exchange bound to this TLS connection completed. */
  #bound = false;

  constructor(io: AuthIO, user: string, password: PasswordSource, policy: AuthPolicy = {}) {
    this.#io = io;
    this.#user = user;
    this.#password = password;
    this.#policy = policy;
  }

  /** AuthenticationOk: throws when the policy does not let the server end authentication now. */
  ok(): void {
    if (this.#scram !== null) throw violation("authentication ended before SCRAM completed");
    if (!this.#asked) this.#allow("none");
    if (this.#policy.channelBinding === "require" && !this.#bound) {
      throw refused(
        "channel_binding=require: the server accepted the connection without SCRAM channel binding",
      );
    }
  }

  /** Answers one authentication request (any but AuthenticationOk). */
  async request(code: number, buf: Uint8Array, start: number, end: number): Promise<void> {
    switch (code) {
      case Auth.CleartextPassword:
        return await this.#passwordMethod(
          "password",
          () => resolvePassword(this.#password, "cleartext"),
        );
      case Auth.MD5Password: {
        if (end - start < 8) throw violation("MD5 request without salt");
        const salt = buf.slice(start + 4, start + 8);
        return await this.#passwordMethod(
          "md5",
          async () => md5Password(this.#user, await resolvePassword(this.#password, "md5"), salt),
        );
      }
      case Auth.SASL:
        return await this.#sasl(mechanisms(buf, start, end));
      case Auth.SASLContinue:
        return await this.#continue(utf8(buf, start + 4, end));
      case Auth.SASLFinal:
        return await this.#final(utf8(buf, start + 4, end));
    }
    const unanswered = UNANSWERED[code];
    if (unanswered?.method !== undefined) this.#allow(unanswered.method);
    throw new ConnectionError(
      "AUTH_UNSUPPORTED",
      `the server requires ${
        unanswered?.name ?? `authentication method ${code}`
      }, which pgpipe does not support`,
    );
  }

  /** Throws AUTH_REFUSED when `require_auth` does not allow what the server asked for. */
  #allow(method: AuthMethod): void {
    const rule = this.#policy.requireAuth;
    if (rule === undefined || rule.allowed.has(method)) return;
    throw refused(
      method === "none"
        ? `the server accepted the connection without authentication, which require_auth=${rule.text} does not allow`
        : `the server asked for ${ASKED[method]}, which require_auth=${rule.text} does not allow`,
    );
  }

  /** Cleartext or MD5: checked, then `answer` is computed and sent with queries riding behind. */
  async #passwordMethod(method: "password" | "md5", answer: () => Promise<string>): Promise<void> {
    this.#allow(method);
    if (this.#policy.channelBinding === "require") {
      throw refused(
        `channel_binding=require: the server asked for ${
          ASKED[method]
        }, which cannot be bound to the TLS connection`,
      );
    }
    this.#asked = true;
    fe.password(this.#io.writer(), await answer());
    this.#io.ride();
    await this.#io.flush();
  }

  /** AuthenticationSASL: picks the mechanism and channel binding, then sends the client-first. */
  async #sasl(offered: string[]): Promise<void> {
    if (this.#scram !== null) throw violation("SASL requested twice");
    const plain = offered.includes("SCRAM-SHA-256");
    const plus = offered.includes("SCRAM-SHA-256-PLUS");
    if (!plain && !plus) {
      if (offered.includes("OAUTHBEARER")) this.#allow("oauth");
      throw new ConnectionError(
        "AUTH_UNSUPPORTED",
        offered.length === 0
          ? "the server asked for SASL authentication but offers no mechanism"
          : `the server offers SASL mechanisms ${
            offered.join(", ")
          }; pgpipe supports SCRAM-SHA-256`,
      );
    }
    this.#allow("scram-sha-256");
    // libpq's rule: -PLUS binds to TLS, so a server offering it over plain TCP is broken or lying.
    if (plus && !this.#io.encrypted) {
      throw violation("the server offered SCRAM-SHA-256-PLUS over a connection without TLS");
    }
    const binding = await this.#binding(plain, plus);
    const secret = this.#policy.scramKeys ??
      await resolvePassword(this.#password, "scram-sha-256");
    this.#asked = true;
    this.#scram = new (await scramModule()).ScramClient(secret, { binding });
    fe.saslInitialResponse(this.#io.writer(), this.#scram.mechanism, this.#scram.start());
    await this.#io.flush();
  }

  /**
   * The channel binding for an exchange the server offered: `p` when it offers -PLUS and this
   * connection can bind, `y` when the connection shows the server's certificate but the server
   * offers no -PLUS (a relay that hid it is then refused by the real server), `n` when the
   * connection cannot show the certificate (no TLS, or native TLS, which verified the server);
   * under `channel_binding=require` anything but `p` refuses. A certificate whose signature
   * algorithm defines no hash (Ed25519) cannot be bound to: with -PLUS offered, `n` would let
   * whoever holds that certificate relay the exchange, so it is refused unless TLS verified the
   * server (libpq refuses it always).
   */
  async #binding(plain: boolean, plus: boolean): Promise<ChannelBinding> {
    const mode = this.#policy.channelBinding ?? "prefer";
    const certificate = this.#io.encrypted ? this.#io.serverCertificate : null;
    const data = mode !== "disable" && certificate !== null
      ? await (await bindingModule()).tlsServerEndPoint(certificate)
      : null;
    if (mode === "require") {
      if (!this.#io.encrypted) {
        throw refused("channel_binding=require: the connection is not encrypted (TLS)");
      }
      if (!plus) {
        throw refused(
          "channel_binding=require: the server does not offer SCRAM-SHA-256-PLUS " +
            "(a server behind a TLS-terminating proxy cannot)",
        );
      }
      if (data === null) throw refused(`channel_binding=require: ${unbindable(certificate)}`);
    }
    // Told even when this connection binds: a process's first one (node:tls) keeps the server's
    // later ones from a native path, which could not.
    const retry = !plain && mode !== "disable" && this.#io.onlyBindingOffered?.() === true;
    if (plus && data !== null) return { flag: "p", data };
    if (!plain) {
      const e = new ConnectionError(
        "AUTH_UNSUPPORTED",
        mode === "disable"
          ? "the server offers only SCRAM-SHA-256-PLUS, and channel_binding=disable"
          : `the server offers only SCRAM-SHA-256-PLUS, and ${unbindable(certificate)}`,
      );
      if (retry) elsewhere.add(e);
      throw e;
    }
    if (mode === "disable" || certificate === null) return { flag: "n" };
    // `y` only when the server offered no -PLUS: said to one that did, it means a downgrade.
    if (!plus) return { flag: "y" };
    if (this.#io.serverVerified) return { flag: "n" };
    throw refused(
      `the server offers SCRAM-SHA-256-PLUS, but ${
        unbindable(certificate)
      } and TLS did not verify the server: SCRAM without binding could be relayed by whoever ` +
        "holds that certificate (verify the server with sslmode=verify-full, or set " +
        "channel_binding=disable)",
    );
  }

  /** SASLContinue: the client-final message (with queries behind it when TLS verified the server). */
  async #continue(serverFirst: string): Promise<void> {
    const scram = this.#scram;
    if (scram === null) throw violation("SASLContinue without SASL");
    try {
      fe.saslResponse(this.#io.writer(), await scram.respond(serverFirst));
    } catch (e) {
      throw new ConnectionError("AUTH_FAILED", (e as Error).message, { cause: e });
    }
    if (this.#io.serverVerified) this.#io.ride();
    await this.#io.flush();
  }

  /** SASLFinal: the server proves it knows the password; then queries may go. */
  async #final(serverFinal: string): Promise<void> {
    const scram = this.#scram;
    if (scram === null) throw violation("SASLFinal without SASL");
    try {
      scram.verify(serverFinal);
    } catch (e) {
      const message = e instanceof (await scramModule()).ScramError ? e.message : String(e);
      throw new ConnectionError("AUTH_FAILED", message, { cause: e });
    }
    this.#scram = null;
    this.#bound = scram.mechanism === "SCRAM-SHA-256-PLUS";
    if (!this.#io.serverVerified) {
      this.#io.ride();
      await this.#io.flush();
    }
  }
}
