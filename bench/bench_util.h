/* What the C launch benchmarks share (launch_overhead.c, graph_replay.c): the empty
 * kernel of tests/gpu/kernels.h as libtileRT loads it, a microsecond clock, and
 * sorting samples for their median. Include after rt_internal.h. */
#ifndef TILE_BENCH_BENCH_UTIL_H
#define TILE_BENCH_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

#include "tests/gpu/kernels.h"

static const IrElem empty_params[] = {IR_PTR, IR_U32};
static const char *const empty_names[] = {"x", "n"};
static const RtPtxKernel empty_kernel = {"empty", empty_params, empty_names, 2, 128};

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* v sorted in place: v[0] the least, v[n / 2] the median, v[n - 1] the most. */
static void sort_samples(double *v, int n) { qsort(v, (size_t)n, sizeof *v, by_value); }

#endif
