/* The table of targets (ir/target.h). Shared memory: CUDA's sharedMemPerBlockOptin,
 * 227 KB on H100/H200 and 163 KB on A100. */
#include "target.h"

#include <string.h>

static const TileTarget targets[] = {
    /* name    sm  smem_optin regs  mma  cp.a  ldm   wgmma  tma    regs/SM threads/SM prod cons occ */
    {"sm_90a", 90, 232448,    255, true, true, true, true,  true,  65536, 2048, 40, 240, 44},
    {"sm_80",  80, 166912,    255, true, true, true, false, false, 65536, 2048, 40, 240, 44},
};

uint32_t tile_target_consumer_regs(const TileTarget *t, int warps)
{
    uint32_t r = (t->regs_per_sm - t->producer_regs * IR_WARPGROUP_THREADS) / (32 * (uint32_t)warps) / 8 * 8;
    return r > t->consumer_regs_max ? t->consumer_regs_max : r;
}

const TileTarget *tile_target(const char *arch)
{
    if (!arch) return tile_target_default();
    for (size_t i = 0; i < sizeof targets / sizeof *targets; i++)
        if (!strcmp(arch, targets[i].name)) return &targets[i];
    return NULL;
}

const TileTarget *tile_target_default(void) { return &targets[0]; }

const char *tile_target_names(void) { return "sm_90a or sm_80"; }
