/**
 * One logical replication session: a connection opened with
 * `replication=database`, a TEMPORARY pgoutput slot (dropped by the server
 * when the session ends), and START_REPLICATION streaming the publications'
 * changes from the slot's starting point. Each change is decoded into a row
 * and handed on synchronously, in commit order.
 *
 * The server may free WAL only up to what we acknowledge: keepalives that ask
 * for an answer get one at once, and the position reached is reported every
 * few seconds. Changes are handed on before the next message is read, so a
 * commit or a keepalive between transactions is as far as we have come. The
 * slot lives only as long as the session: a new session starts from the
 * WAL's end, and changes committed while no session was open are not seen.
 */
import type { Connection } from "../connection/connection.ts";
import { ReplicationRequest } from "./replication_request.ts";
import { ConnectionError } from "../errors.ts";
import { ProtocolViolation } from "../protocol/backend.ts";
import { pgoutputMessage, type TupleValue } from "./pgoutput.ts";
import { parseLsn, postgresClock, replicationMessage, standbyStatusUpdate } from "./messages.ts";
import type { Row } from "../query/result.ts";
import type { DecodeOptions } from "../types/text_decoders.ts";
import { firstRow } from "../connection/requests/driver_queries.ts";
import { connect, type HostOptions } from "../connection/hosts.ts";
import {
  type DecodedRelation,
  type RelationInfo,
  RelationRows,
  type ReplicationEvent,
  type TruncateEvent,
} from "./rows.ts";

/** How often the position reached is reported when the server does not ask. */
const STATUS_INTERVAL_MS = 10_000;
/** How long a stopping stream may take to end politely before its socket is closed. */
const STOP_TIMEOUT_MS = 2_000;

/** What a stream needs: where to connect, what to stream, and where changes go. */
export interface StreamOptions {
  /** The client's connection options (the replication parameter is added here). */
  connection: HostOptions;
  /** The client's decoders and transforms, for rows. */
  decode: DecodeOptions;
  /** The `publications` option as given, for START_REPLICATION. */
  publications: string;
  /** The publication names it lists, checked before streaming starts. */
  publicationNames: readonly string[];
  /** Each change: a row (null for a truncate) and its description. */
  onchange(row: Row | null, event: ReplicationEvent | TruncateEvent): void;
  /**
   * A change that could not be handed on (a custom type parser or a transform
   * threw), with what it was when that is known; the stream goes on.
   */
  onerror(err: unknown, change: FailedChange | null): void;
  /** The stream ended by itself (connection lost, server error); never after `close()`. */
  onlost(err: Error): void;
}

/** The change an error kept from its subscribers. */
export interface FailedChange {
  /** What happened. */
  command: ReplicationEvent["command"] | "truncate";
  /** The table it happened in. */
  relation: RelationInfo;
}

/** `E'...'`: a string literal whatever standard_conforming_strings says. */
function literal(s: string): string {
  return "E'" + s.replaceAll("\\", "\\\\").replaceAll("'", "''") + "'";
}

function slotName(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  return "pgpipe_" + [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** A running replication session. */
export class ReplicationStream {
  #options: StreamOptions;
  #conn!: Connection;
  #request!: ReplicationRequest;
  #relations: RelationRows;
  #streaming = false; // set once START_REPLICATION answered: from then on, losses are reported
  #over = false; // lost or closed: nothing more is delivered or reported
  #closing: Promise<void> | null = null;
  #inTransaction = false;
  #reached = 0n; // everything before this LSN has been handed on
  #reported = 0n; // the last position sent to the server
  #timer: ReturnType<typeof setInterval> | undefined;

  private constructor(options: StreamOptions) {
    this.#options = options;
    this.#relations = new RelationRows(options.decode);
  }

  /** The backend process ID of the replication connection. */
  get pid(): number {
    return this.#conn.pid;
  }

  /** The replication connection's secret key (with `pid`, what a CancelRequest names). */
  get secret(): number {
    return this.#conn.secret;
  }

  /** When the replication connection was opened (ms since the epoch). */
  get openedAt(): number {
    return this.#conn.openedAt;
  }

  /**
   * Connects, checks the publications exist, creates the slot and starts
   * streaming. Rejects with the server's error (no REPLICATION privilege,
   * `wal_level` below logical, a missing publication) or the connection's.
   */
  static async open(options: StreamOptions): Promise<ReplicationStream> {
    const stream = new ReplicationStream(options);
    const base = options.connection;
    const conn = await connect({
      ...base,
      params: { ...base.params, replication: "database" },
      onnotify: undefined,
      onidle: undefined,
      onorphans: undefined,
      queryTimeout: 0,
      onclose: (err) =>
        stream.#lost(
          err ?? new ConnectionError("CONNECTION_CLOSED", "the replication connection closed"),
        ),
    });
    stream.#conn = conn;
    try {
      await stream.#start();
    } catch (e) {
      stream.#over = true;
      clearInterval(stream.#timer);
      // Nothing is in flight once the start failed, so this only says goodbye and closes.
      await conn.end().catch(() => {});
      throw e;
    }
    return stream;
  }

  async #start(): Promise<void> {
    const { publications, publicationNames } = this.#options;
    const conn = this.#conn;
    // pgoutput looks its publications up only when the first change arrives, and then fails
    // the stream: ask the server now, so a missing one is the subscriber's error, not a loop.
    const names = publicationNames.map(literal).join(", ");
    await firstRow(
      conn,
      `select count(*) from unnest(array[${names}]::text[]) as p(name), ` +
        "lateral pg_catalog.pg_get_publication_tables(p.name)",
    );
    const slot = slotName();
    const [, consistentPoint] = await firstRow(
      conn,
      `CREATE_REPLICATION_SLOT ${slot} TEMPORARY LOGICAL pgoutput NOEXPORT_SNAPSHOT`,
    );
    const lsn = parseLsn(String(consistentPoint));
    this.#reached = this.#reported = lsn;
    const request = new ReplicationRequest(
      `START_REPLICATION SLOT ${slot} LOGICAL ${consistentPoint} ` +
        `(proto_version '1', publication_names '${publications.replaceAll("'", "''")}')`,
      (buf, start, end) => this.#data(buf, start, end),
    );
    this.#request = request;
    conn.send(request);
    await request.started;
    if (conn.closed) {
      throw conn.closedReason ?? new ConnectionError("CONNECTION_CLOSED", "closed at start");
    }
    this.#streaming = true;
    // The command ending means the stream is over: a server error, or the server stopping.
    request.done.then(
      () => this.#lost(new ConnectionError("CONNECTION_CLOSED", "the server ended the stream")),
      (e: Error) => this.#lost(e),
    );
    this.#timer = setInterval(() => {
      if (this.#reached > this.#reported) this.#status();
    }, STATUS_INTERVAL_MS);
  }

  /** Sends the position reached (as written, flushed and applied). */
  #status(): void {
    const lsn = this.#reached;
    this.#reported = lsn;
    this.#request.write((w) => standbyStatusUpdate(w, lsn, postgresClock(Date.now())));
  }

  /**
   * One CopyData of the stream. Malformed bytes throw a ProtocolViolation,
   * which the connection's read loop turns into a PROTOCOL_VIOLATION failure
   * (the stream cannot go on past a message it could not read); anything else
   * thrown here is reported and the stream goes on.
   */
  #data(buf: Uint8Array, start: number, end: number): void {
    if (this.#over) return;
    try {
      this.#message(buf, start, end);
    } catch (e) {
      if (e instanceof ProtocolViolation) throw e;
      this.#report(e, null);
    }
  }

  #message(buf: Uint8Array, start: number, end: number): void {
    const message = replicationMessage(buf, start, end);
    if (message.kind === "keepalive") {
      if (!this.#inTransaction && message.walEnd > this.#reached) this.#reached = message.walEnd;
      if (message.replyRequested) this.#status();
      return;
    }
    const m = pgoutputMessage(buf, message.payloadStart, message.payloadEnd);
    switch (m.type) {
      case "begin":
        this.#inTransaction = true;
        return;
      case "commit":
        this.#inTransaction = false;
        if (m.endLsn > this.#reached) this.#reached = m.endLsn;
        return;
      case "relation":
        return this.#relations.relation(m);
      case "insert": {
        const r = this.#relations.get(m.relation);
        return this.#change(r, m.tuple, null, false, "insert");
      }
      case "update": {
        const r = this.#relations.get(m.relation);
        return this.#change(r, m.tuple, m.old, m.key, "update");
      }
      case "delete": {
        const r = this.#relations.get(m.relation);
        return this.#change(r, m.old, null, m.key, "delete");
      }
      case "truncate":
        for (const oid of m.relations) {
          if (this.#over) return; // a callback closed the stream
          const relation = this.#relations.get(oid).info;
          this.#hand(null, {
            command: "truncate",
            relation,
            key: false,
            old: null,
            cascade: m.cascade,
            restartIdentity: m.restartIdentity,
          });
        }
        return;
      default:
        return; // origin, type, message: nothing a subscriber sees
    }
  }

  #change(
    relation: DecodedRelation,
    tuple: TupleValue[],
    oldTuple: TupleValue[] | null,
    key: boolean,
    command: ReplicationEvent["command"],
  ): void {
    let row: Row;
    let old: Row | null;
    try {
      row = this.#relations.row(relation, tuple);
      old = oldTuple === null ? null : this.#relations.row(relation, oldTuple);
    } catch (e) {
      if (e instanceof ProtocolViolation) throw e;
      // A custom type parser or transform threw.
      return this.#report(e, { command, relation: relation.info });
    }
    this.#hand(row, { command, relation: relation.info, key, old });
  }

  #hand(row: Row | null, event: ReplicationEvent | TruncateEvent): void {
    try {
      this.#options.onchange(row, event);
    } catch (e) {
      this.#report(e, event);
    }
  }

  /** Hands an error on; the reporter is the client's own code, but it must not stop the stream. */
  #report(err: unknown, change: FailedChange | null): void {
    try {
      this.#options.onerror(err, change);
    } catch (e) {
      console.error("pgpipe: reporting a subscribe error failed", e, err);
    }
  }

  #lost(err: Error): void {
    if (this.#over) return;
    this.#over = true;
    clearInterval(this.#timer);
    if (!this.#streaming) return; // open() is still running: it rejects instead
    this.#conn.end().catch(() => {});
    this.#options.onlost(err);
  }

  /**
   * Ends the session: CopyDone, then Terminate once the server has answered
   * (the server drops the temporary slot); the socket is closed if that takes
   * too long. Nothing is delivered once this is called.
   */
  close(): Promise<void> {
    return this.#closing ??= (async () => {
      this.#over = true;
      clearInterval(this.#timer);
      this.#request?.stop();
      const kill = setTimeout(() => this.#conn.destroy(), STOP_TIMEOUT_MS);
      try {
        await this.#conn.end();
      } finally {
        clearTimeout(kill);
      }
    })();
  }
}
