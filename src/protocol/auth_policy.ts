/**
 * What the client lets a server authenticate it with: libpq's `require_auth` (16) and
 * `channel_binding` (13). Checked before anything secret is sent, so a server that is not the
 * one the user meant, asking for a weaker method, learns nothing.
 */

/** The authentication methods `require_auth` names (libpq 18). */
const AUTH_METHODS = [
  "password",
  "md5",
  "scram-sha-256",
  "gss",
  "sspi",
  "oauth",
  "none",
] as const;

/** One of libpq's authentication method names; `none` is a server that asks for nothing. */
export type AuthMethod = typeof AUTH_METHODS[number];

/** The methods pgpipe can answer (the others fail with AUTH_UNSUPPORTED when asked). */
const ANSWERABLE: readonly AuthMethod[] = ["password", "md5", "scram-sha-256", "none"];

/** `require_auth` as given and the methods it allows. */
export interface RequireAuth {
  /** The setting's text, for error messages. */
  text: string;
  allowed: ReadonlySet<AuthMethod>;
}

/**
 * libpq's `channel_binding`: `disable` never binds; `prefer` binds (SCRAM-SHA-256-PLUS) when the
 * connection is TLS, the server offers it and the TLS path can show the server's certificate;
 * `require` refuses any authentication that is not SCRAM bound to this TLS connection.
 */
export type ChannelBindingMode = "disable" | "prefer" | "require";

/**
 * Reads `require_auth`: a comma-separated list of methods the server may use, or of methods it
 * may not (each with a leading `!`), never both; throws a TypeError naming what is wrong.
 */
export function parseRequireAuth(text: string): RequireAuth {
  const names = text.split(",").map((name) => name.trim());
  const negated = names[0]?.startsWith("!") ?? false;
  const listed = new Set<AuthMethod>();
  for (const name of names) {
    if (name.startsWith("!") !== negated) {
      throw new TypeError(
        `invalid require_auth "${text}": methods and negated methods (!method) cannot be mixed`,
      );
    }
    const method = negated ? name.slice(1) : name;
    if (!(AUTH_METHODS as readonly string[]).includes(method)) {
      throw new TypeError(
        `invalid require_auth "${text}": "${method}" is not one of ${AUTH_METHODS.join(", ")}`,
      );
    }
    if (listed.has(method as AuthMethod)) {
      throw new TypeError(`invalid require_auth "${text}": "${method}" is listed twice`);
    }
    listed.add(method as AuthMethod);
  }
  const allowed = negated ? new Set(AUTH_METHODS.filter((m) => !listed.has(m))) : listed;
  if (!ANSWERABLE.some((m) => allowed.has(m))) {
    throw new TypeError(
      `require_auth=${text} allows only methods pgpipe does not have (GSSAPI, SSPI, OAuth): ` +
        "no server could be answered",
    );
  }
  return { text, allowed };
}
