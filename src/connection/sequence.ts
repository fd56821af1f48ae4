/**
 * The order of the answers one request may receive, checked as they arrive. A request says at
 * encode time what it asked the server for (its `plan`: Close, Parse, Describe, Bind, Execute,
 * or a simple-protocol Query); the connection keeps one `Sequence` for the request at the head
 * of its FIFO and feeds it every message before the request sees it. Anything the plan cannot
 * explain (a message out of place, one missing, one too many, a row count that disagrees with
 * the completion tag) throws a ProtocolViolation, which destroys the connection: once the
 * stream and the FIFO disagree, no later answer can be trusted to belong to its query.
 *
 * The state is a phase and a row counter, reset when the head changes; nothing is allocated per
 * message. Notices, parameter changes and notifications never reach it (they may come anywhere).
 */
import { Backend, ProtocolViolation } from "../protocol/backend.ts";

/**
 * A request's plan: the extended-protocol messages it sent (a simple-protocol Query: 0; every
 * extended plan has PARSE or BIND).
 */
export const Plan = {
  /** Sent Parse: a ParseComplete comes first (after any CloseComplete). */
  PARSE: 1,
  /** Sent Describe of the statement: ParameterDescription, then RowDescription or NoData. */
  DESCRIBE_STATEMENT: 2,
  /** Sent Bind: BindComplete. */
  BIND: 4,
  /** Sent Describe of the portal: RowDescription or NoData after BindComplete. */
  DESCRIBE_PORTAL: 8,
  /** Bound a cached statement whose description has columns: its rows must match the tag. */
  RETURNS_ROWS: 16,
  /** Close messages sent before the rest are counted from this bit up (`closes * CLOSE`). */
  CLOSE: 64,
} as const;

// Phases: what may come next.
const NONE = 0; // no request begun (the head changed)
const CLOSING = 1; // CloseComplete for each Close sent
const PARSING = 2; // ParseComplete
const PARAMS = 3; // ParameterDescription (statement described)
const SHAPE_STATEMENT = 4; // RowDescription or NoData (statement described)
const BINDING = 5; // BindComplete
const SHAPE_PORTAL = 6; // RowDescription or NoData (portal described)
/** DataRows may come (then a completion). Exported for the read loop's inline row check. */
export const ROWS = 7;
const NO_ROWS = 8; // a completion, no DataRow (the statement returns none)
const SUSPENDED = 9; // a cursor's portal waits for the next Execute (or its Close)
const DONE = 10; // answered: ReadyForQuery at its Sync (or an error at commit)
const FAILED = 11; // an ErrorResponse came: only ReadyForQuery
const STATEMENT = 12; // simple Query: the first statement's answer
const NEXT_STATEMENT = 13; // simple Query: another statement's answer, or ReadyForQuery
const COPY_IN = 14; // the server reads our CopyData: its completion or an error
/** CopyData from the server (COPY TO). Exported for the read loop's inline check. */
export const COPY_OUT = 15;
const COPY_OUT_DONE = 16; // CopyDone came: the completion tag
/** CopyData both ways (replication). Exported for the read loop's inline check. */
export const COPY_BOTH = 17;
const SKIPPED = 18; // an earlier query of the batch failed: the server skips to the Sync

const NAMES: Record<number, string> = {};
for (const [name, code] of Object.entries(Backend)) NAMES[code] = name;

/** The name of a backend message type, for a violation's message. */
function nameOf(type: number): string {
  return NAMES[type] ?? `message type ${JSON.stringify(String.fromCharCode(type))}`;
}

/** What a request tells its Sequence (a subset of PipelineRequest). */
export interface Planned {
  /** The plan bits (see {@link Plan}); absent or 0: a simple-protocol Query. */
  readonly plan?: number;
  /** Rows asked for by each Execute (a cursor); 0 or absent: all of them. */
  readonly rowLimit?: number;
  /** A COPY TO whose text may ask for a header line (absent: it may). */
  readonly copyHeader?: boolean;
  /** A simple Query: the fewest statements its text holds (see {@link statementBounds}). */
  readonly fewestStatements?: number;
  /** A simple Query: the most statements its text holds. */
  readonly mostStatements?: number;
}

const SEMICOLON = 0x3b;
const QUOTE = 0x27;
const DOUBLE_QUOTE = 0x22;
const DOLLAR = 0x24;

/** Whether `c` may continue an identifier (so a `$` after it is not a dollar quote). */
function identifierChar(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) ||
    c === 0x5f || c === DOLLAR || c >= 0x80;
}

/**
 * How many statements a simple Query's text holds, as `[fewest, most]`: each statement the server
 * runs answers once (a completion or an error), so more answers than the most, or a ReadyForQuery
 * before the fewest, are a violation. Statements are separated by semicolons, so there are at
 * most one more than the text has. The exact count comes from a lexer that skips strings, quoted
 * identifiers, dollar quotes, comments and parentheses (a rule's actions); where it could be
 * wrong (a backslash, which may escape a quote when standard_conforming_strings is off, or a
 * `BEGIN ATOMIC` body) only the upper bound is kept. A text the server finds wrong fails at its
 * first error, which ends the Query wherever it comes.
 */
export function statementBounds(text: string): [number, number] {
  let most = 1;
  for (let i = text.indexOf(";"); i !== -1; i = text.indexOf(";", i + 1)) most++;
  if (most === 1) return [1, 1]; // one statement, or none (an EmptyQueryResponse)
  if (text.includes("\\") || /begin\s+atomic/i.test(text)) return [0, most];
  let count = 0;
  let filled = false; // the current statement has something besides blanks and comments
  let depth = 0; // parentheses
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE || c === DOUBLE_QUOTE) {
      // '' (or "") inside is the quote itself: skipping to each next quote handles it.
      const end = text.indexOf(c === QUOTE ? "'" : '"', i + 1);
      if (end === -1) return [0, most];
      i = end;
      filled = true;
    } else if (c === DOLLAR && (i === 0 || !identifierChar(text.charCodeAt(i - 1)))) {
      const tag = /^\$(?:[A-Za-z_\u0080-\uffff][\w\u0080-\uffff]*)?\$/.exec(text.slice(i, i + 64));
      if (tag !== null) {
        const end = text.indexOf(tag[0], i + tag[0].length);
        if (end === -1) return [0, most];
        i = end + tag[0].length - 1;
      }
      filled = true;
    } else if (c === 0x2d && text.charCodeAt(i + 1) === 0x2d) { // -- to the end of the line
      const end = text.indexOf("\n", i);
      i = end === -1 ? n : end;
    } else if (c === 0x2f && text.charCodeAt(i + 1) === 0x2a) { // /* nested */
      let nest = 1;
      for (i += 2; i < n && nest > 0; i++) {
        if (text.charCodeAt(i) === 0x2f && text.charCodeAt(i + 1) === 0x2a) nest++, i++;
        else if (text.charCodeAt(i) === 0x2a && text.charCodeAt(i + 1) === 0x2f) nest--, i++;
      }
      if (nest > 0) return [0, most];
      i--;
    } else if (c === 0x28) {
      depth++;
      filled = true;
    } else if (c === 0x29) {
      depth--;
      filled = true;
    } else if (c === SEMICOLON && depth === 0) {
      if (filled) count++;
      filled = false;
    } else if (c > 0x20) filled = true;
  }
  if (filled) count++;
  if (depth !== 0 || count === 0) return [0, most];
  return [count, count];
}

/** The answer sequence of the request at the head of one connection's FIFO. */
export class Sequence {
  /** What may come next (one of the phases above). */
  phase: number = NONE;
  /** DataRows (or CopyData, during COPY TO) of the current statement or batch. */
  rows = 0;
  /** The request being followed, or null before the first message of the head. */
  req: Planned | null = null;
  #plan = 0;
  #closes = 0;
  #limit = 0;
  #copyExtra = 0; // CopyData a COPY TO sends beyond its rows: the binary trailer
  #copyHeader = false; // and maybe a header line
  #fewest = 0; // statements a simple Query must answer before its ReadyForQuery
  #most = 0; // and the most it may
  #statements = 0; // statements of a simple Query answered so far
  #bothDone = false; // a replication stream's server side ended (CopyDone)
  #shape = 0; // 0: unknown, 1: the statement returns rows (described so), 2: it returns none

  /** The head changed (or the connection failed): the next message begins a new request. */
  end(): void {
    this.req = null;
    this.phase = NONE;
  }

  /** Starts following `req`; `skipped`: an error earlier in its batch means it never runs. */
  begin(req: Planned, skipped: boolean): void {
    this.req = req;
    this.rows = 0;
    const plan = req.plan ?? 0;
    this.#plan = plan;
    this.#closes = Math.floor(plan / Plan.CLOSE);
    this.#limit = req.rowLimit ?? 0;
    this.#shape = plan & Plan.RETURNS_ROWS ? 1 : 0;
    this.#fewest = req.fewestStatements ?? 0;
    this.#most = req.mostStatements ?? Infinity;
    this.#statements = 0;
    this.#bothDone = false;
    if (skipped) this.phase = SKIPPED;
    else if (plan === 0) this.phase = STATEMENT;
    else this.phase = this.#from(CLOSING);
  }

  /** The first phase at or after `p` that the plan asks for. */
  #from(p: number): number {
    const plan = this.#plan;
    if (p <= CLOSING && this.#closes > 0) return CLOSING;
    if (p <= PARSING && (plan & Plan.PARSE) !== 0) return PARSING;
    if (p <= PARAMS && (plan & Plan.DESCRIBE_STATEMENT) !== 0) return PARAMS;
    if (p <= BINDING && (plan & Plan.BIND) !== 0) return BINDING;
    if (p <= SHAPE_PORTAL && (plan & Plan.DESCRIBE_PORTAL) !== 0) return SHAPE_PORTAL;
    if ((plan & Plan.BIND) === 0) return DONE; // described only
    return this.#shape === 2 ? NO_ROWS : ROWS;
  }

  /** Where a statement's completion leads: the next statement (simple Query) or the Sync. */
  #completed(): number {
    if (this.#plan !== 0) return DONE;
    this.#statements++;
    return NEXT_STATEMENT;
  }

  /** Whether a simple Query's next statement may begin to answer now. */
  #mayStart(phase: number): boolean {
    return phase === STATEMENT ||
      ((phase === NEXT_STATEMENT || (phase === COPY_BOTH && this.#bothDone)) &&
        this.#statements < this.#most);
  }

  /** The violation for `type` arriving now. */
  unexpected(type: number): ProtocolViolation {
    const where = this.req === null ? "with no query in flight" : `where ${this.#expected()}`;
    return new ProtocolViolation(`the server sent ${nameOf(type)} ${where}`);
  }

  #expected(): string {
    switch (this.phase) {
      case CLOSING:
        return "CloseComplete was due";
      case PARSING:
        return "ParseComplete was due";
      case PARAMS:
        return "ParameterDescription was due";
      case SHAPE_STATEMENT:
      case SHAPE_PORTAL:
        return "RowDescription or NoData was due";
      case BINDING:
        return "BindComplete was due";
      case ROWS:
        return "rows or the completion of the statement were due";
      case NO_ROWS:
        return "the completion of a statement that returns no rows was due";
      case SUSPENDED:
        return "the cursor had asked for no more rows";
      case DONE:
        return "ReadyForQuery was due";
      case FAILED:
        return "ReadyForQuery was due after an error";
      case STATEMENT:
        return "the answer to a query was due";
      case NEXT_STATEMENT:
        return "another statement's answer or ReadyForQuery was due";
      case COPY_IN:
        return "the server was reading COPY data";
      case COPY_OUT:
      case COPY_BOTH:
        return "COPY data was due";
      case COPY_OUT_DONE:
        return "the completion of a COPY was due";
      case SKIPPED:
        return "the batch had failed and only its ReadyForQuery was due";
      default:
        return "nothing was due";
    }
  }

  /**
   * Checks a message other than DataRow, CopyData, CommandComplete and ReadyForQuery (which
   * have their own checks) and moves on; throws a ProtocolViolation if it is out of place.
   */
  step(type: number, req: Planned, skipped: boolean): void {
    if (this.req !== req) this.begin(req, skipped);
    const phase = this.phase;
    switch (type) {
      case Backend.CloseComplete:
        if (phase === CLOSING) {
          if (--this.#closes === 0) this.phase = this.#from(PARSING);
          return;
        }
        // A cursor closed its portal early: while it waited, or after its last rows came.
        if (phase === SUSPENDED || (phase === DONE && this.#limit > 0)) {
          this.phase = DONE;
          return;
        }
        break;
      case Backend.ParseComplete:
        if (phase === PARSING) return void (this.phase = this.#from(PARAMS));
        break;
      case Backend.ParameterDescription:
        if (phase === PARAMS) return void (this.phase = SHAPE_STATEMENT);
        break;
      case Backend.BindComplete:
        if (phase === BINDING) return void (this.phase = this.#from(SHAPE_PORTAL));
        break;
      case Backend.RowDescription:
        if (phase === SHAPE_STATEMENT) {
          this.#shape = 1;
          return void (this.phase = this.#from(BINDING));
        }
        if (phase === SHAPE_PORTAL || this.#mayStart(phase)) {
          this.#shape = 1;
          this.rows = 0;
          return void (this.phase = ROWS);
        }
        break;
      case Backend.NoData:
        if (phase === SHAPE_STATEMENT) {
          this.#shape = 2;
          return void (this.phase = this.#from(BINDING));
        }
        if (phase === SHAPE_PORTAL) {
          this.#shape = 2;
          return void (this.phase = NO_ROWS);
        }
        break;
      case Backend.EmptyQueryResponse:
        // An empty query string: the whole answer of a simple Query, or of an Execute.
        if (phase === STATEMENT || ((phase === ROWS || phase === NO_ROWS) && this.rows === 0)) {
          return void (this.phase = DONE);
        }
        break;
      case Backend.PortalSuspended:
        // Execute(n) stops after exactly n rows; a plain Execute (0: all) never suspends.
        if (phase === ROWS && this.#limit > 0 && this.rows === this.#limit) {
          this.rows = 0;
          return void (this.phase = SUSPENDED);
        }
        if (phase === ROWS && this.#limit > 0) {
          throw new ProtocolViolation(
            `PortalSuspended after ${this.rows} rows where the cursor asked for ${this.#limit}`,
          );
        }
        break;
      case Backend.ErrorResponse:
        // Anywhere until the request failed or was skipped; after a completion, at commit.
        if (phase !== FAILED && phase !== SKIPPED && phase !== NONE) {
          return void (this.phase = FAILED);
        }
        break;
      case Backend.CopyInResponse:
        if (this.#copyMayStart(phase)) return void (this.phase = COPY_IN);
        break;
      case Backend.CopyOutResponse:
        if (this.#copyMayStart(phase)) {
          this.rows = 0;
          return void (this.phase = COPY_OUT);
        }
        break;
      case Backend.CopyBothResponse:
        if (this.#copyMayStart(phase)) return void (this.phase = COPY_BOTH);
        break;
      case Backend.CopyDone:
        if (phase === COPY_OUT) return void (this.phase = COPY_OUT_DONE);
        // Replication: the server ended its side. What follows is a statement's answer, but the
        // walsender may still flush CopyData it had queued, so the phase stays.
        if (phase === COPY_BOTH && !this.#bothDone) return void (this.#bothDone = true);
        break;
    }
    throw this.unexpected(type);
  }

  #copyMayStart(phase: number): boolean {
    return this.#mayStart(phase) ||
      (phase === NO_ROWS && this.rows === 0) || (phase === ROWS && this.rows === 0);
  }

  /** A DataRow outside the ROWS phase: a cursor's next batch, or a violation. */
  row(type: number): void {
    if (this.phase === SUSPENDED) this.phase = ROWS;
    else throw this.unexpected(type);
  }

  /**
   * A COPY TO started in `binary` format: one CopyData per row, and a last one for the binary
   * trailer (the header rides with the first row); text with HEADER sends one line more.
   */
  copyFormat(binary: boolean): void {
    this.#copyExtra = binary ? 1 : 0;
    this.#copyHeader = !binary && this.req?.copyHeader !== false;
  }

  /** Checks a CommandComplete carrying `count` (null: the tag has none) against the rows. */
  complete(req: Planned, count: number | null): void {
    if (this.req !== req) this.begin(req, false);
    const phase = this.phase;
    const rows = this.rows;
    if (phase === ROWS || phase === NO_ROWS || phase === SUSPENDED) {
      // SELECT, FETCH, and INSERT/UPDATE/DELETE/MERGE ... RETURNING count the rows they return
      // (a statement described as returning none, like SELECT INTO, counts something else).
      if (count !== null && (this.#shape === 1 || rows > 0) && count !== rows) {
        throw new ProtocolViolation(
          `the completion tag counts ${count} rows where ${rows} DataRows came`,
        );
      }
      this.phase = this.#completed();
      return;
    }
    if (this.#mayStart(phase) || phase === COPY_IN) {
      this.phase = this.#completed();
      return;
    }
    if (phase === COPY_OUT_DONE) {
      const due = count === null ? rows : count + this.#copyExtra;
      if (rows !== due && !(this.#copyHeader && rows === due + 1)) {
        throw new ProtocolViolation(
          `the COPY completion tag counts ${count} rows where ${rows} CopyData came`,
        );
      }
      this.phase = this.#completed();
      return;
    }
    throw this.unexpected(Backend.CommandComplete);
  }

  /** Checks a ReadyForQuery for the head request (`synced`: its Sync was sent). */
  ready(req: Planned, skipped: boolean, synced: boolean): void {
    if (this.req !== req) this.begin(req, skipped);
    const phase = this.phase;
    if (
      (synced || phase === SKIPPED) &&
      (phase === DONE || phase === FAILED || phase === SKIPPED ||
        ((phase === NEXT_STATEMENT || (phase === COPY_BOTH && this.#bothDone)) &&
          this.#statements >= this.#fewest))
    ) return;
    throw this.unexpected(Backend.ReadyForQuery);
  }
}
