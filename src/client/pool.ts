/**
 * The connections behind one `sql`: opened lazily, up to `max`. A request goes
 * to the shared connection with the fewest requests in flight, so every
 * connection keeps pipelining while load spreads; a new connection is opened
 * only while every open one is busy and `max` allows.
 *
 * A connection can be reserved (for a transaction or `sql.reserve()`): until it
 * is released no other caller's request goes to it. Requests with nowhere to
 * go wait here, in order, and leave as soon as a connection is free.
 */
import { Connection, type ConnectionOptions } from "../connection/connection.ts";
import type { PipelineRequest } from "../connection/request.ts";
import { ConnectionError } from "../errors.ts";
import { exec } from "./exec.ts";

const IDLE = 0x49; // ReadyForQuery status outside a transaction block

interface Reserver {
  resolve(c: Connection): void;
  reject(e: Error): void;
}

/** A set of pipelined connections sharing one configuration. */
export class Pool {
  #options: ConnectionOptions;
  #max: number;
  #open: Connection[] = [];
  #reserved = new Set<Connection>();
  #opening = 0;
  #openings = new Set<Promise<void>>(); // settle after their handlers ran
  #waiting: PipelineRequest[] = []; // no shared connection could take them yet
  #reservers: Reserver[] = [];
  #routes = new WeakMap<PipelineRequest, Connection>(); // where each request went, for cancel
  #ended: ConnectionError | null = null;

  /** The options every connection of this pool is opened with. */
  get options(): ConnectionOptions {
    return this.#options;
  }

  constructor(options: ConnectionOptions, max: number) {
    this.#options = options;
    this.#max = Math.max(1, max);
  }

  #endedError(): ConnectionError {
    const e = new ConnectionError(this.#ended!.code, this.#ended!.message);
    e.outcome = "not-sent";
    return e;
  }

  /** The open, shared (unreserved) connection with the fewest requests in flight. */
  #leastBusy(): Connection | null {
    let best: Connection | null = null;
    for (const c of this.#open) {
      if (c.closed || this.#reserved.has(c)) continue;
      if (best === null || c.inFlight < best.inFlight) best = c;
    }
    return best;
  }

  #canOpen(): boolean {
    return this.#open.length + this.#opening < this.#max;
  }

  /** Routes a request to a shared connection, opening one if needed. */
  send(req: PipelineRequest): void {
    if (this.#ended !== null) return req.fail(this.#endedError());
    if (this.#waiting.length > 0) {
      this.#waiting.push(req); // keep order behind those already waiting
      return;
    }
    const best = this.#leastBusy();
    if (best !== null && (best.inFlight === 0 || !this.#canOpen())) return this.#route(best, req);
    if (this.#canOpen()) this.#connect();
    if (best !== null) return this.#route(best, req);
    this.#waiting.push(req);
  }

  #route(c: Connection, req: PipelineRequest): void {
    this.#routes.set(req, c);
    c.send(req);
  }

  /** Cancels a request: dropped if still waiting here, else cancelled on its connection. */
  cancel(req: PipelineRequest, reason: Error): void {
    const at = this.#waiting.indexOf(req);
    if (at !== -1) {
      this.#waiting.splice(at, 1);
      return req.fail(reason);
    }
    this.#routes.get(req)?.cancel(req, reason);
  }

  /**
   * Takes a connection for one caller alone. An idle connection is preferred,
   * then a new one; at `max`, a busy shared one is taken (what it already has
   * in flight finishes first), else the caller waits for a release.
   */
  reserve(): Promise<Connection> {
    if (this.#ended !== null) return Promise.reject(this.#endedError());
    return new Promise((resolve, reject) => {
      const best = this.#leastBusy();
      if (best !== null && (best.inFlight === 0 || !this.#canOpen())) {
        this.#reserved.add(best);
        return resolve(best);
      }
      this.#reservers.push({ resolve, reject });
      if (this.#canOpen()) this.#connect();
    });
  }

  /** Returns a reserved connection; one left inside a transaction is rolled back first. */
  release(c: Connection): void {
    if (!this.#reserved.delete(c) || c.closed) return this.#forget();
    // Queued ahead of anything else, so the next user starts outside any transaction.
    if (c.status !== IDLE) exec(c, "rollback").catch(() => {});
    this.#available(c);
  }

  /** A connection became available: hand it to a waiting reserver, or to waiting requests. */
  #available(c: Connection): void {
    const reserver = this.#reservers.shift();
    if (reserver !== undefined) {
      this.#reserved.add(c);
      return reserver.resolve(c);
    }
    const waiting = this.#waiting;
    this.#waiting = [];
    for (const req of waiting) this.#route(c, req);
  }

  #connect(): void {
    this.#opening++;
    const opening = Connection.open({
      ...this.#options,
      onclose: () => this.#forget(),
    }).then(
      (c) => {
        this.#opening--;
        this.#open.push(c);
        this.#available(c);
      },
      (err: Error) => {
        this.#opening--;
        // Nothing is open to take the waiting requests: they fail with the reason.
        if (this.#opening > 0 || this.#open.some((c) => !c.closed)) return;
        if (err instanceof ConnectionError) err.outcome = "not-sent";
        const waiting = this.#waiting;
        const reservers = this.#reservers;
        this.#waiting = [];
        this.#reservers = [];
        for (const req of waiting) req.fail(err);
        for (const r of reservers) r.reject(err);
      },
    ).finally(() => this.#openings.delete(opening));
    this.#openings.add(opening);
  }

  #forget(): void {
    this.#open = this.#open.filter((c) => !c.closed);
    for (const c of this.#reserved) if (c.closed) this.#reserved.delete(c);
    // Work waiting for a connection must not strand when one goes away.
    if ((this.#waiting.length > 0 || this.#reservers.length > 0) && this.#canOpen()) {
      if (this.#ended === null) this.#connect();
    }
  }

  /** Open connections (for tests and stats). */
  get connections(): readonly Connection[] {
    return this.#open;
  }

  /** Stops accepting requests; waits for in-flight ones, up to `timeout` seconds. */
  async end(timeout?: number): Promise<void> {
    this.#ended ??= new ConnectionError("CONNECTION_ENDED", "the client was ended with sql.end()");
    for (const r of this.#reservers.splice(0)) r.reject(this.#endedError());
    // Requests waiting for a connection that is still opening are sent and answered first.
    const all = Promise.allSettled([...this.#openings])
      .then(() => Promise.all(this.#open.map((c) => c.end())));
    if (timeout === undefined) return void await all;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const expired = new Promise<"timeout">((r) =>
      timer = setTimeout(() => r("timeout"), timeout * 1000)
    );
    const outcome = await Promise.race([all, expired]);
    clearTimeout(timer);
    if (outcome === "timeout") { for (const c of this.#open) c.destroy(); }
  }
}
