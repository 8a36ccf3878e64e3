/* A warmed cache as one file, so a fleet starts without compiling (docs/CACHE.md):
 * `tilec cache export` writes the entries of some kernels into a pack, `tilec cache
 * import` checks every one of them and only then stores them.
 *
 *   magic "TILEPACK"[8]  format[4] (1)  id length[4]  compiler id[id length]  count[8]
 *   count x (length[8]  an entry file's bytes: its 56-byte header, then its payload)
 *   xxh3-128 of every byte before it[16]                              (little-endian)
 *
 * Entries travel as their files are, header and checksum included, so an import checks
 * each exactly as a read of the cache does (magic, format, kind, key, length,
 * checksum) and the pack's last 16 bytes show it arrived whole. The compiler identity
 * of the exporting runtime is recorded: its entries are served only to that compiler
 * (their keys name it), which the importer is told. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/arena.h"
#include "rt_internal.h"

#define PACK_MAGIC "TILEPACK"
#define PACK_FORMAT 1u
#define PACK_MAX_ID 1024
/* A pack is read whole into memory: larger than any cache should be (the default
 * bound is 1 GiB), refused from its size alone. */
#define PACK_MAX_BYTES (16ull << 30)

/* ---- writing ------------------------------------------------------------------------- */
typedef struct Pack {
    uint8_t *data;
    size_t len, cap;
    bool oom;
} Pack;

static void put(Pack *p, const void *b, size_t n)
{
    if (p->oom) return;
    if (p->len + n > p->cap) {
        size_t cap = p->cap ? p->cap : 4096;
        while (cap < p->len + n) cap *= 2;
        uint8_t *nd = tl_realloc(p->data, cap);
        if (!nd) {
            p->oom = true;
            return;
        }
        p->data = nd, p->cap = cap;
    }
    memcpy(p->data + p->len, b, n);
    p->len += n;
}

static void put_le(Pack *p, uint64_t v, int bytes)
{
    uint8_t b[8];
    for (int i = 0; i < bytes; i++) b[i] = (uint8_t)(v >> (8 * i));
    put(p, b, (size_t)bytes);
}

/* Writes the pack to path through a temporary file renamed into place. */
static TrtStatus write_pack(const Pack *p, const char *path)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return rt_fail(TRT_ERROR_CACHE_IO, "cannot write %s: %s", tmp, strerror(errno));
    bool ok = fwrite(p->data, 1, p->len, f) == p->len;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return rt_fail(TRT_ERROR_CACHE_IO, "cannot write %s: %s", path, strerror(e));
    }
    return TRT_SUCCESS;
}

TrtStatus rt_pack_write(const char *const *paths, size_t n, const char *out)
{
    Pack p = {0};
    const char *id = rt_compiler_identity();
    put(&p, PACK_MAGIC, 8);
    put_le(&p, PACK_FORMAT, 4);
    put_le(&p, strlen(id), 4);
    put(&p, id, strlen(id));
    put_le(&p, n, 8);
    TrtStatus s = TRT_SUCCESS;
    for (size_t i = 0; i < n && !s; i++) {
        RtBlob img;
        char why[256];
        if (!rt_cache_read_file(paths[i], &img, why, sizeof why)) {
            s = rt_fail(TRT_ERROR_CACHE_IO, "cache entry %s is bad (%s): run 'tilec cache verify --fix' first",
                        paths[i], why);
            break;
        }
        put_le(&p, img.len, 8);
        put(&p, img.data, img.len);
        rt_blob_free(&img);
    }
    RtKey sum = rt_hash_buf(p.data, p.len);
    put(&p, sum.b, sizeof sum.b);
    if (!s && p.oom) s = rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
    if (!s) s = write_pack(&p, out);
    tl_free(p.data);
    return s;
}

/* ---- reading ------------------------------------------------------------------------- */
static uint64_t get_le(const uint8_t *b, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = v << 8 | b[i];
    return v;
}

static TrtStatus read_whole(const char *path, RtBlob *out)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f) return rt_fail(TRT_ERROR_NOT_FOUND, "cannot read %s: %s", path, strerror(errno));
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > PACK_MAX_BYTES) {
        fclose(f);
        return rt_fail(TRT_ERROR_CACHE_IO, "%s is not a pack (not a regular file of at most 16 GiB)", path);
    }
    out->len = (size_t)st.st_size;
    out->data = tl_malloc(out->len ? out->len : 1);
    bool ok = out->data && fread(out->data, 1, out->len, f) == out->len;
    fclose(f);
    if (!ok) rt_blob_free(out);
    return ok ? TRT_SUCCESS : rt_fail(TRT_ERROR_CACHE_IO, "cannot read %s", path);
}

/* Checks the pack's frame (magic, format, the identity, the final checksum) and every
 * entry in it, filling r; nothing is stored. */
static TrtStatus check_pack(const char *path, const uint8_t *b, size_t len, RtPackInfo *r)
{
    size_t at = 24;
    if (len < at + 16 || memcmp(b, PACK_MAGIC, 8))
        return rt_fail(TRT_ERROR_CACHE_IO, "%s is not a tile cache pack (no TILEPACK header)", path);
    RtKey sum = rt_hash_buf(b, len - 16);
    if (memcmp(sum.b, b + len - 16, 16))
        return rt_fail(TRT_ERROR_CACHE_IO, "%s is damaged or truncated (its checksum does not match)", path);
    if (get_le(b + 8, 4) != PACK_FORMAT)
        return rt_fail(TRT_ERROR_CACHE_IO, "%s has pack format %llu; this runtime reads format %u", path,
                       (unsigned long long)get_le(b + 8, 4), PACK_FORMAT);
    uint64_t idlen = get_le(b + 12, 4);
    if (idlen >= PACK_MAX_ID || 16 + idlen + 8 > len - 16) return rt_fail(TRT_ERROR_CACHE_IO, "%s: bad compiler identity", path);
    memcpy(r->compiler, b + 16, idlen);
    r->compiler[idlen] = '\0';
    at = 16 + idlen;
    uint64_t count = get_le(b + at, 8);
    at += 8;
    for (uint64_t i = 0; i < count; i++) {
        char why[256];
        RtEntryKind kind;
        RtKey key;
        if (len - 16 - at < 8) return rt_fail(TRT_ERROR_CACHE_IO, "%s: entry %llu of %llu is cut short", path,
                                              (unsigned long long)i + 1, (unsigned long long)count);
        uint64_t n = get_le(b + at, 8);
        at += 8;
        if (n > len - 16 - at || !rt_cache_check_image(b + at, n, &kind, &key, why, sizeof why))
            return rt_fail(TRT_ERROR_CACHE_IO, "%s: entry %llu of %llu is bad: %s", path, (unsigned long long)i + 1,
                           (unsigned long long)count, n > len - 16 - at ? "longer than the pack" : why);
        r->count[kind]++;
        at += n;
    }
    if (at != len - 16) return rt_fail(TRT_ERROR_CACHE_IO, "%s: %zu bytes after its last entry", path, len - 16 - at);
    r->entries = count;
    return TRT_SUCCESS;
}

/* Stores every entry of a checked pack. */
static TrtStatus store_pack(RtCache *c, const uint8_t *b, size_t len)
{
    size_t at = 16 + get_le(b + 12, 4);
    uint64_t count = get_le(b + at, 8);
    at += 8;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t n = get_le(b + at, 8);
        RtEntryKind kind;
        RtKey key;
        char why[8];
        at += 8;
        rt_cache_check_image(b + at, n, &kind, &key, why, sizeof why);
        TrtStatus s = rt_cache_put(c, kind, &key, b + at + RT_CACHE_HEADER_BYTES, n - RT_CACHE_HEADER_BYTES);
        if (s) return s;
        at += n;
    }
    (void)len;
    return TRT_SUCCESS;
}

TrtStatus rt_pack_read(RtCache *c, const char *path, RtPackInfo *r)
{
    RtBlob b = {0};
    memset(r, 0, sizeof *r);
    TrtStatus s = read_whole(path, &b);
    if (!s) s = check_pack(path, b.data, b.len, r);
    if (!s && c) s = store_pack(c, b.data, b.len);
    rt_blob_free(&b);
    return s;
}
