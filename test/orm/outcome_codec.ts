/**
 * A program's outcomes as JSON that keeps what `assert.deepStrictEqual` compares: each value's
 * type and class (a Date, a bigint, a Buffer or a Uint8Array, undefined against a missing key,
 * an object's class), so outcomes from a child process compare as strictly as in-process ones.
 */

/** A JSON form of `value` in which values of different types or classes never coincide. */
export function tagged(value: unknown): unknown {
  if (value === null || typeof value === "string" || typeof value === "boolean") return value;
  if (typeof value === "number") {
    return Number.isFinite(value) && !Object.is(value, -0) ? value : { $: "number", v: `${value}` };
  }
  if (typeof value === "bigint") return { $: "bigint", v: value.toString() };
  if (value === undefined) return { $: "undefined" };
  if (typeof value !== "object") return { $: typeof value, v: String(value) };
  if (value instanceof Date) {
    return { $: "Date", v: Number.isNaN(value.getTime()) ? "Invalid Date" : value.toISOString() };
  }
  if (ArrayBuffer.isView(value)) {
    const bytes = new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
    return { $: value.constructor.name, v: [...bytes] };
  }
  if (Array.isArray(value)) {
    const items = value.map(tagged);
    return value.constructor === Array ? items : { $: value.constructor.name, v: items };
  }
  const entries = Object.entries(value).map(([k, v]) => [k, tagged(v)]);
  const proto = Object.getPrototypeOf(value);
  return { $: proto === null ? "null-prototype" : proto.constructor?.name ?? "?", v: entries };
}

/** A program's outcomes, step by step, each in its {@link tagged} form. */
export function taggedSteps(outcomes: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(outcomes).map(([step, o]) => [step, tagged(o)]));
}
