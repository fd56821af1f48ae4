// Small statistics helpers shared by the suites: medians resist the noise of a shared 2-core box,
// percentiles describe latency tails.

/** The p-th percentile (0..100) of the samples, nearest-rank on a sorted copy. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

/** The median of the samples. */
export function median(samples: readonly number[]): number {
  return percentile(samples, 50);
}

/** The arithmetic mean of the samples. */
export function mean(samples: readonly number[]): number {
  let sum = 0;
  for (const s of samples) sum += s;
  return samples.length ? sum / samples.length : NaN;
}

/**
 * Runs each item once per round, `rounds` rounds, each round starting one item further along,
 * so a noisy moment of a shared machine does not always land on the same one.
 */
export async function rotated<T>(
  rounds: number,
  items: readonly T[],
  run: (item: T, round: number) => Promise<void>,
): Promise<void> {
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < items.length; k++) await run(items[(k + r) % items.length], r);
  }
}

/** Samples kept by name, in the order the names first came. */
export class Samples extends Map<string, number[]> {
  add(name: string, ...values: number[]): void {
    const samples = this.get(name);
    if (samples) samples.push(...values);
    else this.set(name, [...values]);
  }
  median(name: string): number {
    return median(this.get(name) ?? []);
  }
}
