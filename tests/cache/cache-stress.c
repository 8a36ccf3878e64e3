/* cache-stress: one of many processes hammering one cache directory (run.sh).
 *
 *   cache-stress DIR NKEYS ITERS BUILDLOG
 *
 * Gets ITERS random keys out of NKEYS with rt_cache_get_or_build. A build appends the
 * key's name to BUILDLOG (one line, O_APPEND, so concurrent builders don't mix) and
 * takes a while, to widen the window in which others miss the same key; its payload
 * is a function of the key, so every hit is checked byte for byte. Exits 1 on a wrong
 * payload, 2 on an error. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rt_internal.h"

#define PAYLOAD 65536

static const char *build_log;

static void payload_of(int key, unsigned char *p)
{
    for (int i = 0; i < PAYLOAD; i++) p[i] = (unsigned char)(i * 7 + key * 13);
}

static TrtStatus build(void *ud, RtBlob *out)
{
    int key = *(int *)ud;
    char line[32];
    int n = snprintf(line, sizeof line, "k%d\n", key);
    int fd = open(build_log, O_WRONLY | O_APPEND | O_CREAT, 0600);
    if (fd < 0 || write(fd, line, (size_t)n) != n) return TRT_ERROR_CACHE_IO;
    close(fd);
    nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
    if (!(out->data = malloc(PAYLOAD))) return TRT_ERROR_OUT_OF_MEMORY;
    payload_of(key, out->data);
    out->len = PAYLOAD;
    return TRT_SUCCESS;
}

static int one(RtCache *c, int key)
{
    static unsigned char want[PAYLOAD];
    char name[32];
    snprintf(name, sizeof name, "k%d", key);
    RtKey k = rt_hash_buf(name, strlen(name));
    RtBlob b = {0};
    if (rt_cache_get_or_build(c, RT_ENTRY_CUBIN, &k, build, &key, &b)) return 2;
    payload_of(key, want);
    int rc = b.len == PAYLOAD && !memcmp(b.data, want, PAYLOAD) ? 0 : 1;
    rt_blob_free(&b);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fputs("usage: cache-stress DIR NKEYS ITERS BUILDLOG\n", stderr);
        return 2;
    }
    int nkeys = atoi(argv[2]), iters = atoi(argv[3]);
    build_log = argv[4];
    RtCache *c = NULL;
    if (rt_cache_open(argv[1], 0, &c)) {
        fprintf(stderr, "cache-stress: %s\n", trt_last_error());
        return 2;
    }
    srand((unsigned)getpid());
    int rc = 0;
    for (int i = 0; i < iters && !rc; i++) rc = one(c, rand() % nkeys);
    rt_cache_close(c);
    return rc;
}
