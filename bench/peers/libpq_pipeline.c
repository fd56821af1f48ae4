// libpq's pipeline mode as a reference for bench/suites/throughput.ts: `select $1::int` prepared once,
// `total` queries with `window` in flight, and a Sync every `syncEvery` queries. With 1 it has
// pgpipe's shape (one Sync per query, so each query is its own implicit transaction and a failure
// never aborts its neighbours); with 1000 it has pgbench's (one Sync per pipeline).
// Usage: libpq_pipeline <conninfo> <total> <window> <syncEvery>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
int main(int argc, char **argv) {
  PGconn *c = PQconnectdb(argv[1]);
  int total = atoi(argv[2]), window = atoi(argv[3]), syncEvery = atoi(argv[4]);
  if (PQstatus(c) != CONNECTION_OK) { fprintf(stderr, "%s", PQerrorMessage(c)); return 1; }
  PGresult *r = PQprepare(c, "s", "select $1::int", 1, NULL); PQclear(r);
  PQenterPipelineMode(c);
  int sent = 0, done = 0; char buf[16]; const char *vals[1] = { buf };
  double t0 = now();
  while (done < total) {
    while (sent < total && sent - done < window) {
      snprintf(buf, sizeof buf, "%d", sent);
      PQsendQueryPrepared(c, "s", 1, vals, NULL, NULL, 0);
      sent++;
      if (sent % syncEvery == 0 || sent == total) PQpipelineSync(c);
    }
    PQflush(c);
    // read one result set
    PGresult *res;
    while ((res = PQgetResult(c)) != NULL) {
      ExecStatusType st = PQresultStatus(res);
      if (st == PGRES_TUPLES_OK) done++;
      else if (st == PGRES_PIPELINE_SYNC) { PQclear(res); continue; }
      else if (st != PGRES_COMMAND_OK) { fprintf(stderr, "err %s\n", PQresultErrorMessage(res)); }
      PQclear(res);
    }
  }
  double s = now() - t0;
  printf("libpq pipeline, sync every %d: %.0f q/s\n", syncEvery, total / s);
  return 0;
}
