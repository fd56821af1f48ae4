// The test clusters' TLS certificates, made with WebCrypto alone (no openssl binary, so a machine
// with nothing but Deno runs the TLS cluster): a test CA, a server certificate for localhost and
// 127.0.0.1 and client certificates signed by it, and an unrelated CA. ECDSA P-256 keys, X.509
// v3 written as DER by the small encoder below. (certs.ts makes the rarer ones with openssl.)

/** A certificate and its PKCS#8 private key, as PEM. */
export interface CertPem {
  cert: string;
  key: string;
}

/** PEM texts: the CAs' certificates, the server's certificate and key, the clients'. */
export interface TestCerts<C extends string = string> {
  ca: string;
  otherCa: string;
  serverCert: string;
  serverKey: string;
  /** One per name asked for: a clientAuth certificate whose CN is the given user name. */
  clients: Record<C, CertPem>;
}

// ---------------------------------------------------------------------------------------------
// DER: tag, definite length, contents

function concat(parts: Uint8Array[]): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function tlv(tag: number, ...contents: Uint8Array[]): Uint8Array<ArrayBuffer> {
  const body = concat(contents);
  const n = body.length;
  const length = n < 0x80
    ? [n]
    : n < 0x100
    ? [0x81, n]
    : n < 0x10000
    ? [0x82, n >> 8, n & 0xff]
    : [0x83, n >> 16, (n >> 8) & 0xff, n & 0xff];
  return concat([Uint8Array.of(tag, ...length), body]);
}

const seq = (...items: Uint8Array[]) => tlv(0x30, ...items);
const set = (...items: Uint8Array[]) => tlv(0x31, ...items);
/** [n] EXPLICIT (constructed, context-specific). */
const explicit = (n: number, inner: Uint8Array) => tlv(0xa0 | n, inner);
const octets = (bytes: Uint8Array) => tlv(0x04, bytes);
const bool = (v: boolean) => tlv(0x01, Uint8Array.of(v ? 0xff : 0));
const utf8 = (s: string) => tlv(0x0c, new TextEncoder().encode(s));

/** An unsigned big-endian integer, minimal, with a zero byte before a set top bit. */
function integer(bytes: Uint8Array): Uint8Array {
  let i = 0;
  while (i < bytes.length - 1 && bytes[i] === 0) i++;
  const v = bytes.subarray(i);
  return tlv(0x02, v[0] & 0x80 ? concat([Uint8Array.of(0), v]) : v);
}

/** A BIT STRING: `bytes`, of whose last byte the low `unused` bits are not part of it. */
function bitString(bytes: Uint8Array, unused = 0): Uint8Array {
  return tlv(0x03, Uint8Array.of(unused), bytes);
}

function oid(dotted: string): Uint8Array {
  const [a, b, ...rest] = dotted.split(".").map(Number);
  const out = [a * 40 + b];
  for (const n of rest) {
    const base128 = [n & 0x7f];
    for (let v = n >>> 7; v > 0; v >>>= 7) base128.unshift((v & 0x7f) | 0x80);
    out.push(...base128);
  }
  return tlv(0x06, Uint8Array.from(out));
}

function utcTime(d: Date): Uint8Array {
  const two = (n: number) => String(n).padStart(2, "0");
  const text = two(d.getUTCFullYear() % 100) + two(d.getUTCMonth() + 1) + two(d.getUTCDate()) +
    two(d.getUTCHours()) + two(d.getUTCMinutes()) + two(d.getUTCSeconds()) + "Z";
  return tlv(0x17, new TextEncoder().encode(text));
}

// ---------------------------------------------------------------------------------------------
// X.509

const ECDSA = { name: "ECDSA", namedCurve: "P-256" } as const;
const SIGN = { name: "ECDSA", hash: "SHA-256" } as const;
/** AlgorithmIdentifier ecdsa-with-SHA256 (RFC 5758: no parameters). */
const ECDSA_SHA256 = seq(oid("1.2.840.10045.4.3.2"));

const name = (cn: string) => seq(set(seq(oid("2.5.4.3"), utf8(cn))));
const extension = (id: string, critical: boolean, value: Uint8Array) =>
  seq(oid(id), ...(critical ? [bool(true)] : []), octets(value));

/** ECDSA gives r || s (32 bytes each); X.509 wants SEQUENCE { INTEGER r, INTEGER s }. */
function derSignature(raw: Uint8Array): Uint8Array {
  return seq(integer(raw.subarray(0, 32)), integer(raw.subarray(32)));
}

/** The subjectPublicKey bits of an SPKI (after its algorithm), for the key identifier. */
async function keyId(spki: Uint8Array<ArrayBuffer>): Promise<Uint8Array> {
  // P-256 SPKI: 26 bytes of header, then the BIT STRING's 65-byte uncompressed point.
  return new Uint8Array(await crypto.subtle.digest("SHA-1", spki.subarray(spki.length - 65)));
}

interface Subject {
  cn: string;
  keys: CryptoKeyPair;
}

/** A certificate for `subject`, signed by `issuer` (itself when self-signed). */
async function certificate(
  subject: Subject,
  issuer: Subject,
  extensions: Uint8Array[],
): Promise<Uint8Array> {
  const spki = new Uint8Array(await crypto.subtle.exportKey("spki", subject.keys.publicKey));
  const now = Date.now();
  const tbs = seq(
    explicit(0, integer(Uint8Array.of(2))), // v3
    integer(Uint8Array.of(0x01, ...crypto.getRandomValues(new Uint8Array(8)))),
    ECDSA_SHA256,
    name(issuer.cn),
    seq(utcTime(new Date(now - 86_400_000)), utcTime(new Date(now + 3650 * 86_400_000))),
    name(subject.cn),
    spki,
    explicit(3, seq(...extensions)),
  );
  const raw = new Uint8Array(await crypto.subtle.sign(SIGN, issuer.keys.privateKey, tbs));
  return seq(tbs, ECDSA_SHA256, bitString(derSignature(raw)));
}

function pem(label: string, der: Uint8Array): string {
  const b64 = btoa(String.fromCharCode(...der)).replace(/.{64}/g, "$&\n").trimEnd();
  return `-----BEGIN ${label}-----\n${b64}\n-----END ${label}-----\n`;
}

async function newSubject(cn: string): Promise<Subject> {
  return { cn, keys: await crypto.subtle.generateKey(ECDSA, true, ["sign", "verify"]) };
}

async function caCertificate(ca: Subject): Promise<Uint8Array> {
  const spki = new Uint8Array(await crypto.subtle.exportKey("spki", ca.keys.publicKey));
  return certificate(ca, ca, [
    extension("2.5.29.19", true, seq(bool(true))), // basicConstraints: CA
    extension("2.5.29.15", true, bitString(Uint8Array.of(0x06), 1)), // keyCertSign, cRLSign
    extension("2.5.29.14", false, octets(await keyId(spki))), // subjectKeyIdentifier
  ]);
}

/**
 * A CA and a server certificate it signed (rustls refuses a self-signed leaf), for DNS localhost
 * and IP 127.0.0.1, a client certificate it signed per entry of `clientCns` (name → CN), and
 * another CA that signed nothing here.
 */
export async function makeTestCerts<C extends string>(
  clientCns: Readonly<Record<C, string>>,
): Promise<TestCerts<C>> {
  const [ca, other, server] = await Promise.all([
    newSubject("pgpipe test CA"),
    newSubject("pgpipe other CA"),
    newSubject("localhost"),
  ]);
  const caSpki = new Uint8Array(await crypto.subtle.exportKey("spki", ca.keys.publicKey));
  const serverSpki = new Uint8Array(await crypto.subtle.exportKey("spki", server.keys.publicKey));
  const san = seq(
    tlv(0x82, new TextEncoder().encode("localhost")), // [2] dNSName
    tlv(0x87, Uint8Array.of(127, 0, 0, 1)), // [7] iPAddress
  );
  const leaf = await certificate(server, ca, [
    extension("2.5.29.19", true, seq()), // basicConstraints: not a CA
    extension("2.5.29.15", true, bitString(Uint8Array.of(0x80), 7)), // digitalSignature
    extension("2.5.29.37", false, seq(oid("1.3.6.1.5.5.7.3.1"))), // extKeyUsage: serverAuth
    extension("2.5.29.17", false, san),
    extension("2.5.29.14", false, octets(await keyId(serverSpki))),
    extension("2.5.29.35", false, seq(tlv(0x80, await keyId(caSpki)))), // authorityKeyIdentifier
  ]);
  const clients = Object.fromEntries(
    await Promise.all(
      (Object.entries(clientCns) as [C, string][]).map(async ([name, cn]) => {
        const client = await newSubject(cn);
        const spki = new Uint8Array(await crypto.subtle.exportKey("spki", client.keys.publicKey));
        const cert = await certificate(client, ca, [
          extension("2.5.29.19", true, seq()),
          extension("2.5.29.15", true, bitString(Uint8Array.of(0x80), 7)), // digitalSignature
          extension("2.5.29.37", false, seq(oid("1.3.6.1.5.5.7.3.2"))), // extKeyUsage: clientAuth
          extension("2.5.29.14", false, octets(await keyId(spki))),
          extension("2.5.29.35", false, seq(tlv(0x80, await keyId(caSpki)))),
        ]);
        return [name, { cert: pem("CERTIFICATE", cert), key: await privateKey(client) }];
      }),
    ),
  ) as Record<C, CertPem>;
  return {
    ca: pem("CERTIFICATE", await caCertificate(ca)),
    otherCa: pem("CERTIFICATE", await caCertificate(other)),
    serverCert: pem("CERTIFICATE", leaf),
    serverKey: await privateKey(server),
    clients,
  };
}

async function privateKey(subject: Subject): Promise<string> {
  return pem(
    "PRIVATE KEY",
    new Uint8Array(await crypto.subtle.exportKey("pkcs8", subject.keys.privateKey)),
  );
}
