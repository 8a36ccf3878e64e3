/* The persistent cache: a directory of atomically renamed files (docs/CACHE.md).
 *
 *   DIR/KEY.ptx, DIR/KEY.cubin, DIR/KEY.tune   entries (KEY: 32 hex digits of xxh3-128)
 *   DIR/locks/KEY.KIND.lock                    flock'd by the process building KEY
 *   DIR/tmp/KEY.KIND.PID.N                     entries being written
 *
 * Every promise of DESIGN.md section 4 rests on one of these mechanisms:
 * - a reader never sees half an entry: entries are written to tmp/, fsync'd, then
 *   renamed into place (rename is atomic within a file system);
 * - kill -9 loses at most the entry being written: its temp file is never renamed, and
 *   prune removes temp files whose writer is gone;
 * - corrupted or truncated entries are detected: a header carries the magic, format
 *   version, kind, key, payload length and the payload's xxh3-128, all checked before
 *   a byte is used; a bad entry is removed and rebuilt;
 * - one process builds a missing entry: it holds an flock on the key's lock file (the
 *   kernel releases it when the holder dies) and re-checks after acquiring;
 * - a directory or file not ours or writable by group/others is refused, because
 *   loading it would run their code;
 * - LRU: a hit sets the entry's mtime to now; eviction removes the oldest mtimes. */
#define _DEFAULT_SOURCE   /* flock, futimens's neighbours: BSD names beyond POSIX */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ir/arena.h"
#include "rt_internal.h"

#define CACHE_MAGIC "TILECACH"
#define CACHE_FORMAT 1u
#define HEADER_BYTES RT_CACHE_HEADER_BYTES
#define DEFAULT_MAX_BYTES (1ull << 30)
#define STALE_TMP_SECONDS (24 * 3600)
/* No entry is larger (a cubin is a few MB): a bigger file (a sparse 3 GiB one, say) is
 * judged bad from its size alone, never read. */
#define MAX_ENTRY_BYTES (256ull << 20)
/* Entries are opened without blocking (a FIFO named like one would hang open and
 * read) and without following links; fstat then refuses anything not a regular file. */
#define ENTRY_OPEN_FLAGS (O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)

struct RtCache {
    char *dir;
    uint64_t max_bytes;
};

void (*rt_cache_test_write_hook)(const char *tmp_path);

static const char *const kind_ext[] = {"", "ptx", "cubin", "tune"};

const char *rt_entry_kind_name(RtEntryKind k)
{
    return k >= RT_ENTRY_PTX && k <= RT_ENTRY_TUNE ? kind_ext[k] : "?";
}

void rt_blob_free(RtBlob *b)
{
    tl_free(b->data);
    b->data = NULL;
    b->len = 0;
}

/* ---- directories and their safety ----------------------------------------------- */
static TrtStatus check_owned(const char *path, const struct stat *st, bool want_dir)
{
    if (want_dir ? !S_ISDIR(st->st_mode) : !S_ISREG(st->st_mode))
        return rt_fail(TRT_ERROR_CACHE_UNSAFE, "cache path %s is not a %s", path,
                       want_dir ? "directory" : "regular file");
    if (st->st_uid != geteuid())
        return rt_fail(TRT_ERROR_CACHE_UNSAFE,
                       "cache path %s belongs to another user (uid %u): loading code from it "
                       "would run their code", path, (unsigned)st->st_uid);
    if (st->st_mode & (S_IWGRP | S_IWOTH))
        return rt_fail(TRT_ERROR_CACHE_UNSAFE,
                       "cache path %s is writable by group or others (mode %04o): loading code "
                       "from it would run their code; run chmod go-w on it or choose another "
                       "TILE_CACHE_DIR", path, (unsigned)(st->st_mode & 07777));
    return TRT_SUCCESS;
}

/* mkdir -p with mode 0700 for every directory it creates. */
static TrtStatus make_dirs(const char *dir)
{
    char *p = tl_strdup(dir);
    if (!p) return rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
    TrtStatus s = TRT_SUCCESS;
    for (char *c = p + 1; ; c++) {
        if (*c != '/' && *c) continue;
        char saved = *c;
        *c = 0;
        if (mkdir(p, 0700) != 0 && errno != EEXIST)
            s = rt_fail(TRT_ERROR_CACHE_IO, "cannot create cache directory %s: %s", p,
                        strerror(errno));
        *c = saved;
        if (s || !saved) break;
    }
    tl_free(p);
    return s;
}

static TrtStatus check_dir(const char *path, bool follow)
{
    struct stat st;
    if ((follow ? stat(path, &st) : lstat(path, &st)) != 0)
        return rt_fail(TRT_ERROR_CACHE_IO, "cannot use cache directory %s: %s", path,
                       strerror(errno));
    return check_owned(path, &st, true);
}

static TrtStatus make_subdir(const char *dir, const char *sub)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, sub);
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
        return rt_fail(TRT_ERROR_CACHE_IO, "cannot create %s: %s", path, strerror(errno));
    return check_dir(path, false);
}

bool rt_cache_default_dir(char *buf, size_t n)
{
    const char *v;
    if ((v = getenv("TILE_CACHE_DIR")) && *v) return snprintf(buf, n, "%s", v) < (int)n;
    if ((v = getenv("XDG_CACHE_HOME")) && *v) return snprintf(buf, n, "%s/tile", v) < (int)n;
    if ((v = getenv("HOME")) && *v) return snprintf(buf, n, "%s/.cache/tile", v) < (int)n;
    return false;
}

/* The power of 1024 a size suffix names: K, M, G, T in any case, each optionally
 * followed by B or iB ("5G", "5gb", "5GiB" are all 5 GiB); "" or "B" is 0. -1: not a
 * suffix. */
static int size_suffix(const char *s)
{
    static const char units[] = "KMGT";
    const char *u = *s ? strchr(units, toupper((unsigned char)*s)) : NULL;
    int p = u ? (int)(u - units) + 1 : 0;
    if (p) s++;
    if (p && tolower((unsigned char)s[0]) == 'i' && tolower((unsigned char)s[1]) == 'b') s += 2;
    else if (tolower((unsigned char)*s) == 'b') s++;
    while (isspace((unsigned char)*s)) s++;
    return *s ? -1 : p;
}

bool rt_parse_size(const char *text, uint64_t *out)
{
    const char *s = text;
    while (isspace((unsigned char)*s)) s++;
    if (!isdigit((unsigned char)*s)) return false;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(s, &end, 10);
    while (isspace((unsigned char)*end)) end++;
    int p = size_suffix(end);
    if (errno || p < 0) return false;
    for (int i = 0; i < p; i++) {
        if (n > UINT64_MAX / 1024) return false;
        n *= 1024;
    }
    *out = n;
    return n > 0;
}

/* A bound that is set but unreadable is reported, not silently replaced by the default. */
static uint64_t bound_from_env(void)
{
    const char *v = getenv("TILE_CACHE_MAX_BYTES");
    uint64_t b;
    if (!v || !*v) return DEFAULT_MAX_BYTES;
    if (rt_parse_size(v, &b)) return b;
    fprintf(stderr, "tile: warning: TILE_CACHE_MAX_BYTES='%s' is not a size (a positive number "
            "of bytes, or with a K, M, G or T suffix: 5G); using the default, 1G\n", v);
    return DEFAULT_MAX_BYTES;
}

/* A cache that only looks (tilec cache ls, stats) creates nothing: a directory that
 * does not exist is an empty cache. */
static TrtStatus open_dir(const char *dir, bool create, uint64_t max_bytes, RtCache **out)
{
    char def[4096];
    struct stat st;
    *out = NULL;
    if (!dir) {
        if (!rt_cache_default_dir(def, sizeof def))
            return rt_fail(TRT_ERROR_CACHE_IO, "no cache directory: set TILE_CACHE_DIR or HOME");
        dir = def;
    }
    TrtStatus s = TRT_SUCCESS;
    if (create) s = make_dirs(dir);
    if (!s && (create || stat(dir, &st) == 0 || errno != ENOENT)) s = check_dir(dir, true);
    if (!s && create) s = make_subdir(dir, "locks");
    if (!s && create) s = make_subdir(dir, "tmp");
    if (s) return s;
    RtCache *c = tl_calloc(1, sizeof *c);
    if (!c || !(c->dir = tl_strdup(dir))) {
        tl_free(c);
        return rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
    }
    c->max_bytes = max_bytes ? max_bytes : bound_from_env();
    *out = c;
    return TRT_SUCCESS;
}

TrtStatus rt_cache_open(const char *dir, uint64_t max_bytes, RtCache **out)
{
    return open_dir(dir, true, max_bytes, out);
}

TrtStatus rt_cache_open_readonly(const char *dir, uint64_t max_bytes, RtCache **out)
{
    return open_dir(dir, false, max_bytes, out);
}

void rt_cache_close(RtCache *c)
{
    if (!c) return;
    tl_free(c->dir);
    tl_free(c);
}

const char *rt_cache_dir(const RtCache *c)
{
    return c->dir;
}

uint64_t rt_cache_max_bytes(const RtCache *c)
{
    return c->max_bytes;
}

static void entry_path(const RtCache *c, RtEntryKind kind, const RtKey *key, char *buf,
                       size_t n)
{
    char hex[33];
    rt_key_hex(key, hex);
    snprintf(buf, n, "%s/%s.%s", c->dir, hex, kind_ext[kind]);
}

/* ---- the entry format ------------------------------------------------------------- */
static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* magic[8] format[4] kind[4] key[16] length[8] xxh3-128(payload)[16], little-endian */
static void make_header(uint8_t h[HEADER_BYTES], RtEntryKind kind, const RtKey *key,
                        const void *p, size_t n)
{
    memcpy(h, CACHE_MAGIC, 8);
    put_u32(h + 8, CACHE_FORMAT);
    put_u32(h + 12, (uint32_t)kind);
    memcpy(h + 16, key->b, 16);
    put_u64(h + 32, n);
    RtKey sum = rt_hash_buf(p, n);
    memcpy(h + 40, sum.b, 16);
}

/* Checks a whole entry image against the kind and key its name promises. */
static bool check_image(const uint8_t *img, size_t size, RtEntryKind kind, const RtKey *key,
                        char *why, size_t n)
{
    uint8_t want[HEADER_BYTES];
    if (size < HEADER_BYTES) return snprintf(why, n, "truncated header"), false;
    uint64_t len = get_u64(img + 32);
    if (memcmp(img, CACHE_MAGIC, 8)) return snprintf(why, n, "bad magic"), false;
    make_header(want, kind, key, img + HEADER_BYTES, size - HEADER_BYTES);
    if (memcmp(img + 8, want + 8, 8)) return snprintf(why, n, "wrong format or kind"), false;
    if (memcmp(img + 16, want + 16, 16)) return snprintf(why, n, "wrong key"), false;
    if (len != size - HEADER_BYTES)
        return snprintf(why, n, "payload is %zu bytes, header says %llu (truncated?)",
                        size - HEADER_BYTES, (unsigned long long)len), false;
    if (memcmp(img + 40, want + 40, 16)) return snprintf(why, n, "checksum mismatch"), false;
    return true;
}

static bool read_all(int fd, void *buf, size_t n)
{
    for (size_t done = 0; done < n;) {
        ssize_t r = read(fd, (char *)buf + done, n - done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        done += (size_t)r;
    }
    return true;
}

static bool write_all(int fd, const void *buf, size_t n)
{
    for (size_t done = 0; done < n;) {
        ssize_t r = write(fd, (const char *)buf + done, n - done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        done += (size_t)r;
    }
    return true;
}

/* Why an entry file open on fd (fstat'd as st) is refused before a byte is read:
 * another owner, a mode others can write, not a regular file, or too large. */
static bool refuse_file(const char *path, const struct stat *st, char *why, size_t n)
{
    if (check_owned(path, st, false)) return snprintf(why, n, "%s", trt_last_error()), true;
    if ((uint64_t)st->st_size > MAX_ENTRY_BYTES)
        return snprintf(why, n, "%lld bytes, more than an entry can be (%llu)", (long long)st->st_size,
                        MAX_ENTRY_BYTES), true;
    return false;
}

/* Reads the entry file open on fd (already fstat'd as st) into a malloc'd image. */
static uint8_t *read_image(int fd, const struct stat *st)
{
    size_t size = (size_t)st->st_size;
    uint8_t *img = tl_malloc(size ? size : 1);
    if (img && !read_all(fd, img, size)) {
        tl_free(img);
        img = NULL;
    }
    return img;
}

/* Removes a directory tree (depth-limited: a tree deeper than that stays, and is
 * reported by verify). */
static void remove_tree(int at, const char *name, int depth)
{
    if (unlinkat(at, name, 0) == 0 || errno != EISDIR || depth > 16) return;
    int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d && fd >= 0) close(fd);
    for (struct dirent *de; d && (de = readdir(d));)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) remove_tree(dirfd(d), de->d_name, depth + 1);
    if (d) closedir(d);
    unlinkat(at, name, AT_REMOVEDIR);
}

bool rt_cache_remove_path(const char *path)
{
    remove_tree(AT_FDCWD, path, 0);
    return access(path, F_OK) != 0;
}

/* Removes the entry at path if it is still the file we judged bad (not a fresh one
 * that another process renamed into place meanwhile). */
static void remove_if_same(const char *path, const struct stat *judged)
{
    struct stat now;
    if (lstat(path, &now) == 0 && now.st_ino == judged->st_ino && now.st_dev == judged->st_dev)
        rt_cache_remove_path(path);
}

static RtGet judge_entry(int fd, const char *path, RtEntryKind kind, const RtKey *key,
                         RtBlob *out)
{
    struct stat st;
    char why[128];
    if (fstat(fd, &st) != 0) return RT_GET_MISS;
    if (st.st_uid == geteuid() && !S_ISREG(st.st_mode)) {
        remove_if_same(path, &st);   /* a FIFO, a directory: ours, in the way of the entry */
        return RT_GET_BAD;
    }
    if (refuse_file(path, &st, why, sizeof why)) {
        if (!check_owned(path, &st, false)) remove_if_same(path, &st);   /* too large */
        return RT_GET_BAD;
    }
    uint8_t *img = read_image(fd, &st);
    if (!img) return RT_GET_MISS;
    if (!check_image(img, (size_t)st.st_size, kind, key, why, sizeof why)) {
        tl_free(img);
        remove_if_same(path, &st);
        return RT_GET_BAD;
    }
    memmove(img, img + HEADER_BYTES, (size_t)st.st_size - HEADER_BYTES);
    out->data = img;
    out->len = (size_t)st.st_size - HEADER_BYTES;
    futimens(fd, NULL);   /* the LRU clock; fails harmlessly on a read-only cache */
    return RT_GET_HIT;
}

RtGet rt_cache_get(RtCache *c, RtEntryKind kind, const RtKey *key, RtBlob *out)
{
    char path[4096];
    entry_path(c, kind, key, path, sizeof path);
    out->data = NULL;
    out->len = 0;
    int fd = open(path, ENTRY_OPEN_FLAGS);
    if (fd < 0) return errno == ENOENT ? RT_GET_MISS : RT_GET_BAD;
    RtGet r = judge_entry(fd, path, kind, key, out);
    close(fd);
    return r;
}

/* ---- writing ---------------------------------------------------------------------- */
static bool fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return false;
    bool ok = fsync(fd) == 0;
    close(fd);
    return ok;
}

static bool write_entry(int fd, const char *tmp, RtEntryKind kind, const RtKey *key,
                        const void *p, size_t n)
{
    uint8_t h[HEADER_BYTES];
    make_header(h, kind, key, p, n);
    if (!write_all(fd, h, sizeof h) || !write_all(fd, p, n / 2)) return false;
    if (rt_cache_test_write_hook) rt_cache_test_write_hook(tmp);
    return write_all(fd, (const char *)p + n / 2, n - n / 2) && fsync(fd) == 0;
}

static void evict_to_bound(RtCache *c);

/* A directory named like the entry would make every rename fail (and the entry be
 * rebuilt on every run): it is renamed into tmp/ (atomically, as entries are) and
 * removed there. */
static bool move_aside(RtCache *c, const char *path, const char *tmp)
{
    char aside[4200];
    snprintf(aside, sizeof aside, "%s.aside", tmp);
    if (rename(path, aside) != 0) return false;
    rt_cache_remove_path(aside);
    return true;
}

TrtStatus rt_cache_put(RtCache *c, RtEntryKind kind, const RtKey *key, const void *p, size_t n)
{
    static atomic_uint serial;
    char hex[33], tmp[4096], path[4096];
    rt_key_hex(key, hex);
    snprintf(tmp, sizeof tmp, "%s/tmp/%s.%s.%ld.%u", c->dir, hex, kind_ext[kind],
             (long)getpid(), atomic_fetch_add(&serial, 1));
    entry_path(c, kind, key, path, sizeof path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return rt_fail(TRT_ERROR_CACHE_IO, "cannot write %s: %s", tmp, strerror(errno));
    bool ok = write_entry(fd, tmp, kind, key, p, n);
    ok = close(fd) == 0 && ok;
    int r = ok ? rename(tmp, path) : -1;
    if (r != 0 && ok && (errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST))
        r = move_aside(c, path, tmp) ? rename(tmp, path) : -1;
    if (r != 0) {
        int e = errno;
        unlink(tmp);
        return rt_fail(TRT_ERROR_CACHE_IO, "cannot write cache entry %s: %s", path, strerror(e));
    }
    fsync_dir(c->dir);
    evict_to_bound(c);
    return TRT_SUCCESS;
}

/* ---- the remote tier (rt_remote.c) ----------------------------------------------- */
/* A remote image is checked exactly as a local file is (magic, format, kind, key,
 * length, checksum) before a byte of it is used or stored; a bad one is reported and
 * left for the build that follows to overwrite. A good one is stored locally. */
static RtGet remote_get(RtCache *c, RtEntryKind kind, const RtKey *key, RtBlob *out)
{
    RtBlob img = {0};
    char why[128] = "larger than any entry";
    RtGet g = rt_remote_get(kind, key, MAX_ENTRY_BYTES, &img);
    if (g == RT_GET_HIT && !check_image(img.data, img.len, kind, key, why, sizeof why))
        g = RT_GET_BAD;
    if (g == RT_GET_BAD) rt_remote_refused(kind, key, why);
    if (g != RT_GET_HIT) {
        rt_blob_free(&img);
        return g;
    }
    out->len = img.len - HEADER_BYTES;
    memmove(img.data, (uint8_t *)img.data + HEADER_BYTES, out->len);
    out->data = img.data;
    rt_cache_put(c, kind, key, out->data, out->len);
    return RT_GET_HIT;
}

/* The image a local file would hold, sent to the remote tier (best effort). */
static void remote_put(RtEntryKind kind, const RtKey *key, const void *p, size_t n)
{
    uint8_t *img = tl_malloc(HEADER_BYTES + n);
    if (!img) return;
    make_header(img, kind, key, p, n);
    memcpy(img + HEADER_BYTES, p, n);
    rt_remote_put(kind, key, img, HEADER_BYTES + n);
    tl_free(img);
}

RtGet rt_cache_fetch(RtCache *c, RtEntryKind kind, const RtKey *key, RtBlob *out, RtTier *from)
{
    RtTier t = RT_TIER_LOCAL;
    RtGet g = rt_cache_get(c, kind, key, out);
    if (g != RT_GET_HIT && remote_get(c, kind, key, out) == RT_GET_HIT) g = RT_GET_HIT, t = RT_TIER_REMOTE;
    if (from) *from = t;
    return g;
}

/* ---- one builder per key ---------------------------------------------------------- */
/* Locks path. A lock file that prune unlinked while we waited is not the lock any
 * more: after acquiring, the path must still name the inode we hold, else retry. */
static int lock_path(const char *path)
{
    for (;;) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) return -1;
        while (flock(fd, LOCK_EX) != 0)
            if (errno != EINTR) return close(fd), -1;
        struct stat held, named;
        if (fstat(fd, &held) == 0 && stat(path, &named) == 0 && held.st_ino == named.st_ino &&
            held.st_dev == named.st_dev)
            return fd;
        close(fd);
    }
}

/* The builder of a key asks the remote tier first (so that one process of a machine
 * fetches it, as one builds it), then builds and writes both tiers. */
static TrtStatus build_locked(RtCache *c, RtEntryKind kind, const RtKey *key, RtBuildFn build,
                              void *ud, RtBlob *out, RtTier *from)
{
    if (rt_cache_fetch(c, kind, key, out, from) == RT_GET_HIT) return TRT_SUCCESS;
    *from = RT_TIER_BUILT;
    TrtStatus s = build(ud, out);
    if (s) return s;
    /* A cache that cannot be written still gives the caller its code. */
    rt_cache_put(c, kind, key, out->data, out->len);
    remote_put(kind, key, out->data, out->len);
    return TRT_SUCCESS;
}

TrtStatus rt_cache_get_or_build_from(RtCache *c, RtEntryKind kind, const RtKey *key,
                                     RtBuildFn build, void *ud, RtBlob *out, RtTier *from)
{
    RtTier t = RT_TIER_LOCAL;
    if (!from) from = &t;
    *from = RT_TIER_LOCAL;
    if (rt_cache_get(c, kind, key, out) == RT_GET_HIT) return TRT_SUCCESS;
    char hex[33], lock[4096];
    rt_key_hex(key, hex);
    snprintf(lock, sizeof lock, "%s/locks/%s.%s.lock", c->dir, hex, kind_ext[kind]);
    int fd = lock_path(lock);
    if (fd < 0) {                         /* no lock, no sharing: still correct */
        *from = RT_TIER_BUILT;
        return build(ud, out);
    }
    TrtStatus s = build_locked(c, kind, key, build, ud, out, from);
    close(fd);                            /* releases the flock */
    return s;
}

TrtStatus rt_cache_get_or_build(RtCache *c, RtEntryKind kind, const RtKey *key,
                                RtBuildFn build, void *ud, RtBlob *out)
{
    return rt_cache_get_or_build_from(c, kind, key, build, ud, out, NULL);
}

/* ---- listing, eviction, cleanup --------------------------------------------------- */
static bool parse_entry_name(const char *name, RtEntryKind *kind, RtKey *key)
{
    if (strlen(name) < 34 || name[32] != '.' || !rt_key_from_hex(name, key)) return false;
    for (int k = RT_ENTRY_PTX; k <= RT_ENTRY_TUNE; k++)
        if (!strcmp(name + 33, kind_ext[k])) return *kind = (RtEntryKind)k, true;
    return false;
}

long rt_cache_foreach(RtCache *c, void (*fn)(const RtCacheEntryInfo *e, void *ud), void *ud)
{
    DIR *d = opendir(c->dir);
    if (!d) return 0;
    long count = 0;
    char path[4096];
    for (struct dirent *de; (de = readdir(d));) {
        RtCacheEntryInfo e;
        struct stat st;
        if (!parse_entry_name(de->d_name, &e.kind, &e.key)) continue;
        snprintf(path, sizeof path, "%s/%s", c->dir, de->d_name);
        if (lstat(path, &st) != 0) continue;
        e.size = (uint64_t)st.st_size;
        e.mtime = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        e.path = path;
        fn(&e, ud);
        count++;
    }
    closedir(d);
    return count;
}

typedef struct Victim {
    int64_t mtime;
    uint64_t size;
    char name[48];             /* KEY.KIND */
} Victim;

typedef struct VictimList {
    Victim *v;
    size_t len, cap;
    uint64_t total;
    bool oom;
} VictimList;

static void collect(const RtCacheEntryInfo *e, void *ud)
{
    VictimList *l = ud;
    l->total += e->size;
    if (l->len == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        Victim *nv = tl_realloc(l->v, cap * sizeof *nv);
        if (!nv) {
            l->oom = true;
            return;
        }
        l->v = nv;
        l->cap = cap;
    }
    Victim *v = &l->v[l->len++];
    v->mtime = e->mtime;
    v->size = e->size;
    const char *base = strrchr(e->path, '/');
    snprintf(v->name, sizeof v->name, "%s", base ? base + 1 : e->path);
}

static int older_first(const void *a, const void *b)
{
    const Victim *x = a, *y = b;
    if (x->mtime != y->mtime) return x->mtime < y->mtime ? -1 : 1;
    return strcmp(x->name, y->name);
}

static long evict(RtCache *c, uint64_t bound)
{
    VictimList l = {0};
    rt_cache_foreach(c, collect, &l);
    long removed = 0;
    char path[4096];
    if (l.total > bound && !l.oom) {
        qsort(l.v, l.len, sizeof *l.v, older_first);
        for (size_t i = 0; i < l.len && l.total > bound; i++) {
            snprintf(path, sizeof path, "%s/%s", c->dir, l.v[i].name);
            if (unlink(path) != 0) continue;
            l.total -= l.v[i].size;
            removed++;
        }
    }
    tl_free(l.v);
    return removed;
}

static void evict_to_bound(RtCache *c)
{
    evict(c, c->max_bytes);
}

/* A temp file's writer is gone when its pid (the name's third field) no longer runs,
 * or the file is older than a day (the pid may have been reused). */
static bool stale_tmp(const char *name, const struct stat *st)
{
    const char *p = strchr(name, '.');
    p = p ? strchr(p + 1, '.') : NULL;
    long pid = p ? strtol(p + 1, NULL, 10) : 0;
    if (time(NULL) - st->st_mtime > STALE_TMP_SECONDS) return true;
    return pid <= 0 || (kill((pid_t)pid, 0) != 0 && errno == ESRCH);
}

static void remove_stale_tmp(RtCache *c)
{
    char dir[4096], path[8192];
    snprintf(dir, sizeof dir, "%s/tmp", c->dir);
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *de; (de = readdir(d));) {
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (de->d_name[0] != '.' && lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
            stale_tmp(de->d_name, &st))
            unlink(path);
    }
    closedir(d);
}

/* Lock files nobody holds: unlinked while we hold them, so a waiter that gets the old
 * inode notices (lock_path) and takes the new one. */
static void remove_idle_locks(RtCache *c)
{
    char dir[4096], path[8192];
    snprintf(dir, sizeof dir, "%s/locks", c->dir);
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *de; (de = readdir(d));) {
        if (de->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) continue;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) unlink(path);
        close(fd);
    }
    closedir(d);
}

long rt_cache_prune(RtCache *c, uint64_t bound)
{
    remove_stale_tmp(c);
    remove_idle_locks(c);
    return evict(c, bound);
}

long rt_cache_clear(RtCache *c)
{
    return rt_cache_prune(c, 0);
}

bool rt_cache_read_file(const char *path, RtBlob *out, char *why, size_t n)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    RtEntryKind kind;
    RtKey key;
    out->data = NULL;
    out->len = 0;
    if (!parse_entry_name(base, &kind, &key)) return snprintf(why, n, "not an entry name"), false;
    int fd = open(path, ENTRY_OPEN_FLAGS);
    if (fd < 0) return snprintf(why, n, "%s", strerror(errno)), false;
    struct stat st;
    uint8_t *img = NULL;
    bool ok = fstat(fd, &st) == 0;
    if (ok && refuse_file(path, &st, why, n)) ok = false;
    if (ok && !(img = read_image(fd, &st))) ok = (snprintf(why, n, "unreadable"), false);
    if (ok) ok = check_image(img, (size_t)st.st_size, kind, &key, why, n);
    close(fd);
    if (!ok) tl_free(img);
    else out->data = img, out->len = (size_t)st.st_size;
    return ok;
}

bool rt_cache_check_file(const char *path, char *why, size_t n)
{
    RtBlob img;
    bool ok = rt_cache_read_file(path, &img, why, n);
    rt_blob_free(&img);
    return ok;
}

bool rt_cache_check_image(const void *img, size_t size, RtEntryKind *kind, RtKey *key, char *why, size_t n)
{
    const uint8_t *p = img;
    if (size < HEADER_BYTES) return snprintf(why, n, "truncated header"), false;
    if (size > MAX_ENTRY_BYTES) return snprintf(why, n, "%zu bytes, more than an entry can be", size), false;
    uint32_t k = (uint32_t)p[12] | (uint32_t)p[13] << 8 | (uint32_t)p[14] << 16 | (uint32_t)p[15] << 24;
    if (k < RT_ENTRY_PTX || k > RT_ENTRY_TUNE) return snprintf(why, n, "unknown kind %u", k), false;
    *kind = (RtEntryKind)k;
    memcpy(key->b, p + 16, sizeof key->b);
    return check_image(p, size, *kind, key, why, n);
}
