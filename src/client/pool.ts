/**
 * The connections behind one `sql`: opened lazily, up to `max`. A request goes
 * to the open connection with the fewest requests in flight, so every
 * connection keeps pipelining while load spreads; a new connection is opened
 * only while every open one is busy and `max` allows.
 */
import { Connection, type ConnectionOptions } from "../connection/connection.ts";
import type { PipelineRequest } from "../connection/request.ts";
import { ConnectionError } from "../errors.ts";

/** A set of pipelined connections sharing one configuration. */
export class Pool {
  #options: ConnectionOptions;
  #max: number;
  #open: Connection[] = [];
  #opening = 0;
  #openings = new Set<Promise<void>>(); // settle after their handlers ran
  #waiting: PipelineRequest[] = []; // sent while no connection was open yet
  #ended: ConnectionError | null = null;

  constructor(options: ConnectionOptions, max: number) {
    this.#options = options;
    this.#max = Math.max(1, max);
  }

  /** Routes a request to a connection, opening one if needed. */
  send(req: PipelineRequest): void {
    if (this.#ended !== null) {
      req.fail(Object.assign(new ConnectionError(this.#ended.code, this.#ended.message), {
        outcome: "not-sent" as const,
      }));
      return;
    }
    let best: Connection | null = null;
    for (const c of this.#open) {
      if (!c.closed && (best === null || c.inFlight < best.inFlight)) best = c;
    }
    if (best !== null && (best.inFlight === 0 || this.#open.length + this.#opening >= this.#max)) {
      return best.send(req);
    }
    if (this.#open.length + this.#opening < this.#max) this.#connect();
    if (best !== null) return best.send(req);
    this.#waiting.push(req);
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
        const waiting = this.#waiting;
        this.#waiting = [];
        for (const req of waiting) c.send(req);
      },
      (err: Error) => {
        this.#opening--;
        // Nothing is open to take the waiting requests: they fail with the reason.
        if (this.#opening > 0 || this.#open.some((c) => !c.closed)) return;
        const waiting = this.#waiting;
        this.#waiting = [];
        if (err instanceof ConnectionError) err.outcome = "not-sent";
        for (const req of waiting) req.fail(err);
      },
    ).finally(() => this.#openings.delete(opening));
    this.#openings.add(opening);
  }

  #forget(): void {
    this.#open = this.#open.filter((c) => !c.closed);
  }

  /** Open connections (for tests and stats). */
  get connections(): readonly Connection[] {
    return this.#open;
  }

  /** Stops accepting requests; waits for in-flight ones, up to `timeout` seconds. */
  async end(timeout?: number): Promise<void> {
    this.#ended ??= new ConnectionError("CONNECTION_ENDED", "the client was ended with sql.end()");
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
