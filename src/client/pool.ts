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
import { unrefTimeout } from "../builtins.ts";
import type { Connection } from "../connection/connection.ts";
import { connectTimeoutError, connectTimeoutMs } from "../connection/open.ts";
import type { PipelineRequest } from "../connection/requests/request.ts";
import { ConnectionError, isSocketErrorCode, QueryError } from "../errors.ts";
import { QueryRequest } from "../connection/requests/query_request.ts";
import type { DebugHook } from "../config/options.ts";
import { isUserFailure } from "../connection/transport/user_socket.ts";
import { exec } from "../connection/requests/driver_queries.ts";
import { connect, type HostOptions } from "../connection/hosts.ts";
import type { PoolCounts, Telemetry } from "../telemetry/telemetry.ts";

const IDLE = 0x49; // ReadyForQuery status outside a transaction block

/** How the pool manages its connections' lives. */
export interface PoolOptions {
  /** Most connections. */
  max: number;
  /** Close a connection idle this long (ms); 0: never. */
  idleTimeout: number;
  /** Replace a connection older than this (ms) once it is idle; 0: never. */
  maxLifetime: number;
  /** Sees each query as it is routed to a connection. */
  debug?: DebugHook;
  /**
   * A request each new connection sends before anything else, or null (the catalog query of
   * `fetch_types`).
   */
  arrayTypes?: () => PipelineRequest | null;
  /** Requests each new connection sends next (LISTENs again, on a session shared with `sql.listen`). */
  sessionStart?: () => readonly PipelineRequest[];
  /** Most requests waiting locally (here and in connection backlogs); more are refused. */
  maxQueue: number;
  /** Spans for connecting and the connection create time, when telemetry is on. */
  telemetry?: Telemetry | null;
}

/** Reconnect backoff while a server that was up is unreachable. */
const BACKOFF_MIN_MS = 50;
const BACKOFF_MAX_MS = 2000;

/**
 * Failures worth retrying: the server may come back (restart, failover, too many clients).
 * NO_MATCHING_HOST too: during a failover no server is the primary until a standby is promoted.
 * A socket that could not be opened (ECONNREFUSED, ENOTFOUND, ...) counts as CONNECT_FAILED.
 */
function transient(e: unknown): boolean {
  if (isUserFailure(e)) return false; // what the `socket` function threw: its own, not an outage
  if (e instanceof ConnectionError) {
    return e.code === "CONNECT_FAILED" || e.code === "CONNECTION_CLOSED" ||
      e.code === "CONNECT_TIMEOUT" || e.code === "NO_MATCHING_HOST" || isSocketErrorCode(e.code);
  }
  const code = (e as { code?: unknown })?.code;
  // starting up, too many, shutdown; or a `socket` function's own node:net error (ECONNREFUSED, ...)
  return code === "57P03" || code === "53300" || code === "57P01" ||
    (typeof code === "string" && isSocketErrorCode(code));
}

interface Reserver {
  resolve(c: Connection): void;
  reject(e: Error): void;
  /** When it began waiting, for connect_timeout (ms since the epoch). */
  since: number;
}

/** A set of pipelined connections sharing one configuration. */
export class Pool {
  #options: HostOptions;
  #pool: PoolOptions;
  #max: number;
  #ids = new WeakMap<Connection, number>();
  #nextId = 1;
  #idleTimers = new Map<Connection, ReturnType<typeof setTimeout>>();
  #open: Connection[] = [];
  #reserved = new Set<Connection>();
  // sql.end() waits for each reserved connection (a transaction, sql.reserve()) to come back.
  #onRelease = new Map<Connection, () => void>();
  #opening = 0;
  #openings = new Set<Promise<void>>(); // settle after their handlers ran
  #waiting: PipelineRequest[] = []; // no shared connection could take them yet
  #waitingSince: number[] = []; // when each waiting request arrived, for connect_timeout
  // A request a starting connection took: when it began waiting, and its place among those
  // taken (for #giveBack). Kept from its first claim on, so every failed start restores them.
  #claimedAt = new WeakMap<PipelineRequest, { since: number; order: number }>();
  #claims = 0;
  #everConnected = false; // an outage of a server that worked is retried; a bad config fails fast
  #backoff = 0;
  #retry: ReturnType<typeof setTimeout> | undefined;
  #lastError: Error | null = null;
  #reservers: Reserver[] = [];
  #ended: ConnectionError | null = null;
  #destroyed = false; // sql.end({ timeout }) ran out: whatever was left failed CONNECTION_DESTROYED

  /**
   * The server's parameters (server_version, TimeZone, application_name, ...):
   * filled from each connection as it opens, then kept up to date as the
   * server reports changes. One object, changed in place (postgres.js's `sql.parameters`).
   */
  readonly parameters: Record<string, string> = {};

  /** The options every connection of this pool is opened with. */
  get options(): HostOptions {
    return this.#options;
  }

  constructor(options: HostOptions, pool: PoolOptions) {
    this.#options = options;
    this.#pool = pool;
    this.#max = Math.max(1, pool.max);
  }

  /** Past max_lifetime: takes no new work and closes once idle. */
  #expired(c: Connection): boolean {
    return c.expired; // set by the connection's max_lifetime timer: no clock read per query
  }

  /** Closes a connection that has nothing in flight and nobody holding it. */
  #retire(c: Connection): void {
    clearTimeout(this.#idleTimers.get(c));
    this.#idleTimers.delete(c);
    this.#open = this.#open.filter((o) => o !== c);
    c.end();
  }

  /** A shared connection answered its last request: waiting work takes it, else it idles. */
  #freed(c: Connection): void {
    if (this.#waiting.length === 0 && this.#reservers.length === 0) return this.#idle(c);
    // Not before it joined the pool: its first query (fetching types) must not hand it out.
    if (this.#reserved.has(c) || c.closed || !this.#open.includes(c)) return;
    this.#available(c);
  }

  #idle(c: Connection): void {
    if (this.#reserved.has(c) || c.closed) return;
    if (this.#expired(c)) return this.#retire(c);
    const ms = this.#pool.idleTimeout;
    if (ms <= 0) return;
    clearTimeout(this.#idleTimers.get(c));
    const timer = setTimeout(() => {
      this.#idleTimers.delete(c);
      if (c.inFlight === 0 && !this.#reserved.has(c)) this.#retire(c);
    }, ms);
    // An idle timer must not keep the process alive.
    Deno.unrefTimer(timer as unknown as number);
    this.#idleTimers.set(c, timer);
  }

  /** `destroying`: for requests that were waiting when end's timeout ran out. */
  #endedError(destroying = false): ConnectionError {
    const e = destroying
      ? new ConnectionError(
        "CONNECTION_DESTROYED",
        "the client was ended with sql.end({ timeout }) and the timeout passed",
      )
      : new ConnectionError(this.#ended!.code, this.#ended!.message);
    e.outcome = "not-sent";
    return e;
  }

  /**
   * The open, shared (unreserved) connection with the fewest requests in flight. One held by a
   * barrier (a cursor, a COPY) is never chosen: what was sent to it would wait for the barrier,
   * and a caller awaiting it before ending its COPY or cursor would wait for ever.
   */
  #leastBusy(): Connection | null {
    let best: Connection | null = null;
    for (const c of this.#open) {
      if (c.closed || c.barred || this.#reserved.has(c)) continue;
      if (this.#expired(c)) {
        if (c.inFlight === 0) this.#retire(c);
        continue;
      }
      if (best === null || c.busy < best.busy) best = c;
    }
    return best;
  }

  #canOpen(): boolean {
    return this.#open.length + this.#opening < this.#max;
  }

  /**
   * Nothing can take new work until a COPY FROM STDIN ends: at `max`, none opening, and every
   * live connection shared and held by a COPY waiting for its caller's data. Waiting would
   * deadlock a caller that awaits a query before ending its COPY, so the work is refused.
   */
  #copyBlocked(): QueryError | null {
    if (this.#opening > 0 || this.#canOpen()) return null;
    let copying = false;
    for (const c of this.#open) {
      if (c.closed) continue;
      if (this.#reserved.has(c) || !c.copyInProgress) return null;
      copying = true;
    }
    if (!copying) return null;
    return new QueryError(
      "COPY_IN_PROGRESS",
      `a COPY FROM STDIN holds every connection (max ${this.#max}) until its data ends: ` +
        "end the COPY's stream before awaiting another query, or raise max",
    );
  }

  /** Routes a request to a shared connection, opening one if needed. */
  send(req: PipelineRequest): void {
    if (this.#ended !== null) return req.fail(this.#endedError());
    if (this.#queued() >= this.#pool.maxQueue) {
      return req.fail(
        new QueryError(
          "QUEUE_FULL",
          `${this.#pool.maxQueue} requests are already waiting for a connection (max_queue)`,
        ),
      );
    }
    if (this.#waiting.length > 0) {
      this.#wait(req); // keep order behind those already waiting
      // A burst before connections are open: open more (up to max) to share it, as postgres.js does.
      if (this.#waiting.length > this.#opening && this.#canOpen()) this.#connect();
      return;
    }
    const best = this.#leastBusy();
    if (best !== null && (best.busy === 0 || !this.#canOpen())) return this.#route(best, req);
    if (this.#canOpen()) this.#connect();
    if (best !== null) return this.#route(best, req);
    const blocked = this.#copyBlocked();
    if (blocked !== null) return req.fail(blocked);
    this.#wait(req);
  }

  #wait(req: PipelineRequest): void {
    this.#waiting.push(req);
    this.#waitingSince.push(Date.now());
  }

  /** Takes the first `n` waiting requests. */
  #takeWaiting(n: number): PipelineRequest[] {
    this.#waitingSince.splice(0, n);
    return this.#waiting.splice(0, n);
  }

  /** Requests waiting locally: here and in every connection's backlog. */
  #queued(): number {
    let n = this.#waiting.length;
    for (const c of this.#open) n += c.waiting;
    return n;
  }

  #route(c: Connection, req: PipelineRequest): void {
    req.route = c; // for cancel: where it went
    const timer = this.#idleTimers.get(c);
    if (timer !== undefined) {
      clearTimeout(timer);
      this.#idleTimers.delete(c);
    }
    const debug = this.#pool.debug;
    if (debug !== undefined && req instanceof QueryRequest) {
      try {
        debug(this.#ids.get(c) ?? 0, req.spec.text, req.spec.params, req.spec.types);
      } catch (e) {
        return req.fail(e as Error); // the user's hook failed: that query fails, nothing else
      }
    }
    c.send(req);
  }

  /** Cancels a request: dropped if still waiting here, else cancelled on its connection. */
  cancel(req: PipelineRequest, reason: Error): void {
    const at = this.#waiting.indexOf(req);
    if (at !== -1) {
      this.#waiting.splice(at, 1);
      this.#waitingSince.splice(at, 1);
      return req.fail(reason);
    }
    req.route?.cancel(req, reason);
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
      if (best !== null && (best.busy === 0 || !this.#canOpen())) {
        this.#reserved.add(best);
        return resolve(best);
      }
      const blocked = this.#copyBlocked();
      if (blocked !== null) return reject(blocked);
      this.#reservers.push({ resolve, reject, since: Date.now() });
      if (this.#canOpen()) this.#connect();
    });
  }

  /**
   * Takes the shared connection to backend `pid` (with `secret`, the same server) for one caller
   * alone, as `reserve` would (what it has in flight finishes first): a caller that ran a query
   * on the pool keeps that session. Null when it cannot be taken now (closed, reserved, retiring,
   * held by a COPY or a cursor, others waiting to reserve, or the pool ended).
   */
  reserveAt(pid: number, secret: number): Connection | null {
    if (this.#ended !== null || this.#reservers.length > 0) return null;
    const c = this.#open.find((o) => o.pid === pid && o.secret === secret);
    if (c === undefined || c.closed || c.barred || this.#reserved.has(c) || this.#expired(c)) {
      return null;
    }
    this.#reserved.add(c);
    return c;
  }

  /** Returns a reserved connection; one left inside a transaction is rolled back first. */
  release(c: Connection): void {
    const ending = this.#onRelease.get(c);
    if (ending !== undefined) {
      // sql.end() waits for it: it ends once what it still has (a rollback) is answered.
      this.#onRelease.delete(c);
      this.#reserved.delete(c);
      if (!c.closed && c.status !== IDLE) exec(c, "rollback").catch(() => {});
      return ending();
    }
    if (!this.#reserved.delete(c) || c.closed) return this.#forget();
    if (this.#expired(c) && c.inFlight === 0 && c.status === IDLE) return this.#retire(c);
    // Queued ahead of anything else, so the next user starts outside any transaction.
    if (c.status !== IDLE) exec(c, "rollback").catch(() => {});
    this.#available(c);
  }

  /**
   * A connection became available: waiting requests take it, then a waiting reserver. Both, in
   * that order: the requests are answered before the reserver's BEGIN on the same connection,
   * so a pool kept busy by transactions never starves plain queries (nor the reverse).
   */
  #available(c: Connection): void {
    // Connections still opening will take their share of what waits.
    const share = Math.ceil(this.#waiting.length / (this.#opening + 1));
    for (const req of this.#takeWaiting(share)) this.#route(c, req);
    const reserver = this.#reservers.shift();
    if (reserver !== undefined) {
      this.#reserved.add(c);
      return reserver.resolve(c);
    }
    if (c.inFlight === 0) this.#idle(c);
  }

  #connect(): void {
    this.#opening++;
    let self: Connection | null = null;
    let claimed: Connection | null = null; // the attempt that took its share of what waits
    const claim = (c: Connection) => {
      if (claimed === c) return;
      claimed = c;
      this.#claim(c);
    };
    const trace = this.#pool.telemetry?.connect();
    const opening = connect({
      ...this.#options,
      onstage: trace?.stage,
      onparameter: (name, value) => {
        this.parameters[name] = value;
        this.#options.onparameter?.(name, value);
      },
      onclose: () => this.#forget(),
      // Idle: it may have been held by a barrier that work waited behind.
      onidle: () => self !== null && this.#freed(self),
      onorphans: (reqs) => this.#adopt(self, reqs),
      claim,
      unclaim: (reqs) => this.#giveBack(reqs),
    }).then((c) => {
      self = c;
      for (const [name, value] of c.parameters) this.parameters[name] = value;
      // It may have died in the same read as its ReadyForQuery: that is a failed attempt, not
      // a connection (else a server that drops every session would be retried without pause).
      if (c.closed) throw c.closedReason ?? new ConnectionError("CONNECTION_CLOSED", "closed");
      // Under trust, or after a target_session_attrs check, nothing was claimed yet.
      claim(c);
      return c;
    }).then(
      (c) => {
        trace?.done(c, null);
        this.#opening--;
        if (this.#destroyed) return c.destroy(); // too late: sql.end({ timeout }) ran out
        this.#everConnected = true;
        this.#backoff = 0;
        this.#lastError = null;
        const life = this.#pool.maxLifetime;
        // Jitter, so connections opened together are not all replaced at the same moment.
        if (life > 0) {
          c.deadline = c.openedAt + life * (0.9 + Math.random() * 0.2);
          // Unreferenced: it must not keep the process alive.
          const cancel = unrefTimeout(Math.max(0, c.deadline - Date.now()), () => {
            c.expired = true;
            if (c.inFlight === 0 && !this.#reserved.has(c) && !c.closed) this.#retire(c);
          });
          c.onClose(cancel);
        }
        this.#open.push(c);
        this.#available(c);
      },
      (err: Error) => {
        trace?.done(null, err);
        this.#connectFailed(err);
      },
    ).finally(() => this.#openings.delete(opening));
    this.#openings.add(opening);
  }

  /**
   * A connection about to finish authenticating takes its share of the waiting requests, so
   * they ride in its last authentication write; the catalog query of `fetch_types` goes right
   * behind them (on a fresh backend it costs the server a millisecond, which the first answers
   * need not wait for: a query before it that returns a user-defined type keeps its rows until
   * the catalog's answer is registered). A waiting reserver gets the connection instead (its
   * queries come after the catalog query).
   */
  #claim(c: Connection): void {
    if (!this.#ids.has(c)) this.#ids.set(c, this.#nextId++);
    for (const req of this.#pool.sessionStart?.() ?? []) c.send(req);
    let types = this.#pool.arrayTypes?.();
    if (this.#reservers.length > 0 || this.#destroyed) {
      if (types) c.send(types);
      return;
    }
    const share = Math.ceil(this.#waiting.length / Math.max(1, this.#opening));
    const since = this.#waitingSince.slice(0, share);
    const taken = this.#takeWaiting(share);
    // Queries whose rows could not wait for the catalog's types go behind it, as before.
    if (types && !taken.every((req) => req.mayPrecedeTypes === true)) {
      c.send(types);
      types = undefined;
    }
    for (let i = 0; i < taken.length; i++) {
      const req = taken[i];
      if (!this.#claimedAt.has(req)) {
        this.#claimedAt.set(req, { since: since[i], order: this.#claims++ });
      }
      this.#route(c, req);
    }
    if (types) c.send(types);
  }

  /**
   * A startup failed before the server ran what it had claimed: it waits again, where and since
   * when it first waited (connect_timeout counts from then, and #expire reads oldest first).
   * Whatever was never claimed arrived after every claimed request; so each goes back before
   * those, among the others given back by their order of claim.
   */
  #giveBack(reqs: PipelineRequest[]): void {
    let at = 0;
    for (const req of reqs) {
      const claimed = this.#claimedAt.get(req);
      // Not a waiting request but what #claim sent first, fetch_types' catalog query: the next
      // connection sends its own, so this one goes nowhere (else it would run twice there).
      if (claimed === undefined) continue;
      while (at < this.#waiting.length) {
        const ahead = this.#claimedAt.get(this.#waiting[at]);
        if (ahead === undefined || ahead.order > claimed.order) break;
        at++;
      }
      this.#waiting.splice(at, 0, req);
      this.#waitingSince.splice(at, 0, claimed.since);
      at++;
    }
  }

  #connectFailed(err: Error): void {
    this.#opening--;
    if (this.#opening > 0) return; // the others will take what waits
    const open = this.#leastBusy();
    if (open !== null) {
      // Another connection is up: it takes the share this one would have had.
      for (const req of this.#takeWaiting(this.#waiting.length)) this.#route(open, req);
      return;
    }
    if (this.#open.some((c) => !c.closed)) return; // all reserved: waiters go on release
    this.#lastError = err;
    if (this.#everConnected && transient(err) && this.#ended === null) {
      // The server was up and may come back: retry with backoff; waiting requests give up
      // after connect_timeout (see #expire).
      return this.#scheduleRetry();
    }
    // Nothing is open to take the waiting requests: they fail with the reason.
    if (err instanceof ConnectionError) err.outcome = "not-sent";
    const waiting = this.#takeWaiting(this.#waiting.length);
    const reservers = this.#reservers;
    this.#reservers = [];
    for (const req of waiting) req.fail(err);
    for (const r of reservers) r.reject(err);
  }

  #scheduleRetry(): void {
    this.#expire();
    if (this.#retry !== undefined || (this.#waiting.length === 0 && this.#reservers.length === 0)) {
      return;
    }
    this.#backoff = Math.min(BACKOFF_MAX_MS, Math.max(BACKOFF_MIN_MS, this.#backoff * 2));
    const delay = this.#backoff * (0.75 + Math.random() / 2); // jitter: clients do not stampede
    this.#retry = setTimeout(() => {
      this.#retry = undefined;
      this.#expire();
      if (this.#ended === null && (this.#waiting.length > 0 || this.#reservers.length > 0)) {
        if (this.#canOpen()) this.#connect();
      }
    }, delay);
  }

  /**
   * Fails waiting requests and reservers (sql.begin, sql.reserve) that have waited longer than
   * connect_timeout for a connection: one rule for every caller, so none waits through an
   * outage for ever.
   */
  #expire(): void {
    let limit: number;
    try {
      limit = connectTimeoutMs(this.#options);
    } catch {
      return; // a bad value fails each connection attempt instead
    }
    if (limit <= 0) return;
    const now = Date.now();
    const timedOut = () => {
      const e = connectTimeoutError(this.#options.endpoint, this.#lastError ?? undefined);
      e.outcome = "not-sent";
      return e;
    };
    let n = 0;
    while (n < this.#waitingSince.length && now - this.#waitingSince[n] >= limit) n++;
    for (const req of this.#takeWaiting(n)) req.fail(timedOut());
    n = 0;
    while (n < this.#reservers.length && now - this.#reservers[n].since >= limit) n++;
    for (const r of this.#reservers.splice(0, n)) r.reject(timedOut());
  }

  /**
   * Requests a dead connection never wrote: sent again elsewhere. Not when the
   * connection was reserved: a transaction's statements must not run outside it.
   */
  #adopt(c: Connection | null, reqs: PipelineRequest[]): void {
    if (c !== null && this.#reserved.has(c)) {
      for (const req of reqs) {
        const e = new ConnectionError("CONNECTION_CLOSED", "the reserved connection was lost");
        e.outcome = "not-sent";
        req.fail(e);
      }
      return;
    }
    for (const req of reqs) this.send(req);
  }

  #forget(): void {
    for (const [c, timer] of this.#idleTimers) {
      if (c.closed) {
        clearTimeout(timer);
        this.#idleTimers.delete(c);
      }
    }
    this.#open = this.#open.filter((c) => !c.closed);
    for (const c of this.#reserved) if (c.closed) this.#reserved.delete(c);
    // Work waiting for a connection must not strand when one goes away.
    const stranded = this.#waiting.length > 0 || this.#reservers.length > 0;
    if (stranded && this.#opening === 0 && this.#retry === undefined && this.#canOpen()) {
      if (this.#ended === null) this.#connect();
    }
  }

  /** Connections idle and in use, and requests waiting for one (telemetry's gauges). */
  counts(): PoolCounts {
    let idle = 0;
    let used = 0;
    for (const c of this.#open) {
      if (c.closed) continue;
      if (c.inFlight === 0 && !this.#reserved.has(c)) idle++;
      else used++;
    }
    return { idle, used, pending: this.#queued() + this.#reservers.length };
  }

  /** Open connections (for tests and stats). */
  get connections(): readonly Connection[] {
    return this.#open;
  }

  /** Stops accepting requests; waits for in-flight ones, up to `timeout` seconds. */
  async end(timeout?: number): Promise<void> {
    this.#ended ??= new ConnectionError("CONNECTION_ENDED", "the client was ended with sql.end()");
    // Only a timer that exists: Deno's first clearTimeout loads its Node timers (about 5 ms).
    if (this.#retry !== undefined) clearTimeout(this.#retry);
    this.#retry = undefined;
    for (const timer of this.#idleTimers.values()) clearTimeout(timer);
    this.#idleTimers.clear();
    for (const r of this.#reservers.splice(0)) r.reject(this.#endedError());
    // Requests waiting for a connection that is still opening are sent and answered first.
    const all = Promise.allSettled([...this.#openings]).then(() => {
      // Whatever no connection could take (an outage) fails now rather than wait forever.
      for (const req of this.#takeWaiting(this.#waiting.length)) req.fail(this.#endedError());
      // As postgres.js: a transaction or reserved connection may finish its work first.
      return Promise.all(this.#open.map((c) => this.#afterRelease(c).then(() => c.end())));
    });
    if (timeout === undefined) return void await all;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const expired = new Promise<"timeout">((r) =>
      timer = setTimeout(() => r("timeout"), timeout * 1000)
    );
    const outcome = await Promise.race([all, expired]);
    clearTimeout(timer);
    if (outcome === "timeout") this.#destroyAll();
  }

  /** Resolves once `c` is not reserved (at once for a shared one) or has closed. */
  #afterRelease(c: Connection): Promise<void> {
    if (!this.#reserved.has(c) || c.closed) return Promise.resolve();
    return new Promise((resolve) => {
      const stop = c.onClose(() => {
        this.#onRelease.delete(c);
        resolve();
      });
      this.#onRelease.set(c, () => {
        stop();
        resolve();
      });
    });
  }

  /** The end timeout passed: everything still waiting, opening or in flight fails now. */
  #destroyAll(): void {
    this.#destroyed = true;
    for (const req of this.#takeWaiting(this.#waiting.length)) req.fail(this.#endedError(true));
    for (const r of this.#reservers.splice(0)) r.reject(this.#endedError(true));
    for (const c of this.#open) c.destroy();
  }
}
