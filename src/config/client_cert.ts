/**
 * The client certificate (libpq's `sslcert`, `sslkey`, `sslpassword`; postgres.js's `ssl.cert`,
 * `ssl.key`, `ssl.passphrase`): each a file or its PEM text (Deno Deploy has no files), else
 * libpq's default files `~/.postgresql/postgresql.crt` and `.key`, found as libpq finds them: no
 * certificate file means no certificate, and a certificate takes the default key when `sslkey` is
 * not given. The key may be
 * PKCS#1, SEC1 or PKCS#8, encrypted or not; it is decrypted here, checked against the
 * certificate, and handed on as unencrypted PKCS#8 PEM, so a wrong passphrase or a mismatched
 * pair fails `postgres()` instead of a handshake. No error quotes the key or the passphrase.
 */
import type * as crypto from "node:crypto";
import { cryptoModule } from "../builtins.ts";
import { env } from "./environment.ts";

/** A client certificate chain and its private key, as PEM. */
export interface ClientCertificate {
  cert: string;
  /** Unencrypted PKCS#8. */
  key: string;
}

/** libpq's folder of default TLS files: `~/.postgresql` (undefined without HOME). */
export function postgresqlDir(): string | undefined {
  const home = env("HOME");
  return home ? `${home}/.postgresql` : undefined;
}

/**
 * Whether a keyword's value is PEM text rather than a file name: it holds a PEM header anywhere
 * (openssl's exports may start with "Bag Attributes" lines, an editor's with a byte-order mark).
 */
function isPem(value: string): boolean {
  return value.includes("-----BEGIN ");
}

/**
 * Whether a value that is not PEM may be quoted as a file name in an error: not when it could be
 * a key's text in another form (several lines, or longer than a file name), which must not be.
 */
function quotable(value: string): boolean {
  return value.length <= 255 && !/[\r\n]/.test(value);
}

/** Why a file could not be read, naming it when it may be named. */
function unreadable(keyword: string, path: string, e: unknown): TypeError {
  if (!quotable(path)) {
    return new TypeError(
      `${keyword} is neither PEM text nor the name of a readable file (${(e as Error).name})`,
    );
  }
  const hint = e instanceof Deno.errors.NotCapable ? ` (grant --allow-read=${path})` : "";
  return new TypeError(`cannot read ${keyword} ${path}: ${(e as Error).message}${hint}`);
}

/** A keyword's PEM: its text as it is, or the file it names read now. */
export function readPem(value: string, keyword: string): string {
  if (isPem(value)) return value;
  try {
    return Deno.readTextFileSync(value);
  } catch (e) {
    throw unreadable(keyword, value, e);
  }
}

/**
 * libpq's rule for a key file: no access for group or others (0600 or less), or, owned by root,
 * read for the group at most (0640 or less).
 */
function checkKeyFile(path: string): void {
  let info: Deno.FileInfo;
  try {
    info = Deno.statSync(path);
  } catch (e) {
    throw unreadable("sslkey", path, e);
  }
  if (info.mode === null) return; // no such permissions here (Windows)
  const allowed = info.uid === 0 ? 0o037 : 0o077;
  if ((info.mode & allowed) !== 0) {
    throw new TypeError(
      `private key file ${path} has group or world access; it must be u=rw (0600) or less, ` +
        "or u=rw,g=r (0640) or less if owned by root",
    );
  }
}

/**
 * Whether the certificate file `path` is there to be read. As in libpq, a file that does not exist
 * (nor a path through a file) means no certificate, since the server may not ask for one, while
 * one that cannot be looked at is an error; `defaulted`: libpq's default file, which counts as
 * absent without the permission to look.
 */
function certificateFileExists(path: string, defaulted: boolean): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound || e instanceof Deno.errors.NotADirectory) return false;
    if (defaulted && e instanceof Deno.errors.NotCapable) return false;
    throw unreadable("sslcert", path, e);
  }
}

/** The private key, decrypted with `passphrase` if it needs one, as unencrypted PKCS#8 PEM. */
function decryptKey(pem: string, passphrase: string | undefined): crypto.KeyObject {
  const encrypted = /-----BEGIN ENCRYPTED PRIVATE KEY-----|Proc-Type: *4,ENCRYPTED/.test(pem);
  if (encrypted && passphrase === undefined) {
    throw new TypeError("sslkey is encrypted: give its passphrase as sslpassword");
  }
  try {
    return cryptoModule().createPrivateKey({
      key: pem,
      format: "pem",
      ...(encrypted ? { passphrase } : {}),
    });
  } catch {
    throw new TypeError(
      encrypted
        ? "sslpassword does not decrypt sslkey"
        : "sslkey is not a PEM private key (PKCS#1, SEC1 or PKCS#8)",
    );
  }
}

/**
 * The client certificate to send, as libpq finds it: `sslcert` (a file or PEM text), else the
 * default `~/.postgresql/postgresql.crt`; none when that file does not exist (then `sslkey` is not
 * read either). Its key is `sslkey`, else the default `~/.postgresql/postgresql.key`, which must
 * exist once a certificate does. Empty values count as not given, as in libpq. Throws a TypeError
 * when a file cannot be read, the key is missing, badly protected, cannot be decrypted or does
 * not match.
 */
export function clientCertificate(
  sslcert: string | undefined,
  sslkey: string | undefined,
  sslpassword: string | undefined,
): ClientCertificate | undefined {
  const dir = postgresqlDir();
  const given = sslcert === "" ? undefined : sslcert;
  const certValue = given ?? (dir === undefined ? undefined : `${dir}/postgresql.crt`);
  if (certValue === undefined) return undefined; // no HOME: libpq goes on without one
  if (!isPem(certValue) && !certificateFileExists(certValue, given === undefined)) {
    return undefined;
  }
  const keyValue = sslkey === "" || sslkey === undefined
    ? (dir === undefined ? undefined : `${dir}/postgresql.key`)
    : sslkey;
  if (keyValue === undefined) {
    throw new TypeError(
      "sslcert is given without sslkey, and there is no ~/.postgresql/postgresql.key to use " +
        "instead (HOME is not set)",
    );
  }
  const certPem = readPem(certValue, "sslcert");
  if (!isPem(keyValue)) checkKeyFile(keyValue);
  const key = decryptKey(readPem(keyValue, "sslkey"), sslpassword);
  let certificate: crypto.X509Certificate;
  try {
    certificate = new (cryptoModule().X509Certificate)(certPem);
  } catch {
    throw new TypeError("sslcert is not a PEM certificate");
  }
  if (!certificate.checkPrivateKey(key)) {
    throw new TypeError("sslkey is not the private key of sslcert's certificate");
  }
  return { cert: certPem, key: key.export({ type: "pkcs8", format: "pem" }) as string };
}
