/* Arenas and the allocator hook (see arena.h). */
#include "arena.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double tl_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static long fail_after = -1;

void tl_alloc_fail_after(long n) { fail_after = n; }

static bool should_fail(void)
{
    if (fail_after < 0) return false;
    if (fail_after == 0) return true;
    fail_after--;
    return false;
}

void *tl_malloc(size_t n) { return should_fail() ? NULL : malloc(n ? n : 1); }
void *tl_calloc(size_t count, size_t size) { return should_fail() ? NULL : calloc(count ? count : 1, size ? size : 1); }
void *tl_realloc(void *p, size_t n) { return should_fail() ? NULL : realloc(p, n ? n : 1); }
void tl_free(void *p) { free(p); }

char *tl_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = tl_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

_Noreturn void tl_oom(void)
{
    fputs("tile: out of memory\n", stderr);
    abort();
}

/* Blocks of at least 64 KiB, bump-allocated; a request larger than a block gets a
 * block of its own. */
typedef struct ArenaBlock {
    struct ArenaBlock *next;
    size_t used, size;
    _Alignas(16) unsigned char data[];
} ArenaBlock;

struct Arena {
    ArenaBlock *head;
};

enum { ARENA_BLOCK = 64 * 1024 };

Arena *arena_create(void) { return tl_calloc(1, sizeof(Arena)); }

void arena_destroy(Arena *a)
{
    if (!a) return;
    for (ArenaBlock *b = a->head, *n; b; b = n) {
        n = b->next;
        tl_free(b);
    }
    tl_free(a);
}

void *arena_alloc(Arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    ArenaBlock *b = a->head;
    if (!b || b->size - b->used < n) {
        size_t size = n > ARENA_BLOCK ? n : ARENA_BLOCK;
        ArenaBlock *nb = tl_malloc(sizeof(ArenaBlock) + size);
        if (!nb) tl_oom();
        nb->used = 0;
        nb->size = size;
        if (b && n > ARENA_BLOCK) {      /* keep bump-allocating in the current block */
            nb->next = b->next;
            b->next = nb;
        } else {
            nb->next = b;
            a->head = nb;
        }
        b = nb;
    }
    void *p = b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

char *arena_strndup(Arena *a, const char *s, size_t n)
{
    char *d = arena_alloc(a, n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

char *arena_strdup(Arena *a, const char *s) { return arena_strndup(a, s, strlen(s)); }

char *arena_printf(Arena *a, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *d = arena_alloc(a, (size_t)(n < 0 ? 0 : n) + 1);
    if (n > 0) vsnprintf(d, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return d;
}
