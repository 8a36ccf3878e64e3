/* Tensor maps at launch: a kernel that copies by TMA (codegen/cg_tma.c) takes one
 * CUtensorMap per tensor after its arguments, and the launcher encodes each from the
 * arguments by the kernel's recipe (CgTmaDesc) with cuTensorMapEncodeTiled, a host-only
 * driver call (no GPU work, no synchronization).
 *
 * What TMA requires and the variant's class does not already promise is checked here:
 * extents from 1 to 2^32, element strides whose byte counts are positive multiples of 16
 * below 2^40 (a class divisible by 16 or by 8 admits 0 and negative values; a rank-3
 * map's outer stride, a head's, as its row stride), the address 16-byte aligned. When a check fails the launch runs the variant without TMA
 * (rt_launch.c), which computes the same values with cp.async. */
#include <stdio.h>
#include <string.h>

#include "rt_internal.h"

enum {
    TMA_UINT8 = 0, TMA_UINT16 = 1, TMA_UINT32 = 2,          /* CUtensorMapDataType */
    TMA_INTERLEAVE_NONE = 0,
    TMA_SWIZZLE_NONE = 0, TMA_SWIZZLE_32B = 1, TMA_SWIZZLE_64B = 2, TMA_SWIZZLE_128B = 3,
    TMA_L2_256B = 3,                                        /* CU_TENSOR_MAP_L2_PROMOTION_L2_256B */
    TMA_OOB_ZERO = 0,                                       /* CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: zeros */
};

/* codegen.h: value times the parameter, in the kernel's arithmetic (wrapping at 32 or
 * 64 bits); or value. */
static int64_t value_of(int32_t param, int64_t value, const int64_t *ints, uint32_t bits)
{
    if (param < 0) return value;
    uint64_t v = (uint64_t)ints[param] * (uint64_t)value;
    return bits == 32 ? (int64_t)(int32_t)(uint32_t)v : (int64_t)v;
}

bool rt_tma_encode(const RtDriver *d, const CgTmaDesc *t, uint64_t ptr, const int64_t *ints, void *out, char *why,
                   size_t n)
{
    if (!d || !d->cuTensorMapEncodeTiled) {
        snprintf(why, n, "the CUDA driver has no cuTensorMapEncodeTiled");
        return false;
    }
    if (ptr % 16) {
        snprintf(why, n, "the address 0x%llx is not 16-byte aligned", (unsigned long long)ptr);
        return false;
    }
    uint64_t dims[4], strides[4];
    unsigned box[4], estr[4] = {1, 1, 1, 1};
    for (uint32_t i = 0; i < t->rank; i++) {
        int64_t e = value_of(t->dim_param[i], t->dim_value[i], ints, t->index_bits);
        int64_t s = value_of(t->stride_param[i], t->stride_value[i], ints, t->index_bits);
        /* i32 coordinates cannot leave an extent of 2^32; i64 ones are clamped to s32
         * (cg_tma.c), which keeps their meaning below 2^31; an outer dimension's (2)
         * coordinate is an s32 whatever the block's integers (passes/blockload.c) */
        int64_t most = t->index_bits == 64 && i < 2 ? INT32_MAX : (INT64_C(1) << 32);
        if (e < 1 || e > most) {
            snprintf(why, n, "extent %lld of dimension %u is outside 1 .. %lld", (long long)e, i, (long long)most);
            return false;
        }
        dims[i] = (uint64_t)e;
        box[i] = t->box[i];
        if (i == 0) continue;
        uint64_t bytes = (uint64_t)s * t->elem_bytes;
        if (s < 1 || bytes % 16 || bytes >= (UINT64_C(1) << 40)) {
            snprintf(why, n, "the stride %lld of dimension %u is not a positive multiple of 16 bytes", (long long)s, i);
            return false;
        }
        strides[i - 1] = bytes;
    }
    int dtype = t->elem_bytes == 1 ? TMA_UINT8 : t->elem_bytes == 2 ? TMA_UINT16 : TMA_UINT32;
    int swz = t->swizzle == 128 ? TMA_SWIZZLE_128B : t->swizzle == 64 ? TMA_SWIZZLE_64B
            : t->swizzle == 32 ? TMA_SWIZZLE_32B : TMA_SWIZZLE_NONE;
    memset(out, 0, 128);
    CUresult r = d->cuTensorMapEncodeTiled(out, dtype, t->rank, (void *)(uintptr_t)ptr, dims, strides, box, estr,
                                           TMA_INTERLEAVE_NONE, swz, TMA_L2_256B, TMA_OOB_ZERO);
    if (r) {
        const char *name = NULL;
        if (d->cuGetErrorName(r, &name) || !name) name = "CUDA_ERROR_UNKNOWN";
        snprintf(why, n, "cuTensorMapEncodeTiled failed: %s (%d)", name, r);
        return false;
    }
    return true;
}

uint64_t rt_tma_encode_all(const RtDriver *d, const CgTmaDesc *t, uint32_t n, const TrtArg *args, uint32_t nargs,
                           RtTmaMaps *maps, char *why, size_t wn)
{
    int64_t ints[TRT_MAX_ARGS];   /* once for every map */
    for (uint32_t i = 0; i < nargs && i < TRT_MAX_ARGS; i++)
        if (!rt_arg_int(&args[i], &ints[i])) ints[i] = 0;   /* pointers and floats: recipes never name them */
    uint64_t refused = 0;
    for (uint32_t j = 0; j < n; j++) {
        char w[200];
        bool ok = t[j].ptr_param < nargs && t[j].ptr_param < 64 && args[t[j].ptr_param].kind == TRT_ARG_PTR;
        if (!ok) snprintf(w, sizeof w, "internal error: a tensor map's pointer is not a pointer argument");
        for (uint32_t i = 0; ok && i < t[j].rank; i++)
            if (t[j].dim_param[i] >= (int32_t)nargs || t[j].stride_param[i] >= (int32_t)nargs) {
                snprintf(w, sizeof w, "internal error: a tensor map names an argument past the %u given", nargs);
                ok = false;
            }
        if (ok && rt_tma_encode(d, &t[j], args[t[j].ptr_param].v.ptr, ints, maps->map[j], w, sizeof w)) continue;
        if (!refused) snprintf(why, wn, "%s", w);
        refused |= UINT64_C(1) << (t[j].ptr_param & 63);
    }
    return refused;
}
