/**
 * Whether a statement the user sends inside `sql.begin` can end its transaction block (COMMIT,
 * END, ROLLBACK, ABORT, PREPARE TRANSACTION; not ROLLBACK TO SAVEPOINT). Once one was sent,
 * the driver can no longer say "nothing was committed" if the connection dies: what ran before
 * it may have committed, and what runs after it runs outside any transaction.
 *
 * Every statement of a multi-statement text is looked at, after comments, literals, quoted
 * identifiers and dollar-quoted bodies are blanked, so `select 'commit'` and a DO block's
 * `end` do not count. A `;` the blanking misses can only make it say yes where the answer
 * is no: the outcome then says "unknown" rather than "not-sent", never the reverse.
 */
import { withoutNoise } from "./keyword.ts";

/** Rules out most statements without allocating: none of the words appears as a word. */
const MENTIONS = /\b(?:commit|end|rollback|abort|prepare)\b/i;

/** A statement (the text's first, or one after a `;`) that ends the transaction block. */
const ENDS = new RegExp(
  String.raw`(?:^|;)\s*(?:commit|end|abort|prepare\s+transaction|` +
    String.raw`rollback(?!(?:\s+(?:work|transaction))?\s+to(?![\w$])))(?![\w$])`,
  "i",
);

/** Whether `text` holds a statement that can end a transaction block. */
export function mayEndTransaction(text: string): boolean {
  return MENTIONS.test(text) && ENDS.test(withoutNoise(text));
}
