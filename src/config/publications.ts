/**
 * The `publications` option: which publications `sql.subscribe()` streams changes from.
 */

/**
 * One name that reads as itself: unquoted, already lower-case, nothing around it (the default,
 * `alltables`, which every client reads, so it skips the reader below).
 */
const PLAIN_NAME = /^[a-z_][a-z0-9_$]*$/;

/**
 * The names in a comma-separated publication list, read the way the server
 * reads `publication_names`: blanks around names are ignored, unquoted names
 * are lower-cased, and `"quoted"` names keep their case (`""` is a quote).
 */
export function parsePublications(text: string): string[] {
  if (PLAIN_NAME.test(text)) return [text];
  const names: string[] = [];
  const blank = (c: string) => c === " " || c === "\t" || c === "\n" || c === "\r";
  let i = 0;
  for (;;) {
    while (i < text.length && blank(text[i])) i++;
    let name = "";
    if (text[i] === '"') {
      for (i++;; i++) {
        if (i >= text.length) throw new TypeError(`publications: unterminated quote in ${text}`);
        if (text[i] === '"') {
          if (text[i + 1] !== '"') break;
          i++;
        }
        name += text[i];
      }
      i++;
    } else {
      const from = i;
      while (i < text.length && text[i] !== "," && !blank(text[i])) i++;
      name = text.slice(from, i).replace(/[A-Z]/g, (c) => c.toLowerCase());
    }
    if (name === "") throw new TypeError(`publications: an empty name in "${text}"`);
    names.push(name);
    while (i < text.length && blank(text[i])) i++;
    if (i === text.length) return names;
    if (text[i] !== ",") throw new TypeError(`publications: expected a comma in "${text}"`);
    i++;
  }
}
