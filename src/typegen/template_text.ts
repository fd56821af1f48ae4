/**
 * A template literal's cooked text (what the tag receives in `strings`), with the source offset
 * of every character, so a position in the SQL maps back to the source: escapes decoded, line
 * continuations dropped, CRLF read as LF, as JavaScript cooks them.
 */

/** Text with, for each UTF-16 unit, the 0-based source offset it came from. */
export interface MappedText {
  text: string;
  offsets: number[];
}

const SIMPLE_ESCAPES: Record<string, string> = {
  n: "\n",
  t: "\t",
  r: "\r",
  b: "\b",
  f: "\f",
  v: "\v",
  "0": "\0",
};

/** Appends `chars` to `out`, every unit of it coming from source offset `at`. */
function push(out: MappedText, chars: string, at: number): void {
  out.text += chars;
  for (let i = 0; i < chars.length; i++) out.offsets.push(at);
}

/**
 * Cooks `source.slice(start, end)`, the raw text of one part of a template (between the backtick
 * or `}` and the next `${` or backtick), appending to `out`.
 */
export function cookInto(source: string, start: number, end: number, out: MappedText): void {
  let i = start;
  while (i < end) {
    const c = source[i];
    if (c === "\r") {
      push(out, "\n", i);
      i += source[i + 1] === "\n" ? 2 : 1;
      continue;
    }
    if (c !== "\\") {
      push(out, c, i);
      i++;
      continue;
    }
    const next = source[i + 1];
    if (next === "\r") {
      i += source[i + 2] === "\n" ? 3 : 2;
    } else if (next === "\n" || next === "\u2028" || next === "\u2029") {
      i += 2;
    } else if (next in SIMPLE_ESCAPES) {
      push(out, SIMPLE_ESCAPES[next], i);
      i += 2;
    } else if (next === "x") {
      push(out, String.fromCharCode(parseInt(source.slice(i + 2, i + 4), 16)), i);
      i += 4;
    } else if (next === "u" && source[i + 2] === "{") {
      const close = source.indexOf("}", i + 3);
      push(out, String.fromCodePoint(parseInt(source.slice(i + 3, close), 16)), i);
      i = close + 1;
    } else if (next === "u") {
      push(out, String.fromCharCode(parseInt(source.slice(i + 2, i + 6), 16)), i);
      i += 6;
    } else {
      push(out, next, i);
      i += 2;
    }
  }
}
