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
 *   MOCKCUDA_ACTIVE_CLUSTERS=N  what cuOccupancyMaxActiveClusters reports (default: the
 *                             SMs over the cluster size, as if an SM held one CTA)
 *   MOCKCUDA_ACTIVE_CLUSTERS_ERROR=N  cuOccupancyMaxActiveClusters returns N
 * Its modules are PTX or its own fake cubins, never a real ELF cubin: so, when loaded,
 * it sets TILE_ASSEMBLER=driver unless set (libtileRT would otherwise assemble with the
 * toolkit's ptxas, rt_ptxas.c). A test of the ptxas path sets TILE_ASSEMBLER=ptxas and
 * a TILE_PTXAS that writes the mock's cubins (tests/mock/fake-ptxas.sh).
 * A PTX text containing MOCK_SYNTAX_ERROR fails to load or link with error 218 and a
 * ptxas-like log. An .entry with .reqnctapercluster X, 1, 1 (a thread-block cluster)
 * launches only with a grid x that is a multiple of X (else 912, as the driver), and
 * cuOccupancyMaxActiveClusters checks its cluster dimension against X.
 *
 * The tuner's view (docs/TUNING.md). A module's config is the "// tile-config: A=1 B=2"
 * line the runtime writes at the top of the PTX of a .tile kernel. The variables below
 * take a PATTERN list: entries separated by ';', each "K=V,K=V:VALUE" (every K=V must
 * be in the module's config) or "*:VALUE" (any module); the first match gives VALUE.
 *   MOCKCUDA_TIMES=PATTERNS   the time of one launch in ms (default 1.0), as the events
 *                             see it: each launch advances a fake clock by it; VALUE
 *                             may be a list "a/b/c", used in turn by successive launches
 *   MOCKCUDA_FAULT_CONFIG=P   a launch of a matching module makes the sticky fault 700
 *   MOCKCUDA_HANG_CONFIG=P    after a launch of a matching module, the next
 *                             synchronization never returns (a kernel that hangs)
 *   MOCKCUDA_WRONG_CONFIG=P   a launch of a matching module "computes" a wrong result:
 *                             it flips the first 4 bytes at every pointer argument
 *                             that lies in an allocation (other launches write nothing)
 *   MOCKCUDA_LINK_ERROR_CONFIG=P  cuLinkAddData fails (218) for a matching PTX
 *   MOCKCUDA_REGS=PATTERNS    CU_FUNC_ATTRIBUTE_NUM_REGS (default 32)
 *   MOCKCUDA_SPILL_CONFIG=P   matching modules spill 64 bytes (LOCAL_SIZE_BYTES) always
 *   MOCKCUDA_SMEM_OPTIN=N     the device's opt-in shared memory per block (232448)
 *   MOCKCUDA_MAX_THREADS=N    the device's threads per block (1024)
 * The VALUE of the last four is ignored (write "1").
 *
 * Emulation (tests/emu): with MOCKCUDA_EMULATE=1, a module whose text is LLVM IR (what
 * libtileCG_emu.so gives the runtime in place of PTX, tests/emu/emucg.c) really runs:
 * at its first launch the IR is made host code (tests/emu/llvm_to_host.py --emu, llc,
 * cc with tests/emu/emu_rt.c, from MOCKCUDA_EMU_DIR) and each launch runs the grid on
 * the host, one pthread per GPU thread, before returning. A launch whose emulation
 * finds an error (printed) makes the sticky fault 719 (710 for a failed assert), as a
 * kernel fault would. MOCKCUDA_EMU_TRACE=1 prints each emulated launch (its build
 * directory, grid, threads, shared memory); MOCKCUDA_EMU_KEEP=1 keeps the build files. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mockcuda.h"

__attribute__((constructor)) static void assemble_with_the_mock(void) { setenv("TILE_ASSEMBLER", "driver", 0); }

#define CUBIN_MAGIC "MOCKCUBIN\n"
enum { OK = 0, E_INVALID_VALUE = 1, E_NO_DEVICE = 100, E_INVALID_DEVICE = 101,
       E_INVALID_IMAGE = 200, E_INVALID_PTX = 218, E_NOT_FOUND = 500, E_INVALID_CLUSTER_SIZE = 912 };

typedef struct Module Module;

typedef struct Func {
    char name[64];
    int nparams;
    int bytes[MOCK_MAX_PARAMS];
    unsigned cluster;         /* its .reqnctapercluster's x; 0: none */
    const Module *module;
} Func;

struct Module {
    Func funcs[16];
    int nfuncs;
    bool occupancy_request;   /* the image asks for .minnctapersm */
    char config[512];         /* its "// tile-config:" line, "" if none */
    unsigned launches;        /* for MOCKCUDA_TIMES lists */
    char *llvm;               /* the image when it is LLVM IR (emulation), else NULL */
    void *host;               /* its host build, once launched with MOCKCUDA_EMULATE=1 */
    char host_dir[64];        /* where the build lies, removed when the module is unloaded */
};

typedef struct Event {
    double t;                 /* the fake clock when recorded, ms */
} Event;

typedef struct Link {
    char *cubin;
    size_t len;
} Link;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static MockCounts counts;
static MockLaunch last_launch;
static MockClusterQuery last_cluster_query;
static int primary_ctx;   /* the address is the one context there is */
static int sticky;        /* a kernel fault's error, returned by later calls (0: none) */
static double fake_clock; /* ms of fake kernel time so far (MOCKCUDA_TIMES) */
static bool hang_next;    /* MOCKCUDA_HANG_CONFIG: the next synchronization hangs */
static struct { uint64_t p; size_t n; } *allocs;   /* live allocations */
static size_t nallocs, cap_allocs;

/* ---- configs (the tuner's fake timings and failures) -------------------------------- */
static void config_of(const char *text, char *out, size_t n)
{
    const char *p = strstr(text, "// tile-config:");
    out[0] = '\0';
    if (!p) return;
    p += strlen("// tile-config:");
    snprintf(out, n, "%.*s", (int)strcspn(p, "\n"), p);
}

/* Whether every "K=V" of the comma-separated list [p, end) is a word of config. */
static bool entry_matches(const char *p, const char *end, const char *config)
{
    if (end - p == 1 && *p == '*') return true;
    while (p < end) {
        size_t n = strcspn(p, ",");
        if (p + n > end) n = (size_t)(end - p);
        bool found = false;
        for (const char *c = config; *c && !found;) {
            c += strspn(c, " ");
            size_t w = strcspn(c, " ");
            found = w == n && !strncmp(c, p, n);
            c += w;
        }
        if (!found) return false;
        p += n + (p + n < end);
    }
    return true;
}

/* The VALUE of the first entry of $var matching config, or NULL. */
static const char *pattern_value(const char *var, const char *config, char *buf, size_t n)
{
    const char *v = getenv(var);
    while (v && *v) {
        size_t len = strcspn(v, ";");
        const char *colon = memchr(v, ':', len);
        if (colon && entry_matches(v, colon, config)) {
            snprintf(buf, n, "%.*s", (int)(v + len - colon - 1), colon + 1);
            return buf;
        }
        v += len + (v[len] == ';');
    }
    return NULL;
}

static bool config_matches(const char *var, const char *config)
{
    char buf[64];
    return pattern_value(var, config, buf, sizeof buf) != NULL;
}

/* The n-th (cyclically) of the '/'-separated times of the module's MOCKCUDA_TIMES. */
static double launch_time(const Module *m, unsigned n)
{
    char buf[256];
    const char *v = pattern_value("MOCKCUDA_TIMES", m->config, buf, sizeof buf);
    if (!v) return 1.0;
    unsigned count = 1;
    for (const char *p = v; *p; p++) count += *p == '/';
    const char *p = v;
    for (unsigned i = n % count; i; i--) p = strchr(p, '/') + 1;
    return atof(p);
}

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

/* The H200's figures for what the tuner's resource model asks. */
static int m_cuDeviceGetAttribute(int *v, int attr, int dev)
{
    int cc = env_int("MOCKCUDA_CC", 90);
    switch (attr) {
    case 75: *v = cc / 10; return OK;
    case 76: *v = cc % 10; return OK;
    case 1: *v = env_int("MOCKCUDA_MAX_THREADS", 1024); return OK;    /* threads per block */
    case 12: *v = 65536; return OK;                                   /* registers per block */
    case 38: *v = env_int("MOCKCUDA_L2_BYTES", 1 << 20); return OK;   /* L2 (small: host memory) */
    case 39: *v = 2048; return OK;                                    /* threads per SM */
    case 81: *v = 233472; return OK;                                  /* shared memory per SM */
    case 82: *v = 65536; return OK;                                   /* registers per SM */
    case 97: *v = env_int("MOCKCUDA_SMEM_OPTIN", 232448); return OK;  /* shared per block, opt-in */
    case 106: *v = 32; return OK;                                     /* blocks per SM */
    case 16: *v = env_int("MOCKCUDA_SMS", 132); return OK;            /* SMs */
    default: return E_INVALID_VALUE;
    }
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
    pthread_mutex_lock(&mu);
    bool hang = hang_next;
    pthread_mutex_unlock(&mu);
    while (hang) pause();   /* a kernel that never ends: the caller must kill us */
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

/* The kernels of an LLVM IR module ("define ptx_kernel void @NAME(TYPE %x, ...)"): each
 * parameter's width as the runtime passes it (a tensor map byval: 128 bytes). */
static bool parse_llvm(const char *ir, Module *m)
{
    for (const char *p = ir; (p = strstr(p, "define ptx_kernel void @")) && m->nfuncs < 16;) {
        Func *f = &m->funcs[m->nfuncs++];
        memset(f, 0, sizeof *f);
        p += strlen("define ptx_kernel void @");
        size_t n = strcspn(p, "(");
        snprintf(f->name, sizeof f->name, "%.*s", (int)n, p);
        p += n + 1;
        while (*p && *p != ')' && f->nparams < MOCK_MAX_PARAMS) {
            int bytes = !strncmp(p, "ptr byval", 9) ? 128 : !strncmp(p, "ptr", 3) ? 8
                      : !strncmp(p, "i64", 3) || !strncmp(p, "double", 6) ? 8
                      : !strncmp(p, "i32", 3) || !strncmp(p, "float", 5) ? 4
                      : !strncmp(p, "i16", 3) || !strncmp(p, "bfloat", 6) || !strncmp(p, "half", 4) ? 2 : 1;
            f->bytes[f->nparams++] = bytes;
            int depth = 0;   /* to the next parameter: the comma outside parentheses */
            for (; *p && (depth || (*p != ',' && *p != ')')); p++) depth += *p == '(' ? 1 : *p == ')' ? -1 : 0;
            if (*p == ',') p += 2;
        }
        /* libtileCG_emu's line for a kernel of clusters */
        char key[96];
        snprintf(key, sizeof key, "; tile-emu-cluster %s ", f->name);
        const char *c = strstr(ir, key);
        if (c) f->cluster = (unsigned)atoi(c + strlen(key));
    }
    return m->nfuncs > 0;
}

static bool parse_ptx(const char *ptx, Module *m)
{
    if (strstr(ptx, "define ptx_kernel")) return parse_llvm(ptx, m);
    for (const char *p = ptx; (p = strstr(p, ".entry")) && m->nfuncs < 16;) {
        Func *f = &m->funcs[m->nfuncs++];
        memset(f, 0, sizeof *f);
        p += 6;
        while (*p == ' ' || *p == '\t') p++;
        size_t n = strcspn(p, " \t(\n");
        snprintf(f->name, sizeof f->name, "%.*s", (int)n, p);
        if (!(p = parse_params(p + n, f))) return false;
        /* the directives between the parameters and the body */
        const char *body = strchr(p, '{'), *c = strstr(p, ".reqnctapercluster");
        if (c && (!body || c < body)) f->cluster = (unsigned)atoi(c + strlen(".reqnctapercluster"));
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
    config_of(text, m->config, sizeof m->config);
    if (strstr(text, "define ptx_kernel") && !(m->llvm = strdup(cubin ? text + strlen(CUBIN_MAGIC) : text))) {
        free(m);
        return 2;
    }
    for (int i = 0; i < m->nfuncs; i++) m->funcs[i].module = m;
    *out = m;
    return OK;
}

static void remove_dir(const char *d);
static void forget_dir(const char *d);

static int m_cuModuleUnload(Module *m)
{
    count(&counts.unloads);
    if (m->host) dlclose(m->host);
    if (m->host_dir[0] && !getenv("MOCKCUDA_EMU_KEEP")) {
        remove_dir(m->host_dir);
        forget_dir(m->host_dir);
    }
    free(m->llvm);
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
    char buf[64];
    const char *config = f->module ? f->module->config : "";
    if (attr == 4) {
        const char *r = pattern_value("MOCKCUDA_REGS", config, buf, sizeof buf);
        *v = r ? atoi(r) : 32;
        return OK;
    }
    if (attr != 3) return E_INVALID_VALUE;
    *v = f->module && f->module->occupancy_request ? env_int("MOCKCUDA_SPILL_BYTES", 0) : 0;
    if (config_matches("MOCKCUDA_SPILL_CONFIG", config)) *v = 64;
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
    char config[512];
    config_of(data, config, sizeof config);
    if (type != 1 || strstr(data, "MOCK_SYNTAX_ERROR") ||
        (config[0] && config_matches("MOCKCUDA_LINK_ERROR_CONFIG", config)))
        return E_INVALID_PTX;
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

/* ---- emulation (tests/emu) ------------------------------------------------------------ */
/* Runs a shell command; false (with its output shown) if it fails. */
static bool sh(const char *cmd)
{
    int r = system(cmd);
    if (r) fprintf(stderr, "mockcuda: emulation: '%s' failed (%d)\n", cmd, r);
    return r == 0;
}

/* The build directories of the modules still loaded, removed at exit. */
static char (*emu_dirs)[64];
static size_t n_emu_dirs;
static void remove_dir(const char *d)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", d);
    sh(cmd);
}
static void remove_dirs(void)
{
    for (size_t i = 0; i < n_emu_dirs; i++)
        if (emu_dirs[i][0]) remove_dir(emu_dirs[i]);
}
static void remember_dir(const char *d)
{
    static bool registered;
    if (!registered) registered = atexit(remove_dirs) == 0;
    char (*more)[64] = realloc(emu_dirs, (n_emu_dirs + 1) * sizeof *emu_dirs);
    if (!more) return;
    emu_dirs = more;
    snprintf(emu_dirs[n_emu_dirs++], 64, "%s", d);
}
static void forget_dir(const char *d)
{
    for (size_t i = 0; i < n_emu_dirs; i++)
        if (!strcmp(emu_dirs[i], d)) emu_dirs[i][0] = 0;
}

/* m's host build: the IR through llvm_to_host.py --emu, llc and cc with emu_rt.c, in a
 * directory of its own; NULL (said on stderr) if a step fails. */
static void *host_build(Module *m)
{
    if (m->host) return m->host;
    const char *dir = getenv("MOCKCUDA_EMU_DIR");
    const char *llc = getenv("MOCKCUDA_LLC");
    char tmp[] = "/tmp/mockcuda-emu-XXXXXX", path[600], cmd[3000];
    if (!dir || !mkdtemp(tmp)) {
        fprintf(stderr, "mockcuda: MOCKCUDA_EMULATE needs MOCKCUDA_EMU_DIR (tests/emu)\n");
        return NULL;
    }
    snprintf(path, sizeof path, "%s/k.ll", tmp);
    FILE *f = fopen(path, "w");
    if (!f) return NULL;
    fputs(m->llvm, f);
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "python3 %s/llvm_to_host.py %s/k.ll %s/h.ll --emu && %s -O1 -mtriple=x86_64-pc-linux-gnu "
             "-relocation-model=pic -filetype=obj %s/h.ll -o %s/h.o && cc -O1 -fPIC -shared %s/h.o %s/emu_rt.c "
             "-o %s/k.so -lpthread -lm",
             dir, tmp, tmp, llc && *llc ? llc : "llc-19", tmp, tmp, tmp, dir, tmp);
    if (sh(cmd)) {
        snprintf(path, sizeof path, "%s/k.so", tmp);
        if (!(m->host = dlopen(path, RTLD_NOW | RTLD_LOCAL))) fprintf(stderr, "mockcuda: %s\n", dlerror());
    }
    /* The shared object stays while the module is loaded (removed at its unload or the
     * process's exit): glibc's dlopen knows a library by its device and inode, and a new
     * build given a freed inode would be taken for the old. */
    snprintf(m->host_dir, sizeof m->host_dir, "%s", tmp);
    if (getenv("MOCKCUDA_EMU_KEEP")) {
        fprintf(stderr, "mockcuda: emulation files in %s\n", tmp);
    } else {
        snprintf(cmd, sizeof cmd, "rm -f %s/k.ll %s/h.ll %s/h.o", tmp, tmp, tmp);
        sh(cmd);
        remember_dir(tmp);
    }
    return m->host;
}

/* Runs f's launch on the host; 0, or the sticky fault it makes. */
static int emulate(const Func *f, const unsigned g[3], unsigned threads, unsigned shmem, void **params)
{
    Module *m = (Module *)f->module;
    unsigned cluster = f->cluster > 1 ? f->cluster : 1, clusters[3] = {g[0] / cluster, g[1], g[2]};
    void *h = host_build(m);
    char sym[96];
    snprintf(sym, sizeof sym, "emu_entry_%s", f->name);
    void (*entry)(void **) = h ? (void (*)(void **))dlsym(h, sym) : NULL;
    typedef int (*Run)(void (*)(void **), const unsigned *, unsigned, unsigned, void **, unsigned);
    Run run = h ? (Run)dlsym(h, "emu_launch") : NULL;
    if (!entry || !run) return 719;
    if (getenv("MOCKCUDA_EMU_TRACE"))
        fprintf(stderr, "mockcuda: emulating %s from %s: grid %u %u %u, %u threads, %u bytes of shared memory\n", f->name,
                m->host_dir, g[0], g[1], g[2], threads, shmem);
    return run(entry, clusters, threads, shmem, params, cluster);
}

/* ---- launches and memory ------------------------------------------------------------ */
#define MOCK_LOG 256
static MockLaunch launch_log[MOCK_LOG];   /* the first MOCK_LOG launches since reset */
static int nlog;

static void record(const Func *f, const unsigned g[3], const unsigned b[3], unsigned shmem,
                   void *stream, void **params)
{
    MockLaunch *l = &last_launch;
    memset(l, 0, sizeof *l);
    if (nlog < MOCK_LOG) l = &launch_log[nlog];
    nlog++;
    memset(l, 0, sizeof *l);
    snprintf(l->func, sizeof l->func, "%s", f->name);
    memcpy(l->grid, g, sizeof l->grid);
    l->cluster = f->cluster;
    memcpy(l->block, b, sizeof l->block);
    l->shmem = shmem;
    l->stream = stream;
    l->nparams = f->nparams;
    for (int i = 0; i < f->nparams; i++) {
        l->param_bytes[i] = f->bytes[i];
        if (f->bytes[i] == 128) {
            if (l->ntma < MOCK_MAX_TMA) memcpy(&l->tma[l->ntma++], params[i], sizeof l->tma[0]);
        } else if (f->bytes[i] <= 8) {
            memcpy(&l->params[i], params[i], (size_t)f->bytes[i]);
        }
    }
    if (l != &last_launch) last_launch = *l;
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
    if (f->cluster > 1 && gx % f->cluster) return E_INVALID_CLUSTER_SIZE;
    unsigned g[3] = {gx, gy, gz}, b[3] = {bx, by, bz};
    Module *m = (Module *)f->module;
    const char *config = m ? m->config : "";
    pthread_mutex_lock(&mu);
    counts.launches++;
    record(f, g, b, shmem, stream, params);
    fake_clock += m ? launch_time(m, m->launches++) : 1.0;
    if (config[0] && config_matches("MOCKCUDA_FAULT_CONFIG", config)) sticky = 700;
    if (config[0] && config_matches("MOCKCUDA_HANG_CONFIG", config)) hang_next = true;
    if (config[0] && config_matches("MOCKCUDA_WRONG_CONFIG", config))
        for (int i = 0; i < f->nparams; i++) {
            uint64_t p = 0;
            if (f->bytes[i] != 8) continue;
            memcpy(&p, params[i], 8);
            for (size_t a = 0; a < nallocs; a++)
                if (p >= allocs[a].p && p + 4 <= allocs[a].p + allocs[a].n)
                    for (int k = 0; k < 4; k++) ((unsigned char *)(uintptr_t)p)[k] ^= 0x5a;
        }
    pthread_mutex_unlock(&mu);
    if (m && m->llvm && getenv("MOCKCUDA_EMULATE")) {
        int fault = emulate(f, g, bx * by * bz, shmem, params);
        if (fault) {
            pthread_mutex_lock(&mu);
            sticky = fault;
            pthread_mutex_unlock(&mu);
        }
    }
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

/* ---- occupancy --------------------------------------------------------------------- */
typedef struct {   /* CUlaunchAttribute */
    int id;
    char pad[4];
    union { char bytes[64]; uint64_t align; struct { unsigned x, y, z; } cluster_dim; } value;
} LaunchAttribute;
typedef struct {   /* CUlaunchConfig */
    unsigned gx, gy, gz, bx, by, bz, shmem;
    void *stream;
    LaunchAttribute *attrs;
    unsigned nattrs;
} LaunchConfig;

/* The checks the driver makes of the query (a cluster dimension given, the grid's x a
 * multiple of it, the function's .reqnctapercluster matching it, a block that launches),
 * then MOCKCUDA_ACTIVE_CLUSTERS. The query is recorded (mockcuda_last_cluster_query). */
static int m_cuOccupancyMaxActiveClusters(int *n, Func *f, const LaunchConfig *c)
{
    if (!n || !f || !c || (c->nattrs && !c->attrs)) return E_INVALID_VALUE;
    unsigned x = f->cluster, y = 1, z = 1;
    for (unsigned i = 0; i < c->nattrs; i++)
        if (c->attrs[i].id == 4) {   /* CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION */
            const LaunchAttribute *a = &c->attrs[i];
            if (f->cluster && a->value.cluster_dim.x != f->cluster) return E_INVALID_CLUSTER_SIZE;
            x = a->value.cluster_dim.x, y = a->value.cluster_dim.y, z = a->value.cluster_dim.z;
        }
    if (!x || x > 8 || y != 1 || z != 1 || !c->gx || c->gx % x || c->gy != 1 || c->gz != 1)
        return E_INVALID_CLUSTER_SIZE;
    if (!c->bx || c->bx * c->by * c->bz > 1024 || c->shmem > 232448) return E_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    counts.cluster_queries++;
    last_cluster_query = (MockClusterQuery){x, c->gx, c->bx, c->shmem};
    pthread_mutex_unlock(&mu);
    int err = env_int("MOCKCUDA_ACTIVE_CLUSTERS_ERROR", 0);
    if (err) return err;
    *n = env_int("MOCKCUDA_ACTIVE_CLUSTERS", env_int("MOCKCUDA_SMS", 132) / (int)x);
    return OK;
}

/* ---- graphs ------------------------------------------------------------------------ */
/* A graph is a list of kernel nodes (each with its parameter values copied, as the real
 * driver does); an instantiated graph is a copy of it. cuGraphLaunch runs the nodes in
 * order through cuLaunchKernel, so each is recorded as a launch. MOCKCUDA_MISSING=NAME
 * hides one entry point (a driver without graphs). */
typedef struct {
    Func *f;
    unsigned g[3], b[3], shmem;
    unsigned char vals[MOCK_MAX_PARAMS][128];   /* each parameter's bytes */
} Node;
#define MOCK_GRAPH_NODES 1024
typedef struct {
    Node *nodes[MOCK_GRAPH_NODES];
    int n;
} Graph;
typedef struct {   /* CUDA_KERNEL_NODE_PARAMS_v2 */
    Func *f;
    unsigned g[3], b[3], shmem;
    void **params, **extra;
    void *kern, *ctx;
} NodeParams;

static int m_cuGraphCreate(Graph **g, unsigned flags)
{
    if (flags) return E_INVALID_VALUE;
    *g = calloc(1, sizeof **g);
    return *g ? OK : 2;
}

static int set_node(Node *n, const NodeParams *p)
{
    if (!p->f || p->extra || p->kern || (p->f->nparams && !p->params)) return E_INVALID_VALUE;
    n->f = p->f;
    memcpy(n->g, p->g, sizeof n->g);
    memcpy(n->b, p->b, sizeof n->b);
    n->shmem = p->shmem;
    memset(n->vals, 0, sizeof n->vals);
    for (int i = 0; i < p->f->nparams; i++)
        memcpy(n->vals[i], p->params[i], (size_t)(p->f->bytes[i] <= 128 ? p->f->bytes[i] : 128));
    return OK;
}

static int m_cuGraphAddKernelNode(Node **out, Graph *g, Node *const *deps, size_t ndeps, const NodeParams *p)
{
    if (!g || g->n == MOCK_GRAPH_NODES || (ndeps && !deps)) return E_INVALID_VALUE;
    for (size_t i = 0; i < ndeps; i++) {   /* a dependency is a node of g */
        bool found = false;
        for (int j = 0; j < g->n; j++) found |= g->nodes[j] == deps[i];
        if (!found) return E_INVALID_VALUE;
    }
    Node *n = calloc(1, sizeof *n);
    if (!n) return 2;
    int r = set_node(n, p);
    if (r) {
        free(n);
        return r;
    }
    g->nodes[g->n++] = n;
    *out = n;
    return OK;
}

typedef struct {
    Graph *from;   /* its nodes are the handles SetParams is given */
    Node nodes[MOCK_GRAPH_NODES];
    int n;
} Exec;

static int m_cuGraphInstantiateWithFlags(Exec **e, Graph *g, unsigned long long flags)
{
    if (!g || flags) return E_INVALID_VALUE;
    *e = calloc(1, sizeof **e);
    if (!*e) return 2;
    (*e)->from = g;
    (*e)->n = g->n;
    for (int i = 0; i < g->n; i++) (*e)->nodes[i] = *g->nodes[i];
    return OK;
}

static int m_cuGraphExecKernelNodeSetParams(Exec *e, Node *node, const NodeParams *p)
{
    if (!e) return E_INVALID_VALUE;
    for (int i = 0; i < e->n; i++)
        if (e->from->nodes[i] == node) {
            if (p->f != e->nodes[i].f) return E_INVALID_VALUE;   /* as the driver: same function */
            return set_node(&e->nodes[i], p);
        }
    return E_INVALID_VALUE;
}

static int m_cuGraphLaunch(Exec *e, void *stream)
{
    if (!e) return E_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    counts.graph_launches++;
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < e->n; i++) {
        Node *n = &e->nodes[i];
        void *params[MOCK_MAX_PARAMS];
        for (int j = 0; j < n->f->nparams; j++) params[j] = n->vals[j];
        int r = m_cuLaunchKernel(n->f, n->g[0], n->g[1], n->g[2], n->b[0], n->b[1], n->b[2], n->shmem, stream,
                                 params, NULL);
        if (r) return r;
    }
    return OK;
}

static int m_cuGraphExecDestroy(Exec *e)
{
    free(e);
    return OK;
}

static int m_cuGraphDestroy(Graph *g)
{
    if (!g) return E_INVALID_VALUE;
    for (int i = 0; i < g->n; i++) free(g->nodes[i]);
    free(g);
    return OK;
}

/* ---- events ------------------------------------------------------------------------- */
static int m_cuEventCreate(Event **e, unsigned flags)
{
    *e = calloc(1, sizeof **e);
    return *e ? OK : 2;
}

static int m_cuEventRecord(Event *e, void *stream)
{
    int r = sticky_error();
    if (r) return r;
    pthread_mutex_lock(&mu);
    e->t = fake_clock;
    pthread_mutex_unlock(&mu);
    return OK;
}

static int m_cuEventSynchronize(Event *e)
{
    return m_cuCtxSynchronize();
}

static int m_cuEventElapsedTime(float *ms, Event *a, Event *b)
{
    int r = sticky_error();
    if (r) return r;
    *ms = (float)(b->t - a->t);
    return OK;
}

static int m_cuEventDestroy(Event *e)
{
    free(e);
    return OK;
}

static int m_cuMemAlloc(uint64_t *p, size_t n)
{
    if (sticky_error()) return sticky_error();
    void *m = aligned_alloc(256, (n + 255) / 256 * 256);
    *p = (uint64_t)(uintptr_t)m;
    if (!m) return 2;
    pthread_mutex_lock(&mu);
    if (nallocs == cap_allocs) {
        size_t c = cap_allocs ? 2 * cap_allocs : 64;
        void *na = realloc(allocs, c * sizeof *allocs);
        if (na) allocs = na, cap_allocs = c;
    }
    if (nallocs < cap_allocs) allocs[nallocs].p = *p, allocs[nallocs++].n = n;
    pthread_mutex_unlock(&mu);
    return OK;
}

static int m_cuMemFree(uint64_t p)
{
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < nallocs; i++)
        if (allocs[i].p == p) {
            allocs[i] = allocs[--nallocs];
            break;
        }
    pthread_mutex_unlock(&mu);
    free((void *)(uintptr_t)p);
    return OK;
}

static int m_cuMemGetAddressRange(uint64_t *base, size_t *size, uint64_t p)
{
    int r = E_NOT_FOUND;
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < nallocs && r; i++)
        if (p >= allocs[i].p && p < allocs[i].p + allocs[i].n) {
            if (base) *base = allocs[i].p;
            if (size) *size = allocs[i].n;
            r = OK;
        }
    pthread_mutex_unlock(&mu);
    return r;
}

static int m_cuMemsetD8(uint64_t p, unsigned char v, size_t n)
{
    if (sticky_error()) return sticky_error();
    memset((void *)(uintptr_t)p, v, n);
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
    case E_INVALID_CLUSTER_SIZE: *s = "CUDA_ERROR_INVALID_CLUSTER_SIZE"; return OK;
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

/* ---- tensor maps ------------------------------------------------------------------ */
static int m_cuTensorMapEncodeTiled(void *map, int dtype, unsigned rank, void *address, const uint64_t *dims,
                                    const uint64_t *strides, const unsigned *box, const unsigned *elem_strides,
                                    int interleave, int swizzle, int l2, int oob)
{
    static const int bytes[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};
    if (getenv("MOCKCUDA_TMA_ERROR")) return E_INVALID_VALUE;
    if (!map || ((uintptr_t)map % 64) || rank < 1 || rank > 3 || dtype < 0 || dtype > 12 || (uintptr_t)address % 16 ||
        swizzle < 0 || swizzle > 3)
        return E_INVALID_VALUE;
    unsigned sw = swizzle ? 16u << swizzle : 0;
    for (unsigned i = 0; i < rank; i++) {
        if (!dims[i] || dims[i] > (UINT64_C(1) << 32) || !box[i] || box[i] > 256 || elem_strides[i] != 1)
            return E_INVALID_VALUE;
        if (i && (strides[i - 1] % 16 || strides[i - 1] >= (UINT64_C(1) << 40))) return E_INVALID_VALUE;
    }
    if (sw && box[0] * (unsigned)bytes[dtype] > sw) return E_INVALID_VALUE;
    MockTensorMap m;
    memset(&m, 0, sizeof m);
    memcpy(m.magic, "mocktma", 8);
    m.address = (uint64_t)(uintptr_t)address;
    m.dtype = (uint32_t)dtype;
    m.rank = rank;
    m.interleave = (uint32_t)interleave;
    m.swizzle = (uint32_t)swizzle;
    m.l2_promotion = (uint32_t)l2;
    m.oob_fill = (uint32_t)oob;
    for (unsigned i = 0; i < rank; i++) {
        m.dims[i] = dims[i];
        m.box[i] = box[i];
        m.elem_strides[i] = elem_strides[i];
        if (i) m.strides[i - 1] = strides[i - 1];
    }
    memset(map, 0, 128);
    memcpy(map, &m, sizeof m);
    return OK;
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
    FN(cuMemcpyHtoD), FN(cuMemcpyDtoH), FN(cuMemsetD8), FN(cuMemGetAddressRange),
    FN(cuEventCreate), FN(cuEventRecord), FN(cuEventSynchronize), FN(cuEventElapsedTime),
    FN(cuEventDestroy), FN(cuGraphCreate), FN(cuGraphAddKernelNode), FN(cuGraphInstantiateWithFlags),
    FN(cuGraphExecKernelNodeSetParams), FN(cuGraphLaunch), FN(cuGraphExecDestroy), FN(cuGraphDestroy),
    FN(cuTensorMapEncodeTiled), FN(cuOccupancyMaxActiveClusters),
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

void mockcuda_last_cluster_query(MockClusterQuery *out)
{
    pthread_mutex_lock(&mu);
    *out = last_cluster_query;
    pthread_mutex_unlock(&mu);
}

int mockcuda_launch_log(MockLaunch *out, int max)
{
    pthread_mutex_lock(&mu);
    int n = nlog;
    for (int i = 0; i < max && i < n && i < MOCK_LOG; i++) out[i] = launch_log[i];
    pthread_mutex_unlock(&mu);
    return n;
}

void mockcuda_reset(void)
{
    pthread_mutex_lock(&mu);
    nlog = 0;
    memset(&counts, 0, sizeof counts);
    memset(&last_launch, 0, sizeof last_launch);
    memset(&last_cluster_query, 0, sizeof last_cluster_query);
    sticky = 0;
    hang_next = false;
    fake_clock = 0;
    pthread_mutex_unlock(&mu);
}
