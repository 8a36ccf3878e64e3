/* What the runtime's files share: the driver table, the handles' layouts, the cache's
 * internal API and the error helpers.
 *
 * The CUDA types and constants the runtime needs are declared here rather than taken
 * from cuda.h: the library builds without the CUDA toolkit, and cuda.h's macros would
 * rename the entry points we call through our own function pointers. */
#ifndef TILE_RUNTIME_RT_INTERNAL_H
#define TILE_RUNTIME_RT_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codegen/codegen.h"   /* CgTmaDesc: plain types */
#include "ir/ir.h"
#include "tile/tile_rt.h"

#define RT_DEFAULT_ARCH "sm_90a"
#define RT_PTX_VERSION "8.3"

/* ---- the driver ------------------------------------------------------------------- */
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUlinkState_st *CUlinkState;
typedef struct CUevent_st *CUevent;

enum {
    RT_CU_JIT_ERROR_LOG_BUFFER = 5,
    RT_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
    RT_CU_JIT_INPUT_PTX = 1,
    RT_CU_ATTR_CC_MAJOR = 75,
    RT_CU_ATTR_CC_MINOR = 76,
    RT_CU_FUNC_ATTR_MAX_DYNAMIC_SHARED = 8,
    RT_CU_FUNC_ATTR_LOCAL_SIZE_BYTES = 3,
    RT_CU_FUNC_ATTR_NUM_REGS = 4,
    RT_CU_ATTR_MAX_THREADS_PER_BLOCK = 1,
    RT_CU_ATTR_MAX_REGS_PER_BLOCK = 12,
    RT_CU_ATTR_L2_CACHE_SIZE = 38,
    RT_CU_ATTR_MAX_THREADS_PER_SM = 39,
    RT_CU_ATTR_MAX_SHARED_PER_SM = 81,
    RT_CU_ATTR_MAX_REGS_PER_SM = 82,
    RT_CU_ATTR_MAX_SHARED_PER_BLOCK_OPTIN = 97,
    RT_CU_ATTR_MAX_BLOCKS_PER_SM = 106,
    RT_CU_ATTR_MULTIPROCESSOR_COUNT = 16,
    RT_STATIC_SHARED_LIMIT = 48 * 1024,   /* more dynamic shared memory needs an opt-in */
};

/* The entry points, each looked up with the CUDA version of its ABI (cudaTypedefs.h's
 * PFN_cuX_vNNNN). X(name, version, return, parameters). */
#define RT_DRIVER_FNS(X)                                                                      \
    X(cuInit, 2000, (unsigned flags))                                                         \
    X(cuDriverGetVersion, 2020, (int *v))                                                     \
    X(cuDeviceGetCount, 2000, (int *n))                                                       \
    X(cuDeviceGet, 2000, (CUdevice *d, int ordinal))                                          \
    X(cuDeviceGetAttribute, 2000, (int *v, int attr, CUdevice d))                             \
    X(cuDeviceGetName, 2000, (char *name, int len, CUdevice d))                               \
    X(cuDevicePrimaryCtxRetain, 7000, (CUcontext *c, CUdevice d))                             \
    X(cuDevicePrimaryCtxRelease, 11000, (CUdevice d))                                         \
    X(cuCtxSetCurrent, 4000, (CUcontext c))                                                   \
    X(cuCtxSynchronize, 2000, (void))                                                         \
    X(cuStreamSynchronize, 2000, (CUstream s))                                                \
    X(cuModuleLoadDataEx, 2010, (CUmodule *m, const void *image, unsigned n, int *opts,       \
                                 void **vals))                                                \
    X(cuModuleUnload, 2000, (CUmodule m))                                                     \
    X(cuModuleGetFunction, 2000, (CUfunction *f, CUmodule m, const char *name))               \
    X(cuFuncSetAttribute, 9000, (CUfunction f, int attr, int value))                          \
    X(cuFuncGetAttribute, 2020, (int *v, int attr, CUfunction f))                             \
    X(cuLaunchKernel, 4000, (CUfunction f, unsigned gx, unsigned gy, unsigned gz,             \
                             unsigned bx, unsigned by, unsigned bz, unsigned shmem,           \
                             CUstream s, void **params, void **extra))                        \
    X(cuLinkCreate, 6050, (unsigned n, int *opts, void **vals, CUlinkState *st))              \
    X(cuLinkAddData, 6050, (CUlinkState st, int type, void *data, size_t size,                \
                            const char *name, unsigned n, int *opts, void **vals))            \
    X(cuLinkComplete, 5050, (CUlinkState st, void **cubin, size_t *size))                     \
    X(cuLinkDestroy, 5050, (CUlinkState st))                                                  \
    X(cuGetErrorName, 6000, (CUresult r, const char **s))                                     \
    X(cuMemAlloc, 3020, (CUdeviceptr *p, size_t n))                                           \
    X(cuMemFree, 3020, (CUdeviceptr p))                                                       \
    X(cuMemcpyHtoD, 3020, (CUdeviceptr dst, const void *src, size_t n))                       \
    X(cuMemcpyDtoH, 3020, (void *dst, CUdeviceptr src, size_t n))                             \
    X(cuMemsetD8, 3020, (CUdeviceptr p, unsigned char v, size_t n))                           \
    X(cuMemGetAddressRange, 3020, (CUdeviceptr *base, size_t *size, CUdeviceptr p))            \
    X(cuEventCreate, 2000, (CUevent *e, unsigned flags))                                      \
    X(cuEventRecord, 2000, (CUevent e, CUstream s))                                           \
    X(cuEventSynchronize, 2000, (CUevent e))                                                  \
    X(cuEventElapsedTime, 2000, (float *ms, CUevent start, CUevent end))                      \
    X(cuEventDestroy, 4000, (CUevent e))

/* CUDA graphs (trt_graph_*, rt_graph.c): optional. A driver without one of them still
 * loads (has_graphs false) and only the graph API fails, with TRT_ERROR_DRIVER. The
 * kernel-node functions are looked up at 12000, which gives their _v2 ABI
 * (RtKernelNodeParams). */
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct RtKernelNodeParams {   /* CUDA_KERNEL_NODE_PARAMS_v2 */
    CUfunction func;
    unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
    void **params, **extra;
    void *kern;                        /* CUkernel: NULL, func is used */
    CUcontext ctx;                     /* NULL: the current context */
} RtKernelNodeParams;
#define RT_DRIVER_GRAPH_FNS(X)                                                                \
    X(cuGraphCreate, 10000, (CUgraph *g, unsigned flags))                                     \
    X(cuGraphAddKernelNode, 12000, (CUgraphNode *n, CUgraph g, const CUgraphNode *deps,       \
                                    size_t ndeps, const RtKernelNodeParams *p))               \
    X(cuGraphInstantiateWithFlags, 11040, (CUgraphExec *e, CUgraph g, unsigned long long f))  \
    X(cuGraphLaunch, 10000, (CUgraphExec e, CUstream s))                                      \
    X(cuGraphExecKernelNodeSetParams, 12000, (CUgraphExec e, CUgraphNode n,                   \
                                              const RtKernelNodeParams *p))                   \
    X(cuGraphExecDestroy, 10000, (CUgraphExec e))                                             \
    X(cuGraphDestroy, 10000, (CUgraph g))

/* cuLaunchConfig and its attributes (cuda.h's CUlaunchConfig, CUlaunchAttribute), for
 * cuOccupancyMaxActiveClusters: the layout is the ABI, checked below. */
typedef struct RtLaunchAttribute {   /* CUlaunchAttribute */
    int id;                            /* RT_CU_LAUNCH_ATTRIBUTE_* */
    char pad[4];
    union {                            /* CUlaunchAttributeValue: 64 bytes, 8-aligned */
        char bytes[64];
        uint64_t align_;
        struct { unsigned x, y, z; } cluster_dim;
    } value;
} RtLaunchAttribute;
typedef struct RtLaunchConfig {      /* CUlaunchConfig */
    unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
    CUstream stream;
    RtLaunchAttribute *attrs;
    unsigned nattrs;
} RtLaunchConfig;
_Static_assert(sizeof(RtLaunchAttribute) == 72 && offsetof(RtLaunchAttribute, value) == 8,
               "CUlaunchAttribute's layout");
_Static_assert(sizeof(RtLaunchConfig) == 56 && offsetof(RtLaunchConfig, attrs) == 40 &&
               offsetof(RtLaunchConfig, nattrs) == 48, "CUlaunchConfig's layout (LP64)");
enum { RT_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4 };

/* Optional entry points: NULL when the driver lacks one, and the runtime does without.
 * X(name, version, parameters), as RT_DRIVER_FNS. Without cuTensorMapEncodeTiled a TMA
 * variant falls back to cp.async (rt_tma.c); without cuOccupancyMaxActiveClusters a
 * persistent cluster kernel's launch is sized from the device's limits (rt_compile.c). */
#define RT_DRIVER_OPTIONAL_FNS(X)                                                             \
    X(cuTensorMapEncodeTiled, 12000, (void *map, int dtype, unsigned rank, void *address,     \
                                      const uint64_t *dims, const uint64_t *strides,          \
                                      const unsigned *box, const unsigned *elem_strides,      \
                                      int interleave, int swizzle, int l2_promotion,          \
                                      int oob_fill))                                          \
    X(cuOccupancyMaxActiveClusters, 11070, (int *n, CUfunction f, const RtLaunchConfig *config))

typedef struct RtDriver {
#define X(name, ver, params) CUresult (*name) params;
    RT_DRIVER_FNS(X)
    RT_DRIVER_GRAPH_FNS(X)
    RT_DRIVER_OPTIONAL_FNS(X)
#undef X
    bool has_graphs;           /* every RT_DRIVER_GRAPH_FNS entry was found */
    char no_graphs_why[160];   /* else which one is missing */
    int version;               /* cuDriverGetVersion, e.g. 13000 */
} RtDriver;

/* Opens the driver once per process ($TILE_CUDA_LIBRARY, else libcuda.so.1) and calls
 * cuInit. Returns the table, or NULL with the thread's error set (TRT_ERROR_NO_DRIVER). */
const RtDriver *rt_driver(void);
/* Whether the driver's library opens, without initializing it (so a process may fork
 * after asking: tilec tune checks before its workers start); else why, in *why. */
bool rt_driver_loadable(char *why, size_t n);
/* Sets the thread's error to "WHAT failed: CUDA_ERROR_X (code)" and returns
 * TRT_ERROR_DRIVER. */
TrtStatus rt_driver_error(const RtDriver *d, CUresult r, const char *what);

/* Whether r is one of the errors after which a CUDA context is unusable (a kernel
 * faulted: 700, 702, 710, 714-719). */
bool rt_sticky_error(CUresult r);
struct TrtContext;
/* rt_driver_error for a call on ctx. A sticky error records the fault in ctx (naming
 * the kernels launched since the last successful synchronization) and every later
 * failure on ctx gives that explanation. Returns TRT_ERROR_DRIVER. */
TrtStatus rt_ctx_driver_error(struct TrtContext *ctx, CUresult r, const char *what);
/* TRT_SUCCESS, or TRT_ERROR_DRIVER explaining the earlier fault that made ctx unusable
 * (`what` names the call refused). */
TrtStatus rt_ctx_check_fault(struct TrtContext *ctx, const char *what);
/* A successful cuCtxSynchronize: forget the kernels launched before it. */
void rt_ctx_synchronized(struct TrtContext *ctx);
/* Drops the kernels of a module being destroyed from ctx's ring. */
void rt_ctx_forget_module(struct TrtContext *ctx, const struct TrtModule *m);
/* Records k in ctx's ring (trt_launch's hot path: a load, a compare and two stores). */
static inline void rt_ctx_note_launch(struct TrtContext *ctx, TrtKernel *k);

/* ---- the code generator (rt_codegen.c) --------------------------------------------- */
struct CgOptions;
/* The entry points of libtileCG.so (codegen/codegen.h) the runtime calls.
 * X(field, symbol, return type, parameters). */
#define RT_CODEGEN_FNS(X)                                                                     \
    X(emit_ptx, cg_emit_ptx, char *, (const IrModule *, const struct CgOptions *, DiagList *)) \
    X(compiler_id, cg_compiler_id, const char *, (void))

typedef struct RtCodegen {
#define X(field, sym, ret, params) ret (*field) params;
    RT_CODEGEN_FNS(X)
#undef X
} RtCodegen;

/* Loads libtileCG.so once per process ($TILE_CODEGEN_LIBRARY, else beside libtileRT,
 * else the default search path). Returns its table, or NULL with the thread's error
 * set (TRT_ERROR_NO_CODEGEN, naming `kernel` and every place tried). */
const RtCodegen *rt_codegen(const char *kernel);
/* The compiler identity cache keys name: that of the code generator named by
 * $TILE_CODEGEN_LIBRARY (loaded for the question: an explicit choice may be another
 * build), else this runtime's own, tile_compiler_id() (a code generator found by the
 * default search must have the same, or it is refused on loading). */
const char *rt_compiler_identity(void);

/* ---- errors ----------------------------------------------------------------------- */
/* Records the thread's message and returns s. */
TrtStatus rt_fail(TrtStatus s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Records "what:" and the printed diagnostics as the thread's message; returns s. */
TrtStatus rt_fail_diags(TrtStatus s, const char *what, const DiagList *d);

/* ---- hashing ---------------------------------------------------------------------- */
typedef struct RtKey {
    uint8_t b[16];             /* xxh3-128, big-endian (the hex name's byte order) */
} RtKey;

typedef struct RtHasher RtHasher;   /* incremental xxh3-128 */
RtHasher *rt_hasher_create(void);   /* NULL on out-of-memory */
void rt_hasher_destroy(RtHasher *h);
void rt_hash_bytes(RtHasher *h, const void *p, size_t n);
void rt_hash_str(RtHasher *h, const char *s);   /* the string and its terminator */
void rt_hash_u64(RtHasher *h, uint64_t v);
RtKey rt_hasher_key(const RtHasher *h);
RtKey rt_hash_buf(const void *p, size_t n);
void rt_key_hex(const RtKey *k, char out[33]);
bool rt_key_from_hex(const char *s, RtKey *out);

/* ---- the persistent cache (rt_cache.c, docs/CACHE.md) ---------------------------- */
typedef enum RtEntryKind { RT_ENTRY_PTX = 1, RT_ENTRY_CUBIN = 2, RT_ENTRY_TUNE = 3 } RtEntryKind;

typedef struct RtCache RtCache;

typedef struct RtBlob {
    void *data;                /* malloc'd; freed by rt_blob_free */
    size_t len;
} RtBlob;
void rt_blob_free(RtBlob *b);

typedef enum RtGet {
    RT_GET_HIT,                /* *out holds the payload */
    RT_GET_MISS,               /* no entry */
    RT_GET_BAD,                /* an entry failed its checks (removed; counted) */
} RtGet;

/* A byte count as TILE_CACHE_MAX_BYTES takes it: digits, then optionally K, M, G or T
 * (powers of 1024, any case, optionally followed by B or iB), spaces around. False for
 * anything else, 0 or an overflow. */
bool rt_parse_size(const char *text, uint64_t *out);
/* Opens (creating 0700) the cache at dir, or the default location when dir is NULL.
 * max_bytes: the size bound (0: $TILE_CACHE_MAX_BYTES, else 1 GiB). Refuses a
 * directory that is not ours or is writable by group or others. */
TrtStatus rt_cache_open(const char *dir, uint64_t max_bytes, RtCache **out);
/* The same without creating anything: a directory that does not exist is an empty
 * cache (for commands that only look). */
TrtStatus rt_cache_open_readonly(const char *dir, uint64_t max_bytes, RtCache **out);
void rt_cache_close(RtCache *c);
const char *rt_cache_dir(const RtCache *c);
/* The default directory ($TILE_CACHE_DIR, $XDG_CACHE_HOME/tile, ~/.cache/tile) into
 * buf; false if none can be formed. */
bool rt_cache_default_dir(char *buf, size_t n);

RtGet rt_cache_get(RtCache *c, RtEntryKind kind, const RtKey *key, RtBlob *out);
/* Writes an entry atomically (temp file, fsync, rename) and evicts past the bound. */
TrtStatus rt_cache_put(RtCache *c, RtEntryKind kind, const RtKey *key, const void *p, size_t n);

/* Makes the payload of a missing entry. Returns TRT_SUCCESS and fills *out, or a
 * status with the thread's error set. */
typedef TrtStatus (*RtBuildFn)(void *ud, RtBlob *out);
/* Gets the entry, or builds and stores it. When several processes miss the same key,
 * one builds it (holding an flock on the key's lock file, released by the kernel if
 * the holder dies) and the others wait, then read what it stored. */
TrtStatus rt_cache_get_or_build(RtCache *c, RtEntryKind kind, const RtKey *key,
                                RtBuildFn build, void *ud, RtBlob *out);

/* Where an entry came from: the local directory, the remote tier, or a build now. */
typedef enum RtTier { RT_TIER_LOCAL, RT_TIER_REMOTE, RT_TIER_BUILT } RtTier;
/* rt_cache_get_or_build that also says where the entry came from (*from may be NULL).
 * On a local miss the remote tier is asked (under the key's lock) before building; a
 * remote entry is checked as a local file is, stored locally, then used; a built entry
 * is written locally and to the remote tier. */
TrtStatus rt_cache_get_or_build_from(RtCache *c, RtEntryKind kind, const RtKey *key,
                                     RtBuildFn build, void *ud, RtBlob *out, RtTier *from);
/* rt_cache_get, then the remote tier on a local miss (a hit there is stored locally):
 * for lookups that never build (the default mode's tuned winners). */
RtGet rt_cache_fetch(RtCache *c, RtEntryKind kind, const RtKey *key, RtBlob *out, RtTier *from);

/* Evicts least-recently-used entries until the cache holds at most `bound` bytes, and
 * removes stale temporary and lock files. Returns the number of entries removed. */
long rt_cache_prune(RtCache *c, uint64_t bound);
/* Removes every entry. */
long rt_cache_clear(RtCache *c);

typedef struct RtCacheEntryInfo {
    RtEntryKind kind;
    RtKey key;
    uint64_t size;             /* file bytes, header included */
    int64_t mtime;             /* last use, seconds since the epoch */
    const char *path;
} RtCacheEntryInfo;
/* Calls fn for every entry file (in no particular order); returns how many. */
long rt_cache_foreach(RtCache *c, void (*fn)(const RtCacheEntryInfo *e, void *ud), void *ud);
/* Reads and checks one entry file: true if its header and checksum are sound. */
bool rt_cache_check_file(const char *path, char *why, size_t n);
/* Reads one entry file whole (header and payload, into out: rt_blob_free) if its
 * header and checksum are sound; else false with why. */
bool rt_cache_read_file(const char *path, RtBlob *out, char *why, size_t n);
/* Checks an entry image (a file's bytes: header and payload) against itself: its kind
 * and key, read from its header into *kind and *key, its length and checksum. */
bool rt_cache_check_image(const void *img, size_t size, RtEntryKind *kind, RtKey *key, char *why, size_t n);
/* The bytes of an entry's header (docs/CACHE.md), before its payload. */
#define RT_CACHE_HEADER_BYTES 56

/* Packs of entries (rt_cache_pack.c; tilec cache export/import). rt_pack_write writes
 * the entry files at paths (each checked as it is read) into a pack at out, under this
 * runtime's compiler identity. rt_pack_read checks the pack at path and every entry in
 * it, fills r, and only if all are sound stores them in c (NULL: only checks). */
typedef struct RtPackInfo {
    char compiler[1024];       /* the exporting runtime's rt_compiler_identity() */
    uint64_t entries;
    uint64_t count[4];         /* by RtEntryKind */
} RtPackInfo;
TrtStatus rt_pack_write(const char *const *paths, size_t n, const char *out);
TrtStatus rt_pack_read(RtCache *c, const char *path, RtPackInfo *r);
/* Removes a file, or a directory with what it holds; true if path is gone. */
bool rt_cache_remove_path(const char *path);
uint64_t rt_cache_max_bytes(const RtCache *c);

/* Test hook: called by rt_cache_put after half the payload is in the temp file. */
extern void (*rt_cache_test_write_hook)(const char *tmp_path);
const char *rt_entry_kind_name(RtEntryKind k);

/* ---- the remote tier (rt_remote.c, docs/CACHE.md "The remote tier") --------------- */
/* Without $TILE_REMOTE_CACHE these do nothing (and call nothing in hiredis). Any
 * failure of the server prints one warning per process and turns the tier off. */
/* The whole entry image (header and payload, unchecked) of (kind, key) into *image:
 * RT_GET_HIT; RT_GET_MISS when absent or the tier is off; RT_GET_BAD when larger
 * than max bytes (not copied). */
RtGet rt_remote_get(RtEntryKind kind, const RtKey *key, size_t max, RtBlob *image);
/* Stores an entry image (best effort). */
void rt_remote_put(RtEntryKind kind, const RtKey *key, const void *image, size_t n);
/* Reports a remote entry that failed its checks (one line on stderr; counted). */
void rt_remote_refused(RtEntryKind kind, const RtKey *key, const char *why);
typedef struct RtRemoteUrl {
    char host[256];
    int port;                  /* 6379 when left out */
    int db;                    /* SELECT'ed after connecting when > 0 */
    char user[128], password[256];   /* AUTH after connecting when a password is given */
} RtRemoteUrl;
/* Parses redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]; false for anything else. */
bool rt_remote_parse_url(const char *url, RtRemoteUrl *out);
typedef struct RtRemoteStats {
    bool on;                   /* configured, and no failure yet */
    unsigned hits, misses, puts, refused;
} RtRemoteStats;
RtRemoteStats rt_remote_stats(void);

/* ---- handles ---------------------------------------------------------------------- */
#define RT_RECENT_LAUNCHES 8
struct TrtContext {
    const RtDriver *drv;       /* NULL for a CPU context */
    int device;                /* the ordinal, or TRT_DEVICE_CPU */
    CUdevice dev;
    CUcontext cuctx;
    int cc_major, cc_minor;
    TrtMode mode;
    atomic_uint flags;
    RtCache *cache;            /* NULL: memory only */
    char arch[16];             /* the codegen target, "sm_90a" */
    /* The code generator's settings (ir/knobs.def): the environment's at creation, then
     * trt_context_set_knob's until the first module is loaded; their text is in every
     * key. cache_mode: TRT_CACHE_REQUIRE* refuse to compile (TILE_CACHE_MODE). */
    TileKnobs knobs;
    char knobs_text[256];
    atomic_int cache_mode;
    atomic_uint modules_loaded;
    /* Kernels launched since the last successful cuCtxSynchronize, for the message of a
     * fault (rt_ctx_driver_error): a ring written by trt_launch with relaxed stores
     * (best effort under concurrent launches), a repeat of the last kernel not stored.
     * nrecent counts entries since the sync; slots of destroyed modules are NULL. */
    _Atomic(TrtKernel *) recent[RT_RECENT_LAUNCHES];
    atomic_uint nrecent;
    /* A sticky driver error (a kernel fault): the context is unusable for good. fault is
     * its CUresult, stored after fault_msg is complete (under fault_lock). */
    atomic_int fault;
    pthread_mutex_t fault_lock;
    char fault_msg[1024];
    /* The checked mode (TRT_DEBUG_*, TILE_DEBUG): the bits, and the report buffer of
     * checked kernels (IR_BOUNDS_WORDS words, allocated at the first checked launch and
     * zero between launches), used by one launch at a time under check_lock. */
    atomic_uint debug;
    pthread_mutex_t check_lock;
    CUdeviceptr report;
    /* A graph capture in progress (rt_graph.c): capturing is nonzero while one is, so
     * trt_launch's hot path pays one relaxed load; the capture itself is under
     * graph_lock. */
    atomic_uint capturing;
    pthread_mutex_t graph_lock;
    struct RtCapture *capture;
};

/* trt_launch during a capture: if ctx captures `stream`, records the launch of handle
 * (which ran as k, variant `index` of class `mask`, grid g given by the caller or not)
 * into the capture and sets *taken; else leaves *taken false. */
TrtStatus rt_graph_record(struct TrtContext *ctx, CUstream stream, TrtKernel *handle, TrtKernel *k,
                          unsigned index, uint64_t mask, const uint32_t g[3], bool grid_given,
                          const TrtArg *args, uint32_t nargs, bool *taken);
/* Frees a capture left unfinished on ctx (trt_context_destroy). */
void rt_graph_discard(struct TrtContext *ctx);
/* Whether ctx captures `stream` now. */
bool rt_graph_capturing(struct TrtContext *ctx, CUstream stream);

static inline void rt_ctx_note_launch(struct TrtContext *ctx, TrtKernel *k)
{
    unsigned n = atomic_load_explicit(&ctx->nrecent, memory_order_relaxed);
    _Atomic(TrtKernel *) *prev = &ctx->recent[(n - 1) % RT_RECENT_LAUNCHES];
    if (n && atomic_load_explicit(prev, memory_order_relaxed) == k) return;
    atomic_store_explicit(&ctx->recent[n % RT_RECENT_LAUNCHES], k, memory_order_relaxed);
    atomic_store_explicit(&ctx->nrecent, n + 1, memory_order_relaxed);
}

/* A variant: code for one specialization class of a kernel's arguments. */
/* Where a variant's code came from, from the cheapest to the dearest. */
typedef enum RtOrigin {
    RT_FROM_DISK_CUBIN,        /* its cubin was in the disk cache */
    RT_FROM_REMOTE_CUBIN,      /* its cubin was in the remote cache (now also on disk) */
    RT_FROM_DISK_PTX,          /* its PTX was in the disk cache, linked to a cubin now */
    RT_FROM_REMOTE_PTX,        /* its PTX was in the remote cache, linked to a cubin now */
    RT_FROM_COMPILER,          /* compiled now */
} RtOrigin;

/* Where the time of a variant's build went (TILE_LOG_RECOMPILES reports it): each step
 * that ran adds its milliseconds; a step that did not run stays 0. */
typedef struct RtBuildTimes {
    double front_ms;           /* lowering the parsed kernel with its consts to Tile IR */
    double passes_ms;          /* specialization and the GPU pipeline */
    double llvm_ms;            /* Tile IR -> LLVM IR */
    double opt_ms;             /* LLVM's O3 pipeline */
    double emit_ms;            /* the NVPTX backend */
    double jit_ms;             /* the driver's PTX assembler (cuLink*, or loading PTX) */
    double load_ms;            /* cuModuleLoadDataEx of the image and cuModuleGetFunction */
    double total_ms;           /* the whole build, cache lookups and writes included */
    unsigned links;            /* assembler runs (2 when the occupancy request spilled) */
} RtBuildTimes;

/* The device's limits (rt_context.c), for the tuner's resource model and the size of a
 * persistent kernel's launch. */
typedef struct RtLimits {
    int max_threads, smem_optin, regs_per_block, threads_per_sm, smem_per_sm, regs_per_sm,
        blocks_per_sm, sms, l2_bytes;
} RtLimits;
TrtStatus rt_device_limits(TrtContext *ctx, RtLimits *l);
/* Blocks of a kernel resident on an SM at once: threads, registers (allocated per warp
 * in units of 256) and shared memory (1 KiB reserved per block) each bound it. */
uint32_t rt_blocks_per_sm(const RtLimits *l, uint32_t threads, uint32_t regs, uint32_t shared);

typedef struct RtVariant {
    uint64_t mask;             /* RT_SPEC_* codes, 2 bits per parameter */
    bool checked;              /* the checked mode's variant (passes/bounds.c) */
    CUmodule mod;
    CUfunction fn;
    unsigned threads;          /* block size along x */
    unsigned shared_bytes;     /* dynamic shared memory at launch */
    RtOrigin origin;           /* where its code came from (TILE_LOG_RECOMPILES says) */
    RtBuildTimes times;        /* how long it took to get it */
    uint32_t ntma;             /* tensor maps encoded at each launch (rt_tma.c) */
    CgTmaDesc *tma;            /* malloc'd; NULL when ntma is 0 */
    /* A persistent kernel's (passes/persistent.c) most programs at once: SMs x resident
     * blocks per SM, or for a cluster kernel the clusters resident at once; its
     * launches run min(this, the grid's programs) programs along x. 0: not persistent. */
    uint32_t max_programs;
    /* CTAs a program runs on (the launch key cluster: a thread-block cluster along x,
     * .reqnctapercluster in the PTX): a launch runs this many CTAs a program along x,
     * and program_id(0) is the cluster's index. 1: no cluster. */
    uint32_t cluster;
    /* The launch keys the schedule chose for it (RT_META_CHOSEN_*: bit k, key k = 1). */
    uint32_t chosen;
} RtVariant;
/* The CUDA grid a launch of v runs for the programs g: g, or a persistent kernel's
 * capped 1-D grid; x times v's cluster. rt_launch_grid checks that it fits first. */
void rt_variant_grid(const RtVariant *v, const uint32_t g[3], uint32_t out[3]);
/* rt_variant_grid of a launch of k, refused (TRT_ERROR_INVALID_ARGUMENT, with the sizes)
 * when the CUDA grid would not fit: a persistent kernel walks at most 2147483647
 * programs (in i32), and a cluster kernel's x times its cluster is at most 2147483647. */
TrtStatus rt_launch_grid(const TrtKernel *k, const RtVariant *v, const uint32_t g[3], uint32_t out[3]);

/* Launch facts of a variant, stored before its PTX or cubin in cache entries, so a warm
 * start knows them without compiling. */
typedef struct RtKernelMeta {
    uint32_t threads, shared_bytes;
    uint32_t ntma;             /* tensor maps the kernel takes after its arguments */
    uint32_t flags;            /* RT_META_PERSISTENT */
    uint32_t cluster;          /* CTAs a program (the plan's cluster); 0 or 1: none */
    CgTmaDesc tma[CG_MAX_TMA]; /* how to encode each (codegen/codegen.h) */
} RtKernelMeta;
#define RT_META_PERSISTENT 1u  /* the kernel walks the grid's programs (launched_programs) */
/* A payload begins with threads, shared_bytes, ntma and flags (16 bytes, keeping
 * images 16-aligned), then ntma recipes of 128 bytes, then the PTX or cubin. The
 * payload's flags word holds the cluster size in bits 8..15 (RT_META_CLUSTER_SHIFT; 0
 * meaning 1). Entries written before tensor maps existed have 0 where ntma is, before
 * persistent kernels 0 where flags is, before clusters 0 in bits 8..15: they read as
 * they were. */
#define RT_META_BYTES 16
#define RT_META_CLUSTER_SHIFT 8
#define RT_META_CLUSTER_MASK 0xff00u
/* Bits 16..23 of the flags word: the launch keys passes/schedule.c chose (bit k: the key
 * IrLaunchKey k, now 1), for trt_kernel_last_config. */
#define RT_META_CHOSEN_SHIFT 16
#define RT_META_CHOSEN_MASK 0xff0000u
/* The bytes before the image in payload b (0 if b is malformed). */
size_t rt_meta_size(const RtBlob *b);

/* ---- tensor maps (rt_tma.c) --------------------------------------------------------- */
/* Encodes the tensor map of recipe t for a launch with these arguments into out (128
 * bytes, 64-aligned). False, with the reason in why, when the arguments do not allow
 * one (an extent below 1 or over 2^32, a stride that is not a positive multiple of 16
 * bytes, an address not 16-byte aligned) or the driver has no cuTensorMapEncodeTiled:
 * the caller then runs a variant without TMA. ptr is the pointer argument's address,
 * ints[i] parameter i's integer value. */
bool rt_tma_encode(const RtDriver *d, const CgTmaDesc *t, uint64_t ptr, const int64_t *ints, void *out, char *why,
                   size_t n);
/* An integer argument's value (false for pointers and floats). */
bool rt_arg_int(const TrtArg *a, int64_t *v);
typedef struct RtTmaMaps {   /* the tensor maps of one launch */
    _Alignas(64) unsigned char map[CG_MAX_TMA][128];
} RtTmaMaps;
/* The n maps of recipes t (at most CG_MAX_TMA) from trt_launch's arguments into maps;
 * returns the pointer parameters (bit p) whose map was refused, 0 when all encoded,
 * and the first refusal's reason in why. */
uint64_t rt_tma_encode_all(const RtDriver *d, const CgTmaDesc *t, uint32_t n, const TrtArg *args, uint32_t nargs,
                           RtTmaMaps *maps, char *why, size_t wn);

#define RT_MAX_VARIANTS 16
/* The class of one parameter: a 2-bit code in a variant's mask, parameter i at bits
 * 2i and 2i+1. Integers: NONE, DIV16, ONE or DIV8 (a multiple of 8, not of 16), each
 * one code, not bits to test one by one; pointers: NONE or DIV16 (16-byte aligned). The
 * codes of none, div16 and one are those of the masks before DIV8 came, so their cache
 * keys did not change. */
enum { RT_SPEC_NONE = 0, RT_SPEC_DIV16 = 1, RT_SPEC_ONE = 2, RT_SPEC_DIV8 = 3 };

/* Produces the PTX of one variant and its launch facts (*meta comes filled with the
 * kernel's defaults). Returns a malloc'd string or NULL with *st and the thread's error
 * set. */
typedef char *(*RtCompileFn)(TrtKernel *k, uint64_t mask, bool checked, RtKernelMeta *meta, TrtStatus *st);

struct RtTmaMaps;
/* The variant for a launch of k with these arguments and its tensor maps encoded
 * (rt_launch.c): the class *mask, or one with fewer promises where TMA cannot take
 * the arguments (*mask is then that class). */
TrtStatus rt_pick_variant(TrtKernel *k, const TrtArg *args, uint32_t nargs, uint64_t *mask, bool checked,
                          unsigned *index, struct RtTmaMaps *maps);

typedef struct RtParam {
    IrElem elem;               /* IR_PTR for pointers */
    IrElem pointee;            /* for pointers */
    const char *name;
} RtParam;

struct TrtKernel {
    TrtModule *module;
    char *name;
    TrtConst *consts;          /* the const set it was made with (owned) */
    uint32_t nconsts;
    RtParam *params;
    uint32_t nparams;
    unsigned block;            /* threads per block: warps * 32 */
    RtKey ir_key;              /* hash of the normalized kernel (printed IR) and consts */
    IrCtx *ir;                 /* the lowered kernel, for the grid clause; NULL for PTX */
    IrFunc *func;
    pthread_mutex_t lock;      /* held while adding a variant */
    RtBuildTimes *building;    /* the times of the variant being built (under lock) */
    RtVariant variants[RT_MAX_VARIANTS];
    atomic_uint nvariants;     /* published after the variant is complete */
    atomic_uint last;          /* the variant of the last launch */
    struct TrtKernel *_Atomic last_run;  /* the handle whose config the last launch through this one
                                            ran (itself, or the config its mode chose), or NULL */
    int64_t grid_memo_args[TRT_MAX_ARGS];   /* the scalars of the last grid evaluation */
    uint32_t grid_memo[3];
    bool grid_memo_valid;
    pthread_mutex_t grid_lock;
    struct RtTune *tune;       /* @autotune state (rt_tune.c), NULL without tuning */
};

struct TrtModule {
    TrtContext *ctx;
    RtCompileFn compile;
    Source *src;               /* .tile text (NULL for a PTX module) */
    IrCtx *ast_ctx;            /* owns the parsed program */
    struct AstProgram *prog;
    char *ptx;                 /* a PTX module's text */
    TrtKernel **kernels;
    uint32_t nkernels;
    pthread_mutex_t lock;
};

/* Kernels of a hand-written PTX module: the internal module path of tests and bench. */
typedef struct RtPtxKernel {
    const char *name;
    const IrElem *params;      /* IR_PTR or a scalar element per parameter */
    const char *const *names;  /* the parameters' names for messages, or NULL */
    uint32_t nparams;
    unsigned block;            /* threads per block */
} RtPtxKernel;
TrtStatus rt_module_load_ptx(TrtContext *ctx, const char *ptx, const RtPtxKernel *ks,
                             uint32_t n, TrtModule **out);

/* Compiles (or finds in the cache) and loads the variant for `mask`; returns its index
 * in k->variants. Called with k->lock held. */
TrtStatus rt_variant_build(TrtKernel *k, uint64_t mask, bool checked, unsigned *index);
/* The image of k's variant for `mask` (checked: the checked mode's; RT_META_BYTES of launch facts, then a cubin, or
 * PTX without a disk cache), from the cache or built (and stored) now; *origin says
 * which. The calling thread must have the context current. Thread-safe for different
 * kernels (the tuner compiles its candidates in parallel with it). */
TrtStatus rt_variant_image(TrtKernel *k, uint64_t mask, bool checked, RtBlob *img, RtOrigin *origin);
/* The threads and dynamic shared memory of k's variant for mask as the GPU pipeline
 * plans them, without generating code (the tuner's resource model), and a lower bound
 * of its registers per thread: its share of the values a loop carries (the
 * accumulator of a matmul), which it holds throughout the loop. */
TrtStatus rt_kernel_resources(TrtKernel *k, uint64_t mask, uint32_t *threads, uint32_t *shared,
                              uint32_t *min_regs);
/* A kernel made as trt_module_get_kernel makes one, but not added to m nor given tuning
 * state: the tuner's candidates (one per config), freed by rt_kernel_free_detached. */
TrtStatus rt_kernel_create_detached(TrtModule *m, const char *name, const TrtConst *consts,
                                    uint32_t nconsts, TrtKernel **out);
void rt_kernel_free_detached(TrtKernel *k);
/* Loads an image of rt_variant_image into v (module, function, launch facts). */
TrtStatus rt_variant_load(TrtKernel *k, const RtBlob *img, RtVariant *v);
/* Lowers the kernel with its consts into a new IrCtx (*ctx_out, the caller's even on
 * failure); NULL with *st and the thread's error set on failure. */
IrFunc *rt_lower_kernel(TrtKernel *k, IrCtx **ctx_out, TrtStatus *st);
/* The PTX of one variant of a .tile kernel (frontend, passes, codegen). */
char *rt_compile_tile(TrtKernel *k, uint64_t mask, bool checked, RtKernelMeta *meta, TrtStatus *st);
/* Whether launches of k run checked variants: the context's TRT_DEBUG_BOUNDS, for a
 * kernel compiled from .tile source (hand-written PTX has no hidden parameters). */
bool rt_kernel_checked(const TrtKernel *k);
/* Loads PTX or a cubin image into a module, with the JIT's error log in the message. */
TrtStatus rt_load_image(TrtContext *ctx, const void *image, CUmodule *out);
/* PTX to a cubin for the current device, by the assembler rt_assembler names. */
TrtStatus rt_link_cubin(TrtContext *ctx, const char *ptx, RtBlob *out);
/* Who turns a variant's PTX into the cubin the disk cache keeps (rt_ptxas.c): the
 * toolkit's ptxas when one is found (whole-program code), else the driver's cuLink;
 * TILE_ASSEMBLER=driver|nvjitlink|ptxas chooses. */
typedef enum RtAssembler { RT_ASM_DRIVER, RT_ASM_NVJITLINK, RT_ASM_PTXAS } RtAssembler;
RtAssembler rt_assembler(const TrtContext *ctx);
/* rt_ptxas.c: the ptxas found's version (major * 1000 + minor * 10); PTX to a cubin. */
uint64_t rt_ptxas_version(void);
TrtStatus rt_ptxas_assemble(const char *arch, const char *ptx, RtBlob *out);
/* rt_nvjitlink.c: TILE_ASSEMBLER=nvjitlink and the library opens (else one warning); the
 * library's version (major << 32 | minor) for the cubin key; PTX to a cubin for arch. */
bool rt_nvjitlink_wanted(void);
uint64_t rt_nvjitlink_version(void);
TrtStatus rt_nvjitlink_assemble(const char *arch, const char *ptx, RtBlob *out);
/* The argument kind that a parameter of element type e takes (f8 as its bits: U8). */
TrtArgKind rt_arg_kind(IrElem e);
/* What a launch of k with these arguments and its own grid runs: the kernel (for an
 * @autotune kernel, the config the context's mode chooses: max-autotune tunes here) and
 * its variant's class; ready when that variant is built or the grid is empty. */
typedef struct RtLaunchTarget {
    TrtKernel *k;
    uint64_t mask;
    bool checked, ready;
} RtLaunchTarget;
TrtStatus rt_launch_target(TrtKernel *k, const TrtArg *args, const uint64_t *bytes, uint32_t nargs, CUstream stream,
                           RtLaunchTarget *t);
/* Builds t's variant without launching (once, under its kernel's lock: a no-op when
 * another thread got there first); thread-safe, as the tuner's compiles are. */
TrtStatus rt_launch_target_build(const RtLaunchTarget *t);
/* How many variants the last trt_tgraph_run built before its launches, and on how many
 * threads (rt_tgraph.c), for tests. */
void rt_tgraph_prebuilt(const TrtTensorGraph *g, uint32_t *variants, uint32_t *threads);
/* The inner module of a tensor graph's lowered kernels (rt_tgraph.c), for tests that
 * replace its compile function (which the split's build, made later, takes over). */
TrtModule *rt_tgraph_module(TrtTensorGraph *g);
/* Whether a tensor graph's split has been built (rt_tgraph.c: on the first split call),
 * for tests. */
bool rt_tgraph_split_built(const TrtTensorGraph *g);
/* Overwrites every buffer of a tensor graph's plan with 0xff bytes (NaN), for the tests
 * of the forward/backward split (rt_tgraph.c). */
TrtStatus rt_tgraph_poison_buffers(TrtTensorGraph *g);
/* Checks the count, kinds and pointer alignment of a launch's arguments. */
TrtStatus rt_check_args(const TrtKernel *k, const TrtArg *args, uint32_t nargs);
/* The grid from the kernel's grid(...) clause (memoized on the scalars). */
TrtStatus rt_kernel_grid(TrtKernel *k, const TrtArg *args, uint32_t out[3]);
/* Whether a grid has a size 0 (a launch of it does nothing). */
bool rt_grid_empty(const uint32_t g[3]);
/* Checks an explicit or computed grid against what a GPU launches. */
TrtStatus rt_check_grid(const TrtKernel *k, const uint32_t g[3]);
/* The specialization class codes of a launch's (checked) arguments: 2 bits per parameter. */
uint64_t rt_class_mask(const TrtKernel *k, const TrtArg *args);
/* Describes the class code of parameter i of mask: "divisible by 16", "equal to 1". */
const char *rt_spec_class_name(const TrtKernel *k, uint32_t i, uint64_t mask);
/* Whether TILE_LOG_RECOMPILES or the context's flag asks for reports. */
bool rt_log_recompiles(const TrtContext *ctx);

#endif
