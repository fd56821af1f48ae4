// Checks a value pgpipe returned against the TypeScript type text the typed-SQL describer wrote
// for it (src/typegen/type_map.ts), so a test can run a query and prove each value has the
// type written: the mapping cannot drift from the codecs. It reads the small grammar the type
// map writes: unions (`a | b`), `number`, `string`, `boolean`, `bigint`, `Date`, `Buffer`,
// `unknown`, `null`, `never`, string literals (`"sad"`), and arrays (`(T)[]`, `name[]`, `readonly`).
import { Buffer } from "node:buffer";

/** A parsed type text. */
type TypeText =
  | { kind: "union"; of: TypeText[] }
  | { kind: "name"; name: string }
  | { kind: "literal"; value: string }
  | { kind: "array"; element: TypeText };

const NAMES = new Set([
  "number",
  "string",
  "boolean",
  "bigint",
  "Date",
  "Buffer",
  "Uint8Array",
  "unknown",
  "null",
  "never",
  "object",
]);

/** Splits `text` at ` | ` outside parentheses and string literals. */
function splitUnion(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === "\\") i++;
    } else if (c === "(") depth++;
    else if (c === ")") depth--;
    else if (depth === 0 && text.startsWith(" | ", i)) {
      parts.push(text.slice(start, i));
      start = i + 3;
      i += 2;
    }
  }
  parts.push(text.slice(start));
  return parts;
}

/** Parses a type text; throws on anything outside the grammar (a test then fails loudly). */
function parseTypeText(text: string): TypeText {
  const parts = splitUnion(text.trim());
  if (parts.length > 1) return { kind: "union", of: parts.map(parseTypeText) };
  let t = parts[0];
  if (t.startsWith("readonly ")) t = t.slice("readonly ".length);
  if (t.startsWith("(") && t.endsWith(")[]")) {
    return { kind: "array", element: parseTypeText(t.slice(1, -3)) };
  }
  if (/^\w+\[\]$/.test(t)) return { kind: "array", element: parseTypeText(t.slice(0, -2)) };
  if (t.startsWith('"')) return { kind: "literal", value: JSON.parse(t) };
  if (NAMES.has(t)) return { kind: "name", name: t };
  throw new Error(`a type text outside the describer's grammar: ${text}`);
}

/** Whether `value` is of the type `type` describes. */
function matches(value: unknown, type: TypeText): boolean {
  switch (type.kind) {
    case "union":
      return type.of.some((t) => matches(value, t));
    case "literal":
      return value === type.value;
    case "array":
      return Array.isArray(value) && value.every((v) => matches(v, type.element));
    case "name":
      switch (type.name) {
        case "number":
          return typeof value === "number";
        case "string":
          return typeof value === "string";
        case "boolean":
          return typeof value === "boolean";
        case "bigint":
          return typeof value === "bigint";
        case "Date":
          return value instanceof Date;
        case "Buffer":
          return Buffer.isBuffer(value);
        case "Uint8Array":
          return value instanceof Uint8Array;
        case "object":
          return typeof value === "object" && value !== null;
        case "null":
          return value === null;
        case "unknown":
          return true;
        default:
          return false;
      }
  }
}

/** Whether `value` has the type text `text`, or is null where `nullable` allows it. */
export function valueMatches(value: unknown, text: string, nullable = false): boolean {
  return (nullable && value === null) || matches(value, parseTypeText(text));
}
