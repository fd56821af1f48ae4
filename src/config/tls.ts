/**
 * The TLS keywords: `sslmode` (the `ssl` option: a mode, a boolean, or postgres.js's object of
 * node:tls options), `sslrootcert`, `sslnegotiation`, the client certificate (client_cert.ts),
 * `sslsni` and the protocol version bounds, and the rules that tie them together. Files are read
 * here, in `postgres()`, so a missing or unreadable one fails at once.
 */
import { cryptoModule } from "../builtins.ts";
import type { SslMode, SslNegotiation } from "../connection/transport/transport.ts";
import {
  type ClientCertificate,
  clientCertificate,
  postgresqlDir,
  readPem,
} from "./client_cert.ts";
import { TLS_VERSIONS, type TlsVersion } from "./values.ts";

/** The `ssl` option as an object, its values as strings. */
export interface SslObject {
  mode?: SslMode;
  ca?: string[];
  cert?: string;
  key?: string;
  passphrase?: string;
  rejectUnauthorized?: boolean;
  servername?: string;
  minVersion?: string;
  maxVersion?: string;
}

/** The sslmode and what the `ssl` option's object gives with it. */
export interface SslSetting {
  mode: SslMode;
  ca?: string[];
  /** The `ssl` object's `servername`: the name TLS verifies and sends (SNI). */
  servername?: string;
}

/** The TLS versions both of pgpipe's TLS paths speak. */
export type SpokenTlsVersion = "TLSv1.2" | "TLSv1.3";

/** The TLS settings a connection needs. */
export interface TlsSettings {
  sslmode: SslMode;
  /** The CA certificates to trust, when not the default roots. */
  ca?: string[];
  sslnegotiation: SslNegotiation;
  /** The client certificate and its key (PEM, decrypted), when one is to be sent. */
  clientCertificate?: ClientCertificate;
  /** The name TLS verifies and sends as SNI, when not the host's (the `ssl` object's `servername`). */
  servername?: string;
  /** Whether to send the host name as SNI (libpq's `sslsni`). */
  sni: boolean;
  /** The TLS versions allowed, lowest and highest. */
  minVersion: SpokenTlsVersion;
  maxVersion: SpokenTlsVersion;
}

const SSL_MODES: readonly SslMode[] = [
  "disable",
  "allow",
  "prefer",
  "require",
  "verify-ca",
  "verify-full",
];

/** The `ssl` object's keys pgpipe honours; any other is refused, never ignored. */
const SSL_KEYS = new Set([
  "mode",
  "ca",
  "cert",
  "key",
  "passphrase",
  "rejectUnauthorized",
  "servername",
  "minVersion",
  "maxVersion",
]);

function checkMode(value: unknown, what: string): SslMode {
  if (!SSL_MODES.includes(value as SslMode)) {
    throw new TypeError(
      `invalid ${what} ${JSON.stringify(value)}: use one of ${SSL_MODES.join(", ")}`,
    );
  }
  return value as SslMode;
}

/** A PEM value of the `ssl` object: a string, or bytes (a Buffer from readFileSync). */
function pemText(value: unknown, key: string): string {
  if (typeof value === "string") return value;
  if (value instanceof Uint8Array) return new TextDecoder().decode(value);
  throw new TypeError(`ssl.${key} must be PEM text (a string or bytes); got ${typeof value}`);
}

function optionalString(value: unknown, key: string): string | undefined {
  if (value === undefined || typeof value === "string") return value;
  throw new TypeError(`ssl.${key} must be a string; got ${typeof value}`);
}

/**
 * The `ssl` option's object with its values checked, or undefined when the option is not an
 * object. A key pgpipe cannot honour (`ciphers`, `checkServerIdentity`, ...) is refused.
 */
export function sslObject(value: unknown): SslObject | undefined {
  // Five keywords ask this of every client: the checks below are compiled only for an object.
  return typeof value === "object" && value !== null ? checkedSslObject(value) : undefined;
}

/** The `ssl` option's object with its values checked (see {@link sslObject}). */
function checkedSslObject(value: object): SslObject {
  for (const key of Object.keys(value)) {
    if (!SSL_KEYS.has(key)) {
      throw new TypeError(
        `ssl.${key} is not supported: the ssl option takes ${[...SSL_KEYS].join(", ")}`,
      );
    }
  }
  const o = value as Record<string, unknown>;
  const ca = o.ca === undefined
    ? undefined
    : (Array.isArray(o.ca) ? o.ca : [o.ca]).map((c) => pemText(c, "ca"));
  if (o.rejectUnauthorized !== undefined && typeof o.rejectUnauthorized !== "boolean") {
    throw new TypeError(
      `ssl.rejectUnauthorized must be a boolean; got ${typeof o.rejectUnauthorized}`,
    );
  }
  return {
    ...(o.mode !== undefined ? { mode: checkMode(o.mode, "ssl.mode") } : {}),
    ...(ca !== undefined ? { ca } : {}),
    ...(o.cert !== undefined ? { cert: pemText(o.cert, "cert") } : {}),
    ...(o.key !== undefined ? { key: pemText(o.key, "key") } : {}),
    ...(o.passphrase !== undefined
      ? { passphrase: optionalString(o.passphrase, "passphrase") }
      : {}),
    ...(o.rejectUnauthorized !== undefined ? { rejectUnauthorized: o.rejectUnauthorized } : {}),
    ...(o.servername !== undefined
      ? { servername: optionalString(o.servername, "servername") }
      : {}),
    ...(o.minVersion !== undefined
      ? { minVersion: optionalString(o.minVersion, "minVersion") }
      : {}),
    ...(o.maxVersion !== undefined
      ? { maxVersion: optionalString(o.maxVersion, "maxVersion") }
      : {}),
  };
}

/**
 * The `ssl` option, or an sslmode's text: `true` is `require`, `false` is `disable`. An object
 * without a `mode` verifies the server fully, as node:tls does for postgres.js, unless its
 * `rejectUnauthorized` is false (then `require`).
 */
export function parseSsl(value: unknown): SslSetting {
  if (value === true) return { mode: "require" };
  if (value === false) return { mode: "disable" };
  if (typeof value === "string") return { mode: checkMode(value, "sslmode") };
  if (typeof value !== "object" || value === null) {
    throw new TypeError(`ssl must be a boolean, an sslmode or an object; got ${typeof value}`);
  }
  const o = sslObject(value)!;
  const verifying = o.mode === "verify-ca" || o.mode === "verify-full";
  if (o.rejectUnauthorized === false && verifying) {
    throw new TypeError(`ssl.rejectUnauthorized false contradicts ssl.mode ${o.mode}`);
  }
  if (o.rejectUnauthorized === true && o.mode !== undefined && !verifying) {
    throw new TypeError(
      `ssl.rejectUnauthorized true contradicts ssl.mode ${o.mode} (use verify-ca or verify-full)`,
    );
  }
  const mode = o.mode ?? (o.rejectUnauthorized === false ? "require" : "verify-full");
  return {
    mode,
    ...(o.ca !== undefined ? { ca: o.ca } : {}),
    ...(o.servername !== undefined ? { servername: o.servername } : {}),
  };
}

/** What tlsSettings reads. */
export interface TlsKeywords {
  /** Undefined when no source gives one (see {@link sslSetting}). */
  sslmode?: SslSetting;
  sslrootcert?: string;
  sslnegotiation: SslNegotiation;
  sslcert?: string;
  sslkey?: string;
  sslpassword?: string;
  sslcertmode: "disable" | "allow";
  sslsni: boolean;
  ssl_min_protocol_version: TlsVersion;
  ssl_max_protocol_version?: TlsVersion;
}

/**
 * `pems` with every certificate in them parsed, so a file or text that holds none, or a broken
 * one, fails `postgres()` instead of every handshake.
 */
function checkCertificates(pems: string[], what: string): string[] {
  for (const pem of pems) {
    const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g);
    if (blocks === null) throw new TypeError(`${what} holds no PEM certificate`);
    for (const block of blocks) {
      try {
        new (cryptoModule().X509Certificate)(block);
      } catch {
        throw new TypeError(`${what} holds a certificate that cannot be read`);
      }
    }
  }
  return pems;
}

/**
 * The sslmode in force. libpq's rule for `sslrootcert=system` (16): its default sslmode is
 * `verify-full`, and a weaker one is refused, since anyone can get a publicly trusted certificate
 * for a name of their own (so a chain to the system roots alone proves nothing). It does not
 * apply when the `ssl` object's `ca` replaces `sslrootcert`.
 */
function sslSetting(k: TlsKeywords): SslSetting {
  const system = k.sslrootcert === "system" && k.sslmode?.ca === undefined;
  if (k.sslmode === undefined) return { mode: system ? "verify-full" : "prefer" };
  if (system && k.sslmode.mode !== "verify-full") {
    throw new TypeError(
      `sslmode=${k.sslmode.mode} may not be used with sslrootcert=system: use verify-full ` +
        "(a publicly trusted certificate proves nothing unless it names the host)",
    );
  }
  return k.sslmode;
}

/**
 * The trusted CAs: the `ssl` object's, else `sslrootcert`'s (a file, PEM text or `system`), else
 * libpq's default `~/.postgresql/root.crt` when it exists. Whichever it is (but `system`), libpq
 * also checks the server's certificate against `~/.postgresql/root.crl` when that exists (see
 * {@link refuseRevocationList}).
 */
function rootCertificates(k: TlsKeywords & { sslmode: SslSetting }): string[] | undefined {
  if (k.sslmode.ca !== undefined) {
    return refuseRevocationList(checkCertificates(k.sslmode.ca, "ssl.ca"), "ssl.ca");
  }
  // As libpq: `system` means the default roots (which the native TLS path trusts anyway), and
  // with them libpq loads no revocation list.
  if (k.sslrootcert === "system") return undefined;
  // An empty sslrootcert is not given, as in libpq.
  if (k.sslrootcert !== undefined && k.sslrootcert !== "") {
    const ca = checkCertificates([readPem(k.sslrootcert, "sslrootcert")], "sslrootcert");
    return refuseRevocationList(ca, "sslrootcert");
  }
  const dir = postgresqlDir();
  const root = dir === undefined ? undefined : `${dir}/root.crt`;
  if (root === undefined || !exists(root)) return undefined;
  return refuseRevocationList(checkCertificates([readPem(root, "sslrootcert")], root), root);
}

/**
 * `ca` as it is, unless libpq's default revocation list `~/.postgresql/root.crl` exists: libpq
 * checks the server's certificate against it whenever it verifies with a root certificate file
 * (given or its default; `sslcrl` and `sslcrldir`, which would replace it, are refused here, and
 * an empty one means the default, as in libpq), and neither TLS path can check a revocation
 * list. So a certificate libpq would refuse as revoked could pass: the client is refused instead.
 */
function refuseRevocationList(ca: string[], source: string): string[] {
  const dir = postgresqlDir();
  const crl = dir === undefined ? undefined : `${dir}/root.crl`;
  if (crl === undefined || !exists(crl)) return ca;
  throw new TypeError(
    `${crl} exists: libpq checks the server's certificate against that revocation list when it ` +
      `verifies it with a root certificate (here ${source}), and pgpipe cannot check ` +
      "revocation lists. To connect without the check, remove or rename that file (libpq then " +
      "checks none either)",
  );
}

/** Whether a file exists (false without the permission to look). */
function exists(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}

/** The TLS version bounds: both TLS paths speak 1.2 and 1.3, so lower minimums mean 1.2. */
function versions(
  min: TlsVersion,
  max: TlsVersion | undefined,
): { minVersion: SpokenTlsVersion; maxVersion: SpokenTlsVersion } {
  const rank = (v: TlsVersion) => TLS_VERSIONS.indexOf(v);
  if (max !== undefined && rank(max) < rank("TLSv1.2")) {
    throw new TypeError(
      `ssl_max_protocol_version=${max} is not supported: pgpipe's TLS paths speak TLS 1.2 and 1.3 only`,
    );
  }
  if (max !== undefined && rank(min) > rank(max)) {
    throw new TypeError(
      `invalid TLS version range: ssl_min_protocol_version ${min} is above ssl_max_protocol_version ${max}`,
    );
  }
  return {
    minVersion: min === "TLSv1.3" ? "TLSv1.3" : "TLSv1.2",
    maxVersion: max === "TLSv1.2" ? "TLSv1.2" : "TLSv1.3",
  };
}

/**
 * The TLS settings from the keywords. Nothing is read for a connection that never encrypts
 * (sslmode `disable`), as in libpq; `sslnegotiation=direct` is refused with a mode that may go
 * plain, and `sslrootcert=system` with a mode weaker than `verify-full`.
 */
export function tlsSettings(keywords: TlsKeywords): TlsSettings {
  const k = { ...keywords, sslmode: sslSetting(keywords) };
  const mode = k.sslmode.mode;
  if (k.sslnegotiation === "direct" && !/^(require|verify-ca|verify-full)$/.test(mode)) {
    // libpq's rule: direct TLS never falls back to plain, so a mode that allows plain is refused.
    throw new TypeError(
      `sslnegotiation=direct needs sslmode require, verify-ca or verify-full, not ${mode}`,
    );
  }
  const bounds = versions(k.ssl_min_protocol_version, k.ssl_max_protocol_version);
  const base = { sslmode: mode, sslnegotiation: k.sslnegotiation, sni: k.sslsni, ...bounds };
  if (mode === "disable") return base;
  const ca = rootCertificates(k);
  const certificate = k.sslcertmode === "disable"
    ? undefined
    : clientCertificate(k.sslcert, k.sslkey, k.sslpassword);
  return {
    ...base,
    ...(ca !== undefined ? { ca } : {}),
    ...(certificate !== undefined ? { clientCertificate: certificate } : {}),
    ...(k.sslmode.servername !== undefined ? { servername: k.sslmode.servername } : {}),
  };
}
