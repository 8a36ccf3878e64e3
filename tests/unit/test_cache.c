/* The persistent cache (runtime/rt_cache.c): every promise of DESIGN.md section 4.
 *
 * Entries round-trip; corrupted, truncated and misnamed entries are detected, removed
 * and rebuilt, never returned; directories and files writable by group or others are
 * refused; the default location follows TILE_CACHE_DIR, XDG_CACHE_HOME and HOME and is
 * created 0700; eviction removes the least recently used entries first; processes
 * that miss the same key at once build it exactly once (forked children, counted in a
 * file); and a process killed with SIGKILL in the middle of a write, or while holding
 * a key's build lock, loses only that entry and blocks nobody. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "rt_internal.h"

static struct {
    char dir[256];
    RtCache *c;
} cur;

static int setup(void **state)
{
    (void)state;
    snprintf(cur.dir, sizeof cur.dir, "/tmp/tile-cache-test-XXXXXX");
    if (!mkdtemp(cur.dir)) return -1;
    cur.c = NULL;
    return rt_cache_open(cur.dir, 1 << 30, &cur.c) == TRT_SUCCESS ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    rt_cache_close(cur.c);
    rt_cache_test_write_hook = NULL;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "chmod -R u+w %s; rm -rf %s", cur.dir, cur.dir);
    return system(cmd);
}

static RtKey key_of(const char *s)
{
    return rt_hash_buf(s, strlen(s));
}

static void entry_file(const RtKey *k, RtEntryKind kind, char *buf, size_t n)
{
    char hex[33];
    rt_key_hex(k, hex);
    snprintf(buf, n, "%s/%s.%s", cur.dir, hex, rt_entry_kind_name(kind));
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(i * 31 + seed);
}

static void put_filled(const char *name, size_t n, unsigned seed)
{
    uint8_t *p = malloc(n);
    fill(p, n, seed);
    RtKey k = key_of(name);
    assert_int_equal(rt_cache_put(cur.c, RT_ENTRY_PTX, &k, p, n), TRT_SUCCESS);
    free(p);
}

static RtGet get_named(const char *name)
{
    RtKey k = key_of(name);
    RtBlob b = {0};
    RtGet r = rt_cache_get(cur.c, RT_ENTRY_PTX, &k, &b);
    rt_blob_free(&b);
    return r;
}

/* ---- the format ----------------------------------------------------------------------- */
static void test_put_get_round_trip(void **state)
{
    (void)state;
    uint8_t payload[3000], again[3000];
    fill(payload, sizeof payload, 7);
    RtKey k = key_of("round trip");
    assert_int_equal(rt_cache_put(cur.c, RT_ENTRY_CUBIN, &k, payload, sizeof payload), TRT_SUCCESS);
    RtBlob b = {0};
    assert_int_equal(rt_cache_get(cur.c, RT_ENTRY_CUBIN, &k, &b), RT_GET_HIT);
    assert_int_equal(b.len, sizeof payload);
    fill(again, sizeof again, 7);
    assert_memory_equal(b.data, again, sizeof again);
    rt_blob_free(&b);
    /* The same key of another kind is another entry. */
    assert_int_equal(rt_cache_get(cur.c, RT_ENTRY_PTX, &k, &b), RT_GET_MISS);
    char path[512];
    struct stat st;
    entry_file(&k, RT_ENTRY_CUBIN, path, sizeof path);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_true((size_t)st.st_size > sizeof payload);   /* a header precedes the payload */
    char why[128];
    assert_true(rt_cache_check_file(path, why, sizeof why));
}

static void test_empty_payload(void **state)
{
    (void)state;
    RtKey k = key_of("empty");
    assert_int_equal(rt_cache_put(cur.c, RT_ENTRY_TUNE, &k, "", 0), TRT_SUCCESS);
    RtBlob b = {0};
    assert_int_equal(rt_cache_get(cur.c, RT_ENTRY_TUNE, &k, &b), RT_GET_HIT);
    assert_int_equal(b.len, 0);
    rt_blob_free(&b);
}

static void test_key_hex_round_trip(void **state)
{
    (void)state;
    RtKey k = key_of("hex"), back;
    char hex[33];
    rt_key_hex(&k, hex);
    assert_int_equal(strlen(hex), 32);
    assert_true(rt_key_from_hex(hex, &back));
    assert_memory_equal(k.b, back.b, 16);
    assert_false(rt_key_from_hex("zz", &back));
    RtKey other = key_of("hex2");
    assert_memory_not_equal(k.b, other.b, 16);
}

/* Applies `damage` to the entry of "victim", then checks that get refuses it, removes
 * it, and that get_or_build rebuilds it. */
typedef void (*Damage)(const char *path);

static int builds;

static TrtStatus build_abc(void *ud, RtBlob *out)
{
    (void)ud;
    builds++;
    out->data = malloc(4);
    memcpy(out->data, "abc", 4);
    out->len = 4;
    return TRT_SUCCESS;
}

static void check_rebuilt_after(Damage damage)
{
    put_filled("victim", 5000, 3);
    RtKey k = key_of("victim");
    char path[512];
    entry_file(&k, RT_ENTRY_PTX, path, sizeof path);
    damage(path);
    char why[128];
    assert_false(rt_cache_check_file(path, why, sizeof why));
    assert_int_equal(get_named("victim"), RT_GET_BAD);
    assert_int_not_equal(access(path, F_OK), 0);   /* removed */
    builds = 0;
    RtBlob b = {0};
    assert_int_equal(rt_cache_get_or_build(cur.c, RT_ENTRY_PTX, &k, build_abc, NULL, &b), TRT_SUCCESS);
    assert_int_equal(builds, 1);
    assert_string_equal(b.data, "abc");
    rt_blob_free(&b);
    assert_int_equal(get_named("victim"), RT_GET_HIT);
}

static void flip_payload_byte(const char *path)
{
    int fd = open(path, O_RDWR);
    uint8_t c;
    assert_int_equal(pread(fd, &c, 1, 1000), 1);
    c ^= 0x40;
    assert_int_equal(pwrite(fd, &c, 1, 1000), 1);
    close(fd);
}

static void truncate_payload(const char *path)
{
    assert_int_equal(truncate(path, 2000), 0);
}

static void truncate_header(const char *path)
{
    assert_int_equal(truncate(path, 20), 0);
}

static void flip_magic(const char *path)
{
    int fd = open(path, O_RDWR);
    assert_int_equal(pwrite(fd, "X", 1, 0), 1);
    close(fd);
}

static void test_corrupted_entry_rebuilt(void **state)
{
    (void)state;
    check_rebuilt_after(flip_payload_byte);
}

static void test_truncated_entry_rebuilt(void **state)
{
    (void)state;
    check_rebuilt_after(truncate_payload);
}

static void test_truncated_header_rebuilt(void **state)
{
    (void)state;
    check_rebuilt_after(truncate_header);
}

static void test_bad_magic_rebuilt(void **state)
{
    (void)state;
    check_rebuilt_after(flip_magic);
}

static void test_entry_under_wrong_name_refused(void **state)
{
    (void)state;
    put_filled("original", 100, 1);
    RtKey a = key_of("original"), b = key_of("impostor");
    char pa[512], pb[512];
    entry_file(&a, RT_ENTRY_PTX, pa, sizeof pa);
    entry_file(&b, RT_ENTRY_PTX, pb, sizeof pb);
    assert_int_equal(link(pa, pb), 0);
    assert_int_equal(get_named("impostor"), RT_GET_BAD);
    assert_int_equal(get_named("original"), RT_GET_HIT);
}

/* ---- permissions ---------------------------------------------------------------------- */
static void expect_refused(mode_t mode)
{
    char dir[300];
    snprintf(dir, sizeof dir, "%s/shared", cur.dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    assert_int_equal(chmod(dir, mode), 0);
    RtCache *c = NULL;
    assert_int_equal(rt_cache_open(dir, 0, &c), TRT_ERROR_CACHE_UNSAFE);
    assert_null(c);
    assert_non_null(strstr(trt_last_error(), "writable by group or others"));
    assert_non_null(strstr(trt_last_error(), dir));
}

static void test_group_writable_dir_refused(void **state)
{
    (void)state;
    expect_refused(0770);
}

static void test_world_writable_dir_refused(void **state)
{
    (void)state;
    expect_refused(0707);
}

static void test_writable_subdir_refused(void **state)
{
    (void)state;
    char locks[300];
    snprintf(locks, sizeof locks, "%s/locks", cur.dir);
    assert_int_equal(chmod(locks, 0777), 0);
    RtCache *c = NULL;
    assert_int_equal(rt_cache_open(cur.dir, 0, &c), TRT_ERROR_CACHE_UNSAFE);
    assert_non_null(strstr(trt_last_error(), "locks"));
}

static void test_group_writable_entry_refused(void **state)
{
    (void)state;
    put_filled("shared entry", 100, 1);
    RtKey k = key_of("shared entry");
    char path[512];
    entry_file(&k, RT_ENTRY_PTX, path, sizeof path);
    assert_int_equal(chmod(path, 0620), 0);
    RtBlob b = {0};
    assert_int_equal(rt_cache_get(cur.c, RT_ENTRY_PTX, &k, &b), RT_GET_BAD);
    assert_null(b.data);
    char why[256];
    assert_false(rt_cache_check_file(path, why, sizeof why));
    assert_non_null(strstr(why, "writable by group or others"));
}

static void test_default_location(void **state)
{
    (void)state;
    char buf[512], want[512];
    setenv("TILE_CACHE_DIR", "/x/tile-cache", 1);
    assert_true(rt_cache_default_dir(buf, sizeof buf));
    assert_string_equal(buf, "/x/tile-cache");
    unsetenv("TILE_CACHE_DIR");
    snprintf(want, sizeof want, "%s/xdg", cur.dir);
    setenv("XDG_CACHE_HOME", want, 1);
    assert_true(rt_cache_default_dir(buf, sizeof buf));
    strcat(want, "/tile");
    assert_string_equal(buf, want);
    unsetenv("XDG_CACHE_HOME");
    char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    setenv("HOME", cur.dir, 1);
    RtCache *c = NULL;
    assert_int_equal(rt_cache_open(NULL, 0, &c), TRT_SUCCESS);
    snprintf(want, sizeof want, "%s/.cache/tile", cur.dir);
    assert_string_equal(rt_cache_dir(c), want);
    rt_cache_close(c);
    if (home) setenv("HOME", home, 1);
    free(home);
    struct stat st;
    assert_int_equal(stat(want, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    snprintf(want, sizeof want, "%s/.cache", cur.dir);
    assert_int_equal(stat(want, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);   /* parents it creates are private too */
}

/* ---- LRU -------------------------------------------------------------------------------- */
static void set_mtime(const char *name, time_t t)
{
    RtKey k = key_of(name);
    char path[512];
    entry_file(&k, RT_ENTRY_PTX, path, sizeof path);
    struct timespec ts[2] = {{t, 0}, {t, 0}};
    assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

static void test_lru_eviction_order(void **state)
{
    (void)state;
    const char *names[] = {"a", "b", "c", "d"};
    time_t t0 = time(NULL) - 1000;
    for (int i = 0; i < 4; i++) {
        put_filled(names[i], 1000, (unsigned)i);
        set_mtime(names[i], t0 + 10 * i);   /* a oldest ... d newest */
    }
    assert_int_equal(get_named("a"), RT_GET_HIT);   /* a hit makes a the newest */
    uint64_t entry = 1000 + 56;
    assert_int_equal(rt_cache_prune(cur.c, 2 * entry), 2);
    assert_int_equal(get_named("b"), RT_GET_MISS);
    assert_int_equal(get_named("c"), RT_GET_MISS);
    assert_int_equal(get_named("a"), RT_GET_HIT);
    assert_int_equal(get_named("d"), RT_GET_HIT);
}

static void test_eviction_on_insert(void **state)
{
    (void)state;
    RtCache *small = NULL;
    assert_int_equal(rt_cache_open(cur.dir, 2500, &small), TRT_SUCCESS);
    RtCache *saved = cur.c;
    cur.c = small;
    time_t t0 = time(NULL) - 1000;
    put_filled("first", 1000, 1);
    set_mtime("first", t0);
    put_filled("second", 1000, 2);
    set_mtime("second", t0 + 10);
    put_filled("third", 1000, 3);   /* 3 x 1056 bytes > 2500: the oldest goes */
    assert_int_equal(get_named("first"), RT_GET_MISS);
    assert_int_equal(get_named("second"), RT_GET_HIT);
    assert_int_equal(get_named("third"), RT_GET_HIT);
    cur.c = saved;
    rt_cache_close(small);
}

static void count_entry(const RtCacheEntryInfo *e, void *ud)
{
    (void)e;
    ++*(int *)ud;
}

static void test_clear(void **state)
{
    (void)state;
    put_filled("x", 10, 1);
    put_filled("y", 10, 2);
    int n = 0;
    assert_int_equal(rt_cache_foreach(cur.c, count_entry, &n), 2);
    assert_int_equal(n, 2);
    assert_int_equal(rt_cache_clear(cur.c), 2);
    assert_int_equal(rt_cache_foreach(cur.c, count_entry, &n), 0);
}

/* ---- processes ------------------------------------------------------------------------- */
static char counter_path[300];

/* A slow build that leaves one byte in the counter file per call. */
static TrtStatus build_counted(void *ud, RtBlob *out)
{
    int fd = open(counter_path, O_WRONLY | O_APPEND | O_CREAT, 0600);
    if (fd < 0 || write(fd, "x", 1) != 1) return TRT_ERROR_CACHE_IO;
    close(fd);
    nanosleep(&(struct timespec){0, 200 * 1000 * 1000}, NULL);
    out->len = 100000;
    out->data = malloc(out->len);
    fill(out->data, out->len, 9);
    return TRT_SUCCESS;
}

static int child_get_or_build(int start_fd)
{
    char c;
    if (read(start_fd, &c, 1) != 0) return 10;   /* waits for the parent to close it */
    RtCache *c2 = NULL;
    if (rt_cache_open(cur.dir, 0, &c2)) return 11;
    RtKey k = key_of("contended");
    RtBlob b = {0};
    if (rt_cache_get_or_build(c2, RT_ENTRY_CUBIN, &k, build_counted, NULL, &b)) return 12;
    uint8_t *want = malloc(100000);
    fill(want, 100000, 9);
    int rc = b.len == 100000 && !memcmp(b.data, want, b.len) ? 0 : 13;
    free(want);
    rt_blob_free(&b);
    rt_cache_close(c2);
    return rc;
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static void test_concurrent_miss_builds_once(void **state)
{
    (void)state;
    enum { N = 8 };
    snprintf(counter_path, sizeof counter_path, "%s/counter", cur.dir);
    int start[2];
    assert_int_equal(pipe(start), 0);
    pid_t pids[N];
    for (int i = 0; i < N; i++) {
        if ((pids[i] = fork()) == 0) {
            close(start[1]);
            _exit(child_get_or_build(start[0]));
        }
    }
    close(start[0]);
    close(start[1]);   /* all children start at once */
    for (int i = 0; i < N; i++) {
        int st = 0;
        assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
    }
    assert_int_equal(file_size(counter_path), 1);   /* exactly one process compiled */
}

static int hook_fd = -1;

/* In the child: tell the parent the write is half done, then wait to be killed. */
static void pause_in_write(const char *tmp)
{
    (void)tmp;
    if (write(hook_fd, "w", 1) != 1) _exit(20);
    for (;;) pause();
}

static int tmp_files(void)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "exit $(ls %s/tmp | wc -l)", cur.dir);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_kill_during_write(void **state)
{
    (void)state;
    put_filled("survivor", 5000, 4);
    int sync[2];
    assert_int_equal(pipe(sync), 0);
    pid_t pid = fork();
    if (pid == 0) {
        hook_fd = sync[1];
        rt_cache_test_write_hook = pause_in_write;
        put_filled("interrupted", 1 << 20, 5);
        _exit(21);
    }
    char c;
    assert_int_equal(read(sync[0], &c, 1), 1);   /* the child is in the middle of the write */
    assert_int_equal(get_named("interrupted"), RT_GET_MISS);
    assert_int_equal(kill(pid, SIGKILL), 0);
    int st = 0;
    waitpid(pid, &st, 0);
    assert_true(WIFSIGNALED(st));
    close(sync[0]);
    close(sync[1]);
    assert_int_equal(get_named("interrupted"), RT_GET_MISS);   /* no partial entry visible */
    assert_int_equal(get_named("survivor"), RT_GET_HIT);
    assert_int_equal(tmp_files(), 1);
    rt_cache_prune(cur.c, 1 << 30);   /* the writer is gone: its temp file goes too */
    assert_int_equal(tmp_files(), 0);
    assert_int_equal(get_named("survivor"), RT_GET_HIT);
}

static TrtStatus build_and_hang(void *ud, RtBlob *out)
{
    (void)ud;
    (void)out;
    pause_in_write(NULL);
    return TRT_ERROR_CACHE_IO;
}

static void test_kill_while_holding_lock(void **state)
{
    (void)state;
    int sync[2];
    assert_int_equal(pipe(sync), 0);
    RtKey k = key_of("orphaned");
    pid_t pid = fork();
    if (pid == 0) {
        hook_fd = sync[1];
        RtBlob b = {0};
        rt_cache_get_or_build(cur.c, RT_ENTRY_PTX, &k, build_and_hang, NULL, &b);
        _exit(21);
    }
    char c;
    assert_int_equal(read(sync[0], &c, 1), 1);   /* the child holds the lock */
    assert_int_equal(kill(pid, SIGKILL), 0);
    waitpid(pid, NULL, 0);
    close(sync[0]);
    close(sync[1]);
    builds = 0;
    RtBlob b = {0};
    assert_int_equal(rt_cache_get_or_build(cur.c, RT_ENTRY_PTX, &k, build_abc, NULL, &b), TRT_SUCCESS);
    assert_int_equal(builds, 1);   /* the dead holder's lock was released, not inherited */
    rt_blob_free(&b);
}

static void test_prune_removes_idle_locks(void **state)
{
    (void)state;
    RtKey k = key_of("locked once");
    RtBlob b = {0};
    assert_int_equal(rt_cache_get_or_build(cur.c, RT_ENTRY_PTX, &k, build_abc, NULL, &b), TRT_SUCCESS);
    rt_blob_free(&b);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "test -n \"$(ls %s/locks)\"", cur.dir);
    assert_int_equal(system(cmd), 0);
    rt_cache_prune(cur.c, 1 << 30);
    assert_int_not_equal(system(cmd), 0);
    assert_int_equal(get_named("locked once"), RT_GET_HIT);
}

/* ---- files in the way of an entry ---------------------------------------------------- */
static void entry_path_of(const char *name, char *path, size_t n)
{
    RtKey k = key_of(name);
    entry_file(&k, RT_ENTRY_PTX, path, n);
}

static void assert_builds_and_hits(const char *name)
{
    RtKey k = key_of(name);
    RtBlob b = {0};
    builds = 0;
    assert_int_equal(rt_cache_get_or_build(cur.c, RT_ENTRY_PTX, &k, build_abc, NULL, &b), TRT_SUCCESS);
    assert_int_equal(builds, 1);
    rt_blob_free(&b);
    assert_int_equal(get_named(name), RT_GET_HIT);   /* written: the next run does not rebuild */
}

/* A FIFO named like an entry: opened without blocking, refused by its type, replaced.
 * (It used to hang `tilec run --device gpu` and `tilec cache verify` in open.) */
static void test_fifo_entry_refused(void **state)
{
    (void)state;
    char path[512], why[256];
    entry_path_of("fifo", path, sizeof path);
    assert_int_equal(mkfifo(path, 0600), 0);
    alarm(20);   /* a hang fails the test instead of blocking the suite */
    assert_false(rt_cache_check_file(path, why, sizeof why));
    assert_non_null(strstr(why, "is not a regular file"));
    assert_int_equal(get_named("fifo"), RT_GET_BAD);
    assert_builds_and_hits("fifo");
    alarm(0);
}

/* A 3 GiB sparse file is refused from its size, without reading it. */
static void test_huge_entry_refused_unread(void **state)
{
    (void)state;
    char path[512], why[256];
    entry_path_of("huge", path, sizeof path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 3LL << 30), 0);
    close(fd);
    time_t t0 = time(NULL);
    assert_false(rt_cache_check_file(path, why, sizeof why));
    assert_non_null(strstr(why, "3221225472 bytes, more than an entry can be"));
    assert_int_equal(get_named("huge"), RT_GET_BAD);
    assert_true(time(NULL) - t0 < 5);
    assert_int_not_equal(access(path, F_OK), 0);   /* removed */
    assert_builds_and_hits("huge");
}

/* A directory named like an entry is reported by verify and moved out of the way, so
 * the entry is written (it used to be rebuilt on every run). */
static void test_directory_entry_replaced(void **state)
{
    (void)state;
    char path[512], inner[600], why[256];
    entry_path_of("dir", path, sizeof path);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(inner, sizeof inner, "%s/file", path);
    int fd = open(inner, O_WRONLY | O_CREAT, 0600);
    assert_true(fd >= 0);
    close(fd);
    assert_false(rt_cache_check_file(path, why, sizeof why));
    assert_non_null(strstr(why, "is not a regular file"));
    assert_builds_and_hits("dir");
    assert_true(rt_cache_check_file(path, why, sizeof why));
    /* the same when the directory is in the way of a put */
    RtKey k = key_of("dir2");
    entry_path_of("dir2", path, sizeof path);
    assert_int_equal(mkdir(path, 0700), 0);
    assert_int_equal(rt_cache_put(cur.c, RT_ENTRY_PTX, &k, "xyz", 4), TRT_SUCCESS);
    assert_int_equal(get_named("dir2"), RT_GET_HIT);
}

/* TILE_CACHE_MAX_BYTES: a count of bytes with an optional binary suffix. */
static void test_size_suffixes(void **state)
{
    (void)state;
    static const struct { const char *text; uint64_t bytes; } good[] = {
        {"1000", 1000}, {"5G", 5ull << 30}, {"5g", 5ull << 30}, {"5GB", 5ull << 30},
        {"5GiB", 5ull << 30}, {"5 gib", 5ull << 30}, {"512k", 512ull << 10}, {"64M", 64ull << 20},
        {"2T", 2ull << 40}, {" 7 ", 7}, {"7B", 7}, {"16777215T", 16777215ull << 40},
    };
    for (unsigned i = 0; i < sizeof good / sizeof *good; i++) {
        uint64_t b = 0;
        assert_true(rt_parse_size(good[i].text, &b));
        assert_int_equal(b, good[i].bytes);
    }
    static const char *const bad[] = {"", "junk", "5X", "5GG", "-5G", "0", "0G", "5Gi", "5 G B",
                                      "1.5G", "G", "16777216T", "99999999999999999999"};
    for (unsigned i = 0; i < sizeof bad / sizeof *bad; i++) {
        uint64_t b = 0;
        if (rt_parse_size(bad[i], &b)) fail_msg("'%s' was read as %llu", bad[i], (unsigned long long)b);
    }
}

/* The bound from the environment, and junk reported on stderr with the default used. */
static void test_size_bound_from_env(void **state)
{
    (void)state;
    char log[300];
    snprintf(log, sizeof log, "%s/stderr", cur.dir);
    RtCache *c = NULL;
    setenv("TILE_CACHE_MAX_BYTES", "5G", 1);
    assert_int_equal(rt_cache_open(cur.dir, 0, &c), TRT_SUCCESS);
    assert_int_equal(rt_cache_max_bytes(c), 5ull << 30);
    rt_cache_close(c);
    setenv("TILE_CACHE_MAX_BYTES", "lots", 1);
    fflush(stderr);
    int saved = dup(2), fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    TrtStatus s = rt_cache_open(cur.dir, 0, &c);
    fflush(stderr);
    dup2(saved, 2);
    close(fd);
    close(saved);
    unsetenv("TILE_CACHE_MAX_BYTES");
    assert_int_equal(s, TRT_SUCCESS);
    assert_int_equal(rt_cache_max_bytes(c), 1ull << 30);
    rt_cache_close(c);
    char text[400] = {0};
    FILE *f = fopen(log, "r");
    assert_non_null(f);
    assert_true(fread(text, 1, sizeof text - 1, f) > 0);
    fclose(f);
    assert_non_null(strstr(text, "tile: warning: TILE_CACHE_MAX_BYTES='lots' is not a size"));
}

/* TILE_REMOTE_CACHE's forms (docs/CACHE.md, "The remote tier"), and what is refused. */
static void test_remote_url_forms(void **state)
{
    (void)state;
    static const struct { const char *url, *host; int port, db; const char *user, *pass; } good[] = {
        {"redis://127.0.0.1:6380", "127.0.0.1", 6380, 0, "", ""},
        {"redis://cache.lan", "cache.lan", 6379, 0, "", ""},
        {"redis://h:1/3", "h", 1, 3, "", ""}, {"redis://h/2", "h", 6379, 2, "", ""},
        {"redis://h:7/", "h", 7, 0, "", ""}, {"redis://[::1]:6390/1", "::1", 6390, 1, "", ""},
        {"redis://[fe80::1]", "fe80::1", 6379, 0, "", ""},
        {"redis://:s3cret@h:1", "h", 1, 0, "", "s3cret"},
        {"redis://fleet:pa:ss@[::1]/4", "::1", 6379, 4, "fleet", "pa:ss"},
    };
    for (unsigned i = 0; i < sizeof good / sizeof *good; i++) {
        RtRemoteUrl u;
        if (!rt_remote_parse_url(good[i].url, &u)) fail_msg("'%s' was refused", good[i].url);
        assert_string_equal(u.host, good[i].host);
        assert_int_equal(u.port, good[i].port);
        assert_int_equal(u.db, good[i].db);
        assert_string_equal(u.user, good[i].user);
        assert_string_equal(u.password, good[i].pass);
    }
    static const char *const bad[] = {"", "redis://", "redis://:6379", "http://h:1", "redis:/h",
                                      "redis://h:0", "redis://h:65536", "redis://h:x", "redis://h:1/x",
                                      "redis://user@h:1", "redis://u:@h", "redis://@h", "redis://[::1",
                                      "redis://h:1:2", "redis://h:1/2/3", "redis://:pw@"};
    for (unsigned i = 0; i < sizeof bad / sizeof *bad; i++) {
        RtRemoteUrl u;
        if (rt_remote_parse_url(bad[i], &u)) fail_msg("'%s' was accepted", bad[i]);
    }
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_put_get_round_trip), T(test_empty_payload), T(test_key_hex_round_trip),
        T(test_corrupted_entry_rebuilt), T(test_truncated_entry_rebuilt),
        T(test_truncated_header_rebuilt), T(test_bad_magic_rebuilt),
        T(test_entry_under_wrong_name_refused), T(test_group_writable_dir_refused),
        T(test_world_writable_dir_refused), T(test_writable_subdir_refused),
        T(test_group_writable_entry_refused), T(test_default_location),
        T(test_lru_eviction_order), T(test_eviction_on_insert), T(test_clear),
        T(test_concurrent_miss_builds_once), T(test_kill_during_write),
        T(test_kill_while_holding_lock), T(test_prune_removes_idle_locks),
        T(test_fifo_entry_refused), T(test_huge_entry_refused_unread),
        T(test_directory_entry_replaced), T(test_size_suffixes), T(test_size_bound_from_env),
        T(test_remote_url_forms),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
