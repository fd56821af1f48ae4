/**
 * numeric's binary form, both ways, for binary COPY: a header (digit count,
 * weight, sign, display scale) and base-10000 digits aligned on the decimal
 * point.
 *
 * Encoding reads decimal text in place (two scans of the string, no array of
 * digits), integers that fit a double by arithmetic, and anything else as its
 * decimal text. It keeps what numeric_in keeps: every digit, the display
 * scale (digits after the point, less the exponent), no negative zero, NaN
 * and ±Infinity spelt as numeric_in accepts them. The server truncates to the
 * display scale (numeric_recv), so the scale always covers every digit sent.
 *
 * Decoding writes numeric_out's text (every digit of the display scale, no
 * exponent) into a scratch buffer and makes one string of it.
 *
 * @module
 */
import type { Writer } from "../protocol/writer.ts";
import { i16, ProtocolViolation } from "../protocol/backend.ts";
import { asciiText } from "./utf8_text.ts";

const NUMERIC_POS = 0x0000;
const NUMERIC_NEG = 0x4000;
const NUMERIC_NAN = 0xc000;
const NUMERIC_PINF = 0xd000;
const NUMERIC_NINF = 0xf000;
/** numeric's display scale is 14 bits. */
const NUMERIC_MAX_DSCALE = 0x3fff;
/** An exponent past this cannot make a storable value (weight and scale are 16-bit). */
const MAX_EXPONENT = 1 << 20;
const POW10 = [1, 10, 100, 1000];

/** Why a value is not a numeric; the encoder adds what it was given. */
export class NumericError extends Error {}

const syntax = () => new NumericError("a decimal number (string, number or bigint)");
const range = () => new NumericError("a number in numeric's range");

/** Writes the numeric header (field length included) after making room for `ndigits`. */
function header(w: Writer, ndigits: number, weight: number, sign: number, dscale: number): number {
  w.ensure(12 + 2 * ndigits);
  const b = w.buf;
  const p = w.length;
  const len = 8 + 2 * ndigits;
  b[p] = len >>> 24;
  b[p + 1] = len >>> 16;
  b[p + 2] = len >>> 8;
  b[p + 3] = len;
  b[p + 4] = ndigits >>> 8;
  b[p + 5] = ndigits;
  b[p + 6] = weight >>> 8;
  b[p + 7] = weight;
  b[p + 8] = sign >>> 8;
  b[p + 9] = sign;
  b[p + 10] = dscale >>> 8;
  b[p + 11] = dscale;
  w.length = p + 12 + 2 * ndigits;
  return p + 12;
}

function isSpace(c: number): boolean {
  return c === 32 || (c >= 9 && c <= 13); // isspace(): what numeric_in skips around the value
}

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

/** NaN, Infinity, inf (any case; infinities signed): numeric_in's words. */
function writeWord(w: Writer, text: string, start: number, end: number, sign: number): void {
  const word = text.slice(start, end).toLowerCase();
  if (word === "nan" && sign < 0) header(w, 0, 0, NUMERIC_NAN, 0);
  else if (word === "infinity" || word === "inf") {
    header(w, 0, 0, sign === 1 ? NUMERIC_NINF : NUMERIC_PINF, 0);
  } else throw syntax();
}

/** Where digit `k` of the integer digits then the fraction's is: the point is skipped. */
function digitPosition(k: number, intDigits: number, intStart: number, fracStart: number): number {
  return k < intDigits ? intStart + k : fracStart + k - intDigits;
}

/**
 * Writes decimal text (`-12.50`, `1.5e-7`, `NaN`, ` 3 `) as a numeric field;
 * throws {@linkcode NumericError} for anything numeric_in refuses.
 */
function writeNumericText(w: Writer, text: string): void {
  let i = 0;
  let n = text.length;
  while (i < n && isSpace(text.charCodeAt(i))) i++;
  while (n > i && isSpace(text.charCodeAt(n - 1))) n--;
  // -1: no sign, 0: +, 1: -
  let sign = -1;
  const first = text.charCodeAt(i);
  if (first === 45 || first === 43) {
    sign = first === 45 ? 1 : 0;
    i++;
  }
  const intStart = i;
  while (i < n && isDigit(text.charCodeAt(i))) i++;
  const intDigits = i - intStart;
  let fracStart = i;
  if (i < n && text.charCodeAt(i) === 46) fracStart = ++i;
  while (i < n && isDigit(text.charCodeAt(i))) i++;
  const fracDigits = i - fracStart;
  if (intDigits + fracDigits === 0) return writeWord(w, text, intStart, n, sign);
  let exponent = 0;
  if (i < n) {
    const e = text.charCodeAt(i++);
    if (e !== 101 && e !== 69) throw syntax(); // e E
    let negativeExponent = false;
    const s = text.charCodeAt(i);
    if (s === 45 || s === 43) {
      negativeExponent = s === 45;
      i++;
    }
    if (i === n) throw syntax();
    for (; i < n; i++) {
      const c = text.charCodeAt(i);
      if (!isDigit(c)) throw syntax();
      if (exponent < MAX_EXPONENT) exponent = exponent * 10 + c - 48;
    }
    if (negativeExponent) exponent = -exponent;
  }
  const dscale = Math.max(0, fracDigits - exponent);
  if (dscale > NUMERIC_MAX_DSCALE) throw range();

  // Digit k of the intDigits + fracDigits digits is at digitPosition(k, ...), past the point.
  const total = intDigits + fracDigits;
  let start = 0;
  while (
    start < total && text.charCodeAt(digitPosition(start, intDigits, intStart, fracStart)) === 48
  ) {
    start++;
  }
  if (start === total) { // zero keeps its scale ("0.00"); numeric has no negative zero
    header(w, 0, 0, NUMERIC_POS, dscale);
    return;
  }
  let end = total;
  while (text.charCodeAt(digitPosition(end - 1, intDigits, intStart, fracStart)) === 48) end--;
  // Digit k stands for 10^(intDigits + exponent - 1 - k); its base-10000 digit is that power / 4.
  const top = intDigits + exponent - 1 - start;
  const bottom = intDigits + exponent - end;
  const weight = top >> 2;
  const last = bottom >> 2;
  const ndigits = weight - last + 1;
  if (weight > 32767 || last < -32768 || ndigits > 32767) throw range();
  let p = header(w, ndigits, weight, sign === 1 ? NUMERIC_NEG : NUMERIC_POS, dscale);
  const b = w.buf;
  let group = weight;
  let value = 0;
  for (let k = start; k < end; k++) {
    const power = top - (k - start);
    const g = power >> 2;
    if (g !== group) {
      b[p++] = value >>> 8;
      b[p++] = value;
      value = 0;
      group = g;
    }
    value += (text.charCodeAt(digitPosition(k, intDigits, intStart, fracStart)) - 48) *
      POW10[power & 3];
  }
  b[p] = value >>> 8;
  b[p + 1] = value;
}

/** Base-10000 digits of a safe integer, least significant first. */
const groups = new Uint16Array(5);

/** Writes an integer below 2^53 in magnitude as a numeric field, by arithmetic. */
function writeNumericInteger(w: Writer, value: number): void {
  let a = value < 0 ? -value : value;
  if (a === 0) {
    header(w, 0, 0, NUMERIC_POS, 0);
    return;
  }
  let count = 0;
  while (a > 0) {
    const q = Math.floor(a / 10000);
    groups[count++] = a - q * 10000;
    a = q;
  }
  let low = 0; // trailing zero digits are left out
  while (groups[low] === 0) low++;
  let p = header(w, count - low, count - 1, value < 0 ? NUMERIC_NEG : NUMERIC_POS, 0);
  const b = w.buf;
  for (let g = count - 1; g >= low; g--) {
    b[p++] = groups[g] >>> 8;
    b[p++] = groups[g];
  }
}

/**
 * Writes a number (NaN and ±Infinity too), a bigint or decimal text as a
 * numeric field; false for any other kind of value (nothing written).
 * Throws {@linkcode NumericError} for text numeric_in refuses.
 */
export function writeNumeric(w: Writer, value: unknown): boolean {
  if (typeof value === "string") writeNumericText(w, value);
  else if (typeof value === "number") {
    if (Number.isSafeInteger(value)) writeNumericInteger(w, value);
    else if (value !== value) header(w, 0, 0, NUMERIC_NAN, 0);
    else if (value === Infinity) header(w, 0, 0, NUMERIC_PINF, 0);
    else if (value === -Infinity) header(w, 0, 0, NUMERIC_NINF, 0);
    else writeNumericText(w, String(value)); // the same text a parameter sends
  } else if (typeof value === "bigint") {
    if (value > -9007199254740992n && value < 9007199254740992n) {
      writeNumericInteger(w, Number(value));
    } else writeNumericText(w, String(value));
  } else return false;
  return true;
}

// ---------------------------------------------------------------------------------------
// decoding

let scratch = new Uint8Array(64);

/** Base-10000 digit `d` of the `ndigits` at `digits` (0 past either end). */
function digitAt(buf: Uint8Array, digits: number, ndigits: number, d: number): number {
  return d >= 0 && d < ndigits ? (buf[digits + 2 * d] << 8) | buf[digits + 2 * d + 1] : 0;
}

/** The four decimal digits of `d` into `out` at `p`. */
function putDigits(out: Uint8Array, p: number, d: number): void {
  out[p] = 48 + ((d / 1000) | 0);
  out[p + 1] = 48 + (((d / 100) | 0) % 10);
  out[p + 2] = 48 + (((d / 10) | 0) % 10);
  out[p + 3] = 48 + (d % 10);
}

/** A numeric field as numeric_out writes it: every digit of its display scale, no exponent. */
export function readNumeric(buf: Uint8Array, start: number, end: number): string {
  if (end - start < 8) throw new ProtocolViolation("binary numeric is shorter than its header");
  const ndigits = i16(buf, start);
  const weight = i16(buf, start + 2);
  const sign = (buf[start + 4] << 8) | buf[start + 5];
  const dscale = (buf[start + 6] << 8) | buf[start + 7];
  if (ndigits < 0 || end - start !== 8 + 2 * ndigits) {
    throw new ProtocolViolation("binary numeric length does not match its digit count");
  }
  if (sign === NUMERIC_NAN) return "NaN";
  if (sign === NUMERIC_PINF) return "Infinity";
  if (sign === NUMERIC_NINF) return "-Infinity";
  // Sign, integer digits (4 per group, or "0"), point, dscale digits rounded up to a group.
  const size = 2 + 4 * Math.max(weight + 1, 1) + dscale + 4;
  if (scratch.length < size) {
    scratch = new Uint8Array(size * 2);
  }
  const out = scratch;
  const digits = start + 8;
  let p = 0;
  if (sign === NUMERIC_NEG) out[p++] = 45; // -
  if (weight < 0) out[p++] = 48;
  else {
    // The first group without its leading zeros, then four digits per group.
    const d0 = digitAt(buf, digits, ndigits, 0);
    putDigits(out, p, d0);
    const skip = d0 >= 1000 ? 0 : d0 >= 100 ? 1 : d0 >= 10 ? 2 : 3;
    out.copyWithin(p, p + skip, p + 4);
    p += 4 - skip;
    for (let d = 1; d <= weight; d++) {
      putDigits(out, p, digitAt(buf, digits, ndigits, d));
      p += 4;
    }
  }
  if (dscale > 0) {
    out[p++] = 46; // .
    const stop = p + dscale;
    for (let d = weight + 1; p < stop; d++) {
      putDigits(out, p, digitAt(buf, digits, ndigits, d));
      p += 4;
    }
    p = stop;
  }
  return asciiText(out, 0, p);
}
