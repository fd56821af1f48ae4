/**
 * Opening a connection when there are several servers: which one a new connection goes to, with
 * libpq's rules (the configuration only lists them; trying them is done here, where connections
 * are made).
 *
 * The hosts are tried in order (or shuffled for each connection with
 * `load_balance_hosts=random`). A host that cannot be reached, or whose
 * session is not the kind `target_session_attrs` asks for, is skipped for the
 * next; a session of the wrong kind is closed. An authentication failure stops
 * the search: the other hosts share the same credentials. `prefer-standby`
 * takes the first standby, else the first session of any kind.
 *
 * A session's kind comes from the `in_hot_standby` and
 * `default_transaction_read_only` parameters the server reports at startup
 * (PostgreSQL 14 and later), else from one query.
 */
import { Connection, type ConnectionOptions } from "./connection.ts";
import { connectTimeoutError, connectTimeoutMs } from "./open.ts";
import type { PipelineRequest } from "./requests/request.ts";
import type { PasswordSource } from "./startup.ts";
import { ConnectionError, PostgresError } from "../errors.ts";
import { firstRow } from "./requests/driver_queries.ts";

/** What kind of session a connection needs (libpq's `target_session_attrs`). */
export type TargetSessionAttrs =
  | "any"
  | "read-write"
  | "read-only"
  | "primary"
  | "standby"
  | "prefer-standby";

/** In what order the hosts are tried (libpq's `load_balance_hosts`). */
export type LoadBalanceHosts = "disable" | "random";

/** One server to try, with the password for it (the password file is per host). */
export interface HostTarget {
  host: string;
  port: number;
  /** The numeric address to connect to instead of looking `host` up (libpq's `hostaddr`). */
  address?: string;
  password: PasswordSource;
}

/** The servers a client may connect to, and what kind of session it needs. */
export interface HostSelection {
  /** At least one; tried in this order unless load balancing shuffles them. */
  hosts: readonly HostTarget[];
  targetSessionAttrs: TargetSessionAttrs;
  loadBalanceHosts: LoadBalanceHosts;
}

/** Connection options with the hosts to choose from (`endpoint` is then only a template). */
export interface HostOptions extends ConnectionOptions {
  /** Absent: connect to `endpoint` alone, whatever it is. */
  hosts?: HostSelection;
  /**
   * Set when reading the options failed (a user's `toString` threw): every
   * connection attempt rejects with it, so every query does.
   */
  failure?: Error;
}

/** What `target_session_attrs` looks at in a session. */
export interface SessionKind {
  /** The server is in hot standby (recovery). */
  standby: boolean;
  /** Transactions are read-only by default (a standby, or default_transaction_read_only). */
  readOnly: boolean;
}

/** Asked when the server does not report `in_hot_standby` / `default_transaction_read_only`. */
const KIND_QUERY = "select pg_catalog.pg_is_in_recovery()::text, " +
  "pg_catalog.current_setting('transaction_read_only')";

/** Whether a session of this kind satisfies the target (prefer-standby: its first choice). */
export function matches(kind: SessionKind, target: TargetSessionAttrs): boolean {
  switch (target) {
    case "any":
      return true;
    case "read-write":
      return !kind.readOnly;
    case "read-only":
      return kind.readOnly;
    case "primary":
      return !kind.standby;
    case "standby":
    case "prefer-standby":
      return kind.standby;
  }
}

function describeKind(kind: SessionKind): string {
  if (kind.standby) return "a standby";
  return kind.readOnly ? "a read-only primary" : "a read-write primary";
}

/**
 * The session's kind: from the parameters reported at startup when they say
 * enough for `target`, else from a query.
 */
async function sessionKind(
  conn: Connection,
  target: TargetSessionAttrs = "read-write",
): Promise<SessionKind> {
  const hot = conn.parameters.get("in_hot_standby");
  const readOnly = conn.parameters.get("default_transaction_read_only");
  const needReadOnly = target === "read-write" || target === "read-only";
  if (hot !== undefined && (readOnly !== undefined || !needReadOnly)) {
    return { standby: hot === "on", readOnly: hot === "on" || readOnly === "on" };
  }
  const [recovery, transactionReadOnly] = await firstRow(conn, KIND_QUERY);
  return { standby: recovery === "true", readOnly: transactionReadOnly === "on" };
}

/** Fisher-Yates: a random order of the hosts for one connection. */
function shuffled<T>(items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

/** The server refused our credentials: every host would (libpq stops here too). */
function authFailure(e: unknown): boolean {
  if (e instanceof PostgresError) return e.code.startsWith("28");
  return e instanceof ConnectionError &&
    (e.code === "AUTH_FAILED" || e.code === "AUTH_UNSUPPORTED");
}

const where = (h: HostTarget) =>
  h.host.includes(":") && !h.host.startsWith("/") ? `[${h.host}]:${h.port}` : `${h.host}:${h.port}`;

/** A session being checked; its callbacks reach the caller only once it is accepted. */
interface Candidate {
  conn: Connection;
  target: HostTarget;
  /** Hands the connection to the caller; null if it died while being checked. */
  accept(): Connection | null;
  /** Closes a session that is not wanted. */
  discard(): void;
}

/** The options for one host: its endpoint and password. */
function forHost(options: HostOptions, target: HostTarget): ConnectionOptions {
  const { hosts: _hosts, ...base } = options;
  return {
    ...base,
    endpoint: { ...base.endpoint, host: target.host, port: target.port, address: target.address },
    password: target.password,
  };
}

async function openCandidate(options: HostOptions, target: HostTarget): Promise<Candidate> {
  const base = forHost(options, target);
  let accepted = false;
  const opts: ConnectionOptions = {
    ...base,
    // The session's kind must be known before any query is sent to it.
    claim: undefined,
    unclaim: undefined,
    // A rejected session must not look like a lost connection to the pool or the listener.
    onclose: (e) => {
      if (accepted) base.onclose?.(e);
    },
    onidle: () => {
      if (accepted) base.onidle?.();
    },
    onparameter: base.onparameter &&
      ((name, value) => {
        if (accepted) base.onparameter!(name, value);
      }),
    onnotify: base.onnotify &&
      ((n) => {
        if (accepted) base.onnotify!(n);
      }),
    onorphans: base.onorphans && ((reqs: PipelineRequest[]) => {
      if (accepted) return base.onorphans!(reqs);
      for (const req of reqs) { // only our own check query can be here
        const e = new ConnectionError("CONNECTION_CLOSED", "lost while checking the server");
        e.outcome = "not-sent";
        req.fail(e);
      }
    }),
  };
  const conn = await Connection.open(opts);
  return {
    conn,
    target,
    accept() {
      accepted = true;
      return conn.closed ? null : conn;
    },
    discard() {
      conn.end().catch(() => {});
    },
  };
}

/** Runs the kind check within connect_timeout; a silent server is destroyed. */
async function check(
  conn: Connection,
  target: TargetSessionAttrs,
  timeout: number,
  endpoint: ConnectionOptions["endpoint"],
): Promise<SessionKind> {
  if (timeout <= 0) return await sessionKind(conn, target);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    conn.destroy();
  }, timeout);
  try {
    return await sessionKind(conn, target);
  } catch (e) {
    if (!timedOut) throw e;
    throw connectTimeoutError(endpoint, e);
  } finally {
    clearTimeout(timer);
  }
}

/** A candidate that closed while being checked. */
function lost(c: Candidate): ConnectionError {
  return c.conn.closedReason ??
    new ConnectionError("CONNECTION_CLOSED", "closed while its server was checked", {
      address: c.target.host,
      port: c.target.port,
    });
}

/** The kind check failed (the connection broke, or the query was refused). */
function checkFailed(e: unknown, target: HostTarget): unknown {
  if (e instanceof ConnectionError || e instanceof PostgresError) return e;
  return new ConnectionError(
    "CONNECTION_CLOSED",
    `could not check the server: ${(e as Error).message}`,
    { address: target.host, port: target.port, cause: e },
  );
}

/**
 * The error when no host gave a matching session. With one host and no
 * mismatch, that host's own error; when every host failed, the last error's
 * code (so its class, transient or not, is kept) with every host's reason.
 */
function noHost(
  tried: { target: HostTarget; error?: unknown; kind?: SessionKind }[],
  attrs: TargetSessionAttrs,
): unknown {
  const errors = tried.filter((t) => t.error !== undefined).map((t) => t.error);
  const reasons = tried.map((t) =>
    `${where(t.target)} ${
      t.kind ? `is ${describeKind(t.kind)}` : `failed: ${(t.error as Error)?.message ?? t.error}`
    }`
  ).join("; ");
  if (errors.length === tried.length) {
    const last = errors[errors.length - 1];
    if (errors.length === 1 || !(last instanceof ConnectionError)) return last;
    return new ConnectionError(last.code, `no host could be reached: ${reasons}`, {
      address: last.address,
      port: last.port,
      errno: last.errno,
      syscall: last.syscall,
      cause: new AggregateError(errors, "each host's error"),
    });
  }
  return new ConnectionError(
    "NO_MATCHING_HOST",
    `no server matches target_session_attrs=${attrs}: ${reasons}`,
    errors.length > 0 ? { cause: new AggregateError(errors, "each failed host's error") } : {},
  );
}

/**
 * Opens a connection to the first host that answers with the kind of session
 * wanted; rejects with the reasons (`NO_MATCHING_HOST` when servers answered
 * but none matched) if there is none.
 */
export async function connect(options: HostOptions): Promise<Connection> {
  if (options.failure !== undefined) throw options.failure;
  const selection = options.hosts;
  if (selection === undefined) return await Connection.open(options);
  const attrs = selection.targetSessionAttrs;
  const hosts = selection.loadBalanceHosts === "random"
    ? shuffled(selection.hosts)
    : selection.hosts;
  const tried: { target: HostTarget; error?: unknown; kind?: SessionKind }[] = [];
  if (attrs === "any") {
    // Nothing to check: the first server that lets us in will do, with no wrapping.
    for (const target of hosts) {
      try {
        return await Connection.open(forHost(options, target));
      } catch (e) {
        if (authFailure(e)) throw e;
        tried.push({ target, error: e });
      }
    }
    throw noHost(tried, attrs);
  }
  let fallback: Candidate | null = null; // prefer-standby: the first session of any kind
  for (const target of hosts) {
    let candidate: Candidate;
    try {
      candidate = await openCandidate(options, target);
    } catch (e) {
      if (authFailure(e)) {
        fallback?.discard();
        throw e;
      }
      tried.push({ target, error: e });
      continue;
    }
    let kind: SessionKind;
    try {
      const timeout = connectTimeoutMs(options);
      kind = await check(candidate.conn, attrs, timeout, forHost(options, target).endpoint);
    } catch (e) {
      candidate.conn.destroy();
      tried.push({ target, error: checkFailed(e, target) });
      continue;
    }
    if (matches(kind, attrs)) {
      const conn = candidate.accept();
      if (conn !== null) {
        fallback?.discard();
        return conn;
      }
      tried.push({ target, error: lost(candidate) });
      continue;
    }
    if (attrs === "prefer-standby" && fallback === null) {
      fallback = candidate; // kept open: used if no standby answers
      continue;
    }
    candidate.discard();
    tried.push({ target, kind });
  }
  if (fallback !== null) {
    const conn = fallback.accept();
    if (conn !== null) return conn;
    tried.push({ target: fallback.target, error: lost(fallback) });
  }
  throw noHost(tried, attrs);
}
