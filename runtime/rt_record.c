/* TILE_RECORD=FILE (docs/TUNING.md "Recording what a job runs"): each distinct
 * (kernel file, kernel, caller's consts, key values, specialization) that a process
 * launches through the tuner's choice is appended to FILE as one JSON line, a manifest
 * entry that `tilec tune` reads. One write(2) per line on an O_APPEND descriptor, so
 * lines of concurrent processes never interleave; a process writes an entry once. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt_record.h"

enum { RECORD_MAX_SEEN = 4096, RECORD_LINE = 16384 };

static pthread_mutex_t record_lock = PTHREAD_MUTEX_INITIALIZER;
static RtKey record_seen[RECORD_MAX_SEEN];
static uint32_t record_nseen;
static bool record_warned;

typedef struct Line {
    char buf[RECORD_LINE];
    size_t n;
} Line;

static void put(Line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(Line *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (l->n < sizeof l->buf) l->n += (size_t)vsnprintf(l->buf + l->n, sizeof l->buf - l->n, fmt, ap);
    va_end(ap);
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void put_string(Line *l, const char *s)
{
    put(l, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') put(l, "\\%c", c);
        else if (c < 0x20) put(l, "\\u%04x", c);
        else put(l, "%c", c);
    }
    put(l, "\"");
}

static void put_scalar(Line *l, const TrtArg *a)
{
    switch (a->kind) {
    case TRT_ARG_F32: put(l, "\"%.9g\"", (double)a->v.f32); return;
    case TRT_ARG_F64: put(l, "\"%.17g\"", a->v.f64); return;
    case TRT_ARG_F16: case TRT_ARG_BF16: put(l, "\"0\""); return;   /* bits: not an expression */
    case TRT_ARG_BOOL: case TRT_ARG_I8: put(l, "\"%d\"", a->v.i8); return;
    case TRT_ARG_I16: put(l, "\"%d\"", a->v.i16); return;
    case TRT_ARG_I32: put(l, "\"%" PRId32 "\"", a->v.i32); return;
    case TRT_ARG_U8: put(l, "\"%u\"", a->v.u8); return;
    case TRT_ARG_U16: put(l, "\"%u\"", a->v.u16); return;
    case TRT_ARG_U32: put(l, "\"%" PRIu32 "\"", a->v.u32); return;
    default: put(l, "\"%" PRId64 "\"", a->v.i64); return;
    }
}

/* A pointer argument's elements: from it to the end of its allocation. */
static bool put_buffer(Line *l, const TrtKernel *k, const RtParam *p, const TrtArg *a)
{
    CUdeviceptr base = 0;
    size_t size = 0;
    if (!a->v.ptr || k->module->ctx->drv->cuMemGetAddressRange(&base, &size, a->v.ptr)) return false;
    int eb = ir_elem_bytes(p->pointee);
    uint64_t numel = (base + size - a->v.ptr) / (uint64_t)(eb > 0 ? eb : 1);
    put(l, "{\"dtype\": \"%s\", \"numel\": \"%" PRIu64 "\"}", ir_elem_name(p->pointee), numel);
    return true;
}

static bool is_key(const RtRecordKey *key, uint32_t param)
{
    for (uint32_t i = 0; i < key->n; i++)
        if (key->param[i] == param) return true;
    return false;
}

static bool format_entry(Line *l, const TrtKernel *k, const TrtArg *args, const RtRecordKey *key, uint64_t mask)
{
    char real[PATH_MAX];
    const char *file = k->module->src ? k->module->src->name : "";
    put(l, "{\"file\": ");
    put_string(l, realpath(file, real) ? real : file);
    put(l, ", \"kernel\": ");
    put_string(l, k->name);
    put(l, ", \"consts\": {");
    for (uint32_t i = 0; i < k->nconsts; i++) {
        put(l, "%s", i ? ", " : "");
        put_string(l, k->consts[i].name);
        put(l, ": %" PRId64, k->consts[i].value);
    }
    put(l, "}, \"keys\": [{");
    for (uint32_t i = 0; i < key->n; i++) {
        put(l, "%s", i ? ", " : "");
        put_string(l, key->names[i]);
        put(l, ": %" PRId64, key->values[i]);
    }
    put(l, "}], \"args\": {");
    for (uint32_t i = 0; i < k->nparams; i++) {
        const RtParam *p = &k->params[i];
        put(l, "%s", i ? ", " : "");
        put_string(l, p->name);
        put(l, ": ");
        if (p->elem == IR_PTR && !put_buffer(l, k, p, &args[i])) return false;
        else if (p->elem != IR_PTR && is_key(key, i)) put_string(l, p->name);
        else if (p->elem != IR_PTR) put_scalar(l, &args[i]);
    }
    put(l, "}, \"spec\": \"0x%" PRIx64 "\"}\n", mask);
    return l->n < sizeof l->buf;
}

/* Whether this process wrote the line before (and remember it if not). */
static bool seen_before(const Line *l)
{
    RtKey h = rt_hash_buf(l->buf, l->n);
    for (uint32_t i = 0; i < record_nseen; i++)
        if (!memcmp(&record_seen[i], &h, sizeof h)) return true;
    if (record_nseen < RECORD_MAX_SEEN) record_seen[record_nseen++] = h;
    return false;
}

static void warn_once(const char *path, const char *what)
{
    if (!record_warned) fprintf(stderr, "tile: TILE_RECORD=%s: %s; not recording\n", path, what);
    record_warned = true;
}

void rt_record_launch(const TrtKernel *k, const TrtArg *args, const RtRecordKey *key, uint64_t mask)
{
    const char *path = getenv("TILE_RECORD");
    if (!path || !*path) return;
    Line *l = tl_malloc(sizeof *l);
    if (!l) return;
    l->n = 0;
    pthread_mutex_lock(&record_lock);
    if (!format_entry(l, k, args, key, mask)) warn_once(path, "an argument is not in device memory, or the entry is too long");
    else if (!seen_before(l)) {
        int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, l->buf, l->n) != (ssize_t)l->n) warn_once(path, strerror(errno));
        if (fd >= 0) close(fd);
    }
    pthread_mutex_unlock(&record_lock);
    tl_free(l);
}
