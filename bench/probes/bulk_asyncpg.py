# asyncpg, the reference from outside JavaScript, for bench/suites/bulk.ts:
# `python3 bench/probes/bulk_asyncpg.py <load|read> <url> <rows> <runs>`. The same rows and table shape
# as bench/probes/bulk.ts's events table: load with copy_records_to_table from a generator, read back through a
# cursor of 1,000 in a transaction; jsonb encoded and decoded with the json module (as the
# JavaScript drivers do), through a binary codec. Prints one JSON line: the best time in ms, the rows and peak RSS.
import asyncio
import datetime
import json
import resource
import sys
import time

import asyncpg

COLUMNS = "id int8, name text, at timestamptz, score float8, flag bool, meta jsonb"
SOURCE_TABLE = "bulk_source_events"
BASE = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)


def records(n):
    for i in range(n):
        yield (i, f"name {i}", BASE + datetime.timedelta(seconds=i), i / 4, i % 2 == 0,
               {"n": i, "tag": "x"})


async def main(mode, url, total, runs):
    conn = await asyncpg.connect(url)
    # COPY needs binary codecs, and asyncpg has none for jsonb by default: its binary form is a
    # version byte (1) and the JSON text.
    await conn.set_type_codec("jsonb", schema="pg_catalog", format="binary",
                              encoder=lambda v: b"\x01" + json.dumps(v).encode(),
                              decoder=lambda b: json.loads(b[1:]))
    times = []
    try:
        if mode == "load":
            table = "bulk_asyncpg"
            await conn.execute(f"drop table if exists {table}; "
                               f"create unlogged table {table} ({COLUMNS})")
            for _ in range(runs):
                await conn.execute(f"truncate {table}")
                t0 = time.perf_counter()
                await conn.copy_records_to_table(table, records=records(total))
                times.append((time.perf_counter() - t0) * 1000)
                n = await conn.fetchval(f"select count(*) from {table}")
                if n != total:
                    raise RuntimeError(f"asyncpg stored {n} rows")
            await conn.execute(f"drop table {table}")
        else:
            for _ in range(runs):
                t0 = time.perf_counter()
                rows = 0
                last = None
                async with conn.transaction():
                    async for record in conn.cursor(f"select * from {SOURCE_TABLE}", prefetch=1000):
                        rows += 1
                        last = record
                times.append((time.perf_counter() - t0) * 1000)
                if rows != total or last["id"] != total - 1 or last["meta"]["n"] != total - 1:
                    raise RuntimeError(f"asyncpg read {rows} rows")
    finally:
        await conn.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    print(json.dumps({"ms": min(times), "times": times, "rows": total, "peakRss": peak,
                      "version": asyncpg.__version__}))


asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
