/**
 * One connection to the server and its pipeline.
 *
 * Requests are encoded into the write buffer the moment they are sent and
 * queued in FIFO order (`request_fifo.ts`); one flush per tick (per turn of
 * the event loop while others are in flight, where the transport gathers
 * writes: native TLS) writes everything encoded since the last one. A single
 * read loop frames the answers and hands each message to the request at the
 * head of the FIFO; ReadyForQuery pops it. Notices, parameter changes and
 * notifications are routed by type, never by position (`out_of_band.ts`).
 */
import {
  Backend,
  commandComplete,
  fields,
  parameterDescription,
  ProtocolViolation,
  readyStatus,
  rowDescription,
} from "../protocol/backend.ts";
import { timersModule } from "../builtins.ts";
import { Framer } from "../protocol/framer.ts";
import * as fe from "../protocol/frontend.ts";
import { Writer } from "../protocol/writer.ts";
import { ConnectionError, PostgresError } from "../errors.ts";
import type { DecodeOptions } from "../types/text_decoders.ts";
import type { EncodeContext, PipelineRequest, RequestIO } from "./requests/request.ts";
import type { ConnectionState } from "./requests/request.ts";
import { type PasswordSource, startup, type StartupIO } from "./startup.ts";
import type { AuthPolicy } from "./authentication.ts";
import { StatementCache } from "./statement.ts";
import { CancelRetries, mayBeCancelRequest, sendCancel, StrayCancels } from "./cancel.ts";
import { onlyBindingOffered, openTransport } from "./transport/connect.ts";
import { type Endpoint, type TlsPath, type Transport, whereOf } from "./transport/transport.ts";
import { startWithin, withFallbacks } from "./open.ts";
import { Backlog, RequestFifo } from "./request_fifo.ts";
import { cancelledInBatch, copyError, skippedInBatch, strayCancel } from "./derived_errors.ts";
import { type ServerHooks, ServerReports } from "./out_of_band.ts";
import { QueryWatchdog } from "./watchdog.ts";
import { COPY_BOTH, COPY_OUT, ROWS, Sequence } from "./sequence.ts";

/** Everything one connection needs to know. */
export interface ConnectionOptions extends ServerHooks {
  /** Where to connect and the TLS policy. */
  endpoint: Endpoint;
  /** Startup parameters: user, database, application_name, and any others. */
  params: Record<string, string>;
  /** The password, if the server asks for one. */
  password: PasswordSource;
  /** The protocol minor version to ask for: 0 (3.0) or 2 (3.2, PostgreSQL 18's longer cancel key). */
  protocolMinor?: number;
  /** The lowest protocol minor version the server may answer with (`min_protocol_version`). */
  protocolMinMinor?: number;
  /** What the server may authenticate the client with (`require_auth`, `channel_binding`). */
  auth?: AuthPolicy;
  /**
   * Milliseconds allowed for connect, TLS and startup; 0 for no limit. A
   * function is called at each attempt (the `connect_timeout` option is read
   * then, not once); it throws a TypeError when the value is not usable.
   */
  connectTimeout: number | (() => number);
  /** Most requests written and not yet answered; more wait locally. */
  maxPipeline: number;
  /** Most bytes written and not yet answered; past it, requests wait locally (one always goes). */
  maxPipelineBytes: number;
  /** Most named statements cached on this connection. */
  maxStatements: number;
  /** Value decoding options. */
  decode: DecodeOptions;
  /** Called once when the connection closes, with the reason if it failed. */
  onclose?: (err: ConnectionError | null) => void;
  /** Called whenever the last request in flight is answered. */
  onidle?: () => void;
  /**
   * Takes the requests that were never written when the connection died, so
   * they can run elsewhere; without it they fail with `outcome: "not-sent"`.
   */
  onorphans?: (requests: PipelineRequest[]) => void;
  /**
   * Called (at most once) when authentication is about to end, with the connection still
   * starting: requests sent to it now ride in the same write as the last authentication
   * message instead of waiting for ReadyForQuery. Not called under trust (nothing follows the
   * startup message), nor when a check must see the session first (target_session_attrs).
   */
  claim?: (c: Connection) => void;
  /**
   * Takes back what `claim` sent when the startup then failed without the server running
   * any of it (it refused, or the socket broke before authentication succeeded).
   */
  unclaim?: (requests: PipelineRequest[]) => void;
  /**
   * Called as the startup goes (for telemetry): the socket is open (TLS or not), then the server
   * accepted the session.
   */
  onstage?: (stage: "transport" | "authenticated", encrypted: boolean) => void;
  /**
   * Milliseconds without any answer while the server owes one before the
   * statement running is cancelled; as long again and the connection is
   * destroyed (a server that went silent). 0: no limit.
   */
  queryTimeout?: number;
}

const IDLE = 0x49; // ReadyForQuery status outside a transaction block

/**
 * A tick that has encoded half of what the tick before it encoded, within these bounds, writes
 * what it has before it ends (see #enqueue). Measured with Drizzle's 50 selects and 200 inserts
 * through `@pgpipe/pgpipe/drizzle`: a fixed 1 to 8 KB, and a share of 0.3, 0.5 and 0.7.
 */
const EARLY_WRITE_SHARE = 0.5;
const EARLY_WRITE_MIN = 2048;
const EARLY_WRITE_MAX = 16384;

/** A live, authenticated connection with a pipeline of requests. */
export class Connection implements EncodeContext {
  readonly statements: StatementCache;
  readonly decode: DecodeOptions;
  /** Server parameters (server_version, TimeZone, ...), updated as they change. */
  readonly parameters: Map<string, string> = new Map();
  /** When the connection was opened (ms since the epoch), for max_lifetime. */
  readonly openedAt: number = Date.now();
  /** When the pool retires it (ms since the epoch; max_lifetime with jitter), or Infinity. */
  deadline: number = Infinity;
  /** Set by the pool once `deadline` passed: it takes no new work and closes once idle. */
  expired = false;
  /** Backend process ID and secret key, for CancelRequest. */
  pid = 0;
  secret = 0;
  /** The whole secret key (longer than `secret`'s 4 bytes under protocol 3.2). */
  cancelKey: Uint8Array = new Uint8Array(4);
  /** Transaction status from the last ReadyForQuery: I idle, T in a block, E failed block. */
  status = 0x49;
  #states = new Map<number, ConnectionState>(); // Result.state per status, shared by results

  /** The TLS implementation the connection runs on (`"native"`, `"node"`), or null when plain. */
  get tls(): TlsPath | null {
    return this.#transport?.tls ?? null;
  }

  /** pid, secret, status and tls as results report them: one frozen object per status, reused. */
  get state(): ConnectionState {
    let state = this.#states.get(this.status);
    if (state === undefined || state.pid !== this.pid) {
      state = Object.freeze({
        pid: this.pid,
        secret: this.secret,
        status: String.fromCharCode(this.status),
        tls: this.tls,
      });
      this.#states.set(this.status, state);
    }
    return state;
  }

  #options: ConnectionOptions;
  #transport!: Transport;
  #framer = new Framer();
  #writer = new Writer();
  #spare = new Writer();
  #writing = false;
  #flushQueued = false;
  #fifo = new RequestFifo(); // written or encoded, awaiting answers
  #backlog = new Backlog(); // waiting for room in the pipeline
  #batchOpen = false; // the last request encoded is batchable and still awaits its Sync
  #aborted: PostgresError | null = null; // the error that aborted the batch being answered
  #paused: (() => void) | null = null; // resolves a paused read loop
  #pausing = false;
  #flushWaiters: (() => void)[] = [];
  /** See EncodeContext.typesPending. */
  typesPending: Promise<void> | null = null;
  /** Bytes encoded in this tick so far, and how many make it worth an early write (#enqueue). */
  #tickBytes = 0;
  #earlyAt = EARLY_WRITE_MIN;
  #readGate: (() => void) | null = null; // resolves an idle read loop held back (#idleRead)
  #io: RequestIO = {
    write: (encode) => {
      if (this.#closed !== null) return;
      encode(this.#writer);
      this.#scheduleFlush();
    },
    flushed: () =>
      this.#writer.length === 0 && !this.#writing
        ? Promise.resolve()
        : new Promise<void>((resolve) => this.#flushWaiters.push(resolve)),
    pauseReading: () => {
      this.#pausing = true;
    },
    resumeReading: () => {
      this.#pausing = false;
      const wake = this.#paused;
      this.#paused = null;
      wake?.();
    },
    cancel: () => {
      const head = this.#fifo.queue[this.#fifo.head];
      if (head !== undefined && this.#closed === null) this.#cancelNow(head);
    },
    inTransaction: () => this.status !== IDLE,
  };
  #cancelWhenHead = new Map<PipelineRequest, Error>(); // cancel asked while others ran ahead of it
  #cancelled = new Set<PipelineRequest>(); // requests a CancelRequest was sent for
  #strays = new StrayCancels(); // our CancelRequests that may yet stop a request they were not for
  #recancel = new CancelRetries<PipelineRequest>(); // cancelled statements not yet seen to end
  #seq = new Sequence(); // the answers the head request may receive next (sequence.ts)
  #resend: PipelineRequest | null = null; // re-sent at its ReadyForQuery (late cancel, stale statement)
  #resendCancelled: Error | null = null; // its user cancelled it before it went again
  #watchdog = new QueryWatchdog();
  #reports: ServerReports;
  #closed: ConnectionError | null = null;
  #starting = true; // until the startup's ReadyForQuery: the startup writes and reads
  #opened = false; // the transport is open
  #claimed = false; // claim was called
  #authenticated = false; // AuthenticationOk arrived
  #fatal: PostgresError | null = null;
  #ending: Promise<void> | null = null;
  #drained: (() => void) | null = null; // wakes end() when the last answer arrives
  #closeListeners = new Set<(err: ConnectionError) => void>();

  private constructor(options: ConnectionOptions) {
    this.#options = options;
    this.statements = new StatementCache(options.maxStatements);
    this.decode = options.decode;
    this.#reports = new ServerReports(this.parameters, options);
  }

  /** Connects, negotiates TLS and authenticates; rejects with a typed error. */
  static open(options: ConnectionOptions): Promise<Connection> {
    return withFallbacks(options.endpoint, (tryTls) => Connection.#attempt(options, tryTls));
  }

  static #attempt(options: ConnectionOptions, tryTls: boolean): Promise<Connection> {
    const c = new Connection(options);
    // Returned as it is, not awaited: one more await would bring a failed start to the pool a
    // microtask turn later, after a query its caller sends at once, which then fails with it
    // (test/streams_test.ts, "a query cancelled while its connection starts").
    return startWithin(options, {
      run: (signal) => c.#start(tryTls, signal),
      opened: () => c.#opened,
      close: () => c.#transport?.close(),
      abandon: (err) => c.#abandon(err),
      ready: () => {
        c.#started();
        c.#readLoop();
        c.#startWatchdog();
        return c;
      },
    });
  }

  /** Opens the transport and runs the startup over it; `signal` aborts the negotiation. */
  async #start(tryTls: boolean, signal: AbortSignal): Promise<void> {
    const options = this.#options;
    // The startup writes for itself; requests claimed meanwhile ride in its writes.
    this.#writing = true;
    this.#transport = await openTransport(options.endpoint, tryTls, signal);
    this.#opened = true;
    if (signal.aborted) this.#transport.close();
    options.onstage?.("transport", this.#transport.tls !== null);
    const result = await startup(this.#startupIO(), options.params, options.password, {
      minor: options.protocolMinor,
      minMinor: options.protocolMinMinor,
      auth: options.auth,
    });
    this.pid = result.pid;
    this.secret = result.secret;
    this.cancelKey = result.key;
    options.onstage?.("authenticated", this.#transport.tls !== null);
  }

  /** The startup is over: what was encoded after its last write leaves now. */
  #started(): void {
    this.#starting = false;
    this.#writing = false;
    if (this.#writer.length > 0) this.#scheduleFlush();
    // A cancel asked while the backend's key was unknown.
    const head = this.#fifo.queue[this.#fifo.head];
    if (head !== undefined && this.#cancelWhenHead.delete(head)) this.#cancelNow(head);
  }

  /**
   * The startup failed with requests claimed: they go back to whoever sent them when the
   * server certainly ran none (it refused, or authentication never succeeded); after
   * AuthenticationOk a lost socket leaves that unknown, so they fail.
   */
  #abandon(err: Error): void {
    if (this.inFlight === 0) return;
    const reqs = [...this.#fifo.clear().requests, ...this.#backlog.clear()];
    this.#writer.reset();
    const neverRan = err instanceof PostgresError || !this.#authenticated;
    // One its caller cancelled meanwhile stays cancelled: it is never handed on to run elsewhere.
    const cancelled = this.#cancelWhenHead;
    this.#cancelWhenHead = new Map();
    if (neverRan && this.#options.unclaim !== undefined) {
      for (const [req, reason] of cancelled) req.fail(reason);
      return this.#options.unclaim(reqs.filter((req) => !cancelled.has(req)));
    }
    for (const req of reqs) {
      const e = err instanceof ConnectionError ? copyError(err) : err;
      if (e instanceof ConnectionError) e.outcome = neverRan ? "not-sent" : "unknown";
      req.fail(e);
    }
  }

  #startupIO(): StartupIO {
    const framer = this.#framer;
    const transport = () => this.#transport;
    const message = { type: 0, buf: framer.buf, start: 0, end: 0 };
    return {
      writer: () => this.#writer,
      flush: async () => {
        if (this.#batchOpen) this.#closeBatch();
        // Swap buffers, as #flush does: whatever is encoded during the write goes next time.
        const out = this.#writer;
        this.#writer = this.#spare;
        this.#spare = out;
        this.#fifo.unsent = this.#fifo.tail;
        for (let off = 0; off < out.length;) {
          off += await transport().write(out.buf.subarray(off, out.length));
        }
        out.reset();
      },
      ride: () => {
        if (this.#claimed || this.#options.claim === undefined) return;
        this.#claimed = true;
        this.#options.claim(this);
      },
      authenticated: () => {
        this.#authenticated = true;
      },
      serverVerified: this.#transport.verified,
      encrypted: this.#transport.tls !== null,
      serverCertificate: this.#transport.serverCertificate,
      onlyBindingOffered: () => onlyBindingOffered(this.#options.endpoint, this.#transport),
      next: async () => {
        while (!framer.next()) {
          const n = await transport().read(framer.space());
          if (n === null) throw new Error("the server closed the connection");
          framer.advance(n);
        }
        message.type = framer.type;
        message.buf = framer.buf;
        message.start = framer.start;
        message.end = framer.end;
        return message;
      },
      // Reported during startup too, as postgres.js does (application_name, server_version, ...).
      parameter: (name, value) => this.#reports.parameter(name, value),
      notice: (f) => this.#reports.notice(f),
    };
  }

  /** Checks for a server that owes an answer and has gone quiet (the `query_timeout` option). */
  #startWatchdog(): void {
    this.#watchdog.start(this.#options.queryTimeout ?? 0, {
      owesAnswer: () => {
        const head = this.#fifo.queue[this.#fifo.head];
        // A cursor or COPY may legitimately wait on its consumer, not on the server.
        return head !== undefined && !head.barrier && !this.#pausing;
      },
      cancel: () => this.#cancelNow(this.#fifo.queue[this.#fifo.head]),
      destroy: (quiet) =>
        this.#fail(
          new ConnectionError(
            "QUERY_TIMEOUT",
            `the server sent nothing for ${quiet} ms while a query was running`,
            whereOf(this.#options.endpoint),
          ),
        ),
    });
  }

  /**
   * Calls `fn` once when the connection closes, with the reason; returns a
   * function that removes it. Used by transactions, which fail at once when
   * their connection goes away even if no query of theirs is in flight.
   */
  onClose(fn: (err: ConnectionError) => void): () => void {
    if (this.#closed !== null) {
      fn(this.#closed);
      return () => {};
    }
    this.#closeListeners.add(fn);
    return () => this.#closeListeners.delete(fn);
  }

  /** Where this connection went (the host of a list that it reached). */
  get endpoint(): Endpoint {
    return this.#options.endpoint;
  }

  /** Requests sent and not yet answered, plus those waiting for room. */
  get inFlight(): number {
    return this.#fifo.size + this.#backlog.size;
  }

  /**
   * What a new query would wait behind, for the pool's choice of connection: fetch_types'
   * catalog query, which a new connection sends behind its first queries, does not count
   * (another connection opened for it would cost more than the millisecond it takes).
   */
  get busy(): number {
    return Math.max(0, this.inFlight - (this.typesPending !== null ? 1 : 0));
  }

  /** Why the connection closed, once it has. */
  get closedReason(): ConnectionError | null {
    return this.#closed;
  }

  /** Requests waiting locally for room in this connection's pipeline. */
  get waiting(): number {
    return this.#backlog.size;
  }

  /**
   * Whether a barrier (a cursor, a COPY) holds the connection or waits in it: whatever is sent
   * now waits until it ends, so the pool sends shared work elsewhere.
   */
  get barred(): boolean {
    return this.#fifo.barriers > 0 || this.#backlog.barriers > 0;
  }

  /** Whether a COPY FROM STDIN holds the connection and waits for its caller's data. */
  get copyInProgress(): boolean {
    return this.#fifo.barrier?.awaitsInput === true;
  }

  /** Whether the connection is closed (or closing). */
  get closed(): boolean {
    return this.#closed !== null || this.#ending !== null;
  }

  /** Sends a request: encoded now and written with the others of this tick. */
  send(req: PipelineRequest): void {
    if (this.#closed !== null || this.#ending !== null) {
      const err = this.#closed ??
        new ConnectionError("CONNECTION_ENDED", "the connection is ending");
      req.fail(Object.assign(copyError(err), { outcome: "not-sent" as const }));
      return;
    }
    // Pending from the moment it is accepted, not encoded: when the first queries fill the
    // pipeline it waits in the backlog, and the rows of those ahead of it must still wait for it.
    const types = req.typesDone;
    if (types !== undefined) {
      this.typesPending = types;
      types.then(() => {
        if (this.typesPending === types) this.typesPending = null;
      });
    }
    if (this.#backlog.size > 0 || !this.#hasRoom()) {
      this.#backlog.push(req);
      return;
    }
    this.#enqueue(req);
  }

  /** Whether the pipeline bounds allow one more request (an empty pipeline always does). */
  #hasRoom(): boolean {
    const fifo = this.#fifo;
    const n = fifo.size;
    return n === 0 ||
      (fifo.barriers === 0 && n < this.#options.maxPipeline &&
        fifo.bytes < this.#options.maxPipelineBytes);
  }

  #enqueue(req: PipelineRequest): void {
    // Batchable requests (a transaction's queries) leave their Sync to the connection: one Sync
    // ends each run of them written together, before anything else and at the flush.
    const batchable = req.batchable === true;
    if (this.#batchOpen && !batchable) this.#closeBatch();
    const before = this.#writer.length;
    req.encode(this.#writer, this);
    const size = this.#writer.length - before;
    this.#fifo.push(req, size, !batchable);
    this.#batchOpen = batchable;
    req.attach?.(this.#io);
    this.#scheduleFlush();
    // A batch built in one tick leaves in two parts once the first is worth it: the server starts
    // on the first queries while the caller still builds the rest (an ORM's Promise.all), instead
    // of the two adding up. Only one write is under way at a time (a second one could go out
    // while the first is cut short), so the tick gets one early write: at about half of what the
    // tick before it encoded, the size a repeated workload's tick will likely reach again.
    // A transaction's open batch waits for its Sync.
    this.#tickBytes += size;
    if (
      this.#tickBytes >= this.#earlyAt && !this.#writing && !this.#batchOpen &&
      this.#closed === null
    ) void this.#write();
  }

  /** Ends the open batch: its Sync belongs to the last request encoded. */
  #closeBatch(): void {
    fe.sync(this.#writer);
    this.#fifo.syncLast(5);
    this.#batchOpen = false;
  }

  #scheduleFlush(): void {
    // Everything issued in this tick leaves in one write. Nothing is held back for answers to
    // arrive: on a far link that would cost a whole round trip (bench/suites/latency.ts, "1 query
    // behind 100"), and on loopback batching writes that way gained nothing measurable.
    // Queued even while a write is under way: until it runs, the tick is still building, and
    // the write loop sends only parts worth a write (see #write).
    if (this.#flushQueued) return;
    this.#flushQueued = true;
    // Where the transport gathers writes (native TLS) while others are in flight: one turn of the
    // event loop later (about a µs), after the answers that already arrived were read, so the
    // queries they free leave together in one TLS record rather than one per read (each costs
    // the server a decrypt). Pipelined, that measured 5-10% more queries/s on one connection and
    // on the pool, with less CPU per query on both sides. Over plain TCP and node:tls the same
    // rule, A/B against this one in one process (1 and 4 connections, in a transaction, the pool
    // with 500 in flight), moved q/s and CPU per query by no more than the noise (±2-4% medians;
    // a plain TCP read already takes all that arrived, so there are no per-record reads to
    // gather). They keep the microtask. A lone query still leaves at once.
    if (this.#fifo.size > 1 && this.#transport.gatherWrites) {
      timersModule().setImmediate(this.#flush);
    } else queueMicrotask(this.#flush);
  }

  /** The end of a tick: everything encoded leaves (a write under way takes it when it is done). */
  #flush = (): Promise<void> => {
    this.#flushQueued = false;
    this.#earlyAt = Math.min(
      EARLY_WRITE_MAX,
      Math.max(EARLY_WRITE_MIN, this.#tickBytes * EARLY_WRITE_SHARE),
    );
    this.#tickBytes = 0;
    return this.#write();
  };

  /** Whether the write loop sends what is encoded now, or leaves it to the tick's flush. */
  #worthWriting(): boolean {
    const n = this.#writer.length;
    return n > 0 &&
      (!this.#flushQueued || (n >= this.#earlyAt && !this.#batchOpen));
  }

  /**
   * Writes what is encoded, and what is encoded meanwhile, until nothing is left; while the tick
   * that encodes it still runs (its flush queued), only parts worth an early write.
   */
  async #write(): Promise<void> {
    if (this.#writing || this.#closed !== null) return;
    this.#writing = true;
    try {
      while (this.#worthWriting()) {
        if (this.#batchOpen) this.#closeBatch();
        // Swap buffers so requests sent during this write accumulate for the next one.
        const out = this.#writer;
        this.#writer = this.#spare;
        this.#spare = out;
        this.#fifo.unsent = this.#fifo.tail;
        this.#watchdog.wrote();
        const transport = this.#transport;
        for (let off = 0; off < out.length;) {
          const written = transport.write(out.buf.subarray(off, out.length));
          // The write is under way: a read loop held back while idle may read again (#idleRead).
          if (this.#readGate !== null) this.#openReadGate();
          off += await written;
        }
        out.reset();
      }
    } catch (e) {
      this.#fail(this.#lost(e));
    } finally {
      this.#writing = false;
      // A part left to the tick's flush is not written yet: its waiters wait for that flush.
      if (this.#writer.length === 0 || this.#closed !== null) {
        const waiters = this.#flushWaiters;
        this.#flushWaiters = [];
        for (const wake of waiters) wake();
      }
    }
  }

  /**
   * Where an idle read costs (native TLS), with nothing in flight, the read loop waits until the
   * next write is under way (or one turn of the event loop, whichever comes first) before it reads
   * again. A native read goes to the socket at once (rustls reads it before it waits), and with
   * nothing to read yet that costs a syscall and a pass through rustls; issued before the next
   * serial query's write, that sat on every round trip's critical path, where the raw ping-pong
   * issues it after its write, while the server works. Plain TCP knows the socket is empty
   * without a syscall and node:tls reads by events, so both read at once as before. The turn of
   * the event loop bounds the wait: an idle connection still reads notifications, notices and the
   * server's FATAL (pg_terminate_backend, idle_session_timeout) as they come.
   */
  #idleRead(): Promise<void> {
    return new Promise((resolve) => {
      this.#readGate = resolve;
      timersModule().setImmediate(this.#openReadGate);
    });
  }

  #openReadGate = (): void => {
    const open = this.#readGate;
    this.#readGate = null;
    open?.();
  };

  async #readLoop(): Promise<void> {
    const framer = this.#framer;
    const fifo = this.#fifo;
    try {
      for (;;) {
        while (framer.next()) {
          this.#dispatch(framer.type, framer.buf, framer.start, framer.end);
          if (this.#closed !== null) return; // a FATAL closed it: what follows means nothing
          // A slow COPY or cursor consumer holds the connection: stop reading until it catches up.
          if (this.#pausing) await new Promise<void>((resolve) => this.#paused = resolve);
        }
        fifo.queue[fifo.head]?.beforeRead?.();
        if (fifo.head === fifo.tail && this.#transport.idleReadCosts) await this.#idleRead();
        const n = await this.#transport.read(framer.space());
        if (n === null) break;
        this.#watchdog.heard();
        framer.advance(n);
      }
      if (this.#closed === null) this.#fail(this.#lost(null));
    } catch (e) {
      this.#fail(this.#lost(e));
    }
  }

  #dispatch(type: number, buf: Uint8Array, start: number, end: number): void {
    const fifo = this.#fifo;
    const req = fifo.queue[fifo.head];
    const seq = this.#seq;
    switch (type) {
      case Backend.DataRow:
        // The hot path: one phase compare and a counter (see sequence.ts).
        if (seq.phase !== ROWS) seq.row(type);
        seq.rows++;
        return req.dataRow(buf, start, end);
      case Backend.CommandComplete: {
        if (req === undefined) throw seq.unexpected(type);
        const tag = commandComplete(buf, start, end);
        seq.complete(req, tag.count);
        this.#recancel.ended(req);
        req.commandComplete(tag.command, tag.count);
        if (!fifo.synced[fifo.head]) this.#batchedDone(req);
        return;
      }
      case Backend.ReadyForQuery: {
        const status = readyStatus(buf, start, end);
        if (req === undefined) throw seq.unexpected(type);
        seq.ready(req, this.#aborted !== null, fifo.synced[fifo.head]);
        const before = this.status;
        this.status = status;
        if (this.#aborted !== null || !fifo.synced[fifo.head]) return this.#skipBatch(req);
        this.#shift(req);
        if (req === this.#resend) {
          this.#resend = null;
          const cancelled = this.#resendCancelled;
          if (cancelled !== null) {
            this.#resendCancelled = null;
            req.fail(cancelled);
          } else {
            this.status = before;
            this.#enqueue(req);
          }
        } else {
          req.ready();
          if (req.shared === true && this.status !== IDLE) return this.#leaveTransaction();
        }
        return this.#advanced();
      }
      case Backend.NoticeResponse:
      case Backend.ParameterStatus:
      case Backend.NotificationResponse:
        return this.#reports.route(type, buf, start, end);
      case Backend.CopyData:
        if (seq.phase === COPY_OUT) seq.rows++;
        else if (seq.phase !== COPY_BOTH) throw seq.unexpected(type);
        return req.copyData?.(buf, start, end);
      case Backend.ErrorResponse: {
        const err = new PostgresError(fields(buf, start, end));
        if (err.severity === "FATAL" || err.severity === "PANIC") {
          // The server closes the connection after it: so do we, now, so that nothing it sent
          // before closing (a ReadyForQuery) can settle a query as if it had run.
          this.#fatal = err;
          return this.#fail(this.#lost(null));
        }
        if (req === undefined) throw seq.unexpected(type);
        seq.step(type, req, this.#aborted !== null);
        return this.#failed(req, err);
      }
    }
    if (req === undefined) throw seq.unexpected(type);
    seq.step(type, req, this.#aborted !== null);
    switch (type) {
      case Backend.RowDescription:
        return req.rowDescription(rowDescription(buf, start, end), this);
      case Backend.ParseComplete:
        return req.parseComplete();
      case Backend.BindComplete:
      case Backend.CloseComplete:
        return;
      case Backend.ParameterDescription:
        return req.parameterDescription(parameterDescription(buf, start, end));
      case Backend.NoData:
        return req.noData();
      case Backend.EmptyQueryResponse:
        this.#recancel.ended(req);
        req.emptyQuery();
        if (!fifo.synced[fifo.head]) this.#batchedDone(req);
        return;
      case Backend.PortalSuspended:
        // The backend waits for the next Execute: a cancel now would land on nothing.
        this.#recancel.ended(req);
        return req.portalSuspended();
      case Backend.CopyInResponse:
        return req.copyIn ? req.copyIn() : this.#refuseCopy(type, req);
      case Backend.CopyOutResponse:
        seq.copyFormat(end > start && buf[start] === 1);
        return req.copyOut ? req.copyOut() : this.#refuseCopy(type, req);
      case Backend.CopyBothResponse:
        return req.copyBoth ? req.copyBoth() : this.#refuseCopy(type, req);
      case Backend.CopyDone:
        return req.copyDone?.();
    }
  }

  /** An ErrorResponse (not FATAL) for the head request. */
  #failed(req: PipelineRequest, err: PostgresError): void {
    const fifo = this.#fifo;
    this.#recancel.ended(req);
    // A cancel of ours sent for another request stopped this one (see StrayCancels).
    const stray = err.code === "57014" && !this.#cancelled.has(req) &&
      mayBeCancelRequest(err) && this.#strays.mayHit(req);
    if (!fifo.synced[fifo.head]) {
      // Mid-batch: the server now skips the rest of the batch up to its Sync.
      const failure = stray ? strayCancel(err) : err;
      req.error(failure);
      this.#aborted = failure;
      return this.#batchedDone(req);
    }
    if (stray) {
      // Outside a transaction block it is safe to run it again.
      if (this.status === IDLE && req.restart?.() === true) {
        this.#strays.resent(req);
        this.#resend = req;
        return;
      }
      return req.error(strayCancel(err));
    }
    if (req.retryable?.(err, this.status === IDLE) === true) {
      this.#resend = req;
      return;
    }
    return req.error(err);
  }

  /** Pops the answered head request off the FIFO. */
  #shift(req: PipelineRequest): void {
    this.#fifo.shift(req);
    this.#seq.end();
    this.#cancelled.delete(req);
    this.#recancel.ended(req);
  }

  /** After the head moved on: a cancel waiting for the new head, room for waiting requests, idle. */
  #advanced(): void {
    const next = this.#fifo.queue[this.#fifo.head];
    if (next !== undefined && this.#cancelWhenHead.size > 0 && this.#cancelWhenHead.delete(next)) {
      this.#cancelNow(next);
    }
    if (this.#backlog.size > 0) this.#refill();
    if (next === undefined && this.inFlight === 0) {
      if (this.#drained !== null) this.#drained();
      else this.#options.onidle?.();
    }
  }

  /** A query in the middle of a batch completed (or failed): it settles now, not at a Sync. */
  #batchedDone(req: PipelineRequest): void {
    this.#shift(req);
    req.ready();
    this.#advanced();
  }

  /**
   * ReadyForQuery ended a batch that an error aborted: the server skipped every query from the
   * head up to the one the Sync followed, so each fails with the error that aborted it.
   */
  #skipBatch(head: PipelineRequest): void {
    const cause = this.#aborted;
    if (cause === null) {
      throw new ProtocolViolation("ReadyForQuery arrived in the middle of a batch");
    }
    this.#aborted = null;
    const fifo = this.#fifo;
    for (let req: PipelineRequest = head;; req = fifo.queue[fifo.head]) {
      const last = fifo.synced[fifo.head];
      const cancelled = this.#cancelled.has(req);
      this.#shift(req);
      req.error(cancelled ? cancelledInBatch(cause) : skippedInBatch(cause), true);
      req.ready();
      if (last) break;
    }
    this.#advanced();
  }

  /**
   * A query on a shared connection left a transaction block open (it failed
   * with UNSAFE_TRANSACTION). Queries behind it would run inside that
   * transaction, so the connection is closed instead: the server rolls the
   * transaction back, and queries not yet written go to another connection.
   */
  #leaveTransaction(): void {
    this.#fail(
      new ConnectionError(
        "CONNECTION_CLOSED",
        "connection closed: a query opened a transaction on a connection shared by a pool " +
          "(UNSAFE_TRANSACTION); closing it rolled the transaction back",
        whereOf(this.#options.endpoint),
      ),
    );
  }

  /**
   * COPY issued as an ordinary query (not through `readable()`/`writable()`).
   * COPY TO STDOUT is drained and ignored; COPY FROM STDIN is refused with
   * CopyFail if nothing follows it in the pipeline. If something does, the
   * server would read those messages as COPY data and the FIFO could no longer
   * be trusted, so the connection is closed instead.
   */
  #refuseCopy(type: number, req: PipelineRequest): void {
    if (type === Backend.CopyOutResponse) return;
    if (this.#fifo.size > 1 || this.#writer.length > 0) {
      throw new ProtocolViolation(
        "COPY FROM STDIN was pipelined with other queries; it is not supported yet",
      );
    }
    fe.copyFail(this.#writer, "COPY ... FROM STDIN needs query.writable() in pgpipe");
    // In the extended protocol the server ignored our Sync during copy-in: send another.
    if (!req.simpleProtocol) fe.sync(this.#writer);
    this.#scheduleFlush();
  }

  /**
   * Cancels a request: one still waiting locally is dropped (rejected with
   * `reason`), as is one the server stopped that waits to be sent again; one in
   * the pipeline gets a CancelRequest when it is the one the server is running,
   * so the cancel does not hit its neighbours.
   */
  cancel(req: PipelineRequest, reason: Error): void {
    if (req === this.#resend) {
      // The server already stopped it, and it waits for its ReadyForQuery to go again: it stays
      // stopped. A CancelRequest now would land on an idle backend, or on the next query.
      this.#resendCancelled = reason;
      return;
    }
    if (this.#backlog.remove(req)) return req.fail(reason);
    const at = this.#fifo.indexOf(req);
    if (at === -1) return; // already answered
    // Still starting: the backend's key is not known yet; cancel once it is.
    if (this.#starting) this.#cancelWhenHead.set(req, reason);
    else if (at === this.#fifo.head || this.#fifo.inHeadBatch(at)) this.#cancelNow(req);
    else this.#cancelWhenHead.set(req, reason);
  }

  #cancelNow(req: PipelineRequest): void {
    // An embedded server has no channel for a CancelRequest, and it has answered whatever it
    // was handed before the process could send one: the request completes.
    if (this.#options.endpoint.embedded !== undefined) return;
    this.#cancelled.add(req);
    this.#strays.sent();
    this.#recancel.sent(req);
    sendCancel(this.#options.endpoint, this.pid, this.cancelKey).then(() => {
      this.#strays.closed(this.#fifo.queue, this.#fifo.head, this.#fifo.tail);
      this.#recancel.closed(req, this.#cancelAgain);
    });
  }

  /**
   * A cancelled statement still runs after its CancelRequest was taken (see CancelRetries): it
   * is cancelled again while it is the one the server runs (the head, or in the head's batch)
   * and nothing has aborted its batch yet.
   */
  #cancelAgain = (req: PipelineRequest): void => {
    if (this.#closed !== null || this.#aborted !== null) return;
    const at = this.#fifo.indexOf(req);
    if (at !== -1 && (at === this.#fifo.head || this.#fifo.inHeadBatch(at))) this.#cancelNow(req);
    else this.#recancel.ended(req);
  };

  /** Moves waiting requests into the pipeline as answers make room. */
  #refill(): void {
    while (this.#backlog.size > 0 && this.#hasRoom()) this.#enqueue(this.#backlog.shift());
  }

  #lost(e: unknown): ConnectionError {
    const where = whereOf(this.#options.endpoint);
    if (e instanceof ConnectionError) return e;
    if (e instanceof ProtocolViolation) {
      return new ConnectionError("PROTOCOL_VIOLATION", e.message, { ...where, cause: e });
    }
    const cause = this.#fatal ?? e ?? undefined;
    const reason = this.#fatal?.message ??
      (e instanceof Error ? e.message : "the server closed the connection");
    return new ConnectionError("CONNECTION_CLOSED", `connection closed: ${reason}`, {
      ...where,
      cause,
    });
  }

  /** Rejects everything in flight and closes the socket. */
  #fail(err: ConnectionError): void {
    if (this.#closed !== null) return;
    this.#closed = err;
    this.#transport.close();
    const { requests: queue, written } = this.#fifo.clear();
    const backlog = this.#backlog.clear();
    this.#io.resumeReading();
    for (const wake of this.#flushWaiters.splice(0)) wake();
    this.#batchOpen = false;
    this.#aborted = null;
    this.#seq.end();
    this.#writer.reset();
    const orphans: PipelineRequest[] = [];
    for (let i = 0; i < queue.length; i++) {
      // Written requests may have run: they fail. Encoded-only ones certainly did not.
      if (i < written) {
        queue[i].fail(Object.assign(copyError(err), { outcome: "unknown" as const }));
      } else orphans.push(queue[i]);
    }
    orphans.push(...backlog);
    this.#watchdog.stop();
    this.#recancel.clear();
    this.#drained?.();
    // Orphans first: whoever adopts them must still see how this connection was held (a
    // reserved one's requests must fail, not run elsewhere outside their transaction), and
    // onclose lets the pool forget that.
    const adopt = this.#options.onorphans;
    if (adopt !== undefined && orphans.length > 0 && err.code !== "CONNECTION_ENDED") {
      adopt(orphans);
    } else {
      for (const req of orphans) {
        req.fail(Object.assign(copyError(err), { outcome: "not-sent" as const }));
      }
    }
    this.#options.onclose?.(err);
    for (const fn of this.#closeListeners) fn(err);
    this.#closeListeners.clear();
  }

  /** Sends Terminate after everything in flight is answered, then closes. */
  end(): Promise<void> {
    if (this.#ending !== null) return this.#ending;
    if (this.#closed !== null) return Promise.resolve();
    this.#ending = (async () => {
      if (this.inFlight > 0) await new Promise<void>((resolve) => this.#drained = resolve);
      if (this.#closed !== null) return;
      try {
        fe.terminate(this.#writer);
        const w = this.#writer;
        await this.#transport.write(w.buf.subarray(0, w.length));
      } catch {
        // the server may already be gone; we are closing anyway
      }
      this.#fail(
        new ConnectionError(
          "CONNECTION_ENDED",
          "the connection was ended",
          whereOf(this.#options.endpoint),
        ),
      );
    })();
    return this.#ending;
  }

  /**
   * Closes the socket now; everything in flight rejects with CONNECTION_DESTROYED. With nothing
   * in flight (a transaction between queries) its holder is told CONNECTION_CLOSED, as
   * postgres.js tells it.
   */
  destroy(): void {
    const busy = this.inFlight > 0;
    this.#fail(
      new ConnectionError(
        busy ? "CONNECTION_DESTROYED" : "CONNECTION_CLOSED",
        busy ? "the connection was destroyed" : "the connection was closed with nothing in flight",
        whereOf(this.#options.endpoint),
      ),
    );
  }
}
