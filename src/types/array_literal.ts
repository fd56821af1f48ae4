/**
 * Parser for PostgreSQL array literals in text format, e.g. `{1,NULL,"a \"b\""}`.
 *
 * @module
 */

/** Decodes one element's text (the element type's text decoder). */
type TextDecoderFn = (text: string) => unknown;

// Character codes, named so the scanning loops below read like the grammar.
const QUOTE = 34; // "
const BACKSLASH = 92; // \
const OPEN = 123; // {
const CLOSE = 125; // }
const BRACKET = 91; // [
const COMMA = 44; // ,

/** Whitespace as `array_in` skips it: space, \t, \n, \v, \f, \r. */
function isSpace(c: number): boolean {
  return c === 32 || (c >= 9 && c <= 13);
}

/** True when `text.slice(start, end)` is the keyword NULL in any letter case. */
function isNullKeyword(text: string, start: number, end: number): boolean {
  if (end - start !== 4) return false;
  // `| 32` folds ASCII upper case to lower case.
  return (text.charCodeAt(start) | 32) === 110 && // n
    (text.charCodeAt(start + 1) | 32) === 117 && // u
    (text.charCodeAt(start + 2) | 32) === 108 && // l
    (text.charCodeAt(start + 3) | 32) === 108; // l
}

function malformed(text: string, at: number): Error {
  return new SyntaxError(`Malformed array literal at position ${at}: ${text}`);
}

/**
 * Parses a PostgreSQL array literal (text output format) into nested JavaScript arrays.
 *
 * - Each non-NULL element is passed through `decode` (or kept as a string when `decode`
 *   is null); the unquoted keyword `NULL` becomes `null`, while the quoted `"NULL"` is the
 *   four-letter string.
 * - Multi-dimensional arrays (`{{1,2},{3,4}}`) become nested arrays; `{}` becomes `[]`.
 * - A leading dimension decoration such as `[0:1]=` (emitted for non-1 lower bounds)
 *   is skipped: JavaScript arrays always start at index 0.
 * - `delimiter` is `,` for every built-in type except `box` (`;`).
 *
 * @throws {SyntaxError} when the text is not a well-formed array literal.
 */
export function parseArrayLiteral(
  text: string,
  decode: TextDecoderFn | null,
  delimiter = ",",
): unknown[] {
  const len = text.length;
  const delim = delimiter === "," ? COMMA : delimiter.charCodeAt(0);
  let i = 0;

  if (text.charCodeAt(0) === BRACKET) {
    // `[lo:hi][lo:hi]=` decoration: bounds carry no information for a JS array.
    i = text.indexOf("=") + 1;
    if (i === 0) throw malformed(text, 0);
  }
  while (i < len && isSpace(text.charCodeAt(i))) i++;
  if (text.charCodeAt(i) !== OPEN) throw malformed(text, i);
  i++;

  const root: unknown[] = [];
  let current = root;
  // Only multi-dimensional arrays need a stack of parents, so allocate it lazily.
  let parents: unknown[][] | null = null;

  while (i < len) {
    const c = text.charCodeAt(i);

    if (c === delim || isSpace(c)) {
      i++;
    } else if (c === OPEN) {
      const child: unknown[] = [];
      current.push(child);
      (parents ??= []).push(current);
      current = child;
      i++;
    } else if (c === CLOSE) {
      i++;
      if (parents === null || parents.length === 0) return root;
      current = parents.pop()!;
    } else if (c === QUOTE) {
      // Quoted element: copy runs between escapes with slice() instead of char by char.
      let value = "";
      let start = ++i;
      for (;;) {
        if (i >= len) throw malformed(text, i);
        const q = text.charCodeAt(i);
        if (q === QUOTE) break;
        if (q === BACKSLASH) {
          value += text.slice(start, i);
          start = i + 1; // the escaped character begins the next run
          i += 2;
        } else {
          i++;
        }
      }
      value += text.slice(start, i);
      i++;
      current.push(decode === null ? value : decode(value));
    } else {
      // Unquoted element: runs to the next delimiter or closing brace.
      const start = i;
      let escaped = false;
      for (;;) {
        if (i >= len) throw malformed(text, i);
        const u = text.charCodeAt(i);
        if (u === delim || u === CLOSE) break;
        if (u === BACKSLASH) {
          escaped = true;
          i += 2;
        } else if (u === OPEN || u === QUOTE) {
          throw malformed(text, i);
        } else {
          i++;
        }
      }
      if (escaped) {
        const value = unescape(text, start, i);
        current.push(decode === null ? value : decode(value));
      } else {
        let end = i;
        while (end > start && isSpace(text.charCodeAt(end - 1))) end--;
        if (isNullKeyword(text, start, end)) {
          current.push(null);
        } else {
          const value = text.slice(start, end);
          current.push(decode === null ? value : decode(value));
        }
      }
    }
  }
  throw malformed(text, i);
}

/**
 * Removes backslash escapes from an unquoted element (the server never emits these, but
 * `array_in` accepts them) and drops trailing whitespace unless it was escaped.
 */
function unescape(text: string, start: number, end: number): string {
  let out = "";
  let keep = 0;
  for (let i = start; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c === BACKSLASH) {
      out += text[++i];
      keep = out.length;
    } else {
      out += text[i];
      if (!isSpace(c)) keep = out.length;
    }
  }
  return out.slice(0, keep);
}
