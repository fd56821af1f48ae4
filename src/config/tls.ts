/**
 * The TLS keywords: `sslmode` (the `ssl` option: a mode, a boolean, or a mode with CA
 * certificates), `sslrootcert` and `sslnegotiation`, and the rules that tie them together.
 */
import type { SslMode, SslNegotiation } from "../connection/transport/transport.ts";
import type { SslOption } from "./options.ts";

/** The sslmode and the CA certificates given with it (the `ssl` option's `ca`). */
export interface SslSetting {
  mode: SslMode;
  ca?: string[];
}

/** The TLS settings a connection needs. */
export interface TlsSettings {
  sslmode: SslMode;
  /** The CA certificates to trust, when not the default roots. */
  ca?: string[];
  sslnegotiation: SslNegotiation;
}

const SSL_MODES: readonly SslMode[] = [
  "disable",
  "allow",
  "prefer",
  "require",
  "verify-ca",
  "verify-full",
];

/** The `ssl` option, or an sslmode's text: `true` is `require`, `false` is `disable`. */
export function parseSsl(value: SslOption | string): SslSetting {
  if (value === true) return { mode: "require" };
  if (value === false) return { mode: "disable" };
  if (typeof value === "string") {
    if (!SSL_MODES.includes(value as SslMode)) {
      throw new TypeError(`invalid sslmode "${value}": use one of ${SSL_MODES.join(", ")}`);
    }
    return { mode: value as SslMode };
  }
  const ca = value.ca === undefined ? undefined : Array.isArray(value.ca) ? value.ca : [value.ca];
  return { mode: value.mode ?? (ca ? "verify-full" : "require"), ca };
}

/**
 * The TLS settings from the three keywords: the `sslrootcert` file is read here (unless the `ssl`
 * option gave certificates), and `sslnegotiation=direct` is refused with a mode that may go plain.
 */
export function tlsSettings(
  ssl: SslSetting,
  rootCert: string | undefined,
  sslnegotiation: SslNegotiation,
): TlsSettings {
  let ca = ssl.ca;
  // As libpq: no file is read for a connection that never encrypts, and `system` means the
  // default roots (which the native TLS path trusts anyway).
  if (
    rootCert !== undefined && rootCert !== "system" && ca === undefined && ssl.mode !== "disable"
  ) {
    try {
      ca = [Deno.readTextFileSync(rootCert)];
    } catch (e) {
      const hint = e instanceof Deno.errors.NotCapable ? ` (grant --allow-read=${rootCert})` : "";
      throw new TypeError(`cannot read sslrootcert ${rootCert}: ${(e as Error).message}${hint}`);
    }
  }
  if (sslnegotiation === "direct" && !/^(require|verify-ca|verify-full)$/.test(ssl.mode)) {
    // libpq's rule: direct TLS never falls back to plain, so a mode that allows plain is refused.
    throw new TypeError(
      `sslnegotiation=direct needs sslmode require, verify-ca or verify-full, not ${ssl.mode}`,
    );
  }
  return { sslmode: ssl.mode, ca, sslnegotiation };
}
