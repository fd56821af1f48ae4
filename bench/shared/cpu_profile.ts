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

/** Self time of one function; its location is url:line (1-based), shortened by `shorten`. */
export type FunctionTime = { name: string; location: string; category: string; ms: number };

/** Where the CPU went (ms). */
export interface ProfileSummary {
  /** Sampled time, idle included; busy is the rest, the time the main thread was working. */
  totalMs: number;
  idleMs: number;
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
  classify: (url: string, functionName: string) => string,
  opts: { inclusiveCategory: string; top: number; shorten?: (url: string) => string },
): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const category = new Map(
    profile.nodes.map((n) => [n.id, classify(n.callFrame.url, n.callFrame.functionName)]),
  );
  // Whether a node has a frame of the inclusive category on its stack: itself or an ancestor.
  const inclusive = new Set<number>();
  const mark = (id: number, above: boolean) => {
    const yes = above || category.get(id) === opts.inclusiveCategory;
    if (yes) inclusive.add(id);
    for (const c of byId.get(id)?.children ?? []) mark(c, yes);
  };
  const children = new Set(profile.nodes.flatMap((n) => n.children ?? []));
  for (const n of profile.nodes) if (!children.has(n.id)) mark(n.id, false);

  const selfUs = new Map<number, number>();
  const { samples, timeDeltas } = profile;
  for (let i = 0; i < samples.length; i++) {
    // The time until the next sample belongs to this one; the last gets none.
    const us = i + 1 < timeDeltas.length ? Math.max(0, timeDeltas[i + 1]) : 0;
    selfUs.set(samples[i], (selfUs.get(samples[i]) ?? 0) + us);
  }

  let [totalUs, idleUs, inclusiveUs] = [0, 0, 0];
  const categories = new Map<string, number>();
  const functions = new Map<string, FunctionTime>();
  const shorten = opts.shorten ?? ((u: string) => u);
  for (const [id, us] of selfUs) {
    const f = byId.get(id)?.callFrame;
    if (!f) continue;
    totalUs += us;
    if (f.functionName === "(idle)" && f.url === "") {
      idleUs += us;
      continue;
    }
    const kind = category.get(id)!;
    categories.set(kind, (categories.get(kind) ?? 0) + us);
    if (inclusive.has(id)) inclusiveUs += us;
    const name = f.functionName || "(anonymous)";
    const location = f.url ? `${shorten(f.url)}:${f.lineNumber + 1}` : "";
    const key = `${name}\u0000${location}`;
    const entry = functions.get(key) ?? { name, location, category: kind, ms: 0 };
    entry.ms += us / 1000;
    functions.set(key, entry);
  }
  const byMs = (a: { ms: number }, b: { ms: number }) => b.ms - a.ms;
  return {
    totalMs: totalUs / 1000,
    idleMs: idleUs / 1000,
    busyMs: (totalUs - idleUs) / 1000,
    categories: [...categories].map(([category, us]) => ({ category, ms: us / 1000 })).sort(byMs),
    inclusiveMs: inclusiveUs / 1000,
    top: [...functions.values()].sort(byMs).slice(0, opts.top),
  };
}
