/**
 * Which simple queries start a COPY FROM STDIN. PGlite cannot wait for COPY data between calls
 * (it runs each call to the end of its input, and a COPY that runs out of input there ends the
 * whole instance), so such a query is held until its data has all come and then goes in one
 * call with it.
 */

/**
 * The text with its string literals, quoted identifiers, comments and dollar-quoted bodies
 * blanked, so that words inside them are not read as SQL. Unlike query/keyword.ts's
 * `withoutNoise` (a regular expression), it follows nested block comments, as the server does:
 * a COPY read from inside one would hold its query for data that never comes.
 */
function blanked(text: string): string {
  let out = "";
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    const next = text[i + 1];
    let end = -1;
    if (c === "'" || c === '"') {
      // '' and "" stay inside; a backslash-escaped quote only matters for E'', where a
      // blanked tail is harmless (the statement is then no COPY keyword pair anyway).
      end = i + 1;
      while (end < text.length && !(text[end] === c && text[end + 1] !== c)) {
        end += text[end] === c ? 2 : 1;
      }
      end++;
    } else if (c === "-" && next === "-") {
      end = text.indexOf("\n", i);
      if (end === -1) end = text.length;
    } else if (c === "/" && next === "*") {
      let depth = 1;
      end = i + 2;
      while (end < text.length && depth > 0) {
        if (text[end] === "/" && text[end + 1] === "*") (depth++, end += 2);
        else if (text[end] === "*" && text[end + 1] === "/") (depth--, end += 2);
        else end++;
      }
    } else if (c === "$") {
      const tag = /^\$(?:[A-Za-z_]\w*)?\$/.exec(text.slice(i, i + 64));
      if (tag !== null) {
        const close = text.indexOf(tag[0], i + tag[0].length);
        end = close === -1 ? text.length : close + tag[0].length;
      }
    }
    if (end === -1) {
      out += c;
      i++;
    } else {
      out += " ";
      i = Math.min(end, text.length);
    }
  }
  return out;
}

/** Whether the first statement of `text` is a COPY ... FROM STDIN. */
export function startsCopyIn(text: string): boolean {
  // Cheap first: most queries do not mention COPY at all.
  if (!/copy/i.test(text) || !/stdin/i.test(text)) return false;
  const sql = blanked(text);
  return /^\s*copy\b[^;]*\bfrom\s+stdin\b/i.test(sql);
}
