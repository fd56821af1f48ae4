// Draws docs/latency.svg from the delaying-proxy table of bench/RESULTS.md: the time n
// concurrent queries take through a link that delays each packet, per driver, on a log scale.
//
//   deno run -A docs/chart.ts            write docs/latency.svg (run it after `deno task bench`)
//   deno run -A docs/chart.ts --check    fail if docs/latency.svg does not match bench/RESULTS.md
//
// The SVG goes through `deno fmt` (which formats SVG too), so `deno fmt --check` accepts it.

const RESULTS = new URL("../bench/RESULTS.md", import.meta.url);
const OUT = new URL("./latency.svg", import.meta.url);

/** One row of the proxy table: the case and each driver's milliseconds. */
interface Row {
  label: string;
  ms: Map<string, number>;
}

interface Table {
  title: string;
  drivers: string[];
  rows: Row[];
}

const cells = (line: string) => line.trim().replace(/^\||\|$/g, "").split("|").map((c) => c.trim());

/** The first table under a "### Through a ... proxy" heading. */
export function proxyTable(markdown: string): Table {
  const lines = markdown.split("\n");
  const at = lines.findIndex((l) => /^### Through a .*proxy/.test(l));
  if (at === -1) throw new Error("no '### Through a ... proxy' section in bench/RESULTS.md");
  const title = lines[at].replace(/^###\s*/, "");
  let i = at + 1;
  while (i < lines.length && !lines[i].startsWith("|")) i++;
  const header = cells(lines[i]);
  const columns = header.flatMap((
    h,
    c,
  ) => (h.endsWith(" ms") ? [[c, h.slice(0, -3)] as const] : []));
  if (columns.length === 0) throw new Error(`no "<driver> ms" columns in: ${lines[i]}`);
  const rows: Row[] = [];
  for (i += 2; i < lines.length && lines[i].startsWith("|"); i++) {
    const row = cells(lines[i]);
    const ms = new Map<string, number>();
    for (const [c, driver] of columns) {
      const value = Number(row[c].replaceAll(",", ""));
      if (Number.isFinite(value) && value > 0) ms.set(driver, value);
    }
    rows.push({ label: row[0], ms });
  }
  return { title, drivers: columns.map(([, d]) => d), rows };
}

const COLORS = ["#0f766e", "#9ca3af", "#d97706", "#6366f1"];

export const escape = (s: string): string =>
  s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

const fmt = (ms: number) =>
  ms >= 100 ? Math.round(ms).toLocaleString("en-US") : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2);

/** The chart: one group of horizontal bars per case, x on a log scale. */
export function render(table: Table): string {
  const width = 760;
  const left = 110; // case labels
  const right = 70; // room for the value after the longest bar
  const top = 84;
  const bar = 14;
  const gap = 3;
  const groupGap = 14;
  const values = table.rows.flatMap((r) => [...r.ms.values()]);
  const lo = 10 ** Math.floor(Math.log10(Math.min(...values)));
  const max = Math.max(...values);
  const decade = 10 ** Math.floor(Math.log10(max));
  const hi = [1, 2, 5, 10].map((m) => m * decade).find((v) => v >= max)!;
  // Grid lines on the 1-2-5 series between lo and hi.
  const ticks: number[] = [];
  for (let d = lo; d <= hi; d *= 10) for (const m of [1, 2, 5]) if (m * d <= hi) ticks.push(m * d);
  const plot = width - left - right;
  const x = (ms: number) => left + (Math.log10(ms / lo) / Math.log10(hi / lo)) * plot;
  const groupHeight = table.drivers.length * (bar + gap) - gap;
  const height = top + table.rows.length * (groupHeight + groupGap) + 40;

  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" ` +
      `viewBox="0 0 ${width} ${height}" font-family="system-ui, -apple-system, Segoe UI, sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="#ffffff"/>`,
    `<text x="${left}" y="20" font-size="15" font-weight="600" fill="#111827">` +
      `${escape(table.title)}</text>`,
    `<text x="${left}" y="38" fill="#4b5563">` +
      `n concurrent queries, per driver; log scale, lower is better. From bench/RESULTS.md.</text>`,
  );
  // Legend.
  let lx = left;
  table.drivers.forEach((d, k) => {
    out.push(
      `<rect x="${lx}" y="48" width="12" height="12" fill="${COLORS[k % COLORS.length]}"/>`,
      `<text x="${lx + 17}" y="58" fill="#374151">${escape(d)}</text>`,
    );
    lx += 30 + d.length * 7;
  });
  // Grid, labelled.
  const bottom = height - 30;
  for (const v of ticks) {
    out.push(
      `<line x1="${x(v)}" y1="${top - 8}" x2="${x(v)}" y2="${bottom}" stroke="#e5e7eb"/>`,
      `<text x="${x(v)}" y="${bottom + 16}" text-anchor="middle" fill="#6b7280">` +
        `${v.toLocaleString("en-US")} ms</text>`,
    );
  }
  // Bars.
  table.rows.forEach((row, g) => {
    const y0 = top + g * (groupHeight + groupGap);
    out.push(
      `<text x="${left - 10}" y="${y0 + groupHeight / 2 + 4}" text-anchor="end" fill="#111827">` +
        `${escape(row.label)}</text>`,
    );
    table.drivers.forEach((d, k) => {
      const ms = row.ms.get(d);
      if (ms === undefined) return;
      const y = y0 + k * (bar + gap);
      const w = Math.max(1, x(ms) - left);
      out.push(
        `<rect x="${left}" y="${y}" width="${w.toFixed(1)}" height="${bar}" rx="2" ` +
          `fill="${COLORS[k % COLORS.length]}"><title>${
            escape(`${d}: ${fmt(ms)} ms`)
          }</title></rect>`,
        `<text x="${(left + w + 5).toFixed(1)}" y="${y + bar - 3}" fill="#374151">${
          fmt(ms)
        } ms</text>`,
      );
    });
  });
  out.push("</svg>");
  return out.join("\n") + "\n";
}

/** The text as `deno fmt` would format an SVG file. */
export async function formatted(svg: string): Promise<string> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["fmt", "--quiet", "--ext=svg", "-"],
    stdin: "piped",
    stdout: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(svg));
  await writer.close();
  const { code, stdout } = await child.output();
  if (code !== 0) throw new Error(`deno fmt failed with exit code ${code}`);
  return new TextDecoder().decode(stdout);
}

if (import.meta.main) {
  const svg = await formatted(render(proxyTable(await Deno.readTextFile(RESULTS))));
  if (Deno.args.includes("--check")) {
    const current = await Deno.readTextFile(OUT).catch(() => "");
    if (current !== svg) {
      console.error(
        "docs/latency.svg does not match bench/RESULTS.md: run deno run -A docs/chart.ts",
      );
      Deno.exit(1);
    }
    console.log("docs/latency.svg matches bench/RESULTS.md");
  } else {
    await Deno.writeTextFile(OUT, svg);
    console.log(`wrote ${OUT.pathname}`);
  }
}
