/**
 * The writer's half: the type arguments each tagged template of a query should carry, from what
 * the describer said, and the edits that put them in place. An annotation is compared by its
 * tokens, so one a formatter broke over several lines is still the same annotation.
 */
import ts from "typescript";
import type { ColumnType, QueryTypes } from "./model.ts";
import type { ScannedQuery, TemplateSite } from "./scan.ts";

/** One replacement in a source text. */
export interface Edit {
  start: number;
  end: number;
  text: string;
}

/** A property name as written in a type literal: bare when it is an identifier. */
function propertyName(name: string): string {
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(name) ? name : JSON.stringify(name);
}

/** A column's type with `| null` when it can be null (`unknown`, a json value, holds null already). */
function columnType(column: ColumnType): string {
  return column.nullable && column.type !== "unknown" ? `${column.type} | null` : column.type;
}

/**
 * The row type of a query, as an array type: `{ id: number; name: string | null }[]`, or
 * `never[]` for a statement that returns no rows. A name given twice keeps its last column,
 * as a row object does.
 */
export function rowType(columns: readonly ColumnType[]): string {
  if (columns.length === 0) return "never[]";
  const byName = new Map<string, ColumnType>();
  for (const c of columns) {
    byName.delete(c.name);
    byName.set(c.name, c);
  }
  const members = [...byName.values()].map((c) => `${propertyName(c.name)}: ${columnType(c)}`);
  return `{ ${members.join("; ")} }[]`;
}

/** A site's slot types: each parameter's type, `never` where the slot holds SQL. */
function slotTypes(site: TemplateSite, params: readonly string[]): string {
  const types = site.slots.map((s) => "param" in s ? params[s.param - 1] ?? "unknown" : "never");
  return `[${types.join(", ")}]`;
}

/**
 * The type arguments (between `<` and `>`) each site of a described query should have, or null
 * for a site to leave as it is: a statement with no columns and no parameters (DDL, `begin`),
 * and a fragment without values.
 */
export function wantedTypeArgs(
  query: ScannedQuery,
  types: Extract<QueryTypes, { ok: true }>,
): (string | null)[] {
  return query.sites.map((site, i) => {
    const slots = site.slots.length > 0 ? slotTypes(site, types.params) : null;
    if (i === 0) {
      if (types.columns.length === 0 && slots === null) return null;
      const row = rowType(types.columns);
      return slots === null ? row : `${row}, ${slots}`;
    }
    // A fragment's rows are never read; only its values are typed.
    return slots === null ? null : `unknown[], ${slots}`;
  });
}

/** The tokens of type-argument text, trivia and layout-only punctuation left out. */
function tokens(text: string): string[] {
  const scanner = ts.createScanner(ts.ScriptTarget.Latest, true, ts.LanguageVariant.Standard, text);
  const out: string[] = [];
  for (let kind = scanner.scan(); kind !== ts.SyntaxKind.EndOfFileToken; kind = scanner.scan()) {
    out.push(scanner.getTokenText());
  }
  // `;` or `,` before a closing bracket, and a leading `|` of a union, are layout only.
  return out.filter((t, i) => {
    if ((t === ";" || t === ",") && ["}", "]", ">", ")"].includes(out[i + 1])) return false;
    if ((t === "|" || t === "&") && (i === 0 || ["<", ",", "(", "[", ":"].includes(out[i - 1]))) {
      return false;
    }
    return true;
  });
}

/** Whether two type-argument texts say the same thing, whatever their layout. */
export function sameTypeArgs(a: string, b: string): boolean {
  const x = tokens(a);
  const y = tokens(b);
  return x.length === y.length && x.every((t, i) => t === y[i]);
}

/**
 * The edits that give a query's sites the wanted type arguments (none where already right).
 * `claimed` holds the sites already decided in this file, by where their type arguments start:
 * every query's own template (a `const` fragment may be a statement of its own too, which then
 * keeps its row type), and each fragment once the first query using it has typed it.
 */
export function editsFor(
  query: ScannedQuery,
  wanted: readonly (string | null)[],
  claimed: Set<number> = new Set(),
): Edit[] {
  const edits: Edit[] = [];
  query.sites.forEach((site, i) => {
    if (i > 0) {
      if (claimed.has(site.typeArgsStart)) return;
      claimed.add(site.typeArgsStart);
    }
    const want = wanted[i];
    if (want === null) return;
    if (site.typeArgs !== null && sameTypeArgs(site.typeArgs, want)) return;
    edits.push({ start: site.typeArgsStart, end: site.typeArgsEnd, text: `<${want}>` });
  });
  return edits;
}

/** Applies non-overlapping edits to a text. */
export function applyEdits(text: string, edits: readonly Edit[]): string {
  const sorted = [...edits].sort((a, b) => b.start - a.start);
  let out = text;
  for (const e of sorted) out = out.slice(0, e.start) + e.text + out.slice(e.end);
  return out;
}
