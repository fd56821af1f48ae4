/**
 * Finds the pgpipe queries of a source file: every tagged template whose tag is a pgpipe `sql`
 * (recognise.ts), with its text as pgpipe would send it (values as `$1`…`$n`, static fragments
 * inlined) and where each of its type arguments is, for the writer. Queries whose text depends
 * on run time are listed with the reason instead.
 */
import ts from "typescript";
import type { FoundQuery } from "./model.ts";
import { parseSource, Recogniser, type SourceLoader, unwrap } from "./recognise.ts";
import { piecesOf } from "./sql_pieces.ts";
import { cookInto, type MappedText } from "./template_text.ts";

/** What one interpolated slot of a template holds: the parameter `$n` it became, or SQL. */
export type Slot = { param: number } | { sql: true };

/** One tagged template of a query (the query itself, or a fragment inlined in it). */
export interface TemplateSite {
  /** Source range of its type arguments, `<`…`>` (empty, at the tag's end, when it has none). */
  typeArgsStart: number;
  typeArgsEnd: number;
  /** The text between `<` and `>`, or null when it has no type arguments. */
  typeArgs: string | null;
  /** What each `${}` of the template holds, in order. */
  slots: Slot[];
}

/** A query with its text known, and the tagged templates it is made of. */
export interface ScannedQuery extends FoundQuery {
  /** The query's own template first, then each fragment inlined in it. */
  sites: TemplateSite[];
}

/** A tagged template (or `sql.unsafe` call) left as it is, and why. */
export interface SkippedQuery {
  file: string;
  line: number;
  column: number;
  reason: string;
}

/** What the scanner found in one file. */
export interface ScannedFile {
  /** The file as given (for messages). */
  file: string;
  /** Its text as read. */
  text: string;
  queries: ScannedQuery[];
  skipped: SkippedQuery[];
}

/** A template's text could not be known: why. */
class Dynamic {
  constructor(readonly reason: string) {}
}

/** Words a statement sent on its own can begin with (a fragment begins with something else). */
const STATEMENT_START = new Set(
  (
    "select insert update delete merge with values table create alter drop truncate grant revoke " +
    "comment copy explain show set reset begin start commit end rollback abort savepoint release " +
    "lock listen notify unlisten do call analyze analyse vacuum refresh prepare execute deallocate " +
    "declare fetch move close discard cluster reindex checkpoint load security import reassign"
  ).split(" "),
);

/** The first word of SQL text, comments and opening parentheses skipped. */
function firstWord(text: string): string {
  const rest = text.replace(/^(?:\s+|--[^\n]*|\/\*[\s\S]*?\*\/|\()*/, "");
  return (rest.match(/^[A-Za-z_]+/)?.[0] ?? "").toLowerCase();
}

/** Scans one file's text. `display` is how messages name it; `load` reads imported files. */
export function scanSource(
  display: string,
  path: string,
  text: string,
  load: SourceLoader,
): ScannedFile {
  const source = parseSource(path, text);
  const recogniser = new Recogniser(source, load);
  // What a slot holds when it is SQL built at run time, seen through names too.
  const pieces = piecesOf(recogniser);
  const result: ScannedFile = { file: display, text, queries: [], skipped: [] };
  // Tagged templates already taken into another query (inlined, or inside a dynamic slot).
  const taken = new Set<ts.Node>();

  const where = (node: ts.Node) => {
    const start = node.getStart(source);
    const { line, character } = source.getLineAndCharacterOfPosition(start);
    return { file: display, line: line + 1, column: character + 1 };
  };
  const skip = (node: ts.Node, reason: string) =>
    result.skipped.push({ ...where(node), reason: reason });

  /** A static fragment a slot holds: a tagged template, or a const bound to one. */
  const staticFragment = (expr: ts.Expression): ts.TaggedTemplateExpression | undefined => {
    // An awaited template is a result, not a fragment: left to the dynamic check.
    if (ts.isAwaitExpression(expr)) return undefined;
    const e = unwrap(expr);
    if (ts.isTaggedTemplateExpression(e) && recogniser.isSql(e.tag)) return e;
    if (ts.isIdentifier(e)) {
      const declaration = declarationOfConst(e);
      if (declaration?.initializer !== undefined) {
        const init = unwrap(declaration.initializer);
        if (ts.isTaggedTemplateExpression(init) && recogniser.isSql(init.tag)) return init;
      }
    }
    return undefined;
  };

  /**
   * Marks a fragment written in place as part of the query around it; a `const` bound to one is
   * still visited on its own (a statement is then described by itself as well).
   */
  const takeInline = (slot: ts.Expression, fragment: ts.TaggedTemplateExpression) => {
    if (!ts.isIdentifier(unwrap(slot))) taken.add(fragment);
  };

  /** Appends a template's text to `out`, fragments inlined; a site for it (and each fragment). */
  const build = (
    node: ts.TaggedTemplateExpression,
    out: MappedText,
    sites: TemplateSite[],
    params: { count: number },
    depth: number,
  ): void => {
    if (depth > 20) throw new Dynamic("fragments nested too deep (a circle?)");
    const site = siteOf(node, text);
    sites.push(site);
    const template = node.template;
    if (ts.isNoSubstitutionTemplateLiteral(template)) {
      cookInto(text, template.getStart(source) + 1, template.end - 1, out);
      return;
    }
    cookInto(text, template.head.getStart(source) + 1, template.head.end - 2, out);
    for (const span of template.templateSpans) {
      const expr = span.expression;
      const fragment = staticFragment(expr);
      const list = unwrap(expr);
      if (fragment !== undefined) {
        takeInline(expr, fragment);
        site.slots.push({ sql: true });
        build(fragment, out, sites, params, depth + 1);
      } else if (
        ts.isArrayLiteralExpression(list) && list.elements.length > 0 &&
        list.elements.every((e) => staticFragment(e) !== undefined)
      ) {
        site.slots.push({ sql: true });
        list.elements.forEach((e, i) => {
          if (i > 0) out.text += " ", out.offsets.push(e.getStart(source));
          const f = staticFragment(e)!;
          takeInline(e, f);
          build(f, out, sites, params, depth + 1);
        });
      } else {
        const reason = pieces.reasonIn(expr);
        if (reason !== undefined) throw new Dynamic(reason);
        params.count++;
        site.slots.push({ param: params.count });
        const placeholder = "$" + params.count;
        out.text += placeholder;
        // The placeholder maps to the `${` of its slot.
        for (let i = 0; i < placeholder.length; i++) out.offsets.push(expr.getStart(source) - 2);
      }
      const literal = span.literal;
      const tail = ts.isTemplateTail(literal);
      cookInto(text, literal.getStart(source) + 1, literal.end - (tail ? 1 : 2), out);
    }
  };

  /** Marks the sql tagged templates inside `node` as taken (fragments of a dynamic query). */
  const takeAll = (node: ts.Node): void => {
    // An awaited query runs on its own: it stays a query to describe.
    if (ts.isAwaitExpression(node)) return;
    if (ts.isTaggedTemplateExpression(node) && recogniser.isSql(node.tag)) taken.add(node);
    ts.forEachChild(node, takeAll);
  };

  const visit = (node: ts.Node): void => {
    if (ts.isTaggedTemplateExpression(node) && !taken.has(node) && recogniser.isSql(node.tag)) {
      if (ignored(node, text)) {
        takeAll(node.template);
        skip(node.template, `marked ${IGNORE}`);
        return;
      }
      const out: MappedText = { text: "", offsets: [] };
      const sites: TemplateSite[] = [];
      try {
        build(node, out, sites, { count: 0 }, 0);
        const word = firstWord(out.text);
        if (STATEMENT_START.has(word)) {
          const { file, line, column } = where(node.template);
          result.queries.push({
            file,
            line,
            column,
            text: out.text,
            sourceOffsets: out.offsets,
            sites,
          });
        } else {
          skip(
            node.template,
            "a fragment, not a statement on its own" + (word ? ` (${word} …)` : ""),
          );
        }
      } catch (e) {
        if (!(e instanceof Dynamic)) throw e;
        takeAll(node.template);
        skip(node.template, e.reason);
      }
    } else if (ts.isCallExpression(node) && recogniser.isRawCall(node)) {
      skip(node, "sql.unsafe or sql.file text, known only at run time");
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return result;
}

/** The comment that keeps typegen off the query after it (on its line or the line before). */
const IGNORE = "typegen-ignore";

/**
 * Whether a `// typegen-ignore` (or block) comment precedes the query: in the leading comments of
 * the tagged template or of what it begins, up to its statement.
 */
function ignored(node: ts.Node, text: string): boolean {
  for (let at: ts.Node | undefined = node; at !== undefined; at = at.parent) {
    const comments = ts.getLeadingCommentRanges(text, at.getFullStart()) ?? [];
    if (comments.some((c) => text.slice(c.pos, c.end).includes(IGNORE))) return true;
    if (ts.isStatement(at) || ts.isSourceFile(at)) return false;
  }
  return false;
}

/** A `const` declaration `id` refers to. */
function declarationOfConst(id: ts.Identifier): ts.VariableDeclaration | undefined {
  for (let scope: ts.Node | undefined = id.parent; scope !== undefined; scope = scope.parent) {
    if (!ts.isSourceFile(scope) && !ts.isBlock(scope)) continue;
    for (const s of scope.statements) {
      if (!ts.isVariableStatement(s) || !(s.declarationList.flags & ts.NodeFlags.Const)) continue;
      const d = s.declarationList.declarations.find((d) =>
        ts.isIdentifier(d.name) && d.name.text === id.text
      );
      if (d !== undefined) return d;
    }
  }
  return undefined;
}

/** Where a tagged template's type arguments are, and what they say. */
function siteOf(node: ts.TaggedTemplateExpression, text: string): TemplateSite {
  const start = node.tag.end;
  const end = node.template.getStart();
  const between = text.slice(start, end).trim();
  return {
    typeArgsStart: start,
    typeArgsEnd: end,
    typeArgs: node.typeArguments === undefined ? null : between.slice(1, -1),
    slots: [],
  };
}
