/**
 * The `embedded` option: a server inside this process (PGlite) instead of a host. What has no
 * meaning there is refused here, at `postgres()`, with a QueryError (`EMBEDDED_UNSUPPORTED`)
 * that says why, rather than being ignored or left to hang: several connections, TLS and its
 * files, a host, port, socket, address or service, a URL, and `query_timeout` (which works by
 * sending a CancelRequest).
 */
import { QueryError } from "../errors.ts";
import type { EmbeddedServer } from "../connection/transport/embedded.ts";
import type { Options, ResolvedOptions } from "./options.ts";

/** The code of every refusal of an option that has no meaning with an embedded server. */
export const EMBEDDED_UNSUPPORTED = "EMBEDDED_UNSUPPORTED";

function refuse(name: string, why: string): never {
  throw new QueryError(EMBEDDED_UNSUPPORTED, `${name} cannot be used with ${why}`);
}

/** Checks that `value` has an embedded server's shape. */
function checkServer(value: unknown): EmbeddedServer {
  const server = value as Partial<EmbeddedServer> | null;
  if (
    typeof server !== "object" || server === null || typeof server.connect !== "function" ||
    typeof server.name !== "string" ||
    (server.end !== undefined && typeof server.end !== "function")
  ) {
    throw new TypeError(
      "the embedded option must be an EmbeddedServer ({ name, connect() }), such as " +
        "pglite() from jsr:@pgpipe/pgpipe/pglite returns",
    );
  }
  return server as EmbeddedServer;
}

/**
 * The resolved options for a client over an embedded server: one host (the server's name, port
 * 0), no TLS (`PGSSLMODE` and the other connection variables do not apply), one connection, and
 * connections that are never retired for age (a new one would start a fresh session for
 * nothing). Throws for an option that cannot apply.
 */
export function embeddedOptions(
  resolved: ResolvedOptions,
  options: Options,
  url: string | undefined,
): ResolvedOptions {
  const server = checkServer(options.embedded);
  const what = `an embedded server (${server.name})`;
  if (url !== undefined) refuse("a connection URL", what);
  for (
    const key of [
      "host",
      "port",
      "path",
      "socket",
      "hostaddr",
      "service",
      "sslrootcert",
      "sslcert",
      "sslkey",
    ] as const
  ) {
    if (options[key] !== undefined) refuse(`the ${key} option`, what);
  }
  if (/^(require|verify-ca|verify-full)$/.test(resolved.sslmode) && options.ssl !== undefined) {
    refuse(`ssl ${resolved.sslmode}`, `${what}: there is no network to encrypt`);
  }
  if (options.sslnegotiation === "direct") refuse("sslnegotiation=direct", what);
  if (options.max !== undefined && options.max !== 1) {
    refuse(`max ${options.max}`, `${what}: it serves one session, so a client has one connection`);
  }
  if (options.query_timeout !== undefined && options.query_timeout > 0) {
    refuse(
      "query_timeout",
      `${what}: a query runs inside this process until it completes, and there is no second ` +
        "channel to cancel it on",
    );
  }
  const first = resolved.hosts[0];
  return {
    ...resolved,
    host: server.name,
    port: 0,
    hosts: [{ host: server.name, port: 0, password: first.password }],
    sslmode: "disable",
    ca: undefined,
    sslnegotiation: "postgres",
    // PGREQUIREAUTH and PGCHANNELBINDING are about a server on a network: only what the options
    // ask for applies (against a session that asks for no authentication at all).
    auth: {
      ...(options.require_auth !== undefined ? { requireAuth: resolved.auth.requireAuth } : {}),
      ...(options.channel_binding !== undefined
        ? { channelBinding: resolved.auth.channelBinding }
        : {}),
    },
    max: 1,
    maxLifetime: options.max_lifetime === undefined ? 0 : resolved.maxLifetime,
    socket: undefined,
    embedded: server,
  };
}
