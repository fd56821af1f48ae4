/**
 * A query read in batches through a portal with a row limit: Execute(n) and
 * Flush instead of Sync, so the portal stays open between batches. The next
 * batch is asked for only when the consumer takes one, so memory stays bounded
 * by the batch size, not the result size. It is a barrier: the connection
 * serves nothing else until the cursor is done.
 */
import * as fe from "../../protocol/frontend.ts";
import type { Writer } from "../../protocol/writer.ts";
import type { PostgresError } from "../../errors.ts";
import { ProtocolViolation } from "../../protocol/backend.ts";
import { QueryRequest, type QuerySpec, type ResultTarget } from "./query_request.ts";
import type { RequestIO } from "./request.ts";

interface Waiter {
  resolve(batch: ResultTarget | null): void;
  reject(e: Error): void;
}

/** A cursor over one query's rows. */
export class CursorRequest extends QueryRequest {
  readonly barrier = true;

  /** A cursor's portal lives until it is closed: it always ends with its own Sync. */
  override get batchable(): boolean {
    return false;
  }
  #rows: number;
  /** Rows each Execute asks for: a PortalSuspended must follow exactly that many. */
  get rowLimit(): number {
    return this.#rows;
  }
  #io: RequestIO | null = null;
  #makeBatch: () => ResultTarget;
  #ready: ResultTarget | null = null; // a batch the consumer has not taken yet
  #waiter: Waiter | null = null;
  #suspended = false; // the portal has more rows
  #synced = false; // Sync written: the segment is ending
  #finished = false; // ReadyForQuery or failure: nothing more will come

  constructor(spec: QuerySpec, rows: number, makeBatch: () => ResultTarget) {
    super(spec, makeBatch(), { resolve: () => {}, reject: () => {} });
    this.#rows = rows;
    this.#makeBatch = makeBatch;
  }

  /** A cursor that already delivered rows cannot start over. */
  override restart(): boolean {
    return false;
  }

  protected override encodeExecute(w: Writer): void {
    fe.execute(w, "", this.#rows);
    fe.flush(w);
  }

  attach(io: RequestIO): void {
    this.#io = io;
  }

  #sync(): void {
    if (this.#synced) return;
    this.#synced = true;
    this.#io!.write(fe.sync);
  }

  #deliver(batch: ResultTarget): void {
    const waiter = this.#waiter;
    if (waiter !== null) {
      this.#waiter = null;
      waiter.resolve(batch);
      this.#prefetch();
    } else {
      this.#ready = batch;
    }
  }

  /** While the consumer works on one batch, the next is already on its way. */
  #prefetch(): void {
    if (!this.#suspended || this.#synced) return;
    this.#suspended = false;
    this.target = this.#makeBatch();
    this.#io!.write((w) => {
      fe.execute(w, "", this.#rows);
      fe.flush(w);
    });
  }

  /** Rows, or the end of the portal, come only after the cursor asked for the next batch. */
  #asked(what: string): void {
    if (this.#suspended) {
      throw new ProtocolViolation(`the server sent ${what} before the cursor asked for more rows`);
    }
  }

  /** Each batch is handed out as it ends: its rows cannot wait for fetch_types' catalog. */
  protected override mayKeepRows(): boolean {
    return false;
  }

  override dataRow(buf: Uint8Array, start: number, end: number): void {
    this.#asked("a DataRow");
    super.dataRow(buf, start, end);
  }

  override portalSuspended(): void {
    this.#suspended = true;
    this.#deliver(this.target);
  }

  override commandComplete(command: string, count: number | null): void {
    this.#asked("CommandComplete");
    super.commandComplete(command, count);
    this.#sync();
    this.#deliver(this.target); // the last batch (possibly empty)
  }

  override emptyQuery(): void {
    super.emptyQuery();
    this.#sync();
  }

  override error(err: PostgresError): void {
    super.error(err);
    // The server skips everything until Sync; without one it would wait forever.
    this.#sync();
  }

  override ready(): void {
    this.#finished = true;
    const waiter = this.#waiter;
    this.#waiter = null;
    if (waiter === null) return;
    if (this.failure !== null) waiter.reject(this.failure);
    else waiter.resolve(this.#ready ?? null);
    this.#ready = null;
  }

  override fail(err: Error): void {
    this.#finished = true;
    this.failure ??= err;
    const waiter = this.#waiter;
    this.#waiter = null;
    waiter?.reject(err);
  }

  /** The next batch of rows, or null when there are no more. */
  next(): Promise<ResultTarget | null> {
    if (this.#ready !== null) {
      const batch = this.#ready;
      this.#ready = null;
      this.#prefetch();
      return Promise.resolve(batch);
    }
    if (this.#finished) {
      return this.failure !== null ? Promise.reject(this.failure) : Promise.resolve(null);
    }
    return new Promise((resolve, reject) => this.#waiter = { resolve, reject });
  }

  /** Stops early: closes the portal and ends the segment. Resolves when the connection is free. */
  async close(): Promise<void> {
    if (this.#finished) return;
    this.#ready = null;
    if (!this.#synced && this.#io !== null) {
      this.#synced = true;
      this.#io.write((w) => {
        fe.close(w, "P", "");
        fe.sync(w);
      });
    }
    // Wait for ReadyForQuery (or failure) so the caller knows the connection is free again.
    await new Promise<void>((resolve) => {
      this.#waiter = { resolve: () => resolve(), reject: () => resolve() };
      if (this.#finished) resolve();
    });
  }
}
