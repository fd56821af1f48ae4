/**
 * Where a connection keeps its requests: the FIFO of those encoded or written and awaiting
 * answers ({@link RequestFifo}), and the backlog of those waiting for room in the pipeline
 * ({@link Backlog}), each counting the barriers (cursors, COPYs) it holds.
 */
import type { PipelineRequest } from "./requests/request.ts";

/** Answered FIFO slots left before the live ones that make it worth moving them to the front. */
const COMPACT_AFTER = 4096;

/**
 * The requests encoded or written and awaiting answers: the window `[head, tail)` of `queue` and
 * its parallel arrays. They are reused, not truncated, when the FIFO empties (a serial query
 * would otherwise reallocate them each time), and compacted when a never-empty FIFO has left a
 * long answered prefix behind. Fields are read in place by the read loop (no copy, no call).
 */
export class RequestFifo {
  queue: PipelineRequest[] = [];
  /** Encoded bytes of each queued request, for the byte bound. */
  sizes: number[] = [];
  /** Whether a Sync follows each queued request (false: mid-batch). */
  synced: boolean[] = [];
  head = 0;
  tail = 0;
  /** Queue index from which requests are still only encoded, not written. */
  unsent = 0;
  /** Encoded bytes of the live requests. */
  bytes = 0;
  /** Barrier requests in the FIFO: while any is, nothing else is written. */
  barriers = 0;
  /** The barrier in the FIFO (there is at most one). */
  barrier: PipelineRequest | null = null;

  /** Requests in the window. */
  get size(): number {
    return this.tail - this.head;
  }

  /** Appends `req`, which took `size` encoded bytes; `synced`: a Sync of its own follows it. */
  push(req: PipelineRequest, size: number, synced: boolean): void {
    this.bytes += size;
    const at = this.tail++;
    this.sizes[at] = size;
    this.synced[at] = synced;
    this.queue[at] = req;
    if (req.barrier) {
      this.barriers++;
      this.barrier = req;
    }
  }

  /** The last request's batch got its Sync (`bytes` long). */
  syncLast(bytes: number): void {
    const last = this.tail - 1;
    this.synced[last] = true;
    this.sizes[last] += bytes;
    this.bytes += bytes;
  }

  /** Pops `req`, the answered head. */
  shift(req: PipelineRequest): void {
    this.bytes -= this.sizes[this.head];
    if (req.barrier) {
      this.barriers--;
      if (this.barrier === req) this.barrier = null;
    }
    this.queue[this.head++] = undefined!;
    if (this.head === this.tail) {
      this.head = this.tail = 0;
      this.unsent = 0;
      this.bytes = 0;
    } else if (this.head >= COMPACT_AFTER && this.head * 2 >= this.tail) {
      const head = this.head;
      const tail = this.tail;
      this.queue.copyWithin(0, head, tail);
      this.sizes.copyWithin(0, head, tail);
      this.synced.copyWithin(0, head, tail);
      this.queue.fill(undefined!, tail - head, tail);
      this.head = 0;
      this.tail = tail - head;
      this.unsent = Math.max(0, this.unsent - head);
    }
  }

  /** Where `req` sits in the window, or -1 (already answered, or never here). */
  indexOf(req: PipelineRequest): number {
    const at = this.queue.indexOf(req, this.head);
    return at === -1 || at >= this.tail ? -1 : at;
  }

  /**
   * Whether queue index `at` shares the head's batch. The server answers a batch only at its
   * Sync, so the head tells nothing about which of its queries runs.
   */
  inHeadBatch(at: number): boolean {
    for (let i = this.head; i < at; i++) if (this.synced[i]) return false;
    return true;
  }

  /**
   * Empties the FIFO; returns what it held and how many of those were already written (the rest
   * were only encoded).
   */
  clear(): { requests: PipelineRequest[]; written: number } {
    const requests = this.queue.slice(this.head, this.tail);
    const written = Math.max(0, this.unsent - this.head);
    this.queue = [];
    this.sizes = [];
    this.synced = [];
    this.head =
      this.tail =
      this.unsent =
      this.bytes =
      this.barriers =
        0;
    this.barrier = null;
    return { requests, written };
  }
}

/** The requests waiting locally for room in the pipeline, in order. */
export class Backlog {
  #items: PipelineRequest[] = [];
  #head = 0;
  /** Barrier requests waiting. */
  barriers = 0;

  /** Requests waiting. */
  get size(): number {
    return this.#items.length - this.#head;
  }

  push(req: PipelineRequest): void {
    this.#items.push(req);
    if (req.barrier) this.barriers++;
  }

  /** Takes the first request waiting (there must be one). */
  shift(): PipelineRequest {
    const req = this.#items[this.#head];
    this.#items[this.#head++] = undefined!;
    if (req.barrier) this.barriers--;
    if (this.#head === this.#items.length) {
      this.#items.length = 0;
      this.#head = 0;
    }
    return req;
  }

  /** Drops `req` if it waits here; whether it did. */
  remove(req: PipelineRequest): boolean {
    const at = this.#items.indexOf(req, this.#head);
    if (at === -1) return false;
    this.#items.splice(at, 1);
    if (req.barrier) this.barriers--;
    if (this.#head === this.#items.length) this.#items.length = this.#head = 0;
    return true;
  }

  /** Empties the backlog; returns what waited. */
  clear(): PipelineRequest[] {
    const waiting = this.#items.slice(this.#head);
    this.#items = [];
    this.#head = 0;
    this.barriers = 0;
    return waiting;
  }
}
