/**
 * Turns a template and its values into SQL text with `$n` placeholders and a
 * flat parameter list. Nested queries are inlined as fragments (arrays of them
 * joined by spaces), identifiers and helpers are expanded, and their
 * parameters renumbered. Values are always parameters, never spliced in.
 */
import { QueryError } from "../errors.ts";
import { buildHelper, Helper, type HelperTarget } from "./helpers.ts";
import { Identifier } from "./identifier.ts";
import { Query } from "./query.ts";

/** SQL text and the values of its `$1..$n` parameters. */
export interface Compiled {
  /** SQL text with `$n` placeholders. */
  text: string;
  /** Parameter values in placeholder order. */
  values: readonly unknown[];
}

// The template object is the same on every call of a given template, so its
// text is built once (when it has no fragments, which vary by call).
const textCache = new WeakMap<TemplateStringsArray, string>();

function plainText(strings: TemplateStringsArray): string {
  let text = textCache.get(strings);
  if (text === undefined) {
    text = strings[0];
    for (let i = 1; i < strings.length; i++) text += "$" + i + strings[i];
    textCache.set(strings, text);
  }
  return text;
}

/**
 * Whether an interpolated value changes the text (so the cached text cannot be
 * used). One constructor load and compares, cheaper than three `instanceof`
 * walks for every Date or array parameter; none of these classes is subclassed.
 */
function changesText(arg: object): boolean {
  const c = arg.constructor;
  return c === Query || c === Identifier || c === Helper ||
    (c === Array && (arg as unknown[]).length > 0 && (arg as unknown[])[0] instanceof Query);
}

/** Builds the text of a query with fragments, identifiers or helpers. */
class Builder implements HelperTarget {
  text = "";
  readonly values: unknown[] = [];
  readonly #columnTo: ((name: string) => string) | undefined;

  constructor(columnTo: ((name: string) => string) | undefined) {
    this.#columnTo = columnTo;
  }

  query(q: Query<readonly unknown[]>): void {
    if (q.file !== null) {
      throw new QueryError(
        "INVALID_FRAGMENT",
        "a sql.file query cannot be nested in another query",
      );
    }
    if (q.unsafe) {
      // Its own $n would collide with ours; raw text nests only without parameters.
      if (q.args.length > 0) {
        throw new QueryError(
          "INVALID_FRAGMENT",
          "a sql.unsafe query with parameters cannot be nested in another query",
        );
      }
      this.text += q.strings[0];
      return;
    }
    const strings = q.strings;
    const args = q.args;
    this.text += strings[0];
    for (let i = 0; i < args.length; i++) {
      this.embed(args[i]);
      this.text += strings[i + 1];
    }
  }

  embed(arg: unknown): void {
    if (typeof arg === "object" && arg !== null) {
      if (arg instanceof Query) return this.query(arg);
      if (arg instanceof Identifier) {
        this.text += arg.text;
        return;
      }
      if (arg instanceof Helper) return buildHelper(arg, this, this.#columnTo);
      if (Array.isArray(arg) && arg.length > 0 && arg[0] instanceof Query) {
        for (let i = 0; i < arg.length; i++) {
          const part = arg[i];
          if (!(part instanceof Query)) {
            throw new QueryError(
              "INVALID_FRAGMENT",
              `an array of fragments holds a non-fragment at index ${i}`,
            );
          }
          if (i > 0) this.text += " ";
          this.query(part);
        }
        return;
      }
    }
    this.values.push(arg);
    this.text += "$" + this.values.length;
  }

  /** A value inside a helper: a fragment or identifier inline, else a parameter. */
  value(value: unknown): void {
    if (value instanceof Helper) {
      throw new QueryError("INVALID_HELPER", "a sql(...) helper cannot be a value inside another");
    }
    this.embed(value);
  }
}

/**
 * Compiles a query (and its fragments) into text and parameters. `columnTo`
 * (the `transform.column.to` option) maps the names helpers write.
 */
export function compile(
  query: Query<readonly unknown[]>,
  columnTo?: (name: string) => string,
): Compiled {
  const args = query.args;
  if (query.unsafe) return { text: query.strings[0], values: args };
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (typeof arg === "object" && arg !== null && changesText(arg)) {
      const builder = new Builder(columnTo);
      builder.query(query);
      return builder;
    }
  }
  return { text: plainText(query.strings), values: args };
}
