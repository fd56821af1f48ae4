/**
 * Channel binding data for SCRAM-SHA-256-PLUS: `tls-server-end-point` (RFC 5929 §4.1), the hash
 * of the server's certificate (DER) with the hash function its signature uses, SHA-256 in place
 * of MD5 and SHA-1. PostgreSQL computes the same on its side, so a client that talks through a
 * relay (a TLS terminator that is not the server) binds to the relay's certificate and the
 * server refuses the exchange.
 */

/** Web Crypto's name for each signature algorithm's hash, by the algorithm's OID (hex DER). */
const SIGNATURE_HASHES: Record<string, string> = {
  "2a864886f70d010104": "SHA-256", // md5WithRSAEncryption: SHA-256 instead
  "2a864886f70d010105": "SHA-256", // sha1WithRSAEncryption: SHA-256 instead
  "2a864886f70d01010b": "SHA-256", // sha256WithRSAEncryption
  "2a864886f70d01010c": "SHA-384", // sha384WithRSAEncryption
  "2a864886f70d01010d": "SHA-512", // sha512WithRSAEncryption
  "2a8648ce3d0401": "SHA-256", // ecdsa-with-SHA1: SHA-256 instead
  "2a8648ce3d040302": "SHA-256", // ecdsa-with-SHA256
  "2a8648ce3d040303": "SHA-384", // ecdsa-with-SHA384
  "2a8648ce3d040304": "SHA-512", // ecdsa-with-SHA512
  "2a8648ce380403": "SHA-256", // dsa-with-sha1: SHA-256 instead
  "608648016503040302": "SHA-256", // dsa-with-sha256
};

/** RSASSA-PSS: its hash is a parameter (SHA-1 when absent). */
const RSASSA_PSS = "2a864886f70d01010a";

/** Hash algorithm OIDs (hex DER), for RSASSA-PSS's parameters. */
const HASHES: Record<string, string> = {
  "2b0e03021a": "SHA-256", // SHA-1: SHA-256 instead
  "608648016503040201": "SHA-256",
  "608648016503040202": "SHA-384",
  "608648016503040203": "SHA-512",
};

/** One DER element: its tag and where its contents lie. */
interface Element {
  tag: number;
  start: number;
  end: number;
}

/** The DER element at `at`, or throws when it runs past `limit`. */
function element(der: Uint8Array, at: number, limit: number): Element {
  if (at + 2 > limit) throw new RangeError("truncated DER");
  const tag = der[at];
  let length = der[at + 1];
  let start = at + 2;
  if (length & 0x80) {
    const bytes = length & 0x7f;
    if (bytes === 0 || bytes > 4 || start + bytes > limit) throw new RangeError("bad DER length");
    length = 0;
    for (let i = 0; i < bytes; i++) length = length * 256 + der[start + i];
    start += bytes;
  }
  if (start + length > limit) throw new RangeError("truncated DER");
  return { tag, start, end: start + length };
}

const hex = (bytes: Uint8Array) =>
  Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");

/** The hash RSASSA-PSS parameters name: `[0] EXPLICIT AlgorithmIdentifier`, else SHA-1's stand-in. */
function pssHash(der: Uint8Array, params: Element): string | undefined {
  if (params.tag !== 0x30) return "SHA-256";
  for (let at = params.start; at < params.end;) {
    const field = element(der, at, params.end);
    if (field.tag === 0xa0) {
      const id = element(der, field.start, field.end);
      const oid = element(der, id.start, id.end);
      return HASHES[hex(der.subarray(oid.start, oid.end))];
    }
    at = field.end;
  }
  return "SHA-256";
}

/**
 * The Web Crypto hash a certificate's signature algorithm calls for under tls-server-end-point,
 * or undefined when it names none Web Crypto has (Ed25519, SHA-224) or the DER is malformed.
 */
export function endPointHash(der: Uint8Array): string | undefined {
  try {
    // Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm, signatureValue }
    const certificate = element(der, 0, der.length);
    const tbs = element(der, certificate.start, certificate.end);
    const algorithm = element(der, tbs.end, certificate.end);
    const oid = element(der, algorithm.start, algorithm.end);
    const name = hex(der.subarray(oid.start, oid.end));
    if (name === RSASSA_PSS) {
      return oid.end < algorithm.end
        ? pssHash(der, element(der, oid.end, algorithm.end))
        : "SHA-256";
    }
    return SIGNATURE_HASHES[name];
  } catch {
    return undefined;
  }
}

/**
 * The tls-server-end-point channel binding data of a server certificate (DER), or null when
 * its signature algorithm leaves it undefined here (then the client cannot bind).
 */
export async function tlsServerEndPoint(der: Uint8Array): Promise<Uint8Array | null> {
  const hash = endPointHash(der);
  if (hash === undefined) return null;
  return new Uint8Array(await crypto.subtle.digest(hash, der as Uint8Array<ArrayBuffer>));
}
