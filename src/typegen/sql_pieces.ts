/**
 * Whether what a template slot holds is SQL built at run time (a fragment, an identifier, a
 * helper) rather than a value: seen in the slot itself, or behind a name. A name is followed to
 * its declaration: a variable's initializer, a function's body (when the slot calls it), a
 * parameter or variable typed as one of pgpipe's pieces of SQL, and a name imported from a
 * relative module, into that module. Without this, `${order}` (a `let` fragment), `${cols}` (a
 * `const` helper) or `${filter}` (a parameter) would be described as a `$n` value, and the query's
 * types written from the wrong text.
 */
import ts from "typescript";
import { declarationOf, type Recogniser, unwrap } from "./recognise.ts";

/** pgpipe's types whose values are SQL, not a value, when interpolated. */
const PIECE_TYPES = new Set(["Query", "Identifier", "Helper", "SqlPiece"]);

/** The finder of each file's recogniser, made once. */
const finders = new WeakMap<Recogniser, SqlPieces>();

/** The finder for a file's recogniser (one per file, so each declaration is decided once). */
export function piecesOf(recogniser: Recogniser): SqlPieces {
  let finder = finders.get(recogniser);
  if (finder === undefined) finders.set(recogniser, finder = new SqlPieces(recogniser));
  return finder;
}

/** Finds, for one file's recogniser, the slots that hold SQL built at run time. */
export class SqlPieces {
  readonly #recogniser: Recogniser;
  /** Declarations already decided (a circle of names holds no SQL). */
  readonly #known = new Map<ts.Node, string | undefined>();

  constructor(recogniser: Recogniser) {
    this.#recogniser = recogniser;
  }

  /**
   * Why `expr` holds SQL built at run time, or undefined when it is a value. With
   * `awaitedIsValue`, an awaited query is its rows, a value (a name bound to `await sql\`...\``);
   * an awaited query written in the slot itself is left to the reader as SQL built at run time.
   */
  reasonIn(expr: ts.Node, awaitedIsValue = false): string | undefined {
    let reason: string | undefined;
    const visit = (node: ts.Node): void => {
      if (reason !== undefined) return;
      reason = this.#direct(node);
      if (reason !== undefined) return;
      if (ts.isIdentifier(node) && isReference(node)) {
        reason = this.#behind(node);
        return;
      }
      if (ts.isCallExpression(node)) {
        const callee = unwrap(node.expression);
        if (ts.isIdentifier(callee)) reason = this.#returnedBy(callee);
        if (reason !== undefined) return;
      }
      if (awaitedIsValue && ts.isAwaitExpression(node)) return;
      ts.forEachChild(node, visit);
    };
    visit(expr);
    return reason;
  }

  /** A pgpipe `sql` building SQL right here: a tagged template, `sql(...)`, `sql.unsafe`. */
  #direct(node: ts.Node): string | undefined {
    const r = this.#recogniser;
    if (ts.isTaggedTemplateExpression(node) && r.isSql(node.tag)) {
      return "a fragment chosen or built at run time";
    }
    if (ts.isCallExpression(node) && r.isRawCall(node)) {
      return "sql.unsafe or sql.file text, known only at run time";
    }
    if (ts.isCallExpression(node) && r.isSql(node.expression)) {
      return "sql(...): a dynamic identifier or helper";
    }
    return undefined;
  }

  /** Why the value a name refers to holds SQL, or undefined. */
  #behind(id: ts.Identifier): string | undefined {
    const declaration = declarationOf(id);
    const reason = declaration === undefined ? undefined : this.#held(declaration);
    return reason === undefined ? undefined : `${id.text}: ${reason}`;
  }

  /** Why the value a declaration gives a name holds SQL, or undefined. */
  #held(declaration: ts.Node): string | undefined {
    return this.#decided(declaration, () => {
      if (ts.isParameter(declaration) || ts.isVariableDeclaration(declaration)) {
        if (declaration.type !== undefined && this.#isPieceType(declaration.type)) {
          return "a piece of SQL given at run time";
        }
        if (ts.isVariableDeclaration(declaration) && declaration.initializer !== undefined) {
          return this.reasonIn(declaration.initializer, true);
        }
        return undefined;
      }
      if (ts.isImportSpecifier(declaration) || ts.isImportClause(declaration)) {
        const other = this.#recogniser.importedFrom(declaration);
        const name = ts.isImportClause(declaration)
          ? "default"
          : (declaration.propertyName ?? declaration.name).text;
        const inner = other === undefined ? undefined : piecesOf(other).reasonOfExport(name);
        // Only a fragment of the same file is inlined (its text maps back to this file).
        return inner === undefined
          ? undefined
          : "SQL from another module (only fragments of the same file are inlined)";
      }
      return undefined;
    });
  }

  /** Why what a called function returns holds SQL, or undefined. */
  #returnedBy(callee: ts.Identifier): string | undefined {
    const declaration = declarationOf(callee);
    if (declaration === undefined) return undefined;
    let fn: ts.Node | undefined;
    if (ts.isFunctionDeclaration(declaration)) fn = declaration;
    else if (ts.isVariableDeclaration(declaration) && declaration.initializer !== undefined) {
      const init = unwrap(declaration.initializer);
      if (ts.isArrowFunction(init) || ts.isFunctionExpression(init)) fn = init;
    }
    if (fn === undefined) return undefined;
    const body = fn;
    return this.#decided(body, () => {
      const inner = (ts.isFunctionLike(body) && "body" in body && body.body !== undefined)
        ? this.#inBody(body.body as ts.Node)
        : undefined;
      return inner === undefined ? undefined : `${callee.text}(...) returns SQL: ${inner}`;
    });
  }

  /** The reason found anywhere in a function's body (its own nested functions too). */
  #inBody(body: ts.Node): string | undefined {
    let reason: string | undefined;
    const visit = (node: ts.Node): void => {
      if (reason !== undefined) return;
      // An awaited query is a result, not SQL handed back.
      if (ts.isAwaitExpression(node)) return;
      reason = this.#direct(node);
      if (reason === undefined) ts.forEachChild(node, visit);
    };
    visit(body);
    return reason;
  }

  /** `decide` run once per declaration; a declaration met again while deciding holds no SQL. */
  #decided(declaration: ts.Node, decide: () => string | undefined): string | undefined {
    if (this.#known.has(declaration)) return this.#known.get(declaration);
    this.#known.set(declaration, undefined);
    const reason = decide();
    this.#known.set(declaration, reason);
    return reason;
  }

  /** Whether a type names one of pgpipe's pieces of SQL, or the type of a pgpipe `sql`'s result. */
  #isPieceType(type: ts.TypeNode): boolean {
    let found = false;
    const visit = (node: ts.Node): void => {
      if (found) return;
      if (ts.isTypeReferenceNode(node)) {
        const name = node.typeName;
        const last = ts.isIdentifier(name) ? name : name.right;
        if (PIECE_TYPES.has(last.text) && this.#recogniser.isPgpipeTypeName(name)) {
          found = true;
          return;
        }
      }
      // `ReturnType<typeof sql>` and its kin.
      if (ts.isTypeQueryNode(node) && ts.isIdentifier(node.exprName)) {
        if (this.#recogniser.isSql(node.exprName)) {
          found = true;
          return;
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(type);
    return found;
  }

  /** Why this file's export `name` holds SQL, or undefined. */
  reasonOfExport(name: string): string | undefined {
    const declaration = this.#recogniser.exportedDeclaration(name);
    return declaration === undefined ? undefined : this.#held(declaration);
  }
}

/** Whether an identifier is read as a value (not a property name, a label or a declaration). */
function isReference(id: ts.Identifier): boolean {
  const parent = id.parent;
  if (ts.isPropertyAccessExpression(parent) && parent.name === id) return false;
  if (ts.isPropertyAssignment(parent) && parent.name === id) return false;
  if (ts.isTypeNode(parent) || ts.isTypeReferenceNode(parent)) return false;
  return true;
}
