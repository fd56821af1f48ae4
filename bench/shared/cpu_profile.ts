// Reads a V8 .cpuprofile (what `deno run --cpu-prof` writes) and says where the process's CPU
// went: self time summed by kind of file (the driver's, the benchmark's own, Deno's runtime...)
// and the functions with the most self time. Self time of a sample is the time until the next
// sample, as Chrome's profiler panel counts it; the `(idle)` node is time the thread waited.

/** The parts of a .cpuprofile that are read. */
export interface CpuProfile {
  nodes: {
    id: number;
    callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
    children?: number[];
  }[];
  samples: number[];
  timeDeltas: number[];
}

/** Where a function lives, for the summary. */
export type Classify = (url: string, functionName: string) => string;

/** Self time of one function. */
export interface FunctionTime {
  name: string;
  /** url:line (1-based), shortened by the caller's `shorten`. */
  location: string;
  category: string;
  ms: number;
}

/** Where the CPU went. */
export interface ProfileSummary {
  /** Sampled time, idle included, in ms. */
  totalMs: number;
  idleMs: number;
  /** totalMs - idleMs: the time the main thread was working. */
  busyMs: number;
  /** Self time per category, largest first, idle left out. */
  categories: { category: string; ms: number }[];
  /**
   * Time in samples with a frame of `inclusiveCategory` anywhere on the stack: that code and
   * whatever it called (the runtime's ops, the GC it triggered is not on the stack).
   */
  inclusiveMs: number;
  top: FunctionTime[];
}

/** Sums self time by category and function; `inclusiveCategory` also gets its inclusive time. */
export function summarizeProfile(
  profile: CpuProfile,
  classify: Classify,
  opts: { inclusiveCategory: string; top: number; shorten?: (url: string) => string },
): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const categoryOf = new Map<number, string>();
  for (const n of profile.nodes) {
    categoryOf.set(n.id, classify(n.callFrame.url, n.callFrame.functionName));
  }
  const inclusive = new Map<number, boolean>();
  const hasInclusive = (id: number): boolean => {
    const known = inclusive.get(id);
    if (known !== undefined) return known;
    const p = parent.get(id);
    const yes = categoryOf.get(id) === opts.inclusiveCategory ||
      (p !== undefined && hasInclusive(p));
    inclusive.set(id, yes);
    return yes;
  };

  const selfUs = new Map<number, number>();
  const { samples, timeDeltas } = profile;
  for (let i = 0; i < samples.length; i++) {
    // The time until the next sample belongs to this one; the last gets none.
    const us = i + 1 < timeDeltas.length ? Math.max(0, timeDeltas[i + 1]) : 0;
    selfUs.set(samples[i], (selfUs.get(samples[i]) ?? 0) + us);
  }

  let totalUs = 0;
  let idleUs = 0;
  let inclusiveUs = 0;
  const categories = new Map<string, number>();
  const functions = new Map<string, FunctionTime>();
  const shorten = opts.shorten ?? ((u: string) => u);
  for (const [id, us] of selfUs) {
    const node = byId.get(id);
    if (!node) continue;
    totalUs += us;
    const f = node.callFrame;
    if (f.functionName === "(idle)" && f.url === "") {
      idleUs += us;
      continue;
    }
    const category = categoryOf.get(id)!;
    categories.set(category, (categories.get(category) ?? 0) + us);
    if (hasInclusive(id)) inclusiveUs += us;
    const name = f.functionName || "(anonymous)";
    const location = f.url ? `${shorten(f.url)}:${f.lineNumber + 1}` : "";
    const key = `${name}\u0000${location}`;
    const entry = functions.get(key) ?? { name, location, category, ms: 0 };
    entry.ms += us / 1000;
    functions.set(key, entry);
  }
  return {
    totalMs: totalUs / 1000,
    idleMs: idleUs / 1000,
    busyMs: (totalUs - idleUs) / 1000,
    categories: [...categories].map(([category, us]) => ({ category, ms: us / 1000 }))
      .sort((a, b) => b.ms - a.ms),
    inclusiveMs: inclusiveUs / 1000,
    top: [...functions.values()].sort((a, b) => b.ms - a.ms).slice(0, opts.top),
  };
}
