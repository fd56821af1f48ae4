/**
 * A node-style socket (a `node:tls` socket, or a node socket the user's `socket` function
 * returned) as a {@link Transport}: its `data` events buffered and handed out by pull-style reads,
 * the socket paused while more than 1 MiB waits unread.
 */
import { type NodeLikeSocket, PLAIN, type StreamTraits, type Transport } from "./transport.ts";

/** What stops and restarts the reading of the socket beneath a node:tls one. */
export interface ReadSwitch {
  readStop(): unknown;
  readStart(): unknown;
}

/** Over this many unread bytes the socket is paused; under the second, resumed. */
const PAUSE_ABOVE = 1 << 20;
const RESUME_BELOW = 1 << 18;

/**
 * Adapts a node socket's events to pull-style reads, pausing it when we fall
 * behind. Our listeners sit beside any the socket's owner attached.
 *
 * `beneath` finds what stops the socket under a node:tls socket. Pausing the TLS
 * socket is not enough in Deno: its TLS layer goes on reading the TCP socket
 * and decrypting into memory while paused (a paused 100 MB COPY was read
 * whole). So the reading beneath is stopped too, again at each chunk
 * that still arrives while paused (Deno's TLS layer restarts it when it
 * wants more), and started again on resume.
 */
export class NodeSocketTransport implements Transport {
  #socket: NodeLikeSocket;
  #beneath: (() => ReadSwitch | null) | undefined;
  #chunks: Uint8Array[] = [];
  #buffered = 0;
  #paused = false;
  #ended = false;
  #error: Error | null = null;
  #wake: (() => void) | null = null;
  #writing = new Set<(e: Error) => void>(); // rejects writes not yet called back
  readonly tls: StreamTraits["tls"];
  readonly verified: boolean;
  readonly gatherWrites: boolean;
  readonly idleReadCosts: boolean;
  readonly serverCertificate: Uint8Array | null;

  constructor(
    socket: NodeLikeSocket,
    traits: StreamTraits = PLAIN,
    beneath?: () => ReadSwitch | null,
  ) {
    this.#socket = socket;
    this.#beneath = beneath;
    this.tls = traits.tls;
    this.verified = traits.verified;
    this.gatherWrites = traits.gatherWrites;
    this.idleReadCosts = traits.idleReadCosts;
    this.serverCertificate = traits.serverCertificate;
    socket.on("data", (chunk: Uint8Array) => this.#push(chunk));
    socket.on("end", () => this.#finish(null));
    socket.on("close", () => {
      this.#finish(null);
      this.#failWrites(new Error("the connection closed"));
    });
    socket.on("error", (e: Error) => {
      this.#finish(e);
      this.#failWrites(e);
    });
  }

  /**
   * Rejects the writes still waiting for their callback: a node:net socket calls them back when
   * it closes, but a node-like socket of the user's may not, and nothing may wait for ever.
   */
  #failWrites(e: Error): void {
    const waiting = [...this.#writing];
    this.#writing.clear();
    for (const reject of waiting) reject(this.#error ?? e);
  }

  #push(chunk: Uint8Array): void {
    this.#chunks.push(chunk);
    this.#buffered += chunk.length;
    if (this.#buffered > PAUSE_ABOVE) {
      if (!this.#paused) {
        this.#paused = true;
        this.#socket.pause?.();
      }
      if (this.#beneath !== undefined) this.#switchBeneath(false);
    }
    this.#wake?.();
  }

  /** Stops or starts the reading of the socket beneath the TLS one (never throws: it may be closing). */
  #switchBeneath(on: boolean): void {
    try {
      const handle = this.#beneath!();
      if (on) handle?.readStart();
      else handle?.readStop();
    } catch {
      // closed under us: the close event ends the reads
    }
  }

  #finish(error: Error | null): void {
    if (error && !this.#error) this.#error = error;
    this.#ended = true;
    this.#wake?.();
  }

  async read(p: Uint8Array): Promise<number | null> {
    while (this.#chunks.length === 0) {
      if (this.#error) throw this.#error;
      if (this.#ended) return null;
      await new Promise<void>((resolve) => this.#wake = resolve);
      this.#wake = null;
    }
    let n = 0;
    while (n < p.length && this.#chunks.length > 0) {
      const chunk = this.#chunks[0];
      const take = Math.min(chunk.length, p.length - n);
      p.set(chunk.subarray(0, take), n);
      n += take;
      if (take === chunk.length) this.#chunks.shift();
      else this.#chunks[0] = chunk.subarray(take);
    }
    this.#buffered -= n;
    if (this.#paused && this.#buffered < RESUME_BELOW) {
      this.#paused = false;
      if (this.#beneath !== undefined) this.#switchBeneath(true);
      this.#socket.resume?.();
    }
    return n;
  }

  write(p: Uint8Array): Promise<number> {
    // Copy: the caller reuses its buffer as soon as this resolves.
    const copy = p.slice();
    return new Promise((resolve, reject) => {
      this.#writing.add(reject);
      // The socket's own error (e.g. a refused connect) says more than the write's.
      this.#socket.write(copy, (e?: Error | null) => {
        this.#writing.delete(reject);
        if (e) reject(this.#error ?? e);
        else resolve(copy.length);
      });
    });
  }

  close(): void {
    try {
      this.#socket.destroy();
    } catch {
      // already closed
    }
  }
}
