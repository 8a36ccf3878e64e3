/* Running one test case: a kernel's source and its arguments, compiled at -O0 and
 * -O2 and run in the interpreter on the same inputs (outputs poisoned first), then to
 * PTX (checked with ptxas) or on the GPU through libtileRT, and compared.
 * Cases come from the generator (dt_case_from_program) or from regression files
 * (dt_case_read), which carry their arguments in `// difftest-...:` header lines. */
#ifndef TILE_DIFFTEST_RUN_H
#define TILE_DIFFTEST_RUN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "gen.h"

enum { DT_MAX_ARGS = 32 };

typedef enum { DT_ARG_RAND, DT_ARG_POISON, DT_ARG_ZEROS, DT_ARG_SCALAR } DtArgKind;

typedef struct DtArg {
    char name[16];
    DtArgKind kind;
    int64_t count;           /* buffers */
    double value;            /* scalars */
    double tol;              /* buffers: absolute tolerance against the GPU (0: exact) */
} DtArg;

typedef struct DtCase {
    char *text;              /* the .tile source (malloc'd; kernel `k`, with a grid) */
    uint64_t data_seed;      /* random inputs come from it */
    DtArg args[DT_MAX_ARGS];
    int nargs;
} DtCase;

typedef enum {
    DT_OK, DT_MISMATCH_O2, DT_MISMATCH_GPU, DT_MISMATCH_GPU_IR, DT_COMPILE_FAIL, DT_CODEGEN_FAIL,
    DT_PTXAS_FAIL, DT_RUN_ERROR, DT_GPU_ERROR, DT_TIMEOUT, DT_CRASH, DT_NSTATUS
} DtStatus;

typedef struct DtRunOptions {
    bool gpu;                /* compare the interpreter with the GPU */
    bool ptx;                /* CPU mode: compile to PTX for sm_90a and sm_80 */
    bool ptxas;              /* ... and check it with ptxas */
    const char *ptxas_path;
    const char *tmpdir;      /* for PTX files */
    const char *inject;      /* an op whose -O2 result is perturbed (tests the reducer) */
    struct TrtContext *gpu_ctx;
} DtRunOptions;

typedef struct DtResult {
    DtStatus status;
    char msg[1024];
} DtResult;

const char *dt_status_name(DtStatus s);
/* Whether a status is a failure the reducer can shrink (mismatches, codegen, ptxas). */
bool dt_status_reducible(DtStatus s);

void dt_case_from_program(const DtProgram *p, DtCase *c);
void dt_case_free(DtCase *c);
/* Runs c; the result's msg says what differed. */
DtStatus dt_run_case(const DtCase *c, const DtRunOptions *o, DtResult *r);

/* Regression files: the source with a header of `// difftest-data:`, `// difftest-args:`
 * and `// difftest-tol:` lines. dt_case_read returns false with a message in err. */
bool dt_case_write(const DtCase *c, const char *path, const char *comment);
void dt_case_fprint(const DtCase *c, FILE *f, const char *comment);
bool dt_case_read(const char *path, DtCase *c, char *err, size_t errlen);

#endif
