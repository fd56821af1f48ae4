/**
 * One connection to the server and its pipeline.
 *
 * Requests are encoded into the write buffer the moment they are sent and
 * queued in FIFO order; one flush per tick (over native TLS while others are
 * in flight, per turn of the event loop) writes everything encoded since the
 * last one. A single read loop frames the answers and hands each message
 * to the request at the head of the FIFO; ReadyForQuery pops it. Notices,
 * parameter changes and notifications are routed by type, never by position.
 */
import {
  Backend,
  commandComplete,
  cstrPair,
  type FieldMap,
  fields,
  type Notification,
  notification,
  parameterDescription,
  ProtocolViolation,
  rowDescription,
} from "../protocol/backend.ts";
import { setImmediate } from "node:timers";
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
import { mayBeCancelRequest, sendCancel, StrayCancels } from "./cancel.ts";
import {
  type Endpoint,
  openTransport,
  socketErrorInfo,
  socketPath,
  type Transport,
} from "./transport/transport.ts";
import type { TlsPath } from "./transport/tls.ts";

/** Everything one connection needs to know. */
export interface ConnectionOptions {
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
  /** Called for each NoticeResponse. */
  onnotice?: (notice: FieldMap) => void;
  /** Called for each ParameterStatus after startup too. */
  onparameter?: (name: string, value: string) => void;
  /** Called for each NotificationResponse. */
  onnotify?: (n: Notification) => void;
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
/** Answered FIFO slots left before the live ones that make it worth moving them to the front. */
const COMPACT_AFTER = 4096;

/**
 * The error of a query that `cause` failed though it was not its own (an error that aborted its
 * batch, a cancel meant for another query), in the server's own terms (`code`, `message`), with
 * `detail` saying what happened and `cause` attached.
 */
function derivedError(code: string, message: string, detail: string, cause: PostgresError) {
  const err = new PostgresError({
    S: "ERROR",
    V: "ERROR",
    C: code,
    M: message,
    D: `${detail} (${cause.code}: ${cause.message})`,
  });
  (err as { cause?: unknown }).cause = cause;
  return err;
}

/**
 * An earlier query of the batch failed: 25P02, what the query would have got with a Sync of its
 * own (a statement in an aborted transaction).
 */
const skippedInBatch = (cause: PostgresError): PostgresError =>
  derivedError(
    "25P02",
    "current transaction is aborted, commands ignored until end of transaction block",
    "not run: an earlier query written in the same batch of this transaction failed",
    cause,
  );

/**
 * The query was cancelled, but the cancel stopped an earlier query of its batch (the server
 * answers a batch only at its Sync, so the driver cannot aim a cancel behind the running query):
 * 57014, as a cancel gives.
 */
const cancelledInBatch = (cause: PostgresError): PostgresError =>
  derivedError(
    "57014",
    "canceling statement due to user request",
    "cancelled: the server stopped its batch while an earlier query of it ran",
    cause,
  );

/**
 * A CancelRequest sent for another query stopped this one (the server stops whatever runs when
 * the signal lands), and it cannot simply run again (inside a transaction block, a cursor, a
 * COPY, a multi-statement simple query): 57014, and why.
 */
const strayCancel = (cause: PostgresError): PostgresError =>
  derivedError(
    "57014",
    cause.message, // the server's, in its lc_messages
    "stopped: a cancel this connection sent for another query landed while it ran",
    cause,
  );

/** Messages that may arrive at any time, not as part of a request's answer. */
const OUT_OF_BAND = new Set<number>([
  Backend.NoticeResponse,
  Backend.ParameterStatus,
  Backend.NotificationResponse,
  Backend.ErrorResponse, // a FATAL when the server shuts the session down
]);

function describeEndpoint(e: Endpoint): { address: string; port: number } {
  return { address: e.host, port: e.port };
}

/** The connect timeout in ms for an attempt starting now; throws a TypeError for a bad value. */
export function connectTimeoutMs(options: Pick<ConnectionOptions, "connectTimeout">): number {
  const value = options.connectTimeout;
  const ms = typeof value === "function" ? value() : value;
  if (typeof ms !== "number" || !(ms >= 0)) {
    throw new TypeError(`invalid connect_timeout: ${ms} ms (use a number of seconds, 0 for none)`);
  }
  return ms;
}

/** postgres.js's CONNECT_TIMEOUT error: `write CONNECT_TIMEOUT host:port` (or the socket path). */
export function connectTimeoutError(e: Endpoint, cause?: unknown): ConnectionError {
  const target = e.host.startsWith("/") && e.socket === undefined
    ? socketPath(e.host, e.port)
    : `${e.host}:${e.port}`;
  return new ConnectionError("CONNECT_TIMEOUT", `write CONNECT_TIMEOUT ${target}`, {
    ...describeEndpoint(e),
    cause,
  });
}

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
  // The FIFO of requests written or encoded and awaiting answers is [#head, #tail) of #queue and
  // its parallel arrays. They are reused, not truncated, when the FIFO empties (a serial query
  // would otherwise reallocate them each time), and compacted when a never-empty FIFO has left
  // a long answered prefix behind.
  #queue: PipelineRequest[] = [];
  #sizes: number[] = []; // encoded bytes of each queued request, for the byte bound
  #synced: boolean[] = []; // whether a Sync follows each queued request (false: mid-batch)
  #tail = 0;
  #batchOpen = false; // the last request encoded is batchable and still awaits its Sync
  #aborted: PostgresError | null = null; // the error that aborted the batch being answered
  #queuedBytes = 0;
  #head = 0;
  #unsent = 0; // queue index from which requests are still only in #writer
  #backlog: PipelineRequest[] = []; // waiting for room in the pipeline
  #backlogHead = 0;
  #barriers = 0; // barrier requests in the queue: while any is, nothing else is written
  #barrier: PipelineRequest | null = null; // the barrier in the queue (there is at most one)
  #backlogBarriers = 0; // barrier requests waiting in the backlog
  #paused: (() => void) | null = null; // resolves a paused read loop
  #pausing = false;
  #flushWaiters: (() => void)[] = [];
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
      const head = this.#queue[this.#head];
      if (head !== undefined && this.#closed === null) this.#cancelNow(head);
    },
    inTransaction: () => this.status !== IDLE,
  };
  #cancelWhenHead = new Map<PipelineRequest, Error>(); // cancel asked while others ran ahead of it
  #cancelled = new Set<PipelineRequest>(); // requests a CancelRequest was sent for
  #strays = new StrayCancels(); // our CancelRequests that may yet stop a request they were not for
  #resend: PipelineRequest | null = null; // re-sent at its ReadyForQuery (late cancel, stale statement)
  #resendCancelled: Error | null = null; // its user cancelled it before it went again
  #lastRead = 0; // ms timestamps for the query_timeout watchdog
  #lastWrite = 0;
  #watchdog: ReturnType<typeof setInterval> | undefined;
  #timeoutCancelled = false;
  #closed: ConnectionError | null = null;
  #starting = true; // until the startup's ReadyForQuery: the startup writes and reads
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
  }

  /** Connects, negotiates TLS and authenticates; rejects with a typed error. */
  static async open(options: ConnectionOptions): Promise<Connection> {
    const mode = options.endpoint.sslmode;
    try {
      // allow: plain first, TLS if the server refuses; prefer: TLS first, plain if TLS fails.
      return await Connection.#attempt(options, mode !== "allow");
    } catch (e) {
      const retryPlain = mode === "prefer" && e instanceof ConnectionError &&
        e.code === "SSL_FAILED";
      const retryTls = mode === "allow" && e instanceof PostgresError;
      // A user's socket is plain under prefer and allow (see openTransport): nothing to retry.
      if ((!retryPlain && !retryTls) || options.endpoint.socket !== undefined) throw e;
      return await Connection.#attempt(options, retryTls);
    }
  }

  static async #attempt(options: ConnectionOptions, tryTls: boolean): Promise<Connection> {
    const timeoutMs = connectTimeoutMs(options); // read now: it may change between attempts
    const c = new Connection(options);
    const where = describeEndpoint(options.endpoint);
    let timer: ReturnType<typeof setTimeout> | undefined;
    let timedOut = false;
    let opened = false;
    const abort = new AbortController();
    // The startup writes for itself; requests claimed meanwhile ride in its writes.
    c.#writing = true;
    const work = (async () => {
      c.#transport = await openTransport(options.endpoint, tryTls, abort.signal);
      opened = true;
      if (timedOut) c.#transport.close();
      options.onstage?.("transport", c.#transport.tls !== null);
      const result = await startup(c.#startupIO(), options.params, options.password, {
        minor: options.protocolMinor,
        minMinor: options.protocolMinMinor,
        auth: options.auth,
      });
      c.pid = result.pid;
      c.secret = result.secret;
      c.cancelKey = result.key;
      options.onstage?.("authenticated", c.#transport.tls !== null);
    })();
    try {
      if (timeoutMs > 0) {
        const timeout = new Promise<never>((_, reject) => {
          timer = setTimeout(() => {
            timedOut = true;
            abort.abort();
            c.#transport?.close();
            reject(connectTimeoutError(options.endpoint));
          }, timeoutMs);
        });
        work.catch(() => {}); // its failure after a timeout is already reported
        await Promise.race([work, timeout]);
      } else {
        await work;
      }
    } catch (e) {
      c.#transport?.close();
      const err = startupError(e, opened, where);
      c.#abandon(err);
      throw err;
    } finally {
      clearTimeout(timer);
    }
    c.#started();
    c.#readLoop();
    c.#startWatchdog();
    return c;
  }

  /** The startup is over: what was encoded after its last write leaves now. */
  #started(): void {
    this.#starting = false;
    this.#writing = false;
    if (this.#writer.length > 0) this.#scheduleFlush();
    // A cancel asked while the backend's key was unknown.
    const head = this.#queue[this.#head];
    if (head !== undefined && this.#cancelWhenHead.delete(head)) this.#cancelNow(head);
  }

  /**
   * The startup failed with requests claimed: they go back to whoever sent them when the
   * server certainly ran none (it refused, or authentication never succeeded); after
   * AuthenticationOk a lost socket leaves that unknown, so they fail.
   */
  #abandon(err: Error): void {
    const reqs = [
      ...this.#queue.slice(this.#head, this.#tail),
      ...this.#backlog.slice(this.#backlogHead),
    ];
    if (reqs.length === 0) return;
    this.#queue = [];
    this.#backlog = [];
    this.#head =
      this.#tail =
      this.#backlogHead =
      this.#unsent =
        0;
    this.#queuedBytes = 0;
    this.#barriers = 0;
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
      const e = err instanceof ConnectionError ? clone(err) : err;
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
        this.#unsent = this.#tail;
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
      serverCertificate: null, // wired to the transport once it can show the certificate
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
      parameter: (name: string, value: string) => {
        this.parameters.set(name, value);
        callHook("onparameter", this.#options.onparameter, name, value);
      },
      notice: (f: FieldMap) => callHook("onnotice", this.#options.onnotice, f),
    };
  }

  /** Checks for a server that owes an answer and has gone quiet (the `query_timeout` option). */
  #startWatchdog(): void {
    const limit = this.#options.queryTimeout ?? 0;
    if (limit <= 0) return;
    this.#watchdog = setInterval(() => {
      const head = this.#queue[this.#head];
      // A cursor or COPY may legitimately wait on its consumer, not on the server.
      if (head === undefined || head.barrier || this.#pausing) return;
      const quiet = Date.now() - Math.max(this.#lastRead, this.#lastWrite);
      if (quiet < limit) return;
      if (!this.#timeoutCancelled) {
        this.#timeoutCancelled = true;
        this.#cancelNow(head);
      } else if (quiet >= 2 * limit) {
        this.#fail(
          new ConnectionError(
            "QUERY_TIMEOUT",
            `the server sent nothing for ${quiet} ms while a query was running`,
            describeEndpoint(this.#options.endpoint),
          ),
        );
      }
    }, Math.max(10, Math.min(1000, limit / 4)));
    Deno.unrefTimer(this.#watchdog as unknown as number);
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
    return this.#tail - this.#head + this.#backlog.length - this.#backlogHead;
  }

  /** Why the connection closed, once it has. */
  get closedReason(): ConnectionError | null {
    return this.#closed;
  }

  /** Requests waiting locally for room in this connection's pipeline. */
  get waiting(): number {
    return this.#backlog.length - this.#backlogHead;
  }

  /**
   * Whether a barrier (a cursor, a COPY) holds the connection or waits in it: whatever is sent
   * now waits until it ends, so the pool sends shared work elsewhere.
   */
  get barred(): boolean {
    return this.#barriers > 0 || this.#backlogBarriers > 0;
  }

  /** Whether a COPY FROM STDIN holds the connection and waits for its caller's data. */
  get copyInProgress(): boolean {
    return this.#barrier?.awaitsInput === true;
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
      req.fail(Object.assign(clone(err), { outcome: "not-sent" as const }));
      return;
    }
    if (this.#backlogHead < this.#backlog.length || !this.#hasRoom()) {
      this.#backlog.push(req);
      if (req.barrier) this.#backlogBarriers++;
      return;
    }
    this.#enqueue(req);
  }

  /** Whether the pipeline bounds allow one more request (an empty pipeline always does). */
  #hasRoom(): boolean {
    const n = this.#tail - this.#head;
    return n === 0 ||
      (this.#barriers === 0 && n < this.#options.maxPipeline &&
        this.#queuedBytes < this.#options.maxPipelineBytes);
  }

  #enqueue(req: PipelineRequest): void {
    // Batchable requests (a transaction's queries) leave their Sync to the connection: one Sync
    // ends each run of them written together, before anything else and at the flush.
    const batchable = req.batchable === true;
    if (this.#batchOpen && !batchable) this.#closeBatch();
    const before = this.#writer.length;
    req.encode(this.#writer, this);
    const size = this.#writer.length - before;
    this.#queuedBytes += size;
    const at = this.#tail++;
    this.#sizes[at] = size;
    this.#synced[at] = !batchable;
    this.#batchOpen = batchable;
    this.#queue[at] = req;
    if (req.barrier) {
      this.#barriers++;
      this.#barrier = req;
    }
    req.attach?.(this.#io);
    this.#scheduleFlush();
  }

  /** Ends the open batch: its Sync belongs to the last request encoded. */
  #closeBatch(): void {
    fe.sync(this.#writer);
    const last = this.#tail - 1;
    this.#synced[last] = true;
    this.#sizes[last] += 5;
    this.#queuedBytes += 5;
    this.#batchOpen = false;
  }

  #scheduleFlush(): void {
    // Everything issued in this tick leaves in one write. Nothing is held back for answers to
    // arrive: on a far link that would cost a whole round trip (bench/suites/latency.ts, "1 query
    // behind 100"), and on loopback batching writes that way gained nothing measurable.
    if (this.#flushQueued || this.#writing) return;
    this.#flushQueued = true;
    // Over native TLS while others are in flight: one turn of the event loop later (about a µs),
    // after the answers that already arrived were read, so the queries they free leave together
    // in one TLS record rather than one per read (each costs the server a decrypt). Pipelined,
    // that measured 5-10% more queries/s on one connection and on the pool, with less CPU per
    // query on both sides. Over plain TCP and node:tls the same rule, A/B against this one in one
    // process (1 and 4 connections, in a transaction, the pool with 500 in flight), moved q/s and
    // CPU per query by no more than the noise (±2-4% medians; a plain TCP read already takes
    // all that arrived, so there are no per-record reads to gather). They keep the microtask.
    // A lone query still leaves at once.
    if (this.#tail - this.#head > 1 && this.#transport.tls === "native") setImmediate(this.#flush);
    else queueMicrotask(this.#flush);
  }

  #flush = async (): Promise<void> => {
    this.#flushQueued = false;
    if (this.#writing || this.#closed !== null) return;
    this.#writing = true;
    try {
      while (this.#writer.length > 0) {
        if (this.#batchOpen) this.#closeBatch();
        // Swap buffers so requests sent during this write accumulate for the next one.
        const out = this.#writer;
        this.#writer = this.#spare;
        this.#spare = out;
        this.#unsent = this.#tail;
        this.#lastWrite = Date.now();
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
      const waiters = this.#flushWaiters;
      this.#flushWaiters = [];
      for (const wake of waiters) wake();
    }
  };

  /**
   * Over native TLS with nothing in flight, the read loop waits until the next write is under way
   * (or one turn of the event loop, whichever comes first) before it reads again. A native read
   * goes to the socket at once (rustls reads it before it waits), and with nothing to read yet
   * that costs a syscall and a pass through rustls; issued before the next serial query's write,
   * that sat on every round trip's critical path, where the raw ping-pong issues it after its
   * write, while the server works. Plain TCP knows the socket is empty without a syscall and
   * node:tls reads by events, so both read at once as before. The turn of the event loop bounds
   * the wait: an idle connection still reads notifications, notices and the server's FATAL
   * (pg_terminate_backend, idle_session_timeout) as they come.
   */
  #idleRead(): Promise<void> {
    return new Promise((resolve) => {
      this.#readGate = resolve;
      setImmediate(this.#openReadGate);
    });
  }

  #openReadGate = (): void => {
    const open = this.#readGate;
    this.#readGate = null;
    open?.();
  };

  async #readLoop(): Promise<void> {
    const framer = this.#framer;
    try {
      for (;;) {
        while (framer.next()) {
          this.#dispatch(framer.type, framer.buf, framer.start, framer.end);
          // A slow COPY or cursor consumer holds the connection: stop reading until it catches up.
          if (this.#pausing) await new Promise<void>((resolve) => this.#paused = resolve);
        }
        this.#queue[this.#head]?.beforeRead?.();
        if (this.#head === this.#tail && this.#transport.tls === "native") await this.#idleRead();
        const n = await this.#transport.read(framer.space());
        if (n === null) break;
        this.#lastRead = Date.now();
        this.#timeoutCancelled = false;
        framer.advance(n);
      }
      if (this.#closed === null) this.#fail(this.#lost(null));
    } catch (e) {
      this.#fail(this.#lost(e));
    }
  }

  #dispatch(type: number, buf: Uint8Array, start: number, end: number): void {
    const req = this.#queue[this.#head];
    if (req === undefined && !OUT_OF_BAND.has(type)) {
      throw new ProtocolViolation(
        `the server sent ${String.fromCharCode(type)} with no query in flight`,
      );
    }
    switch (type) {
      case Backend.DataRow:
        return req.dataRow(buf, start, end);
      case Backend.CommandComplete: {
        const tag = commandComplete(buf, start, end);
        req.commandComplete(tag.command, tag.count);
        if (!this.#synced[this.#head]) this.#batchedDone(req);
        return;
      }
      case Backend.ReadyForQuery: {
        const status = buf[start];
        if (end - start !== 1 || (status !== 0x49 && status !== 0x54 && status !== 0x45)) {
          throw new ProtocolViolation("ReadyForQuery must carry one status byte: I, T or E");
        }
        const before = this.status;
        this.status = buf[start];
        if (this.#aborted !== null || !this.#synced[this.#head]) return this.#skipBatch(req);
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
        req.emptyQuery();
        if (!this.#synced[this.#head]) this.#batchedDone(req);
        return;
      case Backend.PortalSuspended:
        return req.portalSuspended();
      case Backend.ErrorResponse: {
        const err = new PostgresError(fields(buf, start, end));
        if (err.severity === "FATAL" || err.severity === "PANIC" || req === undefined) {
          // The server is about to close the connection (e.g. pg_terminate_backend).
          this.#fatal = err;
          return;
        }
        // A cancel of ours sent for another request stopped this one (see StrayCancels).
        const stray = err.code === "57014" && !this.#cancelled.has(req) &&
          mayBeCancelRequest(err) && this.#strays.mayHit(req);
        if (!this.#synced[this.#head]) {
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
      case Backend.NoticeResponse:
        callHook("onnotice", this.#options.onnotice, fields(buf, start, end));
        return;
      case Backend.ParameterStatus: {
        const [name, value] = cstrPair(buf, start, end);
        this.parameters.set(name, value);
        callHook("onparameter", this.#options.onparameter, name, value);
        return;
      }
      case Backend.NotificationResponse:
        callHook("onnotify", this.#options.onnotify, notification(buf, start, end));
        return;
      case Backend.CopyInResponse:
        return req.copyIn ? req.copyIn() : this.#refuseCopy(type, req);
      case Backend.CopyOutResponse:
        return req.copyOut ? req.copyOut() : this.#refuseCopy(type, req);
      case Backend.CopyBothResponse:
        return req.copyBoth ? req.copyBoth() : this.#refuseCopy(type, req);
      case Backend.CopyData:
        return req.copyData?.(buf, start, end);
      case Backend.CopyDone:
        return req.copyDone?.();
      default:
        throw new ProtocolViolation(`unexpected message type ${String.fromCharCode(type)}`);
    }
  }

  /** Pops the answered head request off the FIFO. */
  #shift(req: PipelineRequest): void {
    this.#queuedBytes -= this.#sizes[this.#head];
    if (req.barrier) {
      this.#barriers--;
      if (this.#barrier === req) this.#barrier = null;
    }
    this.#queue[this.#head++] = undefined!;
    if (this.#head === this.#tail) {
      this.#head = this.#tail = 0;
      this.#unsent = 0;
      this.#queuedBytes = 0;
    } else if (this.#head >= COMPACT_AFTER && this.#head * 2 >= this.#tail) {
      const head = this.#head;
      const tail = this.#tail;
      this.#queue.copyWithin(0, head, tail);
      this.#sizes.copyWithin(0, head, tail);
      this.#synced.copyWithin(0, head, tail);
      this.#queue.fill(undefined!, tail - head, tail);
      this.#head = 0;
      this.#tail = tail - head;
      this.#unsent = Math.max(0, this.#unsent - head);
    }
    this.#cancelled.delete(req);
  }

  /** After the head moved on: a cancel waiting for the new head, room for waiting requests, idle. */
  #advanced(): void {
    const next = this.#queue[this.#head];
    if (next !== undefined && this.#cancelWhenHead.size > 0 && this.#cancelWhenHead.delete(next)) {
      this.#cancelNow(next);
    }
    if (this.#backlogHead < this.#backlog.length) this.#refill();
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
    for (let req: PipelineRequest = head;; req = this.#queue[this.#head]) {
      const last = this.#synced[this.#head];
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
        describeEndpoint(this.#options.endpoint),
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
    if (this.#tail - this.#head > 1 || this.#writer.length > 0) {
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
    const waiting = this.#backlog.indexOf(req, this.#backlogHead);
    if (waiting !== -1) {
      this.#backlog.splice(waiting, 1);
      if (req.barrier) this.#backlogBarriers--;
      return req.fail(reason);
    }
    const at = this.#queue.indexOf(req, this.#head);
    if (at === -1 || at >= this.#tail) return; // already answered
    // Still starting: the backend's key is not known yet; cancel once it is.
    if (this.#starting) this.#cancelWhenHead.set(req, reason);
    else if (at === this.#head || this.#inHeadBatch(at)) this.#cancelNow(req);
    else this.#cancelWhenHead.set(req, reason);
  }

  /**
   * Whether queue index `at` shares the head's batch. The server answers a batch only at its
   * Sync, so the head tells nothing about which of its queries runs: cancel now. The server
   * stops whichever runs, and any error in a batch aborts the whole transaction anyway.
   */
  #inHeadBatch(at: number): boolean {
    for (let i = this.#head; i < at; i++) if (this.#synced[i]) return false;
    return true;
  }

  #cancelNow(req: PipelineRequest): void {
    this.#cancelled.add(req);
    this.#strays.sent();
    sendCancel(this.#options.endpoint, this.pid, this.cancelKey).then(() =>
      this.#strays.closed(this.#queue, this.#head, this.#tail)
    );
  }

  /** Moves waiting requests into the pipeline as answers make room. */
  #refill(): void {
    while (this.#backlogHead < this.#backlog.length && this.#hasRoom()) {
      const req = this.#backlog[this.#backlogHead];
      this.#backlog[this.#backlogHead++] = undefined!;
      if (req.barrier) this.#backlogBarriers--;
      this.#enqueue(req);
    }
    if (this.#backlogHead === this.#backlog.length) {
      this.#backlog.length = 0;
      this.#backlogHead = 0;
    }
  }

  #lost(e: unknown): ConnectionError {
    const where = describeEndpoint(this.#options.endpoint);
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
    const queue = this.#queue.slice(this.#head, this.#tail);
    const unsentFrom = Math.max(0, this.#unsent - this.#head);
    const backlog = this.#backlog.slice(this.#backlogHead);
    this.#queue = [];
    this.#barriers = 0;
    this.#barrier = null;
    this.#backlogBarriers = 0;
    this.#io.resumeReading();
    for (const wake of this.#flushWaiters.splice(0)) wake();
    this.#sizes = [];
    this.#synced = [];
    this.#tail = 0;
    this.#batchOpen = false;
    this.#aborted = null;
    this.#queuedBytes = 0;
    this.#backlog = [];
    this.#head = this.#backlogHead = 0;
    this.#writer.reset();
    const orphans: PipelineRequest[] = [];
    for (let i = 0; i < queue.length; i++) {
      // Written requests may have run: they fail. Encoded-only ones certainly did not.
      if (i < unsentFrom) queue[i].fail(Object.assign(clone(err), { outcome: "unknown" as const }));
      else orphans.push(queue[i]);
    }
    orphans.push(...backlog);
    clearInterval(this.#watchdog);
    this.#drained?.();
    // Orphans first: whoever adopts them must still see how this connection was held (a
    // reserved one's requests must fail, not run elsewhere outside their transaction), and
    // onclose lets the pool forget that.
    const adopt = this.#options.onorphans;
    if (adopt !== undefined && orphans.length > 0 && err.code !== "CONNECTION_ENDED") {
      adopt(orphans);
    } else {
      for (const req of orphans) {
        req.fail(Object.assign(clone(err), { outcome: "not-sent" as const }));
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
          describeEndpoint(this.#options.endpoint),
        ),
      );
    })();
    return this.#ending;
  }

  /** Closes the socket now; everything in flight rejects with CONNECTION_DESTROYED. */
  destroy(): void {
    this.#fail(
      new ConnectionError(
        "CONNECTION_DESTROYED",
        "the connection was destroyed",
        describeEndpoint(this.#options.endpoint),
      ),
    );
  }
}

/**
 * Calls a user's hook from the read loop. What it throws must not take the
 * connection down (nor be lost), so it is reported on the console.
 */
function callHook<A extends unknown[]>(
  name: string,
  hook: ((...args: A) => void) | undefined,
  ...args: A
): void {
  if (hook === undefined) return;
  try {
    hook(...args);
  } catch (e) {
    console.error(`pgpipe: the ${name} callback threw`, e);
  }
}

/** What a failed startup rejects with: typed errors as they are, anything else as a ConnectionError. */
function startupError(
  e: unknown,
  opened: boolean,
  where: { address: string; port: number },
): Error {
  // openTransport's errors are already what the caller should see (a user's socket
  // function may have thrown its own).
  if (!opened || e instanceof ConnectionError || e instanceof PostgresError) return e as Error;
  if (e instanceof ProtocolViolation) {
    return new ConnectionError("PROTOCOL_VIOLATION", e.message, { ...where, cause: e });
  }
  // A socket from the `socket` option may still be connecting: its connect error
  // (ECONNREFUSED, ...) surfaces on the first write, and keeps its code.
  const failed = connectErrorOf(e);
  if (failed !== null) {
    return new ConnectionError(failed.code, (e as Error).message, {
      ...where,
      cause: e,
      errno: failed.errno,
      syscall: failed.syscall,
    });
  }
  return new ConnectionError(
    "CONNECTION_CLOSED",
    `connection lost during startup: ${(e as Error)?.message ?? e}`,
    { ...where, cause: e },
  );
}

/** Node's code, errno and syscall when `e` is a node socket's failure to connect, else null. */
function connectErrorOf(e: unknown): ReturnType<typeof socketErrorInfo> {
  const syscall = (e as { syscall?: unknown } | null)?.syscall;
  if (syscall !== "connect" && syscall !== "getaddrinfo") return null;
  return socketErrorInfo(e);
}

/** A fresh copy of a connection error for each request, so outcomes can differ. */
function clone(err: ConnectionError): ConnectionError {
  return new ConnectionError(err.code, err.message, {
    address: err.address,
    port: err.port,
    cause: err.cause,
    errno: err.errno,
    syscall: err.syscall,
  });
}
