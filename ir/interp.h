/* The reference interpreter: the meaning of Tile IR.
 *
 * Runs a kernel over a 1- to 3-D grid on the CPU, one program after another (x
 * fastest, then y, then z), each op on whole tiles; docs/INTERPRETER.md has every
 * decision (rounding, shifts, conversions, errors, the rand contract). Arithmetic
 * follows LANGUAGE.md: integers wrap, integer / and % truncate, f16/bf16/fp8 values are stored
 * rounded to nearest-even after every op, math functions on f16/bf16 compute in f32.
 * Buffers hold elements in their in-memory form (f16 as 2 bytes, i1 as 1 byte), so a
 * buffer read from a raw file or handed to the GPU has the same bytes.
 *
 * Every buffer's size is known: a load, store or atomic of an unmasked lane outside
 * its buffer stops the run with an error naming the kernel, the program id, the
 * argument and the index. Division by zero of integers, a failed assert, and a loop
 * past the step limit stop it the same way. */
#ifndef TILE_IR_INTERP_H
#define TILE_IR_INTERP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ir.h"

typedef struct InterpBuffer {
    IrElem elem;                 /* element type (never IR_PTR) */
    void *data;                  /* count * ir_elem_bytes(elem) bytes, caller-owned */
    int64_t count;
} InterpBuffer;

typedef struct InterpArg {
    bool is_buffer;
    union {
        int64_t i;               /* integer scalars (and i1) */
        double f;                /* float scalars */
        InterpBuffer buf;        /* pointer parameters */
    } u;
} InterpArg;

/* A value as the interpreter holds it, shown to an observer: n elements in row-major
 * order; integers and i1 in ints (normalized to the type's width), floats in floats,
 * pointers as the argument index of their buffer (-1: null) in bufs and the element
 * offset into it in ints. The arrays are valid during the call only. */
typedef struct InterpValue {
    const IrType *type;
    int64_t n;
    const int64_t *ints;         /* NULL for floats */
    const double *floats;        /* NULL unless floats */
    const int32_t *bufs;         /* NULL unless pointers */
} InterpValue;

/* Called after every op that defines a value (once per result), with the program id;
 * for checkers of static facts (passes/axischeck.c). */
typedef void (*InterpObserver)(void *ud, const IrOp *op, uint32_t result, const InterpValue *v,
                               const int64_t pid[3]);

typedef struct InterpOptions {
    FILE *print_out;             /* where print() writes; NULL: stdout */
    int64_t max_loop_iterations; /* per loop, 0: 1<<31; past it the run stops */
    InterpObserver observe;      /* NULL: none */
    void *observe_ud;
    int64_t max_work;            /* elements processed by the whole run (every program,
                                    every op: its result's elements; a dot M*N*K; a
                                    store its lanes), 0: INTERP_DEFAULT_MAX_WORK */
} InterpOptions;

/* The default work bound, 2^28: a runaway loop stops in about a second, while the
 * examples need at most 1.4 million. */
#define INTERP_DEFAULT_MAX_WORK (INT64_C(1) << 28)
/* The largest grid a GPU launches (CUDA's limits): 2^31-1 x 65535 x 65535. */
#define INTERP_MAX_GRID_X INT64_C(2147483647)
#define INTERP_MAX_GRID_YZ INT64_C(65535)

/* Runs `kernel` on grid[0] x grid[1] x grid[2] programs. args must match the kernel's
 * parameters in count and kind (checked). On an error, a diagnostic (with the op's
 * source location) goes to `diags` and the function returns false; buffers may then
 * hold partial results. */
bool interp_run(const IrFunc *kernel, const InterpArg *args, uint32_t nargs,
                const int64_t grid[3], const InterpOptions *opt, DiagList *diags);

/* Evaluates a kernel's grid function on the given arguments (only scalars are read).
 * Writes 1..3 values to grid (the rest set to 1) and returns the count, or -1 with a
 * diagnostic. */
int interp_eval_grid(const IrFunc *grid_fn, const InterpArg *args, uint32_t nargs,
                     int64_t grid[3], DiagList *diags);

/* ---- number formats (shared with codegen and the tests) --------------------------- */
uint16_t fp_f32_to_f16(float f);         /* round to nearest even, overflow to inf */
float fp_f16_to_f32(uint16_t h);
uint16_t fp_f32_to_bf16(float f);
float fp_bf16_to_f32(uint16_t h);
uint8_t fp_f32_to_f8e4m3(float f);       /* e4m3fn: no inf; saturates to NaN beyond 448 */
float fp_f8e4m3_to_f32(uint8_t b);
uint8_t fp_f32_to_f8e5m2(float f);
float fp_f8e5m2_to_f32(uint8_t b);
/* Rounds a double to the nearest value of float type e (f64 unchanged). */
double fp_round(IrElem e, double v);
uint32_t fp_f32_bits(float f);           /* the IEEE bits of an f32, and back */
float fp_bits_f32(uint32_t u);

/* ---- Philox4x32-10, the generator behind rand/randn (docs/INTERPRETER.md) ---------- */
void philox4x32_10(uint32_t ctr[4], const uint32_t key[2]);
/* offset: the element's offset value, sign-extended to 64 bits. */
float tile_rand(uint64_t seed, int64_t offset);
float tile_randn(uint64_t seed, int64_t offset);

#endif
