/**
 * Whether a statement needs a session of its own: it leaves state in the session that a later
 * statement of the same caller may rely on (settings, temporary tables, advisory locks, sequence
 * values read back with `currval`/`lastval`, prepared statements, cursors, LISTEN), opens or ends
 * a transaction block, or runs code that may do any of that (`DO`, `CALL`). Kysely hands a
 * dialect the statements of `db.connection()` exactly as it hands a lone query, so the dialect
 * sends a first statement to the shared, pipelined pool only when this says no; the callback's
 * next statement then holds the connection it ran on when no one else holds it (driver.ts).
 *
 * The answer errs towards yes: comments, string literals, quoted identifiers and dollar-quoted
 * bodies are blanked first (Kysely quotes every identifier, so a column named "temp" does not
 * count), then a statement-leading keyword or a session function anywhere counts. A yes where
 * no was right costs only pipelining (the statement runs on a reserved connection). What it
 * cannot see: a function of the user's own that sets session state, and the `nextval` of a
 * column default (an insert into a `serial` table sets what `lastval()` reads); the driver's
 * holding on to the first statement's connection covers those unless another caller took it.
 */
import { withoutNoise } from "../query/keyword.ts";

/** Rules out most statements without allocating: no word below appears at all. */
const MENTIONS =
  /(?:set|reset|begin|start|commit|end|rollback|abort|savepoint|release|prepare|execute|deallocate|declare|close|fetch|move|listen|discard|lock|load|do|call|create|temp|advisory|val|pg_backend_pid)/i;

/** A statement (the text's first, or one after a `;`) that touches the session or the block. */
const LEADING = new RegExp(
  String.raw`(?:^|;)\s*(?:set|reset|begin|start|commit|end|rollback|abort|savepoint|release|` +
    String.raw`prepare|execute|deallocate|declare|close|fetch|move|listen|unlisten|discard|lock|` +
    String.raw`load|do|call|create\s+(?:(?:global|local)\s+)?(?:temp|temporary)(?![\w$]))` +
    String.raw`(?![\w$])`,
  "i",
);

/**
 * Session state named anywhere: temporary objects (`select ... into temp`, `pg_temp.`),
 * `set_config`, advisory locks, sequence functions (`nextval` sets what `currval`/`lastval`
 * read), and the backend's pid (a caller comparing pids expects one session).
 */
const ANYWHERE =
  /(?<![\w$])(?:temp|temporary|pg_temp\w*|set_config|pg_(?:try_)?advisory_\w+|nextval|currval|lastval|setval|pg_backend_pid)(?![\w$])/i;

/** Whether `text` must run on a connection held for its caller; see the module comment. */
export function needsSession(text: string): boolean {
  if (!MENTIONS.test(text)) return false;
  const sql = withoutNoise(text);
  return LEADING.test(sql) || ANYWHERE.test(sql);
}
