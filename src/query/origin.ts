/**
 * Where a query was written, for error stacks. A query fails long after the
 * caller's frame is gone (its answer arrives in the read loop), so the caller's
 * line is captured when the query is built and appended to the stack of the
 * error it rejects with, as postgres.js does.
 *
 * Capturing a stack costs about a microsecond, so without `debug` it is done
 * once per template (the template object is the same on every call of it) and
 * only the caller's own frame is kept; with `debug` every query captures the
 * whole stack.
 */

type Fn = (...args: never[]) => unknown;

const byTemplate = new WeakMap<TemplateStringsArray, string>();
/** `sql.unsafe` and `sql.file` have no template object: their text or path is the key. */
const byText = new Map<string, string>();
const MAX_TEXTS = 1000;

function capture(below: Fn, frames: number): string {
  const holder: { stack?: string } = {};
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = frames;
  Error.captureStackTrace(holder, below);
  Error.stackTraceLimit = limit;
  const stack = holder.stack ?? "";
  // Drop the "Error" header line: only the frames are appended to another error's stack.
  const newline = stack.indexOf("\n");
  return newline === -1 ? "" : stack.slice(newline);
}

/**
 * The frames of the code that called `below` (a public entry point such as the
 * `sql` tag), keyed for caching by the template or text; all of them with
 * `full`, else only the innermost.
 */
export function originOf(key: TemplateStringsArray | string, below: Fn, full: boolean): string {
  if (full) return capture(below, Math.max(10, Error.stackTraceLimit));
  if (typeof key === "string") {
    let found = byText.get(key);
    if (found === undefined) {
      if (byText.size >= MAX_TEXTS) byText.clear();
      found = capture(below, 1);
      byText.set(key, found);
    }
    return found;
  }
  let found = byTemplate.get(key);
  if (found === undefined) {
    found = capture(below, 1);
    byTemplate.set(key, found);
  }
  return found;
}

/** What a failed query tells about itself on its error. */
export interface QueryDetails {
  /** Frames of the code that wrote the query (see {@linkcode originOf}). */
  origin: string;
  /** The SQL text sent. */
  query: string;
  /** The parameters as sent (serialised), when known. */
  parameters: readonly unknown[];
  /** The values as given to the query. */
  args: readonly unknown[];
  /** The parameter type OIDs sent, when known. */
  types: readonly number[];
}

/**
 * Gives a query's error the query's details (postgres.js's `query`,
 * `parameters`, `args`, `types`) and the caller's frames at the end of its
 * stack. They are enumerable only with `debug`, so logging an error does not
 * print parameters that may hold secrets. A value that is not an object is
 * wrapped in an Error with it as the message. An error that already has them
 * (one error shared by queries of the same failed statement) is left alone.
 */
export function withQueryDetails(err: unknown, details: QueryDetails, debug: boolean): Error {
  const e: Error = typeof err === "object" && err !== null ? err as Error : new Error(String(err));
  if (Object.hasOwn(e, "args") || !Object.isExtensible(e)) return e;
  const prop = (value: unknown) => ({
    value,
    enumerable: debug,
    configurable: true,
    writable: true,
  });
  Object.defineProperties(e, {
    stack: prop(typeof e.stack === "string" ? e.stack + details.origin : details.origin),
    query: prop(details.query),
    parameters: prop(details.parameters),
    args: prop(details.args),
    types: prop(details.types),
  });
  return e;
}
