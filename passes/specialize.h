/* Specialization of a kernel to the classes of its run-time arguments (Triton's
 * "specialization": integers equal to 1 or divisible by 16, pointers aligned to 16
 * bytes; and integers divisible by 8 but not 16, the row length of a bf16 matrix whose
 * rows are 16 bytes apart). The runtime computes the classes per launch and compiles
 * one variant per class set; see passes/specialize.c. */
#ifndef TILE_PASSES_SPECIALIZE_H
#define TILE_PASSES_SPECIALIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/interp.h"
#include "ir/ir.h"
#include "passes/passes.h"

typedef enum {
    SPEC_NONE = 0,     /* nothing known */
    SPEC_DIV16 = 1,    /* an integer divisible by 16 */
    SPEC_ONE = 2,      /* an integer equal to 1 */
    SPEC_ALIGN16 = 3,  /* a pointer aligned to 16 bytes */
    SPEC_DIV8 = 4,     /* an integer divisible by 8 (and not by 16: that is DIV16) */
} SpecClass;

/* Rewrites kernel f for the classes of its parameters (nparams = f->body.nargs
 * entries): uses of a parameter equal to 1 become the constant 1, a parameter
 * divisible by 16 (8) gets a multiple_of 16 (8) hint. Pointer classes are not expressible in
 * the IR: the returned bit set (bit i: parameter i is 16-byte aligned) goes to the
 * code generator (CgOptions.aligned_params) and the axis analysis. */
uint64_t pass_specialize(IrFunc *f, const SpecClass *classes);

/* The class of an integer argument value, and of a pointer argument's address. */
SpecClass spec_class_int(int64_t v);
SpecClass spec_class_ptr(uint64_t address);

/* The classes of interpreter arguments for f (f->body.nargs entries): integers by
 * value, buffers as 16-byte aligned (what the runtime's allocations are). */
void spec_classes_of_args(const IrFunc *f, const InterpArg *args, SpecClass *out);

/* Kernel f as the runtime compiles it: specialized to the classes, the -O3 cleanup
 * passes, then the GPU pipeline. The one sequence that the runtime, `tilec run
 * --check-axis-info` and the differential tester share. Returns pass_specialize's
 * aligned-pointer bits, for codegen and the axis analysis. */
uint64_t pass_prepare_gpu(IrFunc *f, const SpecClass *classes, const PassOptions *opt);

#endif
