/* The manifest of `tilec tune` (docs/TUNING.md "tilec tune"): kernels, their key values
 * and how to make their arguments, read from JSON (one object with "kernels") or JSON
 * Lines (one entry per line, as TILE_RECORD writes them) through cJSON. Sizes and
 * scalars are expressions over + - * / ( ) of the key's names and the consts, evaluated
 * by tm_eval; errors say FILE:LINE:COL. */
#ifndef TILE_TOOLS_TUNE_MANIFEST_H
#define TILE_TOOLS_TUNE_MANIFEST_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tile/tile_rt.h"

#define TM_MAX_NAMES 16

/* Names and values an expression may use: a key's, then the entry's consts. */
typedef struct TmScope {
    const char *names[2 * TM_MAX_NAMES];
    int64_t values[2 * TM_MAX_NAMES];
    uint32_t n;
} TmScope;

/* An expression's value: integer arithmetic (exact, overflow is an error, / truncates)
 * unless real, then double. On error: false, with the message and the column (0-based
 * offset into expr) where it went wrong. */
typedef struct TmValue {
    int64_t i;
    double d;
} TmValue;
bool tm_eval(const char *expr, const TmScope *scope, bool real, TmValue *out, char *err, size_t errlen,
             size_t *errcol);

/* Where a value was written: the line and column of the manifest, 1-based. */
typedef struct TmLoc {
    uint32_t line, col;
} TmLoc;

typedef struct TmArg {
    char *name;
    char *dtype;               /* a buffer's element type; NULL for a scalar */
    char *expr;                /* numel of a buffer, or a scalar's value */
    TmLoc loc;                 /* of expr */
} TmArg;

typedef struct TmKey {
    TrtConst vals[TM_MAX_NAMES];
    TmLoc locs[TM_MAX_NAMES];  /* of each value's name */
    uint32_t n;
    TmLoc loc;                 /* of the key's '{' */
} TmKey;

typedef struct TmEntry {
    char *file;                /* as resolved against the manifest's directory */
    char *kernel;
    TrtConst consts[TM_MAX_NAMES];
    uint32_t nconsts;
    TmKey *keys;
    uint32_t nkeys;
    TmArg *args;
    uint32_t nargs;
    TmLoc loc;                 /* of the entry's "kernel" */
    TmLoc consts_loc;          /* of its "consts", else loc */
} TmEntry;

typedef struct TmManifest {
    char *path;
    TmEntry *entries;
    uint32_t nentries;
    uint32_t nerrors;          /* printed as found, FILE:LINE:COL: error: ... */
} TmManifest;

/* Reads and checks the manifest: its JSON, its fields, that each file has the kernel,
 * that every run-time parameter gets a value and every expression evaluates (with a
 * CPU context: no driver needed). Errors are printed to `err`; nerrors counts them.
 * False only when the file cannot be read. tm_free frees what tm_read made. */
bool tm_read(const char *path, TmManifest *m, FILE *err);
void tm_free(TmManifest *m);
void tm_error(TmManifest *m, FILE *err, TmLoc loc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* The scope of entry e's key k: the key's values, then the consts. */
void tm_scope(const TmEntry *e, const TmKey *k, TmScope *out);

#endif
