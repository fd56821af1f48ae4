// The client's side of the bulk suite's per-type view, in a fresh process:
// `deno run -A bench/probes/bulk_codecs.ts <values>`. For each supported type, the binary COPY
// encoder's and decoder's cost per value (ns), without a server: <values> values as an
// application has them (bench/shared/bulk_tables.ts) encoded into one buffer, then decoded from
// it, several rounds, the best round kept. Prints one JSON line: [{ type, encodeNs, decodeNs }].
import { Writer } from "../../src/protocol/writer.ts";
import { arrayEncoder, binaryEncoderFor } from "../../src/types/binary_encoders.ts";
import { copyDecoderFor } from "../../src/types/copy_decoders.ts";
import { arrayOf, Oid, type OidName } from "../../src/types/oids.ts";
import { CODEC_TYPES } from "../shared/bulk_tables.ts";

const count = Number(Deno.args[0] ?? 20_000);
const ROUNDS = 15;

/** The best of ROUNDS timings of `run`, in ns per value. */
function best(run: () => void): number {
  for (let r = 0; r < 3; r++) run(); // warm up: let the JIT settle
  let min = Infinity;
  for (let r = 0; r < ROUNDS; r++) {
    const t0 = performance.now();
    run();
    min = Math.min(min, performance.now() - t0);
  }
  return (min * 1e6) / count;
}

const out = [];
let kept = 0; // decoded values are used, so no decode is optimised away
for (const { type, value } of CODEC_TYPES) {
  const element = type.endsWith("[]") ? Oid[type.slice(0, -2) as OidName] : undefined;
  const oid = element === undefined ? Oid[type as OidName] : arrayOf[element];
  const encode = element === undefined
    ? binaryEncoderFor(oid)!
    : arrayEncoder(element, binaryEncoderFor(element)!, undefined);
  const decode = copyDecoderFor(oid, { bigint: false })!;
  const values = Array.from({ length: count }, (_, i) => value(i));
  const w = new Writer(1 << 20);
  const encodeNs = best(() => {
    w.reset();
    for (let i = 0; i < count; i++) encode(w, values[i]);
  });
  // Each field is a 32-bit length and its bytes.
  const starts = new Int32Array(count);
  const buf = w.buf;
  for (let i = 0, p = 0; i < count; i++) {
    starts[i] = p + 4;
    p += 4 + ((buf[p] << 24) | (buf[p + 1] << 16) | (buf[p + 2] << 8) | buf[p + 3]);
  }
  const ends = starts.map((_, i) => (i + 1 < count ? starts[i + 1] - 4 : w.length));
  const decodeNs = best(() => {
    for (let i = 0; i < count; i++) if (decode(buf, starts[i], ends[i]) !== null) kept++;
  });
  out.push({ type, encodeNs, decodeNs });
}
if (kept === 0) throw new Error("nothing decoded");
console.log(JSON.stringify(out));
