/* A mock CUDA driver: the cu* entry points libtileRT uses, without a GPU.
 *
 * Modules live in memory: a PTX image is parsed for its .entry names and .param
 * widths; cuLink* "links" PTX into a fake cubin ("MOCKCUBIN\n" + the PTX), so tests can
 * tell a cubin load (a warm cache) from a PTX load (a JIT). Launches run nothing: they
 * record the function, grid, block and every parameter's value (read at the width the
 * PTX declares, as the real driver does). Device memory is host memory.
 *
 * Fault injection, read at each call so a test can change it between calls:
 *   MOCKCUDA_INIT_ERROR=N     cuInit returns N
 *   MOCKCUDA_DEVICE_COUNT=N   number of devices (default 1)
 *   MOCKCUDA_LOAD_ERROR=N     cuModuleLoadDataEx returns N, with a JIT log
 *   MOCKCUDA_LAUNCH_ERROR=N   cuLaunchKernel returns N
 *   MOCKCUDA_MISSING=cuX      cuGetProcAddress gives a NULL pointer for cuX
 *   MOCKCUDA_CC=XY            compute capability (default 90)
 *   MOCKCUDA_SYNC_ERROR=N     cuCtxSynchronize and cuStreamSynchronize return N; a
 *                             sticky N (a kernel fault: 700, 702, 710, 714-719) then
 *                             stays, as on a GPU: every later launch, load, allocation,
 *                             copy and synchronization returns it until mockcuda_reset
 *   MOCKCUDA_BOUNDS_REPORT=w1,w2,...  a launch "hits" an out-of-bounds access: it writes
 *                             1, w1, w2, ... (i64 words) to the buffer that the last
 *                             parameter points at, as a checked kernel (passes/bounds.c)
 *                             writes its report
 * A PTX text containing MOCK_SYNTAX_ERROR fails to load or link with error 218 and a
 * ptxas-like log. */
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mockcuda.h"

#define CUBIN_MAGIC "MOCKCUBIN\n"
enum { OK = 0, E_INVALID_VALUE = 1, E_NO_DEVICE = 100, E_INVALID_DEVICE = 101,
       E_INVALID_IMAGE = 200, E_INVALID_PTX = 218, E_NOT_FOUND = 500 };

typedef struct Module Module;

typedef struct Func {
    char name[64];
    int nparams;
    int bytes[MOCK_MAX_PARAMS];
    const Module *module;
} Func;

struct Module {
    Func funcs[16];
    int nfuncs;
    bool occupancy_request;   /* the image asks for .minnctapersm */
};

typedef struct Link {
    char *cubin;
    size_t len;
} Link;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static MockCounts counts;
static MockLaunch last_launch;
static int primary_ctx;   /* the address is the one context there is */
static int sticky;        /* a kernel fault's error, returned by later calls (0: none) */

static bool is_sticky(int r)
{
    return r == 700 || r == 702 || r == 710 || (r >= 714 && r <= 719);
}

static int sticky_error(void)
{
    pthread_mutex_lock(&mu);
    int r = sticky;
    pthread_mutex_unlock(&mu);
    return r;
}

static int env_int(const char *name, int def)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : def;
}

static void count(int *c)
{
    pthread_mutex_lock(&mu);
    (*c)++;
    pthread_mutex_unlock(&mu);
}

/* ---- devices and contexts ---------------------------------------------------------- */
static int m_cuInit(unsigned flags)
{
    count(&counts.init);
    return env_int("MOCKCUDA_INIT_ERROR", 0);
}

static int m_cuDriverGetVersion(int *v)
{
    *v = 13000;
    return OK;
}

static int m_cuDeviceGetCount(int *n)
{
    *n = env_int("MOCKCUDA_DEVICE_COUNT", 1);
    return OK;
}

static int m_cuDeviceGet(int *d, int ordinal)
{
    if (ordinal < 0 || ordinal >= env_int("MOCKCUDA_DEVICE_COUNT", 1)) return E_INVALID_DEVICE;
    *d = ordinal;
    return OK;
}

static int m_cuDeviceGetAttribute(int *v, int attr, int dev)
{
    int cc = env_int("MOCKCUDA_CC", 90);
    if (attr == 75) *v = cc / 10;
    else if (attr == 76) *v = cc % 10;
    else return E_INVALID_VALUE;
    return OK;
}

static int m_cuDeviceGetName(char *name, int len, int dev)
{
    snprintf(name, (size_t)len, "Mock GPU %d", dev);
    return OK;
}

static int m_cuDevicePrimaryCtxRetain(void **c, int dev)
{
    count(&counts.retains);
    *c = &primary_ctx;
    return OK;
}

static int m_cuDevicePrimaryCtxRelease(int dev)
{
    count(&counts.releases);
    return OK;
}

static int m_cuCtxSetCurrent(void *c)
{
    count(&counts.set_current);
    return c == &primary_ctx ? OK : E_INVALID_VALUE;
}

static int m_cuCtxSynchronize(void)
{
    int r = sticky_error();
    if (r) return r;
    if ((r = env_int("MOCKCUDA_SYNC_ERROR", 0)) && is_sticky(r)) {
        pthread_mutex_lock(&mu);
        sticky = r;
        pthread_mutex_unlock(&mu);
    }
    return r;
}

static int m_cuStreamSynchronize(void *s)
{
    return m_cuCtxSynchronize();
}

/* ---- modules ------------------------------------------------------------------------ */
/* The width of a PTX parameter declaration: ".u64 x" -> 8, ".f32 x" -> 4, ".u8 x" -> 1,
 * and ".align 2 .b8 x[2]" (how LLVM declares f16 and bf16 parameters) -> 2. */
static int param_bytes(const char *decl)
{
    if (!strncmp(decl, ".align", 6)) decl += 6 + strspn(decl + 6, " \t0123456789");
    int bits = atoi(decl + strcspn(decl, "0123456789"));
    int bytes = bits >= 8 ? bits / 8 : 1;
    const char *bracket = memchr(decl, '[', strcspn(decl, ",)\n"));
    return bracket ? bytes * atoi(bracket + 1) : bytes;
}

/* Reads ".param .TYPE name" entries up to the closing parenthesis. */
static const char *parse_params(const char *p, Func *f)
{
    const char *end = strchr(p, ')');
    while (end && (p = strstr(p, ".param")) && p < end && f->nparams < MOCK_MAX_PARAMS) {
        p += 6;
        while (*p == ' ' || *p == '\t') p++;
        f->bytes[f->nparams++] = param_bytes(p);
    }
    return end;
}

static bool parse_ptx(const char *ptx, Module *m)
{
    for (const char *p = ptx; (p = strstr(p, ".entry")) && m->nfuncs < 16;) {
        Func *f = &m->funcs[m->nfuncs++];
        memset(f, 0, sizeof *f);
        p += 6;
        while (*p == ' ' || *p == '\t') p++;
        size_t n = strcspn(p, " \t(\n");
        snprintf(f->name, sizeof f->name, "%.*s", (int)n, p);
        if (!(p = parse_params(p + n, f))) return false;
    }
    return m->nfuncs > 0;
}

static void put_log(unsigned n, const int *opts, void **vals, const char *msg)
{
    char *buf = NULL;
    size_t size = 0;
    for (unsigned i = 0; i < n; i++) {
        if (opts[i] == 5) buf = vals[i];
        if (opts[i] == 6) size = (size_t)(uintptr_t)vals[i];
    }
    if (buf && size) snprintf(buf, size, "%s", msg);
}

static int m_cuModuleLoadDataEx(Module **out, const void *image, unsigned n, int *opts,
                                void **vals)
{
    if (sticky_error()) return sticky_error();
    const char *text = image;
    bool cubin = !strncmp(text, CUBIN_MAGIC, strlen(CUBIN_MAGIC));
    int err = env_int("MOCKCUDA_LOAD_ERROR", 0);
    if (!err && strstr(text, "MOCK_SYNTAX_ERROR")) err = E_INVALID_PTX;
    if (err) {
        put_log(n, opts, vals, "ptxas fatal   : mock syntax error in line 1");
        return err;
    }
    Module *m = calloc(1, sizeof *m);
    if (!m) return 2;
    if (!parse_ptx(cubin ? text + strlen(CUBIN_MAGIC) : text, m)) {
        free(m);
        return E_INVALID_IMAGE;
    }
    count(cubin ? &counts.cubin_loads : &counts.ptx_loads);
    m->occupancy_request = strstr(text, ".minnctapersm") != NULL;
    for (int i = 0; i < m->nfuncs; i++) m->funcs[i].module = m;
    *out = m;
    return OK;
}

static int m_cuModuleUnload(Module *m)
{
    count(&counts.unloads);
    free(m);
    return OK;
}

static int m_cuModuleGetFunction(Func **f, Module *m, const char *name)
{
    for (int i = 0; i < m->nfuncs; i++)
        if (!strcmp(m->funcs[i].name, name)) return *f = &m->funcs[i], OK;
    return E_NOT_FOUND;
}

/* Local memory (attribute 3): MOCKCUDA_SPILL_BYTES when the module asks for
 * .minnctapersm, else 0 - an assembler that spills only to meet the occupancy request. */
static int m_cuFuncGetAttribute(int *v, int attr, Func *f)
{
    if (attr != 3) return E_INVALID_VALUE;
    *v = f->module && f->module->occupancy_request ? env_int("MOCKCUDA_SPILL_BYTES", 0) : 0;
    return OK;
}

static int m_cuFuncSetAttribute(Func *f, int attr, int value)
{
    return attr == 8 && value <= 232448 ? OK : E_INVALID_VALUE;
}

/* ---- linking ------------------------------------------------------------------------ */
static int m_cuLinkCreate(unsigned n, int *opts, void **vals, Link **st)
{
    *st = calloc(1, sizeof **st);
    return *st ? OK : 2;
}

static int m_cuLinkAddData(Link *st, int type, void *data, size_t size, const char *name,
                           unsigned n, int *opts, void **vals)
{
    if (type != 1 || strstr(data, "MOCK_SYNTAX_ERROR")) return E_INVALID_PTX;
    size_t hl = strlen(CUBIN_MAGIC);
    if (!(st->cubin = malloc(hl + size))) return 2;
    memcpy(st->cubin, CUBIN_MAGIC, hl);
    memcpy(st->cubin + hl, data, size);
    st->len = hl + size;
    return OK;
}

static int m_cuLinkComplete(Link *st, void **cubin, size_t *size)
{
    if (!st->cubin) return E_INVALID_VALUE;
    count(&counts.links);
    *cubin = st->cubin;
    *size = st->len;
    return OK;
}

static int m_cuLinkDestroy(Link *st)
{
    free(st->cubin);
    free(st);
    return OK;
}

/* ---- launches and memory ------------------------------------------------------------ */
static void record(const Func *f, const unsigned g[3], const unsigned b[3], unsigned shmem,
                   void *stream, void **params)
{
    MockLaunch *l = &last_launch;
    memset(l, 0, sizeof *l);
    snprintf(l->func, sizeof l->func, "%s", f->name);
    memcpy(l->grid, g, sizeof l->grid);
    memcpy(l->block, b, sizeof l->block);
    l->shmem = shmem;
    l->stream = stream;
    l->nparams = f->nparams;
    for (int i = 0; i < f->nparams; i++) {
        l->param_bytes[i] = f->bytes[i];
        memcpy(&l->params[i], params[i], (size_t)f->bytes[i]);
    }
}

static int m_cuLaunchKernel(Func *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                            unsigned by, unsigned bz, unsigned shmem, void *stream,
                            void **params, void **extra)
{
    int err = env_int("MOCKCUDA_LAUNCH_ERROR", 0);
    if (!err) err = sticky_error();
    if (err) return err;
    if (!f || bx * by * bz > 1024 || !bx || !gx || !gy || !gz) return E_INVALID_VALUE;
    if (f->nparams && !params) return E_INVALID_VALUE;
    unsigned g[3] = {gx, gy, gz}, b[3] = {bx, by, bz};
    pthread_mutex_lock(&mu);
    counts.launches++;
    record(f, g, b, shmem, stream, params);
    pthread_mutex_unlock(&mu);
    const char *rep = getenv("MOCKCUDA_BOUNDS_REPORT");
    if (rep && *rep && f->nparams && f->bytes[f->nparams - 1] == 8) {
        int64_t *w;
        memcpy(&w, params[f->nparams - 1], sizeof w);
        w[0] = 1;
        for (int i = 1; i < 16 && *rep; i++) {
            char *end;
            w[i] = strtoll(rep, &end, 10);
            rep = *end == ',' ? end + 1 : end;
            if (end == rep && *rep) break;
        }
    }
    return OK;
}

static int m_cuMemAlloc(uint64_t *p, size_t n)
{
    if (sticky_error()) return sticky_error();
    void *m = aligned_alloc(256, (n + 255) / 256 * 256);
    *p = (uint64_t)(uintptr_t)m;
    return m ? OK : 2;
}

static int m_cuMemFree(uint64_t p)
{
    free((void *)(uintptr_t)p);
    return OK;
}

static int m_cuMemcpyHtoD(uint64_t dst, const void *src, size_t n)
{
    if (sticky_error()) return sticky_error();
    memcpy((void *)(uintptr_t)dst, src, n);
    return OK;
}

static int m_cuMemcpyDtoH(void *dst, uint64_t src, size_t n)
{
    if (sticky_error()) return sticky_error();
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return OK;
}

static int m_cuGetErrorName(int r, const char **s)
{
    switch (r) {
    case OK: *s = "CUDA_SUCCESS"; return OK;
    case E_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; return OK;
    case E_NO_DEVICE: *s = "CUDA_ERROR_NO_DEVICE"; return OK;
    case E_INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; return OK;
    case E_INVALID_IMAGE: *s = "CUDA_ERROR_INVALID_IMAGE"; return OK;
    case E_INVALID_PTX: *s = "CUDA_ERROR_INVALID_PTX"; return OK;
    case E_NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; return OK;
    case 700: *s = "CUDA_ERROR_ILLEGAL_ADDRESS"; return OK;
    case 702: *s = "CUDA_ERROR_LAUNCH_TIMEOUT"; return OK;
    case 710: *s = "CUDA_ERROR_ASSERT"; return OK;
    case 714: *s = "CUDA_ERROR_HARDWARE_STACK_ERROR"; return OK;
    case 715: *s = "CUDA_ERROR_ILLEGAL_INSTRUCTION"; return OK;
    case 716: *s = "CUDA_ERROR_MISALIGNED_ADDRESS"; return OK;
    case 717: *s = "CUDA_ERROR_INVALID_ADDRESS_SPACE"; return OK;
    case 718: *s = "CUDA_ERROR_INVALID_PC"; return OK;
    case 719: *s = "CUDA_ERROR_LAUNCH_FAILED"; return OK;
    default: *s = NULL; return E_INVALID_VALUE;
    }
}

/* ---- the entry point table ---------------------------------------------------------- */
#define FN(name) {#name, (void *)m_##name}
static const struct { const char *name; void *fn; } table[] = {
    FN(cuInit), FN(cuDriverGetVersion), FN(cuDeviceGetCount), FN(cuDeviceGet),
    FN(cuDeviceGetAttribute), FN(cuDeviceGetName), FN(cuDevicePrimaryCtxRetain),
    FN(cuDevicePrimaryCtxRelease), FN(cuCtxSetCurrent), FN(cuCtxSynchronize),
    FN(cuStreamSynchronize), FN(cuModuleLoadDataEx), FN(cuModuleUnload),
    FN(cuModuleGetFunction), FN(cuFuncSetAttribute), FN(cuFuncGetAttribute), FN(cuLaunchKernel), FN(cuLinkCreate), FN(cuLinkAddData),
    FN(cuLinkComplete), FN(cuLinkDestroy), FN(cuGetErrorName), FN(cuMemAlloc), FN(cuMemFree),
    FN(cuMemcpyHtoD), FN(cuMemcpyDtoH),
};

/* Like the real driver, an unknown symbol gives success and a NULL pointer. */
int cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags,
                        int *status)
{
    const char *missing = getenv("MOCKCUDA_MISSING");
    *pfn = NULL;
    if (missing && !strcmp(missing, symbol)) return OK;
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (!strcmp(table[i].name, symbol)) *pfn = table[i].fn;
    if (status) *status = *pfn ? 0 : 1;
    return OK;
}

void mockcuda_counts(MockCounts *out)
{
    pthread_mutex_lock(&mu);
    *out = counts;
    pthread_mutex_unlock(&mu);
}

void mockcuda_last_launch(MockLaunch *out)
{
    pthread_mutex_lock(&mu);
    *out = last_launch;
    pthread_mutex_unlock(&mu);
}

void mockcuda_reset(void)
{
    pthread_mutex_lock(&mu);
    memset(&counts, 0, sizeof counts);
    memset(&last_launch, 0, sizeof last_launch);
    sticky = 0;
    pthread_mutex_unlock(&mu);
}
