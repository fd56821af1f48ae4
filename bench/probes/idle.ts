// The floor of every probe's peak RSS: a Deno process that imports nothing and does nothing.
// `deno run -A bench/probes/idle.ts` prints one JSON line with its peak RSS (VmHWM).
const status = Deno.readTextFileSync("/proc/self/status");
const peakRss = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? NaN) * 1024;
console.log(JSON.stringify({ peakRss }));
