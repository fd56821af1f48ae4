/**
 * The embedded server `pglite()` hands to `postgres()`: a PGlite instance, given or started on
 * first use, opened one stream at a time. An instance it started is its own, and `sql.end()`
 * closes it (a data folder is then complete on disk); one it was given stays open for its owner.
 * Every server over the same instance shares that instance's one Session, so two clients on one
 * PGlite never interleave.
 */
import type { EmbeddedServer } from "../connection/transport/embedded.ts";
import { type PGliteLike, Session } from "./session.ts";
import { PGliteStream } from "./stream.ts";

/** The sessions of the instances in use, so servers sharing one instance share its session. */
const sessions = new WeakMap<PGliteLike, Session>();

function sessionOf(pg: PGliteLike): Session {
  let session = sessions.get(pg);
  if (session === undefined) sessions.set(pg, session = new Session(pg));
  return session;
}

/** Whether `value` is a PGlite instance rather than a data folder or PGlite's options. */
export function isPGlite(value: unknown): value is PGliteLike {
  return typeof (value as PGliteLike | null)?.execProtocolRawStream === "function";
}

/**
 * A PGlite as an embedded server: `source` is the instance given, or how to start one (then this
 * server owns it).
 */
export class PGliteServer implements EmbeddedServer {
  readonly name: string;
  #source: PGliteLike | (() => Promise<PGliteLike>);
  #session: Promise<Session> | null = null;

  constructor(name: string, source: PGliteLike | (() => Promise<PGliteLike>)) {
    this.name = name;
    this.#source = source;
  }

  /** The session, starting the instance if this server owns one and it is not up. */
  #ready(): Promise<Session> {
    const source = this.#source;
    return this.#session ??= (async () => {
      const pg = typeof source === "function" ? await source() : source;
      await pg.waitReady;
      return sessionOf(pg);
    })().catch((e) => {
      this.#session = null; // a later connection tries again
      throw e;
    });
  }

  async connect(): Promise<PGliteStream> {
    const session = await this.#ready();
    const stream = new PGliteStream(session);
    await session.acquire(stream, this.name);
    return stream;
  }

  /** Closes the instance this server started (once its stream ended); a given one stays open. */
  async end(): Promise<void> {
    if (typeof this.#source !== "function" || this.#session === null) return;
    const session = await this.#session.catch(() => null);
    this.#session = null;
    await session?.close();
  }
}
