/**
 * Frontend (client to server) message encoders. Each appends one message to a
 * {@link Writer}; none allocates beyond the writer's own growth.
 */
import type { Writer } from "./writer.ts";

const PROTOCOL_VERSION = 196608; // 3.0
const SSL_REQUEST_CODE = 80877103;
const CANCEL_REQUEST_CODE = 80877102;

/**
 * StartupMessage: protocol 3.`minor` (3.0 unless asked; 3.2 since PostgreSQL 18) and the session
 * parameters (user, database, ...).
 */
export function startup(w: Writer, params: Record<string, string>, minor = 0): void {
  w.begin(0).i32(PROTOCOL_VERSION + minor);
  for (const key in params) w.cstr(key).cstr(params[key]);
  w.u8(0).end();
}

/** SSLRequest: asks the server whether it will speak TLS on this socket. */
export function sslRequest(w: Writer): void {
  w.begin(0).i32(SSL_REQUEST_CODE).end();
}

/** CancelRequest, sent on a fresh socket with the target's BackendKeyData (4 to 256 key bytes). */
export function cancelRequest(w: Writer, pid: number, key: Uint8Array): void {
  w.begin(0).i32(CANCEL_REQUEST_CODE).i32(pid).bytes(key).end();
}

/** PasswordMessage carrying a cleartext or MD5-hashed password. */
export function password(w: Writer, text: string): void {
  w.begin(0x70).cstr(text).end(); // 'p'
}

/** SASLInitialResponse: the chosen mechanism and the client-first message. */
export function saslInitialResponse(w: Writer, mechanism: string, data: string): void {
  w.begin(0x70).cstr(mechanism);
  const at = w.length;
  w.i32(0);
  w.setI32(at, w.str(data));
  w.end();
}

/** SASLResponse: a later SASL message (the client-final message for SCRAM). */
export function saslResponse(w: Writer, data: string): void {
  w.begin(0x70);
  w.str(data);
  w.end();
}

/** Query: the simple protocol; may hold several statements. */
export function query(w: Writer, text: string): void {
  w.begin(0x51).cstr(text).end(); // 'Q'
}

/** Parse: prepares `text` as statement `name` ("" is the unnamed statement). */
export function parse(w: Writer, name: string, text: string, types: readonly number[]): void {
  w.begin(0x50).cstr(name).cstr(text).i16(types.length); // 'P'
  for (let i = 0; i < types.length; i++) w.i32(types[i]);
  w.end();
}

/**
 * Bind: binds text-format parameters to the unnamed portal. `null` is SQL NULL.
 * `resultFormats` is empty (all text) or one format code per result column.
 */
export function bind(
  w: Writer,
  statement: string,
  values: readonly (string | null)[],
  resultFormats: readonly number[],
): void {
  w.begin(0x42).u8(0).cstr(statement).i16(0).i16(values.length); // 'B', unnamed portal
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === null) {
      w.i32(-1);
      continue;
    }
    const at = w.length;
    w.i32(0);
    w.setI32(at, w.str(v));
  }
  w.i16(resultFormats.length);
  for (let i = 0; i < resultFormats.length; i++) w.i16(resultFormats[i]);
  w.end();
}

/** Describe a prepared statement ('S') or a portal ('P'). */
export function describe(w: Writer, kind: "S" | "P", name: string): void {
  w.begin(0x44).u8(kind.charCodeAt(0)).cstr(name).end(); // 'D'
}

/** Execute the named portal, returning at most `maxRows` rows (0: all). */
export function execute(w: Writer, portal: string, maxRows: number): void {
  w.begin(0x45).cstr(portal).i32(maxRows).end(); // 'E'
}

/** Close a prepared statement ('S') or a portal ('P'). */
export function close(w: Writer, kind: "S" | "P", name: string): void {
  w.begin(0x43).u8(kind.charCodeAt(0)).cstr(name).end(); // 'C'
}

/** Sync: ends a pipeline segment; the server answers ReadyForQuery. */
export function sync(w: Writer): void {
  w.begin(0x53).end(); // 'S'
}

/** Flush: asks the server to send what it has without ending the segment. */
export function flush(w: Writer): void {
  w.begin(0x48).end(); // 'H'
}

/** Terminate: a polite goodbye before closing the socket. */
export function terminate(w: Writer): void {
  w.begin(0x58).end(); // 'X'
}

/** CopyData: a chunk of COPY FROM STDIN input. */
export function copyData(w: Writer, data: Uint8Array): void {
  w.begin(0x64).bytes(data).end(); // 'd'
}

/** CopyDone: the end of COPY FROM STDIN input. */
export function copyDone(w: Writer): void {
  w.begin(0x63).end(); // 'c'
}

/** CopyFail: aborts COPY FROM STDIN with a reason. */
export function copyFail(w: Writer, reason: string): void {
  w.begin(0x66).cstr(reason).end(); // 'f'
}
