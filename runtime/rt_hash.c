/* Cache keys and checksums: xxh3-128 (Debian's libxxhash-dev, compiled in with
 * XXH_INLINE_ALL so libtileRT carries no run-time dependency to the GPU machine).
 *
 * A key's bytes are the canonical (big-endian) form of the 128-bit hash, so the hex
 * file name of an entry reads the same as the hash printed by xxhsum. */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

struct RtHasher {
    XXH3_state_t state;
};

RtHasher *rt_hasher_create(void)
{
    RtHasher *h = aligned_alloc(64, (sizeof(RtHasher) + 63) / 64 * 64);
    if (h) XXH3_128bits_reset(&h->state);
    return h;
}

void rt_hasher_destroy(RtHasher *h)
{
    free(h);
}

void rt_hash_bytes(RtHasher *h, const void *p, size_t n)
{
    XXH3_128bits_update(&h->state, p, n);
}

void rt_hash_str(RtHasher *h, const char *s)
{
    rt_hash_bytes(h, s, strlen(s) + 1);
}

void rt_hash_u64(RtHasher *h, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    rt_hash_bytes(h, b, sizeof b);
}

static RtKey key_of(XXH128_hash_t v)
{
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, v);
    RtKey k;
    memcpy(k.b, c.digest, sizeof k.b);
    return k;
}

RtKey rt_hasher_key(const RtHasher *h)
{
    return key_of(XXH3_128bits_digest(&h->state));
}

RtKey rt_hash_buf(const void *p, size_t n)
{
    return key_of(XXH3_128bits(p, n));
}

void rt_key_hex(const RtKey *k, char out[33])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        out[2 * i] = digits[k->b[i] >> 4];
        out[2 * i + 1] = digits[k->b[i] & 15];
    }
    out[32] = 0;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

bool rt_key_from_hex(const char *s, RtKey *out)
{
    for (int i = 0; i < 16; i++) {
        int hi = hex_digit(s[2 * i]), lo = hi < 0 ? -1 : hex_digit(s[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        out->b[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}
