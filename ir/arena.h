/* Arenas and the one allocator hook.
 *
 * A compilation owns an arena: AST nodes, IR types, ops and values live in it and die
 * together when the arena is destroyed. Every allocation of the project goes through
 * tl_malloc/tl_realloc/tl_free, so the test build can fail allocation number N
 * (tl_alloc_fail_after) and check that nothing crashes or leaks. */
#ifndef TILE_IR_ARENA_H
#define TILE_IR_ARENA_H

#include <stddef.h>

void *tl_malloc(size_t n);             /* NULL on failure (never aborts) */
void *tl_calloc(size_t count, size_t size);
void *tl_realloc(void *p, size_t n);
void tl_free(void *p);
char *tl_strdup(const char *s);
/* A monotonic clock in milliseconds (for the compile-time reports). */
double tl_now_ms(void);
/* Testing: make the allocation after the next `n` ones fail (n < 0: never fail). */
void tl_alloc_fail_after(long n);

typedef struct Arena Arena;
Arena *arena_create(void);             /* NULL on out-of-memory */
void arena_destroy(Arena *a);          /* frees every block the arena handed out */
/* Zeroed, 16-byte aligned memory that lives as long as the arena. Aborts with a
 * message on out-of-memory: compilation state cannot be half-built. */
void *arena_alloc(Arena *a, size_t n);
char *arena_strdup(Arena *a, const char *s);
char *arena_strndup(Arena *a, const char *s, size_t n);
char *arena_printf(Arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A growable array of pointers or small structs, kept in plain malloc memory. */
#define VEC(T) struct { T *data; size_t len, cap; }
#define vec_push(v, x)                                                            \
    do {                                                                          \
        if ((v)->len == (v)->cap) {                                               \
            size_t nc_ = (v)->cap ? (v)->cap * 2 : 8;                             \
            void *nd_ = tl_realloc((v)->data, nc_ * sizeof(*(v)->data));          \
            if (!nd_) tl_oom();                                                   \
            (v)->data = nd_;                                                      \
            (v)->cap = nc_;                                                       \
        }                                                                         \
        (v)->data[(v)->len++] = (x);                                              \
    } while (0)
#define vec_free(v) (tl_free((v)->data), (v)->data = NULL, (v)->len = (v)->cap = 0)

_Noreturn void tl_oom(void);

#endif
