/**
 * The startup conversation: StartupMessage, authentication (authentication.ts answers the
 * server's requests under the client's policy), then ParameterStatus and BackendKeyData until
 * ReadyForQuery.
 *
 * Queries need not wait for ReadyForQuery: the server reads them only after it, so they may ride
 * in the same write as the last authentication message (`AuthIO.ride`).
 */
import { Auth, Backend, cstrEnd, fields, i32, readyStatus, utf8 } from "../protocol/backend.ts";
import * as fe from "../protocol/frontend.ts";
import { ConnectionError, PostgresError } from "../errors.ts";
import {
  Authenticator,
  type AuthIO,
  type AuthPolicy,
  type PasswordSource,
} from "./authentication.ts";

export type { PasswordSource };

/** What the startup exchange needs from the connection. */
export interface StartupIO extends AuthIO {
  /** Waits for the next message; its body is `buf[start, end)`. */
  next(): Promise<{ type: number; buf: Uint8Array; start: number; end: number }>;
  /** A ParameterStatus arrived. */
  parameter(name: string, value: string): void;
  /** A NoticeResponse arrived. */
  notice(fields: Record<string, string>): void;
  /** AuthenticationOk arrived: the server accepted the credentials. */
  authenticated(): void;
}

/** The protocol versions to ask for and accept, and the authentication policy. */
export interface StartupOptions {
  /** The minor version to ask for: 0 (3.0) or 2 (3.2), `max_protocol_version`. */
  minor?: number;
  /** The lowest minor version the server may answer with, `min_protocol_version`. */
  minMinor?: number;
  /** `require_auth`, `channel_binding` and SCRAM keys. */
  auth?: AuthPolicy;
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
  lowest: number,
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
  if (minor < lowest) {
    throw new ConnectionError(
      "PROTOCOL_VIOLATION",
      `the server speaks protocol 3.${minor}, below min_protocol_version 3.${lowest}`,
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
  options: StartupOptions = {},
): Promise<StartupResult> {
  const minor = options.minor ?? 0;
  fe.startup(io.writer(), params, minor);
  await io.flush();
  const auth = new Authenticator(io, params.user, password, options.auth);
  let authenticated = false;
  let negotiated = false;
  let keyed = false;
  const result: StartupResult = { pid: 0, secret: 0, key: new Uint8Array(4), minor };
  for (;;) {
    const { type, buf, start, end } = await io.next();
    switch (type) {
      case Backend.Authentication: {
        if (end - start < 4) throw violation("Authentication message is truncated");
        if (authenticated) throw violation("authentication request after authentication succeeded");
        const code = i32(buf, start);
        if (code === Auth.Ok) {
          auth.ok();
          authenticated = true;
          io.authenticated();
        } else await auth.request(code, buf, start, end);
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
        // Sent once per session.
        if (keyed) throw violation("BackendKeyData sent twice");
        keyed = true;
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
        result.minor = negotiate(buf, start, end, result.minor, options.minMinor ?? 0, negotiated);
        negotiated = true;
        break;
      case Backend.ReadyForQuery: {
        if (!authenticated) throw violation("ReadyForQuery before authentication");
        readyStatus(buf, start, end);
        return result;
      }
      default:
        throw violation(`unexpected message ${String.fromCharCode(type)} during startup`);
    }
  }
}
