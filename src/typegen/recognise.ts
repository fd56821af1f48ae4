/**
 * Which expressions of a source file are a pgpipe `sql`: read from the syntax, following each
 * name to its declaration. A Program and its TypeChecker would need Deno's module resolution
 * (`jsr:`, `npm:`, import maps) to see pgpipe's types at all; pgpipe's `sql` comes into being
 * in few ways, and each is visible in the source:
 *
 * - `postgres(...)`, the default (or `postgres`) export of pgpipe, called;
 * - the first parameter of a callback given to `<sql>.begin(...)` or `<tx>.savepoint(...)`;
 * - `await <sql>.reserve()`, and `await <sql>.begin()` (a transaction for `await using`);
 * - a variable, parameter or class property typed as pgpipe's `Sql`, `TransactionSql`,
 *   `ReservedSql`, `Transaction` or `SqlTag` (or `postgres.Sql`, ...);
 * - a name imported from a relative module that exports one of these (followed across files,
 *   through `export *` barrels too).
 */
import ts from "typescript";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { nearestDenoConfig } from "./deno_config.ts";

/** pgpipe's own entry, when typegen runs from a checkout (examples import it by path). */
const PGPIPE_ENTRY = new URL("../../mod.ts", import.meta.url).protocol === "file:"
  ? fileURLToPath(new URL("../../mod.ts", import.meta.url))
  : undefined;

/** Module specifiers that name pgpipe's main entry. */
const PGPIPE_SPECIFIER = /^(?:jsr:\/?)?@pgpipe\/pgpipe(?:@[^/]*)?\/?$/;

/** The type names of pgpipe whose values are an `sql` tag. */
const SQL_TYPES = new Set(["Sql", "TransactionSql", "ReservedSql", "Transaction", "SqlTag"]);

/** Reads and parses a source file by absolute path; undefined when it cannot be read. */
export type SourceLoader = (path: string) => ts.SourceFile | undefined;

/** Parses `text` as a TypeScript (or JavaScript, TSX) source file, with parent pointers. */
export function parseSource(path: string, text: string): ts.SourceFile {
  const kind = path.endsWith(".tsx")
    ? ts.ScriptKind.TSX
    : path.endsWith(".jsx")
    ? ts.ScriptKind.JSX
    : /\.[cm]?js$/.test(path)
    ? ts.ScriptKind.JS
    : ts.ScriptKind.TS;
  return ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, kind);
}

/** Strips parentheses, `await`, `as`, `satisfies` and `!` around an expression. */
export function unwrap(expr: ts.Expression): ts.Expression {
  for (;;) {
    if (
      ts.isParenthesizedExpression(expr) || ts.isAwaitExpression(expr) ||
      ts.isAsExpression(expr) || ts.isSatisfiesExpression(expr) || ts.isNonNullExpression(expr) ||
      ts.isTypeAssertionExpression(expr)
    ) expr = expr.expression;
    else return expr;
  }
}

/** What a name imported from pgpipe is. */
type PgpipeImport = "factory" | "namespace" | "sqlType";

/** Recognises the `sql` tags of one file; `others` holds the recognisers of files it imports. */
export class Recogniser {
  readonly #source: ts.SourceFile;
  readonly #load: SourceLoader;
  readonly #others: Map<string, Recogniser>;
  readonly #known = new Map<ts.Node, boolean>();

  constructor(source: ts.SourceFile, load: SourceLoader, others = new Map<string, Recogniser>()) {
    this.#source = source;
    this.#load = load;
    this.#others = others;
    others.set(source.fileName, this);
  }

  /** Whether `expr` (a tag, a callee's object) is a pgpipe `sql`. */
  isSql(expr: ts.Expression): boolean {
    expr = unwrap(expr);
    if (ts.isIdentifier(expr)) {
      const declaration = declarationOf(expr);
      return declaration !== undefined && this.#declaresSql(declaration);
    }
    if (ts.isPropertyAccessExpression(expr) && expr.expression.kind === ts.SyntaxKind.ThisKeyword) {
      const member = classMember(expr, expr.name.text);
      return member !== undefined && this.#declaresSql(member);
    }
    return false;
  }

  /** Whether `call` is `sql.unsafe(...)` or `sql.file(...)` on a pgpipe `sql`. */
  isRawCall(call: ts.CallExpression): boolean {
    const callee = unwrap(call.expression);
    return ts.isPropertyAccessExpression(callee) &&
      (callee.name.text === "unsafe" || callee.name.text === "file") &&
      this.isSql(callee.expression);
  }

  /** Whether a declaration (variable, parameter, property, import) holds a pgpipe `sql`. */
  #declaresSql(declaration: ts.Node): boolean {
    const known = this.#known.get(declaration);
    if (known !== undefined) return known;
    this.#known.set(declaration, false); // a circle of aliases is no sql
    const found = this.#decide(declaration);
    this.#known.set(declaration, found);
    return found;
  }

  #decide(node: ts.Node): boolean {
    if (ts.isParameter(node)) {
      if (node.type !== undefined) return this.#isSqlType(node.type);
      return this.#isCallbackOfBegin(node);
    }
    if (ts.isVariableDeclaration(node) || ts.isPropertyDeclaration(node)) {
      if (node.type !== undefined) return this.#isSqlType(node.type);
      return node.initializer !== undefined && this.#makesSql(node.initializer);
    }
    if (ts.isImportSpecifier(node) || ts.isImportClause(node)) return this.#importsSql(node);
    return false;
  }

  /** Whether an expression's value is a new or aliased `sql`. */
  #makesSql(init: ts.Expression): boolean {
    const expr = unwrap(init);
    if (ts.isIdentifier(expr) || ts.isPropertyAccessExpression(expr)) return this.isSql(expr);
    if (!ts.isCallExpression(expr)) return false;
    const callee = unwrap(expr.expression);
    if (this.#pgpipeName(callee) === "factory") return true;
    if (ts.isPropertyAccessExpression(callee) && this.isSql(callee.expression)) {
      const method = callee.name.text;
      // A transaction to `await using` (no callback), or a reserved connection.
      if (method === "reserve") return true;
      if (method === "begin") return !expr.arguments.some((a) => ts.isFunctionLike(unwrap(a)));
    }
    return false;
  }

  /** Whether a parameter is the first of a callback given to `sql.begin` or `tx.savepoint`. */
  #isCallbackOfBegin(parameter: ts.ParameterDeclaration): boolean {
    const fn = parameter.parent;
    if (fn.parameters[0] !== parameter) return false;
    let arg: ts.Node = fn;
    while (ts.isParenthesizedExpression(arg.parent)) arg = arg.parent;
    const call = arg.parent;
    if (!ts.isCallExpression(call) || !call.arguments.includes(arg as ts.Expression)) return false;
    const callee = unwrap(call.expression);
    return ts.isPropertyAccessExpression(callee) &&
      (callee.name.text === "begin" || callee.name.text === "savepoint") &&
      this.isSql(callee.expression);
  }

  /** Whether a type annotation names one of pgpipe's `sql` types (or a union holding one). */
  #isSqlType(type: ts.TypeNode): boolean {
    if (ts.isUnionTypeNode(type)) return type.types.some((t) => this.#isSqlType(t));
    if (ts.isParenthesizedTypeNode(type)) return this.#isSqlType(type.type);
    if (!ts.isTypeReferenceNode(type)) return false;
    const name = type.typeName;
    if (ts.isIdentifier(name)) return this.#pgpipeName(name) === "sqlType";
    return SQL_TYPES.has(name.right.text) && ts.isIdentifier(name.left) &&
      ["factory", "namespace"].includes(this.#pgpipeName(name.left) ?? "");
  }

  /** What a name imported from pgpipe stands for, or undefined when it is not one. */
  #pgpipeName(expr: ts.Node): PgpipeImport | undefined {
    if (ts.isPropertyAccessExpression(expr)) {
      // `pg.default(...)` / `pg.postgres(...)` through `import * as pg`.
      return ["default", "postgres"].includes(expr.name.text) &&
          this.#pgpipeName(expr.expression) === "namespace"
        ? "factory"
        : undefined;
    }
    if (!ts.isIdentifier(expr)) return undefined;
    const declaration = declarationOf(expr);
    if (declaration === undefined) return undefined;
    const module = importOf(declaration);
    if (module === undefined || !this.#isPgpipe(module)) return undefined;
    if (ts.isImportClause(declaration)) return "factory";
    if (ts.isNamespaceImport(declaration)) return "namespace";
    if (ts.isImportSpecifier(declaration)) {
      const imported = (declaration.propertyName ?? declaration.name).text;
      if (imported === "default" || imported === "postgres") return "factory";
      if (SQL_TYPES.has(imported)) return "sqlType";
    }
    return undefined;
  }

  /** Whether a module specifier names pgpipe. */
  #isPgpipe(specifier: string): boolean {
    if (PGPIPE_SPECIFIER.test(specifier)) return true;
    // A bare name the project's import map points at pgpipe (`"db": "jsr:@pgpipe/pgpipe@^0.1"`).
    const mapped = importMapOf(dirname(this.#source.fileName))[specifier];
    if (mapped !== undefined && PGPIPE_SPECIFIER.test(mapped)) return true;
    return PGPIPE_ENTRY !== undefined && /^\.\.?\//.test(specifier) &&
      resolve(dirname(this.#source.fileName), specifier) === PGPIPE_ENTRY;
  }

  /** Whether an imported name, from a relative module, is an `sql` that module exports. */
  #importsSql(node: ts.ImportSpecifier | ts.ImportClause): boolean {
    const specifier = importOf(node);
    if (specifier === undefined || !/^\.\.?\//.test(specifier)) return false;
    const name = ts.isImportClause(node) ? "default" : (node.propertyName ?? node.name).text;
    return this.#other(specifier)?.exportsSql(name) ?? false;
  }

  /** The recogniser of the file a relative specifier names (parsed once). */
  #other(specifier: string): Recogniser | undefined {
    const path = resolve(dirname(this.#source.fileName), specifier);
    const existing = this.#others.get(path);
    if (existing !== undefined) return existing;
    const source = this.#load(path);
    return source === undefined ? undefined : new Recogniser(source, this.#load, this.#others);
  }

  /** Whether a type name (`Query`, `postgres.Query`) is one imported from pgpipe. */
  isPgpipeTypeName(name: ts.EntityName): boolean {
    if (ts.isQualifiedName(name)) {
      return ts.isIdentifier(name.left) &&
        ["factory", "namespace"].includes(this.#pgpipeName(name.left) ?? "");
    }
    const declaration = declarationOf(name);
    if (declaration === undefined || !ts.isImportSpecifier(declaration)) return false;
    const module = importOf(declaration);
    return module !== undefined && this.#isPgpipe(module);
  }

  /** The recogniser of the relative module an imported name comes from. */
  importedFrom(node: ts.ImportSpecifier | ts.ImportClause): Recogniser | undefined {
    const specifier = importOf(node);
    return specifier !== undefined && /^\.\.?\//.test(specifier)
      ? this.#other(specifier)
      : undefined;
  }

  /** The variable declaration this file exports under `name` (directly, or `export { a as b }`). */
  exportedDeclaration(name: string): ts.Node | undefined {
    for (const statement of this.#source.statements) {
      if (ts.isVariableStatement(statement) && exported(statement)) {
        const d = statement.declarationList.declarations.find((d) =>
          ts.isIdentifier(d.name) && d.name.text === name
        );
        if (d !== undefined) return d;
      }
      if (
        ts.isExportDeclaration(statement) && statement.moduleSpecifier === undefined &&
        statement.exportClause !== undefined && ts.isNamedExports(statement.exportClause)
      ) {
        const e = statement.exportClause.elements.find((e) => e.name.text === name);
        if (e !== undefined) return findDeclaration(this.#source, (e.propertyName ?? e.name).text);
      }
    }
    return undefined;
  }

  /** Whether this file exports an `sql` under `name` (through `export *` too: a barrel file). */
  exportsSql(name: string): boolean {
    // A circle of `export *` between modules exports nothing more the second time round.
    if (this.#asked.has(name)) return false;
    this.#asked.add(name);
    try {
      return this.#exportsSql(name);
    } finally {
      this.#asked.delete(name);
    }
  }

  /** Names `exportsSql` is deciding now. */
  readonly #asked = new Set<string>();

  #exportsSql(name: string): boolean {
    const stars: string[] = [];
    for (const statement of this.#source.statements) {
      if (
        ts.isExportDeclaration(statement) && statement.exportClause === undefined &&
        statement.moduleSpecifier !== undefined && ts.isStringLiteral(statement.moduleSpecifier) &&
        /^\.\.?\//.test(statement.moduleSpecifier.text)
      ) {
        stars.push(statement.moduleSpecifier.text);
        continue;
      }
      if (ts.isExportAssignment(statement) && name === "default") {
        return this.#makesSql(statement.expression);
      }
      if (ts.isVariableStatement(statement) && exported(statement)) {
        for (const d of statement.declarationList.declarations) {
          if (ts.isIdentifier(d.name) && d.name.text === name) return this.#declaresSql(d);
        }
      }
      if (ts.isExportDeclaration(statement) && statement.exportClause !== undefined) {
        if (!ts.isNamedExports(statement.exportClause)) continue;
        for (const e of statement.exportClause.elements) {
          if (e.name.text !== name) continue;
          const local = (e.propertyName ?? e.name).text;
          const from = statement.moduleSpecifier;
          if (from !== undefined && ts.isStringLiteral(from)) {
            return /^\.\.?\//.test(from.text) && (this.#other(from.text)?.exportsSql(local) ??
              false);
          }
          const declaration = findDeclaration(this.#source, local);
          return declaration !== undefined && this.#declaresSql(declaration);
        }
      }
    }
    // A name the module exports itself hides the same name from an `export *`.
    return stars.some((from) => this.#other(from)?.exportsSql(name) ?? false);
  }
}

/** The `imports` of the project's deno.json for files in `dir`. */
function importMapOf(dir: string): Record<string, string> {
  const imports = nearestDenoConfig(dir)?.json.imports;
  return typeof imports === "object" && imports !== null ? imports as Record<string, string> : {};
}

/** Whether a statement carries `export`. */
function exported(statement: ts.VariableStatement): boolean {
  return statement.modifiers?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword) ?? false;
}

/** The module specifier of an import declaration a node belongs to. */
function importOf(node: ts.Node): string | undefined {
  let at: ts.Node | undefined = node;
  while (at !== undefined && !ts.isImportDeclaration(at)) at = at.parent;
  return at !== undefined && ts.isStringLiteral(at.moduleSpecifier)
    ? at.moduleSpecifier.text
    : undefined;
}

/** The class member (property, or constructor parameter property) named `name` around `at`. */
function classMember(at: ts.Node, name: string): ts.Node | undefined {
  let node: ts.Node | undefined = at.parent;
  while (node !== undefined && !ts.isClassLike(node)) node = node.parent;
  if (node === undefined) return undefined;
  for (const member of node.members) {
    if (ts.isPropertyDeclaration(member) && ts.isIdentifier(member.name)) {
      if (member.name.text === name) return member;
    }
    if (ts.isConstructorDeclaration(member)) {
      const p = member.parameters.find((p) =>
        ts.isIdentifier(p.name) && p.name.text === name && (p.modifiers?.length ?? 0) > 0
      );
      if (p !== undefined) return p;
    }
  }
  return undefined;
}

/** The declaration `id` refers to, looked up scope by scope outwards. */
export function declarationOf(id: ts.Identifier): ts.Node | undefined {
  const name = id.text;
  for (let scope: ts.Node | undefined = id.parent; scope !== undefined; scope = scope.parent) {
    const found = findDeclaration(scope, name);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** The declaration of `name` a scope node introduces itself, if any. */
function findDeclaration(scope: ts.Node, name: string): ts.Node | undefined {
  if (ts.isFunctionLike(scope)) {
    for (const p of scope.parameters) {
      if (ts.isIdentifier(p.name) && p.name.text === name) return p;
    }
    return undefined;
  }
  if (ts.isCatchClause(scope)) {
    const v = scope.variableDeclaration;
    return v !== undefined && ts.isIdentifier(v.name) && v.name.text === name ? v : undefined;
  }
  if (
    (ts.isForStatement(scope) || ts.isForOfStatement(scope) || ts.isForInStatement(scope)) &&
    scope.initializer !== undefined && ts.isVariableDeclarationList(scope.initializer)
  ) {
    return scope.initializer.declarations.find((d) =>
      ts.isIdentifier(d.name) && d.name.text === name
    );
  }
  if (
    !ts.isSourceFile(scope) && !ts.isBlock(scope) && !ts.isModuleBlock(scope) &&
    !ts.isCaseClause(scope) && !ts.isDefaultClause(scope)
  ) return undefined;
  for (const statement of scope.statements) {
    if (ts.isVariableStatement(statement)) {
      const d = statement.declarationList.declarations.find((d) =>
        ts.isIdentifier(d.name) && d.name.text === name
      );
      if (d !== undefined) return d;
    } else if (
      (ts.isFunctionDeclaration(statement) || ts.isClassDeclaration(statement)) &&
      statement.name?.text === name
    ) {
      return statement;
    } else if (ts.isImportDeclaration(statement) && statement.importClause !== undefined) {
      const clause = statement.importClause;
      if (clause.name?.text === name) return clause;
      const bindings = clause.namedBindings;
      if (bindings !== undefined && ts.isNamespaceImport(bindings)) {
        if (bindings.name.text === name) return bindings;
      } else if (bindings !== undefined) {
        const s = bindings.elements.find((e) => e.name.text === name);
        if (s !== undefined) return s;
      }
    }
  }
  return undefined;
}
