/**
 * Turns a template and its values into SQL text with `$n` placeholders and a
 * flat parameter list. Nested queries are inlined as fragments, their
 * parameters renumbered. Values are always parameters, never spliced in.
 */
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

function append(
  strings: TemplateStringsArray,
  args: readonly unknown[],
  values: unknown[],
): string {
  let text = strings[0];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg instanceof Query) {
      text += append(arg.strings, arg.args, values);
    } else {
      values.push(arg);
      text += "$" + values.length;
    }
    text += strings[i + 1];
  }
  return text;
}

/** Compiles a query (and its fragments) into text and parameters. */
export function compile(query: Query<readonly unknown[]>): Compiled {
  const args = query.args;
  for (let i = 0; i < args.length; i++) {
    if (args[i] instanceof Query) {
      const values: unknown[] = [];
      return { text: append(query.strings, args, values), values };
    }
  }
  return { text: plainText(query.strings), values: args };
}
