/**
 * `deno fmt` over a text, for files that were formatted with it before typegen wrote to them: a
 * written annotation is laid out as `deno fmt` would, and a file that never used `deno fmt` is
 * not reformatted behind its author's back.
 */
import { dirname, extname } from "node:path";

/** `text` as `deno fmt` lays it out with the configuration found from `path`'s folder; null if it cannot. */
async function denoFmt(path: string, text: string): Promise<string | null> {
  const ext = extname(path).slice(1) || "ts";
  try {
    const child = new Deno.Command(Deno.execPath(), {
      args: ["fmt", `--ext=${ext}`, "-"],
      cwd: dirname(path),
      stdin: "piped",
      stdout: "piped",
      stderr: "null",
    }).spawn();
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(text));
    await writer.close();
    const out = await child.output();
    return out.success ? new TextDecoder().decode(out.stdout) : null;
  } catch {
    return null;
  }
}

/**
 * The new text of a file: formatted by `deno fmt` when the old text was already as `deno fmt`
 * would have it (then `deno fmt --check` still passes after the write), else as written.
 */
export async function layOut(path: string, before: string, after: string): Promise<string> {
  if (await denoFmt(path, before) !== before) return after;
  return await denoFmt(path, after) ?? after;
}
