/**
 * The Node built-ins, loaded on first use instead of when pgpipe is imported: a program's first
 * use of any of them loads Deno's Node compatibility layer, and a plaintext query of text values
 * needs none of them. Loading `node:tls`, `node:net`, `node:dns`, `node:stream` and `node:crypto`
 * made importing pgpipe about 8 ms slower; `node:buffer`, `node:timers` and `node:process`
 * another 13 (the layer's first load). `process.getBuiltinModule` loads one synchronously, so the
 * code that needs it stays synchronous; `process` is reached through `globalThis` in the getter
 * because Deno loads the layer when the global is first touched. `test/layout_test.ts` and
 * `test/cold_graph_test.ts` keep them out of static imports.
 *
 * @module
 */
import type * as BufferModule from "node:buffer";
import type * as Crypto from "node:crypto";
import type * as Dns from "node:dns/promises";
import type * as Net from "node:net";
import type * as Stream from "node:stream";
import type * as Timers from "node:timers";
import type * as Tls from "node:tls";

/** Node's `process`, as far as the getter below needs it. */
type NodeProcess = { getBuiltinModule(name: string): unknown };

/** A getter of the built-in `name`, loaded by its first call. */
function builtin<T>(name: string): () => T {
  let loaded: T | undefined;
  return () =>
    loaded ??= (globalThis as unknown as { process: NodeProcess }).process.getBuiltinModule(
      name,
    ) as T;
}

/** `node:buffer`: the `Buffer`s bytea values and raw rows are, as postgres.js gives them. */
export const bufferModule: () => typeof BufferModule = builtin("node:buffer");
/** `node:crypto`: MD5, certificates and keys. */
export const cryptoModule: () => typeof Crypto = builtin("node:crypto");
/** `node:dns/promises`: the lookup behind `sslsni=0`. */
export const dnsModule: () => typeof Dns = builtin("node:dns/promises");
/** `node:net`: the TCP socket node:tls runs over. */
export const netModule: () => typeof Net = builtin("node:net");
/** `node:stream`: Node streams of COPY and large objects, and the duplexes under node:tls. */
export const streamModule: () => typeof Stream = builtin("node:stream");
/** `node:timers`: `setImmediate`, one turn of the event loop (Web timers have none). */
export const timersModule: () => typeof Timers = builtin("node:timers");
/** `node:tls`. */
export const tlsModule: () => typeof Tls = builtin("node:tls");

/**
 * Calls `fn` after `ms` unless the returned function is called first, without keeping the process
 * alive. Deno's `setTimeout` loads the timers of its Node compatibility layer on first use (about
 * 5 ms of CPU); `AbortSignal.timeout` runs on the runtime's own unreferenced timer and loads
 * nothing, so a timer every connection sets does not cost a cold start that load. Its timer is
 * not cleared on cancel, only left to run out unheard: for timers set about once per connection.
 */
export function unrefTimeout(ms: number, fn: () => void): () => void {
  const signal = AbortSignal.timeout(ms);
  signal.addEventListener("abort", fn, { once: true });
  return () => signal.removeEventListener("abort", fn);
}
