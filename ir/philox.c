/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11;
 * the Random123 reference) and the rand/randn contract built on it.
 *
 * The contract (docs/INTERPRETER.md) is what the GPU code must reproduce bit for bit:
 * key = {lo32(seed), hi32(seed)}, counter = {lo32(offset), hi32(offset), 0, 0}, and
 * the floats are formed from the top 24 bits of the first one or two output words. */
#include <math.h>

#include "interp_internal.h"

enum {
    PHILOX_M0 = 0xD2511F53u, PHILOX_M1 = 0xCD9E8D57u,
    PHILOX_W0 = 0x9E3779B9u, PHILOX_W1 = 0xBB67AE85u,
};

static void philox_round(uint32_t c[4], const uint32_t k[2])
{
    uint64_t p0 = (uint64_t)PHILOX_M0 * c[0];
    uint64_t p1 = (uint64_t)PHILOX_M1 * c[2];
    uint32_t out[4] = {
        (uint32_t)(p1 >> 32) ^ c[1] ^ k[0], (uint32_t)p1,
        (uint32_t)(p0 >> 32) ^ c[3] ^ k[1], (uint32_t)p0,
    };
    for (int i = 0; i < 4; i++) c[i] = out[i];
}

void philox4x32_10(uint32_t ctr[4], const uint32_t key[2])
{
    uint32_t k[2] = {key[0], key[1]};
    for (int r = 0; r < 10; r++) {
        if (r > 0) {                    /* the key advances between rounds */
            k[0] += PHILOX_W0;
            k[1] += PHILOX_W1;
        }
        philox_round(ctr, k);
    }
}

static void philox_for(uint64_t seed, int64_t offset, uint32_t c[4])
{
    uint64_t off = (uint64_t)offset;
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    c[0] = (uint32_t)off;
    c[1] = (uint32_t)(off >> 32);
    c[2] = c[3] = 0;
    philox4x32_10(c, key);
}

/* 24 bits fit a float's mantissa exactly, so the scaling is exact: [0, 1 - 2^-24]. */
float tile_rand(uint64_t seed, int64_t offset)
{
    uint32_t c[4];
    philox_for(seed, offset, c);
    return (float)(c[0] >> 8) * 0x1p-24f;
}

/* Box-Muller in f32; u1 in (0, 1] keeps the log finite. */
float tile_randn(uint64_t seed, int64_t offset)
{
    uint32_t c[4];
    philox_for(seed, offset, c);
    float u1 = (float)((c[0] >> 8) + 1) * 0x1p-24f;
    float u2 = (float)(c[1] >> 8) * 0x1p-24f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831855f * u2);
}
