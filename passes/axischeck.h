/* The axis analysis's checker (passes/axischeck.c): its facts against the values the
 * interpreter computes (tilec run --check-axis-info). */
#ifndef TILE_PASSES_AXISCHECK_H
#define TILE_PASSES_AXISCHECK_H

#include "ir/axisinfo.h"

/* Runs kernel f in the interpreter (as interp_run, with base's options) and checks,
 * after every op, each fact axisinfo_analyze(f, aligned_params) claims for its result
 * on the values computed (passes/axischeck.c). A fact that fails is reported to diags
 * at the op, naming the fact, the axis, the element and the program; returns false then
 * or when the run itself fails. */
bool axisinfo_check_run(const IrFunc *f, uint64_t aligned_params, const InterpArg *args, uint32_t nargs,
                        const int64_t grid[3], const InterpOptions *base, DiagList *diags);
/* The same with given facts (ai: f->nvalues entries), for tests of the checker. */
bool axisinfo_check_facts(const IrFunc *f, const AxisInfo *ai, const InterpArg *args, uint32_t nargs,
                          const int64_t grid[3], const InterpOptions *base, DiagList *diags);

#endif
