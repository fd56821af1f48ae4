/**
 * Which result columns are provably never null, and which parameters must not be null, read
 * from the server's parse tree of the statement (node_tree.ts). The rules, and nothing else:
 *
 * - a table column with a valid `NOT NULL` constraint (a primary key's columns have one), not
 *   on the nullable side of an outer join (left, right, full), and not in a query with
 *   grouping sets (whose total rows null the grouped columns);
 * - a non-null literal; `count(...)`, and the window functions that always give a number
 *   (`row_number`, `rank`, `dense_rank`, `percent_rank`, `cume_dist`);
 * - `coalesce` with a non-null argument; a `case` whose every branch, `else` included, is;
 * - a built-in cast (or a binary-compatible relabelling) of a non-null value that is not json
 *   (since PostgreSQL 17 `'null'::jsonb::int` is null); `is [not] null`
 *   and `is [not] true`; `exists (...)`, `array(...)`, `array[...]`, `row(...)`; `and`, `or`,
 *   `not` of non-null operands;
 * - a column of a subquery, a CTE (not a recursive one), a `values` list or a union that is
 *   non-null in every row source, by these same rules; and a view's, by its definition (the
 *   describer describes it and answers through the NOT NULL lookup).
 *
 * Everything else may be null. A parameter must not be null when it is the value written to a
 * `NOT NULL` column by `insert ... values` or `update ... set` (the server would refuse the null),
 * unless a BEFORE ROW trigger of the table may fill it in (the describer's lookup says which).
 */
import {
  asNode,
  child,
  field,
  int,
  nodeList,
  type PgNode,
  type PgValue,
  text,
} from "./node_tree.ts";
import { FIRST_USER_OID } from "../types/oids.ts";

/** Whether column `attnum` of relation `relid` has a valid NOT NULL constraint. */
export type NotNullLookup = (relid: number, attnum: number) => boolean;

// Values of the server's enums, as nodeToString writes them (numbers).
const CMD_SELECT = 1;
const CMD_UPDATE = 2;
const CMD_INSERT = 3;
const CMD_DELETE = 4;
const RTE_RELATION = 0;
const RTE_SUBQUERY = 1;
const RTE_JOIN = 2;
const RTE_VALUES = 5;
const RTE_CTE = 6;
/** PostgreSQL 18's grouping step: Vars above GROUP BY point at its expressions. */
const RTE_GROUP = 9;
const JOIN_LEFT = 1;
const JOIN_FULL = 2;
const JOIN_RIGHT = 3;
const COERCE_EXPLICIT_CAST = 1;
const COERCE_IMPLICIT_CAST = 2;
const EXISTS_SUBLINK = 0;
const ARRAY_SUBLINK = 6;
const PARAM_EXTERN = 0;

/** count(any), count(*). */
const COUNTS = new Set([2147, 2803]);
/** count, row_number, rank, dense_rank, percent_rank, cume_dist as window functions. */
const NON_NULL_WINDOW_FUNCTIONS = new Set([2147, 2803, 3100, 3101, 3102, 3103, 3104]);

/** Whether a FUNCEXPR is a cast (written or implicit) by one of the server's own functions. */
function isBuiltinCast(e: PgNode): boolean {
  const format = int(e, "funcformat");
  return (format === COERCE_EXPLICIT_CAST || format === COERCE_IMPLICIT_CAST) &&
    int(e, "funcid") < FIRST_USER_OID;
}

/** A query and where it sits: its range table, the entries outer joins may null, its parent. */
interface Scope {
  query: PgNode;
  rtable: PgNode[];
  /** 1-based range table indexes on the nullable side of an outer join. */
  nullable: Set<number>;
  parent: Scope | null;
  /** Whether a relation has rules, which may make the rows a statement writes to it return. */
  ruled: (relid: number) => boolean;
}

function scopeOf(
  query: PgNode,
  parent: Scope | null,
  ruled: (relid: number) => boolean = parent?.ruled ?? (() => false),
): Scope {
  const nullable = new Set<number>();
  const jointree = child(query, "jointree");
  if (jointree !== undefined) markNullable(jointree, false, nullable);
  return { query, rtable: nodeList(field(query, "rtable")), nullable, parent, ruled };
}

/** Adds every range table index under `item` that an outer join above it may null. */
function markNullable(item: PgNode, nulled: boolean, out: Set<number>): void {
  switch (item.tag) {
    case "RANGETBLREF":
      if (nulled) out.add(int(item, "rtindex"));
      return;
    case "JOINEXPR": {
      const type = int(item, "jointype");
      const rtindex = int(item, "rtindex");
      if (nulled && rtindex > 0) out.add(rtindex);
      const left = child(item, "larg");
      const right = child(item, "rarg");
      const leftNulled = nulled || type === JOIN_RIGHT || type === JOIN_FULL;
      const rightNulled = nulled || type === JOIN_LEFT || type === JOIN_FULL;
      if (left !== undefined) markNullable(left, leftNulled, out);
      if (right !== undefined) markNullable(right, rightNulled, out);
      return;
    }
    case "FROMEXPR":
      for (const x of nodeList(field(item, "fromlist"))) markNullable(x, nulled, out);
      return;
  }
}

/** The entries of a target list that are columns of the result (junk ones are not). */
function outputs(list: PgValue | undefined): PgNode[] {
  return nodeList(list).filter((te) => text(te, "resjunk") !== "true");
}

/** The expressions a query returns, in order: its target list, or its RETURNING list. */
function returned(query: PgNode): PgNode[] | null {
  const command = int(query, "commandType");
  if (command === CMD_SELECT) return outputs(field(query, "targetList"));
  if (command === CMD_INSERT || command === CMD_UPDATE || command === CMD_DELETE) {
    return outputs(field(query, "returningList"));
  }
  return null; // MERGE (its RETURNING rows may lack either side), utility statements
}

/** The names of the columns the statement returns, as the server will report them. */
export function returnedNames(query: PgNode): string[] | null {
  return returned(query)?.map((te) => text(te, "resname") ?? "?column?") ?? null;
}

/**
 * For each column `query` returns, whether it is proved never null (false for a statement that
 * returns nothing the rules can read). `ruled` says which tables have rules: what a statement
 * writing to one returns is the rule's doing, so nothing of it is proved.
 */
export function nonNullColumns(
  query: PgNode,
  notNull: NotNullLookup,
  ruled: (relid: number) => boolean = () => false,
): boolean[] {
  const list = returned(query);
  if (list === null) return [];
  const scope = scopeOf(query, null, ruled);
  return columnsOf(scope, list, notNull);
}

/** Output column `i` (0-based) of a query's results, as each set operation combines its arms. */
function columnsOf(scope: Scope, list: PgNode[], notNull: NotNullLookup): boolean[] {
  const setOps = child(scope.query, "setOperations");
  if (setOps !== undefined) {
    return list.map((_, i) => setOperationColumn(scope, setOps, i, notNull));
  }
  return list.map((te) => nonNull(field(te, "expr"), scope, notNull));
}

/** A union's column is non-null when every arm's is; intersect: either; except: the left. */
function setOperationColumn(scope: Scope, op: PgNode, i: number, notNull: NotNullLookup): boolean {
  if (op.tag === "RANGETBLREF") {
    const rte = scope.rtable[int(op, "rtindex") - 1];
    const sub = rte === undefined ? undefined : child(rte, "subquery", "QUERY");
    return sub === undefined ? false : subqueryColumn(sub, i + 1, scope, notNull);
  }
  if (op.tag !== "SETOPERATIONSTMT") return false;
  const left = child(op, "larg");
  const right = child(op, "rarg");
  const l = left !== undefined && setOperationColumn(scope, left, i, notNull);
  const r = right !== undefined && setOperationColumn(scope, right, i, notNull);
  switch (int(op, "op")) {
    case 1: // SETOP_UNION
      return l && r;
    case 2: // SETOP_INTERSECT
      return l || r;
    case 3: // SETOP_EXCEPT
      return l;
    default:
      return false;
  }
}

/** Column `attno` (1-based) of a subquery, a CTE's query or a set operation's arm. */
function subqueryColumn(
  query: PgNode,
  attno: number,
  parent: Scope,
  notNull: NotNullLookup,
): boolean {
  const list = returned(query);
  if (list === null) return false;
  const scope = scopeOf(query, parent);
  const te = list[attno - 1];
  if (te === undefined || int(te, "resno") !== attno) return false;
  if (child(query, "setOperations") !== undefined) {
    return columnsOf(scope, list, notNull)[attno - 1] ?? false;
  }
  return nonNull(field(te, "expr"), scope, notNull);
}

/** The scope `levels` above `scope`, if there is one. */
function up(scope: Scope, levels: number): Scope | null {
  let s: Scope | null = scope;
  for (let i = 0; i < levels && s !== null; i++) s = s.parent;
  return s;
}

/** Whether a Var is proved non-null. */
function varNonNull(v: PgNode, from: Scope, notNull: NotNullLookup): boolean {
  const scope = up(from, int(v, "varlevelsup") || 0);
  if (scope === null) return false;
  // PostgreSQL 18: RETURNING old.x is null for a row an insert made.
  const returningType = text(v, "varreturningtype");
  if (returningType !== undefined && returningType !== "0") return false;
  // Grouping sets' summary rows null the grouped columns whatever their constraints.
  const groupingSets = field(scope.query, "groupingSets");
  if (groupingSets !== undefined && groupingSets !== null) return false;
  const varno = int(v, "varno");
  const attno = int(v, "varattno");
  if (scope.nullable.has(varno)) return false;
  const rte = scope.rtable[varno - 1];
  if (rte === undefined) return false;
  switch (int(rte, "rtekind")) {
    case RTE_RELATION:
      // A view a statement writes to returns what its INSTEAD OF trigger or rule made, which
      // its definition says nothing about; so does a table with rules.
      if (
        varno === int(scope.query, "resultRelation") &&
        (text(rte, "relkind") === "v" || scope.ruled(int(rte, "relid")))
      ) return false;
      // System columns (ctid, xmin, tableoid, ...) and the whole row always have a value.
      if (attno <= 0) return true;
      return notNull(int(rte, "relid"), attno);
    case RTE_SUBQUERY: {
      const sub = child(rte, "subquery", "QUERY");
      return sub !== undefined && attno > 0 && subqueryColumn(sub, attno, scope, notNull);
    }
    case RTE_JOIN: {
      const alias = (field(rte, "joinaliasvars") ?? []) as PgValue[];
      return attno > 0 && Array.isArray(alias) && nonNull(alias[attno - 1], scope, notNull);
    }
    case RTE_VALUES: {
      const rows = field(rte, "values_lists");
      if (!Array.isArray(rows) || rows.length === 0 || attno <= 0) return false;
      return rows.every((row) => Array.isArray(row) && nonNull(row[attno - 1], scope, notNull));
    }
    case RTE_CTE: {
      const cte = findCte(scope, text(rte, "ctename"), int(rte, "ctelevelsup") || 0);
      if (cte === undefined || text(cte, "cterecursive") === "true") return false;
      const query = child(cte, "ctequery", "QUERY");
      const cteScope = up(scope, int(rte, "ctelevelsup") || 0);
      return query !== undefined && cteScope !== null && attno > 0 &&
        subqueryColumn(query, attno, cteScope, notNull);
    }
    case RTE_GROUP: {
      const exprs = field(rte, "groupexprs");
      return attno > 0 && Array.isArray(exprs) && nonNull(exprs[attno - 1], scope, notNull);
    }
    default:
      return false; // functions, table functions, tuplestores
  }
}

/** The CTE named `name`, `levels` queries above `scope`. */
function findCte(scope: Scope, name: string | undefined, levels: number): PgNode | undefined {
  const owner = up(scope, levels);
  if (owner === null || name === undefined) return undefined;
  return nodeList(field(owner.query, "cteList")).find((c) => text(c, "ctename") === name);
}

/** json and jsonb: a cast from them may give null for the JSON value `null`. */
const JSON_TYPES = new Set([114, 3802]);

/** The field that holds each expression node's result type, for the nodes that say it. */
const TYPE_FIELD: Record<string, string> = {
  VAR: "vartype",
  CONST: "consttype",
  PARAM: "paramtype",
  FUNCEXPR: "funcresulttype",
  OPEXPR: "opresulttype",
  RELABELTYPE: "resulttype",
  COERCEVIAIO: "resulttype",
  COERCETODOMAIN: "resulttype",
  AGGREF: "aggtype",
  WINDOWFUNC: "wintype",
  COALESCEEXPR: "coalescetype",
  CASEEXPR: "casetype",
};

/** The type OID of an expression, when its node says it (undefined otherwise). */
function typeOf(value: PgValue | undefined): number | undefined {
  const e = asNode(value);
  const field = e === undefined ? undefined : TYPE_FIELD[e.tag];
  if (e === undefined || field === undefined) return undefined;
  const oid = int(e, field);
  return oid > 0 ? oid : undefined;
}

/** Whether an expression is proved never null, by the rules of this module's comment. */
function nonNull(value: PgValue | undefined, scope: Scope, notNull: NotNullLookup): boolean {
  const e = asNode(value);
  if (e === undefined) return false;
  const all = (name: string) => {
    const args = field(e, name);
    return Array.isArray(args) && args.length > 0 &&
      args.every((a) => nonNull(a, scope, notNull));
  };
  switch (e.tag) {
    case "VAR":
      return varNonNull(e, scope, notNull);
    case "CONST":
      return text(e, "constisnull") === "false";
    case "AGGREF":
      return COUNTS.has(int(e, "aggfnoid"));
    case "WINDOWFUNC":
      return NON_NULL_WINDOW_FUNCTIONS.has(int(e, "winfnoid"));
    case "COALESCEEXPR": {
      const args = field(e, "args");
      return Array.isArray(args) && args.some((a) => nonNull(a, scope, notNull));
    }
    case "RELABELTYPE":
    case "COERCEVIAIO":
    case "ARRAYCOERCEEXPR":
    case "COERCETODOMAIN":
    case "COLLATEEXPR":
      return nonNull(field(e, "arg"), scope, notNull);
    case "FUNCEXPR": {
      // A built-in cast of a value gives a value, except from json: PostgreSQL 17 made
      // `'null'::jsonb::int` a SQL null. The argument's type must be known, and not json.
      const args = field(e, "args");
      const from = Array.isArray(args) ? typeOf(args[0]) : undefined;
      return isBuiltinCast(e) && from !== undefined && !JSON_TYPES.has(from) && all("args");
    }
    case "NULLTEST":
    case "BOOLEANTEST":
    case "ARRAYEXPR":
    case "ROWEXPR":
      return true;
    case "SUBLINK": {
      const kind = int(e, "subLinkType");
      return kind === EXISTS_SUBLINK || kind === ARRAY_SUBLINK;
    }
    case "BOOLEXPR":
      return all("args");
    case "CASEEXPR": {
      const whens = nodeList(field(e, "args"));
      return whens.length > 0 && nonNull(field(e, "defresult"), scope, notNull) &&
        whens.every((w) => nonNull(field(w, "result"), scope, notNull));
    }
    default:
      return false;
  }
}

/**
 * The 1-based numbers of the parameters a null would make the statement fail: those written
 * as they are (or through a built-in cast) to a `NOT NULL` column by `insert ... values`,
 * `update ... set` or `on conflict do update set`, in the statement or a CTE of it.
 */
export function requiredParams(query: PgNode, notNull: NotNullLookup): Set<number> {
  const out = new Set<number>();
  collectRequired(query, notNull, out);
  return out;
}

function collectRequired(query: PgNode, notNull: NotNullLookup, out: Set<number>): void {
  for (const cte of nodeList(field(query, "cteList"))) {
    const q = child(cte, "ctequery", "QUERY");
    if (q !== undefined) collectRequired(q, notNull, out);
  }
  const command = int(query, "commandType");
  if (command !== CMD_INSERT && command !== CMD_UPDATE) return;
  const rtable = nodeList(field(query, "rtable"));
  const target = rtable[int(query, "resultRelation") - 1];
  if (target === undefined || int(target, "rtekind") !== RTE_RELATION) return;
  const relid = int(target, "relid");
  const lists = [field(query, "targetList")];
  const onConflict = child(query, "onConflict");
  if (onConflict !== undefined) lists.push(field(onConflict, "onConflictSet"));
  for (const list of lists) {
    for (const te of outputs(list)) {
      if (notNull(relid, int(te, "resno"))) paramsOf(field(te, "expr"), rtable, out);
    }
  }
}

/** The parameters whose null would make `value` null: itself, through casts, VALUES rows. */
function paramsOf(value: PgValue | undefined, rtable: PgNode[], out: Set<number>): void {
  const e = asNode(value);
  if (e === undefined) return;
  switch (e.tag) {
    case "PARAM":
      if (int(e, "paramkind") === PARAM_EXTERN) out.add(int(e, "paramid"));
      return;
    case "RELABELTYPE":
    case "COERCEVIAIO":
    case "COERCETODOMAIN":
    case "COLLATEEXPR":
      return paramsOf(field(e, "arg"), rtable, out);
    case "FUNCEXPR": {
      const args = field(e, "args");
      // A built-in cast is strict: a null in gives a null out. Its first argument is the value.
      if (isBuiltinCast(e) && Array.isArray(args)) paramsOf(args[0], rtable, out);
      return;
    }
    case "VAR": {
      // `insert ... values (...), (...)`: the rows are a VALUES entry of the insert's range table.
      if ((int(e, "varlevelsup") || 0) !== 0) return;
      const rte = rtable[int(e, "varno") - 1];
      if (rte === undefined || int(rte, "rtekind") !== RTE_VALUES) return;
      const rows = field(rte, "values_lists");
      const attno = int(e, "varattno");
      if (!Array.isArray(rows) || attno <= 0) return;
      for (const row of rows) if (Array.isArray(row)) paramsOf(row[attno - 1], rtable, out);
      return;
    }
  }
}

/** Every relation OID the tree names (its tables, views, ... in any subquery or CTE). */
export function relationsOf(tree: PgValue): Set<number> {
  const out = new Set<number>();
  const walk = (v: PgValue | undefined): void => {
    if (v === null || v === undefined || typeof v === "string") return;
    if (Array.isArray(v)) {
      for (const x of v) walk(x);
      return;
    }
    if (v.tag === "RANGETBLENTRY" && int(v, "rtekind") === RTE_RELATION) {
      const relid = int(v, "relid");
      if (relid > 0) out.add(relid);
    }
    for (const x of Object.values(v.fields)) walk(x);
  };
  walk(tree);
  return out;
}
