/**
 * The numbers of PostgreSQL's value formats that more than one codec needs, defined once: the
 * text and binary codecs, of parameters, results and COPY alike, take them from here.
 *
 * @module
 */

/** ms between 1970-01-01 and PostgreSQL's epoch, 2000-01-01 (binary dates and timestamps). */
export const PG_EPOCH_MS = 946_684_800_000;

/** ms in a day: a binary date counts days from PostgreSQL's epoch. */
export const DAY_MS = 86_400_000;

/**
 * Largest and smallest instants a JS `Date` can hold (`new Date(±8.64e15)`): PostgreSQL's
 * ±infinity maps to them, both ways.
 */
export const MAX_TIME = 8.64e15;

/** 2^32: an int8 (or a binary timestamp) read or written as two 32-bit halves. */
export const TWO_32 = 4294967296;

/** array_send and array_recv handle at most 6 dimensions (MAXDIM). */
export const MAX_DIMENSIONS = 6;

/** The value of each ASCII hex digit (either case), -1 for every other character below 128. */
export const HEX_VALUE: Int8Array = new Int8Array(128).fill(-1);
for (let c = 0; c < 10; c++) HEX_VALUE[48 + c] = c;
for (let c = 0; c < 6; c++) HEX_VALUE[65 + c] = HEX_VALUE[97 + c] = 10 + c;
