/**
 * A server inside this process (PGlite, through `pglite.ts`): its byte stream
 * comes from a call, not a socket. There is nothing to encrypt and no second
 * channel to send a CancelRequest on; the connection layer knows only that,
 * never which server it is.
 */
import { ConnectionError } from "../../errors.ts";

/**
 * The byte stream an {@link EmbeddedServer} opens: the shape of a `Deno.Conn`.
 *
 * @example
 * ```ts
 * import type { EmbeddedStream } from "jsr:@pgpipe/pgpipe";
 * const stream: EmbeddedStream = await Deno.connect({ hostname: "localhost", port: 5432 });
 * ```
 */
export interface EmbeddedStream {
  /** Reads into `p`; resolves to the byte count, or null once the session ended. */
  read(p: Uint8Array): Promise<number | null>;
  /** Takes some of `p` (an embedded server takes it all); resolves to how many bytes. */
  write(p: Uint8Array): Promise<number>;
  /** Ends the session; pending reads resolve to null. */
  close(): void;
}

/**
 * A PostgreSQL server running inside this process that speaks the wire protocol through calls
 * instead of a socket, such as PGlite through `jsr:@pgpipe/pgpipe/pglite`. It serves one
 * session: a client over it has one connection (`max` 1), `sql.listen` shares that session, and
 * there is no TLS, no cancel request, no replication and no second host.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * import { pglite } from "jsr:@pgpipe/pgpipe/pglite";
 * const options = pglite(); // { embedded: EmbeddedServer, user, database }
 * const sql = postgres(options);
 * console.log(options.embedded.name); // "pglite:memory"
 * ```
 */
export interface EmbeddedServer {
  /** Names the server in errors and in `sql.options.host` (for example `pglite:memory`). */
  readonly name: string;
  /**
   * Opens a byte stream to the server's session, as a socket to a server would be: the client
   * writes its startup message, then the protocol. One stream at a time: a stream's close ends
   * the session as a server's backend would end (its transaction is rolled back, its prepared
   * statements, temporary tables, listens and settings dropped). Rejects when the session is
   * held by another client.
   */
  connect(): Promise<EmbeddedStream>;
  /** Called once by `sql.end()` after the client's connection closed: frees what it started. */
  end?(): Promise<void>;
}

/**
 * Opens the embedded server's stream (`connect.ts` reads it as a plain one: nothing to encrypt or
 * authenticate on a wire). What its `connect` throws is passed on when it is a
 * ConnectionError (the server's own refusal), else wrapped in one (CONNECT_FAILED, with the
 * cause): a server that cannot start is a failed connection, not a crash in the pool.
 */
export async function openEmbedded(
  server: EmbeddedServer,
  where: { address: string; port: number },
): Promise<EmbeddedStream> {
  try {
    return await server.connect();
  } catch (e) {
    if (e instanceof ConnectionError) throw e;
    const text = e instanceof Error ? e.message : String(e);
    throw new ConnectionError("CONNECT_FAILED", `could not open ${server.name}: ${text}`, {
      ...where,
      cause: e,
    });
  }
}
