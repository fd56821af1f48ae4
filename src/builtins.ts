/**
 * The Node built-ins only some connections need, loaded on first use instead of when pgpipe is
 * imported: loading `node:tls`, `node:net`, `node:dns`, `node:stream` and `node:crypto` made
 * importing pgpipe about 8 ms slower (46 against 38 ms on the bench machine), and a program on
 * plain TCP or Deno's native TLS with SCRAM needs none of them. `process.getBuiltinModule` loads one synchronously, so the
 * code that needs it stays synchronous. `test/layout_test.ts` keeps them out of static imports.
 *
 * @module
 */
import process from "node:process";
import type * as Crypto from "node:crypto";
import type * as Dns from "node:dns/promises";
import type * as Net from "node:net";
import type * as Stream from "node:stream";
import type * as Tls from "node:tls";

/** A getter of the built-in `name`, loaded by its first call. */
function builtin<T>(name: string): () => T {
  let loaded: T | undefined;
  return () => loaded ??= process.getBuiltinModule(name) as T;
}

/** `node:crypto`: MD5, certificates and keys. */
export const cryptoModule: () => typeof Crypto = builtin("node:crypto");
/** `node:dns/promises`: the lookup behind `sslsni=0`. */
export const dnsModule: () => typeof Dns = builtin("node:dns/promises");
/** `node:net`: the TCP socket node:tls runs over. */
export const netModule: () => typeof Net = builtin("node:net");
/** `node:stream`: Node streams of COPY and large objects, and the duplexes under node:tls. */
export const streamModule: () => typeof Stream = builtin("node:stream");
/** `node:tls`. */
export const tlsModule: () => typeof Tls = builtin("node:tls");
