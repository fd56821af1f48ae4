/**
 * The startup of a stream over PGlite. PGlite answers a StartupMessage as a trust server does
 * (AuthenticationOk, ParameterStatus, BackendKeyData, ReadyForQuery) but applies none of its
 * parameters: its one session's database and role were fixed when it started. So the stream
 * sets the parameters itself (`set_config`, as a server applies them at startup) and checks the
 * database and role asked for against the session's, before it answers: a setting the server
 * refuses, or another database, fails the startup with a FATAL error, as a server's would.
 */
import { Backend, cstrEnd, fields, i16, i32, utf8 } from "../protocol/backend.ts";
import { Writer } from "../protocol/writer.ts";
import { concat, eachMessage } from "./frames.ts";

/** The startup packet's request code and, for a StartupMessage, its parameters. */
export function readStartup(packet: Uint8Array): { code: number; params: Map<string, string> } {
  const code = i32(packet, 4);
  const params = new Map<string, string>();
  if (code >> 16 !== 3) return { code, params };
  let at = 8;
  while (at < packet.length && packet[at] !== 0) {
    const keyEnd = cstrEnd(packet, at, packet.length);
    const valueEnd = cstrEnd(packet, keyEnd + 1, packet.length);
    params.set(utf8(packet, at, keyEnd), utf8(packet, keyEnd + 1, valueEnd));
    at = valueEnd + 1;
  }
  return { code, params };
}

const literal = (s: string) => `'${s.replaceAll("'", "''")}'`;

/**
 * The query that applies every startup parameter but `user` and `database` and then reports
 * the session's database and roles (in one implicit transaction: a refused setting undoes the
 * others).
 */
export function settingsQuery(params: Map<string, string>): string {
  const sets: string[] = [];
  for (const [name, value] of params) {
    if (name === "user" || name === "database") continue;
    sets.push(`pg_catalog.set_config(${literal(name)}, ${literal(value)}, false)`);
  }
  const report =
    "select pg_catalog.current_database()::text, session_user::text, current_user::text";
  return sets.length === 0 ? report : `select ${sets.join(", ")}; ${report}`;
}

/** An ErrorResponse of severity FATAL with `fields` (S and V replaced). */
function fatal(f: Record<string, string>): Uint8Array {
  const w = new Writer(256);
  w.begin(Backend.ErrorResponse);
  for (const [code, value] of Object.entries({ ...f, S: "FATAL", V: "FATAL" })) {
    w.u8(code.charCodeAt(0)).cstr(value);
  }
  w.u8(0).end();
  return w.buf.slice(0, w.length);
}

/** The values of the DataRow in `buf[start, end)`, as text (null for NULL). */
function rowValues(buf: Uint8Array, start: number, end: number): (string | null)[] {
  const values: (string | null)[] = [];
  let at = start + 2;
  for (let i = 0, n = i16(buf, start); i < n && at <= end; i++) {
    const length = i32(buf, at);
    at += 4;
    values.push(length < 0 ? null : utf8(buf, at, at + length));
    if (length > 0) at += length;
  }
  return values;
}

/**
 * The answer the client gets: PGlite's own (`started`), with the ParameterStatus messages the
 * settings query produced before its BackendKeyData; or AuthenticationOk and a FATAL error when
 * a setting was refused or the database or role is not the session's. `failed` tells which.
 */
export function startupAnswer(
  started: Uint8Array,
  settings: Uint8Array,
  params: Map<string, string>,
): { answer: Uint8Array; failed: boolean } {
  const head: Uint8Array[] = [];
  const tail: Uint8Array[] = [];
  eachMessage(started, (type, start, end) => {
    (type === Backend.BackendKeyData || type === Backend.ReadyForQuery ? tail : head)
      .push(started.subarray(start - 5, end));
  });
  const reported: Uint8Array[] = [];
  let error: Record<string, string> | null = null;
  let identity: (string | null)[] = [];
  eachMessage(settings, (type, start, end) => {
    if (type === Backend.ParameterStatus) reported.push(settings.subarray(start - 5, end));
    else if (type === Backend.ErrorResponse) error ??= fields(settings, start, end);
    else if (type === Backend.DataRow) identity = rowValues(settings, start, end);
  });
  const [database, sessionUser, currentUser] = identity;
  const askedDatabase = params.get("database");
  const askedUser = params.get("user");
  if (error === null && askedDatabase !== undefined && askedDatabase !== database) {
    error = {
      C: "3D000",
      M: `database "${askedDatabase}" is not this PGlite's: its one session is on "${database}"`,
      H: "leave the database option out, or name the session's",
    };
  }
  if (
    error === null && askedUser !== undefined && askedUser !== sessionUser &&
    askedUser !== currentUser
  ) {
    error = {
      C: "28000",
      M: `role "${askedUser}" is not this PGlite session's: it runs as "${currentUser}"`,
      H: "leave the user option out, or name the session's",
    };
  }
  if (error !== null) {
    const ok = head.find((m) => m[0] === Backend.Authentication);
    return { answer: concat([...(ok ? [ok] : []), fatal(error)]), failed: true };
  }
  return { answer: concat([...head, ...reported, ...tail]), failed: false };
}
