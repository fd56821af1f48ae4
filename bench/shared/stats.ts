// Small statistics helpers shared by the suites: medians resist the noise of a shared 2-core box,
// percentiles describe latency tails.

/** The p-th percentile (0..100) of the samples, nearest-rank on a sorted copy. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

export const median = (samples: readonly number[]) => percentile(samples, 50);
export const mean = (samples: readonly number[]) =>
  samples.length ? samples.reduce((sum, s) => sum + s, 0) / samples.length : NaN;

/** Runs each item once a round, each round starting one further on: noise lands on no one item. */
export async function rotated<T>(
  rounds: number,
  items: readonly T[],
  run: (item: T, r: number) => Promise<void>,
) {
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < items.length; k++) await run(items[(k + r) % items.length], r);
  }
}

/** Latencies (µs) of `count` round trips one after another, stopping early at `stop`. */
export async function serial(once: () => Promise<unknown>, count: number, stop = Infinity) {
  const samples: number[] = [];
  while (samples.length < count && performance.now() < stop) {
    const t0 = performance.now();
    await once();
    samples.push((performance.now() - t0) * 1000);
  }
  return samples;
}

/** Samples kept by name, in the order the names first came. */
export class Samples extends Map<string, number[]> {
  add(name: string, ...values: number[]): void {
    if (!this.has(name)) this.set(name, []);
    this.get(name)!.push(...values);
  }
  median(name: string): number {
    return median(this.get(name) ?? []);
  }
}
