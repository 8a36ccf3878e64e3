/* The report of `tilec tune --report DIR`: DIR/report.md (a table of the winners and
 * their speedup over the default config, then each key's configs) and one SVG bar
 * chart per key (DIR/KERNEL_KEY.svg: median time per measured config, the winner and
 * the default marked), written by hand: no plotting library. */
#ifndef TILE_TOOLS_TUNE_REPORT_H
#define TILE_TOOLS_TUNE_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "runtime/rt_tune.h"

typedef struct TrReport {
    const char *dir;
    FILE *md;                  /* the summary table, then the details */
    char *details;             /* the per-key sections, appended after the table */
    size_t ndetails;
    FILE *det;
    bool ok;
} TrReport;

/* Creates DIR if needed and starts report.md; tr_key adds one key (r NULL: no result
 * in the cache); tr_end writes it out (false, with a message, on an I/O error). */
void tr_begin(TrReport *rep, const char *dir, const char *manifest);
void tr_key(TrReport *rep, const char *what, const RtTuneResult *r);
bool tr_end(TrReport *rep);

/* The SVG chart of one result, to f. */
void tr_svg(FILE *f, const char *what, const RtTuneResult *r);

#endif
