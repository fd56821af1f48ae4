/**
 * The startup conversation: StartupMessage, authentication (cleartext, MD5,
 * SCRAM-SHA-256), then ParameterStatus and BackendKeyData until ReadyForQuery.
 *
 * Queries need not wait for ReadyForQuery: the server reads them only after
 * it, so they may ride in the same write as the last authentication message
 * (`StartupIO.ride`). Behind a password that is the password message. Behind
 * SCRAM it is the client-final message, but only when TLS already proved the
 * server's identity; otherwise the server's SCRAM signature must be checked
 * first (an impostor would see the queries), so they go as soon as it is.
 */
import { Auth, Backend, cstrEnd, fields, i32, utf8 } from "../protocol/backend.ts";
import * as fe from "../protocol/frontend.ts";
import { md5Password } from "../protocol/md5.ts";
import { ScramClient, ScramError } from "../protocol/scram.ts";
import type { Writer } from "../protocol/writer.ts";
import { ConnectionError, PostgresError } from "../errors.ts";

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

/** What the startup exchange needs from the connection. */
export interface StartupIO {
  /** The writer to encode outgoing messages into (flush swaps it for a spare). */
  writer(): Writer;
  /** Sends what is in the writer. */
  flush(): Promise<void>;
  /** Waits for the next message; its body is `buf[start, end)`. */
  next(): Promise<{ type: number; buf: Uint8Array; start: number; end: number }>;
  /** A ParameterStatus arrived. */
  parameter(name: string, value: string): void;
  /** A NoticeResponse arrived. */
  notice(fields: Record<string, string>): void;
  /**
   * Authentication is about to end: what the writer holds is the last message the server
   * needs, so queries waiting for this connection may be encoded behind it.
   */
  ride(): void;
  /** AuthenticationOk arrived: the server accepted the credentials. */
  authenticated(): void;
  /** Whether TLS verified the server's identity (a chain and host name check passed). */
  readonly serverVerified: boolean;
}

/** What the server told us during startup. */
export interface StartupResult {
  /** Backend process ID, for CancelRequest. */
  pid: number;
  /** The secret key's first 4 bytes as an integer (all of it under protocol 3.0), for `Result.state`. */
  secret: number;
  /** The whole secret key, for CancelRequest: 4 bytes, up to 256 under protocol 3.2. */
  key: Uint8Array;
  /** The protocol's minor version in use: the one asked for, or the lower one the server chose. */
  minor: number;
}

/** Protocol 3.0's version code; a minor version is added to it. */
const PROTOCOL_3_0 = 0x30000;
/** Protocol 3.2 lets the server send a cancel key of up to 256 bytes. */
const MAX_CANCEL_KEY = 256;

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

function violation(message: string): ConnectionError {
  return new ConnectionError("PROTOCOL_VIOLATION", message);
}

/**
 * NegotiateProtocolVersion: the server does not speak the minor version we asked for (a server
 * before 18 asked for 3.2) and names the newest it does, with the protocol options (`_pq_.*`) it
 * does not know. We carry on with its version; anything else is a broken server.
 */
function negotiate(
  buf: Uint8Array,
  start: number,
  end: number,
  asked: number,
  again: boolean,
): number {
  if (again) throw violation("NegotiateProtocolVersion sent twice");
  if (end - start < 8) throw violation("NegotiateProtocolVersion is truncated");
  const version = i32(buf, start);
  const count = i32(buf, start + 4);
  const options: string[] = [];
  for (let at = start + 8; options.length < count; at = cstrEnd(buf, at, end) + 1) {
    if (at >= end) throw violation("NegotiateProtocolVersion is truncated");
    options.push(utf8(buf, at, cstrEnd(buf, at, end)));
  }
  // pgpipe asks for no protocol options: a server that names one answers something else.
  if (options.length > 0) {
    throw violation(
      `the server does not know the protocol options ${options.join(", ")}, ` +
        "which pgpipe did not ask for",
    );
  }
  const minor = version - PROTOCOL_3_0;
  if (!(minor >= 0 && minor < asked)) {
    throw violation(
      `the server offers protocol ${version >> 16}.${version & 0xffff} ` +
        `instead of the 3.${asked} asked for`,
    );
  }
  return minor;
}

/**
 * Runs startup and authentication to the first ReadyForQuery, asking for protocol 3.`minor`
 * (0 or 2, the `max_protocol_version` option).
 */
export async function startup(
  io: StartupIO,
  params: Record<string, string>,
  password: PasswordSource,
  minor = 0,
): Promise<StartupResult> {
  fe.startup(io.writer(), params, minor);
  await io.flush();
  let scram: ScramClient | null = null;
  let authenticated = false;
  let negotiated = false;
  const result: StartupResult = { pid: 0, secret: 0, key: new Uint8Array(4), minor };
  for (;;) {
    const { type, buf, start, end } = await io.next();
    switch (type) {
      case Backend.Authentication: {
        if (end - start < 4) throw violation("Authentication message is truncated");
        if (authenticated) throw violation("authentication request after authentication succeeded");
        const code = i32(buf, start);
        if (code === Auth.Ok) {
          if (scram !== null) throw violation("authentication ended before SCRAM completed");
          authenticated = true;
          io.authenticated();
        } else if (code === Auth.CleartextPassword) {
          fe.password(io.writer(), await resolvePassword(password, "cleartext"));
          io.ride();
          await io.flush();
        } else if (code === Auth.MD5Password) {
          if (end - start < 8) throw violation("MD5 request without salt");
          const pw = await resolvePassword(password, "md5");
          fe.password(io.writer(), md5Password(params.user, pw, buf.slice(start + 4, start + 8)));
          io.ride();
          await io.flush();
        } else if (code === Auth.SASL) {
          const mechanisms: string[] = [];
          for (let at = start + 4; at < end && buf[at] !== 0;) {
            const stop = cstrEnd(buf, at, end);
            mechanisms.push(utf8(buf, at, stop));
            at = stop + 1;
          }
          if (!mechanisms.includes("SCRAM-SHA-256")) {
            throw new ConnectionError(
              "AUTH_UNSUPPORTED",
              `the server offers SASL mechanisms ${
                mechanisms.join(", ")
              }; pgpipe supports SCRAM-SHA-256`,
            );
          }
          scram = new ScramClient(await resolvePassword(password, "scram-sha-256"));
          fe.saslInitialResponse(io.writer(), "SCRAM-SHA-256", scram.start());
          await io.flush();
        } else if (code === Auth.SASLContinue) {
          if (scram === null) throw violation("SASLContinue without SASL");
          try {
            fe.saslResponse(io.writer(), await scram.respond(utf8(buf, start + 4, end)));
          } catch (e) {
            throw new ConnectionError("AUTH_FAILED", (e as Error).message, { cause: e });
          }
          if (io.serverVerified) io.ride();
          await io.flush();
        } else if (code === Auth.SASLFinal) {
          if (scram === null) throw violation("SASLFinal without SASL");
          try {
            scram.verify(utf8(buf, start + 4, end));
          } catch (e) {
            const message = e instanceof ScramError ? e.message : String(e);
            throw new ConnectionError("AUTH_FAILED", message, { cause: e });
          }
          scram = null;
          if (!io.serverVerified) {
            // The server proved it knows the password: now queries may go.
            io.ride();
            await io.flush();
          }
        } else {
          const names: Record<number, string> = { 2: "Kerberos V5", 7: "GSSAPI", 9: "SSPI" };
          throw new ConnectionError(
            "AUTH_UNSUPPORTED",
            `the server requires ${
              names[code] ?? `authentication method ${code}`
            }, which pgpipe does not support`,
          );
        }
        break;
      }
      case Backend.ErrorResponse:
        throw new PostgresError(fields(buf, start, end));
      case Backend.NoticeResponse:
        io.notice(fields(buf, start, end));
        break;
      case Backend.ParameterStatus: {
        const a = cstrEnd(buf, start, end);
        io.parameter(utf8(buf, start, a), utf8(buf, a + 1, cstrEnd(buf, a + 1, end)));
        break;
      }
      case Backend.BackendKeyData: {
        const keyLength = end - start - 4;
        // 3.0 has a 4-byte key; 3.2 lets it grow (PostgreSQL 18 sends 32 bytes).
        if (result.minor < 2 ? keyLength !== 4 : keyLength < 4 || keyLength > MAX_CANCEL_KEY) {
          throw violation(
            `BackendKeyData with a ${keyLength}-byte key under protocol 3.${result.minor}`,
          );
        }
        result.pid = i32(buf, start);
        result.secret = i32(buf, start + 4);
        result.key = buf.slice(start + 4, end);
        break;
      }
      case Backend.NegotiateProtocolVersion:
        result.minor = negotiate(buf, start, end, result.minor, negotiated);
        negotiated = true;
        break;
      case Backend.ReadyForQuery:
        if (!authenticated) throw violation("ReadyForQuery before authentication");
        return result;
      default:
        throw violation(`unexpected message ${String.fromCharCode(type)} during startup`);
    }
  }
}
