/* libtileRT: load .tile kernels, compile them on first use, launch them on a CUstream.
 *
 * A host program creates a context on a device (sharing that device's primary context,
 * so it runs beside PyTorch and the CUDA runtime), loads a module from a .tile file or
 * string, gets a kernel (with values for its const parameters) and launches it with
 * typed arguments. Compiled code is remembered in memory (one variant per
 * specialization class of the arguments, each compiled once) and on disk (the cache of
 * docs/CACHE.md), so a later process starts without compiling.
 *
 * The CUDA driver is opened at run time: this library loads and links on a machine
 * without one, and every call then returns TRT_ERROR_NO_DRIVER with a message.
 *
 * Errors: every function returns a TrtStatus; on failure trt_last_error() gives a
 * message for the calling thread (valid until that thread's next failing call).
 * Ownership is stated per function; handles are opaque and are freed by their
 * destroy function. Contexts, modules and kernels may be used from several threads;
 * a kernel's first launch with a new argument class compiles under a lock. */
#ifndef TILE_TILE_RT_H
#define TILE_TILE_RT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header and of the library (trt_version()); a program can compare
 * the two to find a library older than the header it was built with. */
#define TILE_RT_VERSION_MAJOR 0
#define TILE_RT_VERSION_MINOR 1
#define TILE_RT_VERSION_PATCH 0
#define TILE_RT_VERSION "0.1.0"

/* The driver's handle types as cuda.h declares them: CUdeviceptr is an unsigned long
 * long (on the 64-bit systems tile supports) and CUstream a pointer to struct CUstream_st,
 * so values pass between the two headers unchanged. C99 forbids repeating a typedef, so
 * there (and only there, and only when cuda.h is not already included) the header
 * leaves CUdeviceptr and CUstream to cuda.h; its own functions use the TrtDevicePtr and
 * TrtStream names, which are the same types. C11 and C++ allow the repetition. */
typedef unsigned long long TrtDevicePtr;
typedef struct CUstream_st *TrtStream;
#if !defined(__cuda_cuda_h__) && \
    (defined(__cplusplus) || (defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L))
typedef unsigned long long CUdeviceptr_v2;
typedef CUdeviceptr_v2 CUdeviceptr;
typedef struct CUstream_st *CUstream;
#endif

typedef enum TrtStatus {
    TRT_SUCCESS = 0,
    TRT_ERROR_NO_DRIVER,        /* no usable CUDA driver (not found, too old, cuInit failed) */
    TRT_ERROR_NO_DEVICE,        /* the device ordinal does not exist */
    TRT_ERROR_INVALID_ARGUMENT, /* API misuse: NULL handle, bad argument list, bad grid */
    TRT_ERROR_NOT_FOUND,        /* no kernel of that name, unreadable file */
    TRT_ERROR_COMPILE,          /* the .tile source has errors (the message lists them) */
    TRT_ERROR_NO_CODEGEN,       /* this build has no GPU code generator */
    TRT_ERROR_CACHE_UNSAFE,     /* the cache directory is writable by other users */
    TRT_ERROR_CACHE_IO,         /* the cache could not be read or written */
    TRT_ERROR_DRIVER,           /* a driver call failed (the message names it and its code) */
    TRT_ERROR_OUT_OF_MEMORY,
    TRT_ERROR_KERNEL_FAILED,    /* a kernel run by the interpreter stopped (out-of-bounds
                                   access, failed assert, ...; the message says where) */
    TRT_ERROR_CACHE_MISS,       /* the cache mode requires a cached kernel and there is none
                                   (the message names the kernel, its variant and its keys) */
} TrtStatus;

/* A short constant name of a status ("TRT_ERROR_NO_DRIVER"). */
const char *trt_status_name(TrtStatus s);
/* The message of the calling thread's last failure ("" if none), whole however long.
 * Owned by the library; valid until the thread's next failing call. */
const char *trt_last_error(void);
/* The library's version, "MAJOR.MINOR.PATCH" (TILE_RT_VERSION of the build). Static. */
const char *trt_version(void);

/* ---- contexts --------------------------------------------------------------------- */
/* Which @autotune config a launch runs (docs/TUNING.md). A kernel's config is chosen per
 * key value (the run-time values of its `key = [...]` parameters) and argument class,
 * on the first launch of that key through a kernel handle, and only for launches whose
 * grid comes from the kernel's grid(...) clause (an explicit grid runs the handle's own
 * config); consts given to trt_module_get_kernel fix those keys of the space. */
typedef enum TrtMode {
    TRT_MODE_DEFAULT = 0,       /* a tuned winner from the disk cache, else the kernel's
                                   @autotune default config; never benchmarks */
    TRT_MODE_REDUCE_OVERHEAD,   /* as default for single launches; the overhead is
                                   reduced by capturing launches into a graph
                                   (trt_graph_begin) and replaying it */
    TRT_MODE_MAX_AUTOTUNE,      /* a winner from the disk cache, else tune the key now
                                   (compiles in parallel, benchmarks in a worker process
                                   that a faulting config cannot take the caller down
                                   with), store the winner in the cache and run it */
    TRT_MODE_FROM_ENV = -1,     /* TILE_MODE=default|reduce-overhead|max-autotune, else default */
} TrtMode;

enum {
    TRT_FLAG_LOG_RECOMPILES = 1u << 0,  /* report each new variant on stderr, and for each new
                                           key of an @autotune kernel which config runs and
                                           why: tuned now, from the cache, or the default
                                           (also TILE_LOG_RECOMPILES=1) */
    TRT_FLAG_NO_DISK_CACHE = 1u << 1,   /* keep compiled code in memory only */
};

typedef struct TrtContext TrtContext;

/* The device ordinal of a context that runs kernels on the CPU, in the reference
 * interpreter (ir/interp.h), on host memory: no driver, no code generator, no disk
 * cache. Its kernels launch with trt_launch_host. */
#define TRT_DEVICE_CPU (-1)

/* Opens the driver, retains device `device`'s primary context and makes it current on
 * the calling thread. cache_dir: the cache's directory, or NULL for $TILE_CACHE_DIR,
 * else $XDG_CACHE_HOME/tile, else ~/.cache/tile (created 0700; one writable by group
 * or others is refused with TRT_ERROR_CACHE_UNSAFE), or "" for no disk cache. On success *out is a context the
 * caller owns (trt_context_destroy); on failure *out is NULL. With device
 * TRT_DEVICE_CPU it makes a CPU context instead: no driver is opened, cache_dir is
 * ignored. */
TrtStatus trt_context_create(int device, TrtMode mode, const char *cache_dir, TrtContext **out);
/* Unloads every module of ctx and releases the primary context. NULL is ignored. */
void trt_context_destroy(TrtContext *ctx);
/* Sets TRT_FLAG_* bits (replacing the previous ones). */
TrtStatus trt_context_set_flags(TrtContext *ctx, unsigned flags);
TrtMode trt_context_mode(const TrtContext *ctx);
/* The cache directory in use, or NULL without a disk cache. Owned by ctx. */
const char *trt_context_cache_dir(const TrtContext *ctx);
/* The device ordinal the context was made for, or TRT_DEVICE_CPU. */
int trt_context_device(const TrtContext *ctx);

/* ---- modules and kernels ------------------------------------------------------------ */
typedef struct TrtModule TrtModule;
typedef struct TrtKernel TrtKernel;

/* Loads .tile source; it is checked for syntax here and each kernel is compiled lazily
 * (per const set and specialization). `name` is used in diagnostics ("softmax.tile").
 * The text is copied. *out is owned by the caller (trt_module_destroy) and must be
 * destroyed before its context. */
TrtStatus trt_module_load_string(TrtContext *ctx, const char *name, const char *text,
                                 TrtModule **out);
TrtStatus trt_module_load_file(TrtContext *ctx, const char *path, TrtModule **out);
/* Frees the module, its kernels and their loaded code. NULL is ignored. */
void trt_module_destroy(TrtModule *m);

/* A value for a const parameter (or a launch key: trt_launch_key). */
typedef struct TrtConst {
    const char *name;
    int64_t value;
} TrtConst;

/* The kernel `name` with the given const values (the others from the @autotune
 * default config or their defaults). A name the module does not declare (the kernel, or
 * a const that is not one of its const parameters nor a launch key) is
 * TRT_ERROR_NOT_FOUND. Type and shape errors appear here (TRT_ERROR_COMPILE, with the
 * diagnostics in the message). The same name and consts
 * give the same handle. *out is owned by the module. */
TrtStatus trt_module_get_kernel(TrtModule *m, const char *name, const TrtConst *consts,
                                uint32_t nconsts, TrtKernel **out);

/* The launch keys, which every kernel takes as consts beside its own const parameters
 * (warps, stages, ...: docs/LANGUAGE-REFERENCE.md, "Launch keys"). Key i, for i = 0, 1,
 * ... until TRT_ERROR_NOT_FOUND: *name (static), the valid values *min..*max (warps
 * and cluster take only the powers of two between), and *def, the value of a kernel
 * that does not set it. Any out pointer may be NULL. Needs no context. */
TrtStatus trt_launch_key(uint32_t i, const char **name, int64_t *min, int64_t *max, int64_t *def);

/* ---- launching ---------------------------------------------------------------------- */
typedef enum TrtArgKind {
    TRT_ARG_PTR,      /* v.ptr: a device pointer, for a *T parameter */
    TRT_ARG_BOOL,     /* v.i8 (0 or 1), for bool/i1 */
    TRT_ARG_I8, TRT_ARG_I16, TRT_ARG_I32, TRT_ARG_I64,
    TRT_ARG_U8, TRT_ARG_U16, TRT_ARG_U32, TRT_ARG_U64,
    TRT_ARG_F16, TRT_ARG_BF16,  /* v.u16: the value's bits */
    TRT_ARG_F32, TRT_ARG_F64,
} TrtArgKind;

/* One launch argument. Set the member that the kind names (the trt_arg_* helpers do):
 * the launch passes the driver a pointer to it, of the parameter's width. */
typedef struct TrtArg {
    TrtArgKind kind;
    union {
        TrtDevicePtr ptr;
        int8_t i8; int16_t i16; int32_t i32; int64_t i64;
        uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64;
        float f32; double f64;
    } v;
} TrtArg;

/* One helper per kind (member assignments, not designated initializers, which C++
 * has only since C++20). f16 and bf16 take the bits of the value. */
static inline TrtArg trt_arg_ptr(TrtDevicePtr x) { TrtArg a; a.kind = TRT_ARG_PTR; a.v.u64 = 0; a.v.ptr = x; return a; }
static inline TrtArg trt_arg_i8(int8_t x) { TrtArg a; a.kind = TRT_ARG_I8; a.v.u64 = 0; a.v.i8 = x; return a; }
static inline TrtArg trt_arg_i16(int16_t x) { TrtArg a; a.kind = TRT_ARG_I16; a.v.u64 = 0; a.v.i16 = x; return a; }
static inline TrtArg trt_arg_i32(int32_t x) { TrtArg a; a.kind = TRT_ARG_I32; a.v.u64 = 0; a.v.i32 = x; return a; }
static inline TrtArg trt_arg_i64(int64_t x) { TrtArg a; a.kind = TRT_ARG_I64; a.v.u64 = 0; a.v.i64 = x; return a; }
static inline TrtArg trt_arg_u8(uint8_t x) { TrtArg a; a.kind = TRT_ARG_U8; a.v.u64 = 0; a.v.u8 = x; return a; }
static inline TrtArg trt_arg_u16(uint16_t x) { TrtArg a; a.kind = TRT_ARG_U16; a.v.u64 = 0; a.v.u16 = x; return a; }
static inline TrtArg trt_arg_u32(uint32_t x) { TrtArg a; a.kind = TRT_ARG_U32; a.v.u64 = 0; a.v.u32 = x; return a; }
static inline TrtArg trt_arg_u64(uint64_t x) { TrtArg a; a.kind = TRT_ARG_U64; a.v.u64 = 0; a.v.u64 = x; return a; }
static inline TrtArg trt_arg_f16(uint16_t bits) { TrtArg a; a.kind = TRT_ARG_F16; a.v.u64 = 0; a.v.u16 = bits; return a; }
static inline TrtArg trt_arg_bf16(uint16_t bits) { TrtArg a; a.kind = TRT_ARG_BF16; a.v.u64 = 0; a.v.u16 = bits; return a; }
static inline TrtArg trt_arg_f32(float x) { TrtArg a; a.kind = TRT_ARG_F32; a.v.u64 = 0; a.v.f32 = x; return a; }
static inline TrtArg trt_arg_f64(double x) { TrtArg a; a.kind = TRT_ARG_F64; a.v.u64 = 0; a.v.f64 = x; return a; }
static inline TrtArg trt_arg_bool(int x) { TrtArg a; a.kind = TRT_ARG_BOOL; a.v.u64 = 0; a.v.i8 = (int8_t)(x != 0); return a; }

#define TRT_MAX_ARGS 64

/* Launches `k` on `stream` (NULL: the legacy default stream). For a kernel with
 * @autotune and grid == NULL, the first launch of a key chooses the config by the
 * context's mode (TrtMode; in max-autotune this synchronizes `stream`, copies the
 * buffers the arguments point into and benchmarks before returning). args: one per run-time
 * parameter of the kernel, in order (count, kinds and pointer alignment to the element
 * size are checked). grid: 3 block counts, or NULL to evaluate the kernel's grid(...)
 * clause on the arguments. A grid with a size 0 launches nothing (TRT_SUCCESS, after the
 * arguments are checked). The first launch with a new specialization class (integer
 * arguments equal to 1 or divisible by 16, pointers aligned to 16 bytes) compiles or
 * loads a variant; later launches of that class only pack arguments and call the
 * driver. The calling thread must have the context's device current (it is after
 * trt_context_create; CUDA runtime and PyTorch use the same primary context). */
TrtStatus trt_launch(TrtKernel *k, const TrtArg *args, uint32_t nargs,
                     const uint32_t grid[3], TrtStream stream);

/* Runs `k` in the reference interpreter on host memory; only for a context made with
 * TRT_DEVICE_CPU. args as for trt_launch, with TRT_ARG_PTR values that are host
 * addresses; bytes[i] is the size of the buffer that pointer argument i may reach from
 * its address (ignored for scalars; bytes may be NULL when there is no pointer). An
 * access past it stops the run with TRT_ERROR_KERNEL_FAILED naming the kernel, the
 * program, the argument and the index. Synchronous: the buffers hold the results when
 * it returns (on a failure, possibly partial ones). grid as for trt_launch. */
TrtStatus trt_launch_host(TrtKernel *k, const TrtArg *args, const uint64_t *bytes,
                          uint32_t nargs, const uint32_t grid[3]);

/* ---- the checked mode ------------------------------------------------------------- */
/* TRT_DEBUG_BOUNDS (also TILE_DEBUG=bounds in the environment when the context is
 * made; TILE_DEBUG is a comma-separated list, "" or "none" for nothing): every launch
 * on the context runs the kernel's checked variant, compiled with a bounds check on
 * each load, store and atomic through a pointer argument (passes/bounds.c; cached
 * apart from the unchecked variants, which are never served to it, nor it to them).
 * A lane outside its buffer is masked off (a load gives its `other` or 0, a store or
 * atomic does nothing), so the kernel does not fault; trt_launch then synchronizes the
 * stream and returns TRT_ERROR_KERNEL_FAILED with the first such access in the
 * interpreter's words (file:line:col: error: out-of-bounds store in kernel 'K',
 * program (x, y, z): argument 'out' has N elements, lane L writes element E), and the
 * context stays usable. The sizes come from trt_launch_sized; a pointer without one
 * (trt_launch, or TRT_BYTES_UNKNOWN) is not checked. Checked launches of a context
 * are serialized and each waits for its kernel: a debugging mode, not a fast one.
 * Kernels of a CPU context are always checked (the interpreter knows every size). */
enum { TRT_DEBUG_BOUNDS = 1u << 0 };
/* Sets the TRT_DEBUG_* bits (replacing the previous ones, TILE_DEBUG's included). */
TrtStatus trt_context_set_debug(TrtContext *ctx, unsigned debug);
unsigned trt_context_debug(const TrtContext *ctx);

/* ---- the cache's mode and the compiler's knobs (docs/CACHE.md) ------------------------ */
/* What a launch may do when its kernel is not in the cache. A deployment that shipped a
 * warmed cache (tilec cache export / import) requires it, so that a kernel nobody
 * warmed fails at once, naming itself, instead of compiling silently on every rank. */
typedef enum TrtCacheMode {
    TRT_CACHE_DEFAULT = 0,        /* compile and link what is missing, and store it */
    TRT_CACHE_REQUIRE = 1,        /* never compile: a kernel must have its PTX (or cubin) in
                                     the cache; a cubin missing for this driver or assembler
                                     is linked from the cached PTX */
    TRT_CACHE_REQUIRE_CUBIN = 2,  /* never compile nor link: its cubin must be there */
} TrtCacheMode;
/* Sets the mode (TILE_CACHE_MODE=default|require|require-cubin sets it at creation).
 * The REQUIRE modes need a disk cache: without one (cache_dir "") they are refused with
 * TRT_ERROR_INVALID_ARGUMENT. In them an @autotune kernel uses its tuned config from the
 * cache, else its default (max-autotune does not tune: that compiles). */
TrtStatus trt_context_set_cache_mode(TrtContext *ctx, TrtCacheMode mode);
TrtCacheMode trt_context_cache_mode(const TrtContext *ctx);
/* Sets a knob of the code generator (docs/CACHE.md lists them: "sink", "tma", ...;
 * their environment variables, TILE_SINK=0 and so on, set them at creation). Every
 * cache key names every knob. Only before the context's first module is loaded (its
 * kernels' variants would otherwise mix settings): TRT_ERROR_INVALID_ARGUMENT after, or
 * for an unknown knob or a value out of its range. */
TrtStatus trt_context_set_knob(TrtContext *ctx, const char *name, const char *value);
/* "src-<hash>-llvm-<version>": the identity of the compiler whose code this runtime's
 * cache keys name (a hash of its sources taken at build time; docs/CACHE.md). */
const char *trt_compiler_id(void);

/* The size of a pointer argument that is not known: that pointer is not checked. */
#define TRT_BYTES_UNKNOWN UINT64_MAX
/* trt_launch with the size of each pointer argument's buffer: bytes[i] bytes may be
 * reached from argument i's address (ignored for scalars and outside the checked
 * mode; bytes may be NULL: no sizes). */
TrtStatus trt_launch_sized(TrtKernel *k, const TrtArg *args, const uint64_t *bytes, uint32_t nargs,
                           const uint32_t grid[3], TrtStream stream);

/* ---- CUDA graphs (reduce-overhead) ------------------------------------------------- */
/* A graph replays a sequence of trt_launch calls with one driver call. Between
 * trt_graph_begin(ctx, stream) and trt_graph_end(ctx, stream, &g), each trt_launch (or
 * trt_launch_sized) of a kernel of ctx on that stream is checked, its variant built or
 * loaded and its grid evaluated as usual, and then recorded instead of run; launch i of
 * the graph is the i-th recorded call (a launch with an empty grid records nothing).
 * Launches on other streams run as usual, and work that is not a trt_launch (a copy,
 * another library's kernel) is not captured: it runs when issued. Inside a capture, a
 * checked launch (TILE_DEBUG=bounds) and max-autotune's first tuning of a key fail with
 * TRT_ERROR_INVALID_ARGUMENT (launch the key once before capturing). A driver without
 * CUDA graphs (cuGraphCreate and the rest) makes these functions fail with
 * TRT_ERROR_DRIVER saying so; everything else works. Thread safety: one capture per
 * context at a time (a second trt_graph_begin fails until trt_graph_end); any thread may
 * launch into it. trt_graph_launch and trt_graph_update on one graph may be called from
 * several threads (they are serialized); trt_graph_destroy must not race with them. A
 * graph refers to its kernels' modules: destroy it before them. */
typedef struct TrtGraph TrtGraph;

/* Starts capturing the trt_launch calls on `stream` (NULL: the legacy default stream)
 * of ctx, a GPU context. Fails if ctx captures already or the driver has no graphs. */
TrtStatus trt_graph_begin(TrtContext *ctx, TrtStream stream);

/* Ends the capture of `stream` on ctx and instantiates its launches as a graph, each
 * after the one before, in *out (owned by the caller: trt_graph_destroy). The capture
 * ends also when this fails (*out is NULL then). */
TrtStatus trt_graph_end(TrtContext *ctx, TrtStream stream, TrtGraph **out);

/* Replays g on `stream` (asynchronous, like trt_launch): one cuGraphLaunch. */
TrtStatus trt_graph_launch(TrtGraph *g, TrtStream stream);

/* Gives launch `launch_index` of g new arguments (pointers, scalars) for later replays,
 * in place (cuGraphExecKernelNodeSetParams; a replay already issued keeps the old ones).
 * args as for trt_launch. Fails with TRT_ERROR_INVALID_ARGUMENT, changing nothing, if
 * the arguments would select another variant (an argument changed specialization
 * class, e.g. an integer from divisible by 16 to odd, or a pointer lost its 16-byte
 * alignment), give another grid from the grid(...) clause, or change a scalar of a
 * kernel with @autotune launched without a grid (its config may depend on it): the
 * message names what changed, and the caller must capture the graph again. */
TrtStatus trt_graph_update(TrtGraph *g, uint32_t launch_index, const TrtArg *args, uint32_t nargs);

/* How many launches g replays (0 for NULL). */
uint32_t trt_graph_num_launches(const TrtGraph *g);

/* Frees g (NULL: nothing). A replay in flight is not affected. */
void trt_graph_destroy(TrtGraph *g);

/* ---- tensor graphs (LANGUAGE.md section 7) ------------------------------------------ */
/* A `graph` of a module, compiled for running: its graph IR is fused into kernels
 * (docs/GRAPHS.md) and each kernel lowered to a Tile kernel of an inner module, which
 * compiles like any kernel (lazily, one variant per specialization class, the disk
 * cache, @autotune by the context's mode). Sizes named in the graph's types are scalar
 * arguments of those kernels, so a new value of a size compiles nothing new unless it
 * changes a specialization class (divisible by 16 or not, equal to 1). The
 * intermediates of the memory plan live in buffers that the graph allocates on the first
 * run and keeps for later ones (grown when new sizes need more). Bind every parameter,
 * size and output, then run; bindings stay until changed. Not thread-safe: one thread
 * binds and runs a graph at a time. Not to be confused with TrtGraph (CUDA graphs). */
typedef struct TrtTensorGraph TrtTensorGraph;

/* The graph `name` of m (TRT_ERROR_NOT_FOUND if m has none of that name). Errors of the
 * graph, or a kernel of its plan that cannot be lowered yet, are TRT_ERROR_COMPILE. *out
 * is owned by the caller (trt_tgraph_destroy), destroyed before m. */
TrtStatus trt_module_get_graph(TrtModule *m, const char *name, TrtTensorGraph **out);

/* A graph's compile options (LANGUAGE-REFERENCE.md section 7.4, docs/GRAPHS.md
 * "Recomputation"): for a graph with a grad, which forward values its backward keeps.
 * Each NULL leaves the graph's own @recompute setting. They change the graph's kernels,
 * which are keyed by their source, so kernels of different options never share a cache
 * entry. */
typedef struct TrtGraphOptions {
    const char *recompute;       /* "save-all", "selective" or "checkpoint" */
    const char *memory_budget;   /* bytes ("1073741824", "2GiB") or a fraction of save-all's ("0.5") */
    const char *sizes;           /* "T=4096,V=32000": the sizes the budget compares at (else 4096 each) */
} TrtGraphOptions;

/* trt_module_get_graph with options (NULL: none); TRT_ERROR_INVALID_ARGUMENT for a bad one. */
TrtStatus trt_module_get_graph_with(TrtModule *m, const char *name, const TrtGraphOptions *opts,
                                    TrtTensorGraph **out);
/* Frees g, its buffers and its kernels' module. NULL is ignored. */
void trt_tgraph_destroy(TrtTensorGraph *g);

/* Binds parameter `name`: a tensor takes a TRT_ARG_PTR (device memory on a GPU context,
 * host memory on a CPU one) holding its elements row-major and contiguous, a scalar a
 * value of its type's kind (rt's trt_arg_* helpers). */
TrtStatus trt_tgraph_bind(TrtTensorGraph *g, const char *name, TrtArg value);
/* Binds the size name `name` (at least 1). */
TrtStatus trt_tgraph_bind_size(TrtTensorGraph *g, const char *name, int64_t value);
/* Binds result i (0 <= i < trt_tgraph_num_outputs) to memory the caller owns. */
TrtStatus trt_tgraph_bind_output(TrtTensorGraph *g, uint32_t i, TrtDevicePtr p);
uint32_t trt_tgraph_num_outputs(const TrtTensorGraph *g);
/* The bytes of result i for the bound sizes. */
TrtStatus trt_tgraph_output_bytes(const TrtTensorGraph *g, uint32_t i, uint64_t *bytes);
/* Launches the plan's kernels on `stream` in order (asynchronous, as trt_launch; on a
 * CPU context synchronous, in the interpreter, with every access bounds-checked). Fails
 * with TRT_ERROR_INVALID_ARGUMENT naming what is not bound. */
TrtStatus trt_tgraph_run(TrtTensorGraph *g, TrtStream stream);

/* For tests and tools: the kernels of the plan (kernel i is "<graph>_k<i>", NULL past
 * the end; a chunked kernel, docs/GRAPHS.md "The LM head", is its first step's) and the
 * buffers of the memory plan as allocated (their bytes, 0 before the first run). */
uint32_t trt_tgraph_num_kernels(const TrtTensorGraph *g);
TrtKernel *trt_tgraph_kernel(const TrtTensorGraph *g, uint32_t i);
uint32_t trt_tgraph_num_buffers(const TrtTensorGraph *g);
uint64_t trt_tgraph_buffer_bytes(const TrtTensorGraph *g, uint32_t i);

/* What a binding (python/tile) needs to check a graph's arguments and make its results
 * without being told a signature. The graphs of m come from the parsed program (nothing
 * is compiled): their number (0 for NULL) and the i-th one's name (NULL past the end).
 * The rest describes a compiled graph; strings are owned by g. */
uint32_t trt_module_num_graphs(const TrtModule *m);
const char *trt_module_graph_name(const TrtModule *m, uint32_t i);

typedef struct TrtGraphValueInfo {
    const char *name;          /* the parameter's name; "ret0", "ret1", ... for results */
    TrtArgKind kind;           /* TRT_ARG_PTR for a tensor, else the scalar's kind */
    const char *elem;          /* the element type as ir_elem_name spells it: "bf16" */
    uint32_t elem_bytes;
    uint32_t rank;             /* 0: a scalar */
    const char *const *dims;   /* rank sizes, normalized: "1024", "T", "2*S+T" */
    const char *type;          /* the whole type: "bf16[T, 1024]", "f32" */
} TrtGraphValueInfo;

/* The parameters in declared order, the results in returned order (i past the end:
 * TRT_ERROR_INVALID_ARGUMENT), and the size names of the parameters' types, first
 * appearance first (NULL past the end). */
uint32_t trt_tgraph_num_params(const TrtTensorGraph *g);
TrtStatus trt_tgraph_param(const TrtTensorGraph *g, uint32_t i, TrtGraphValueInfo *out);
TrtStatus trt_tgraph_output(const TrtTensorGraph *g, uint32_t i, TrtGraphValueInfo *out);
uint32_t trt_tgraph_num_sizes(const TrtTensorGraph *g);
const char *trt_tgraph_size_name(const TrtTensorGraph *g, uint32_t i);

/* ---- the forward/backward split of a training graph (docs/GRAPHS.md "The
 * forward/backward split") ----
 * A graph with a grad runs whole (trt_tgraph_run) or in two parts: run_forward launches
 * the plan's forward kernels, run_backward its backward kernels. What crosses from one
 * part to the other is only memory the caller binds: the saved values (the
 * intermediates of the forward that the backward reads: trt_tgraph_saved describes
 * each, trt_tgraph_saved_bytes gives its size for the bound sizes), and the parameters
 * and results as bound for each part. The graph's own buffers hold only what stays
 * inside a part, so any number of forwards, each with its own saved memory, may run
 * before their backwards (gradient accumulation, activation checkpointing in the
 * caller's loop): bind the saved memory (and parameters, results) of the step before
 * each part. The backward computes seed * d(loss)/dw: the seed is the incoming
 * gradient of the loss, a scalar of the loss's type, 1 until bound.
 * A part fails with TRT_ERROR_INVALID_ARGUMENT naming what is not bound (every saved
 * value, and the parameters and results its kernels use); on a graph without a grad
 * the split calls fail and num_saved is 0. The parts are a build of their own, made
 * by the first of these calls (its kernels loaded; TRT_ERROR_COMPILE if that fails,
 * and a later call tries again), with a plan and buffers of its own: the LM head
 * runs there in Liger's order (its dx and dw for a seed of 1 saved by the forward with
 * the loss, scaled by the seed in the backward), in trt_tgraph_run it reads the seed
 * (docs/GRAPHS.md "The LM head"). A graph used both ways holds both plans' buffers.
 * The parameters, sizes and results bound to g serve both. */
uint32_t trt_tgraph_num_saved(const TrtTensorGraph *g);
TrtStatus trt_tgraph_saved(const TrtTensorGraph *g, uint32_t i, TrtGraphValueInfo *out);
TrtStatus trt_tgraph_saved_bytes(const TrtTensorGraph *g, uint32_t i, uint64_t *bytes);
/* Saved value i lives in p (caller-owned device memory, host memory on a CPU context,
 * of trt_tgraph_saved_bytes at least) in the parts that follow. */
TrtStatus trt_tgraph_bind_saved(TrtTensorGraph *g, uint32_t i, TrtDevicePtr p);
/* The backward part's seed, a scalar of the loss's type's kind (trt_arg_f32 for an f32
 * loss); the joint run's seed is always 1. */
TrtStatus trt_tgraph_bind_seed(TrtTensorGraph *g, TrtArg value);
/* The seed described (name "dloss", the loss's type); an error without one. */
TrtStatus trt_tgraph_seed(const TrtTensorGraph *g, TrtGraphValueInfo *out);
/* Which part computes result i: 1 the forward, 2 the backward, 0 without a grad. */
uint32_t trt_tgraph_output_part(const TrtTensorGraph *g, uint32_t i);
TrtStatus trt_tgraph_run_forward(TrtTensorGraph *g, TrtStream stream);
TrtStatus trt_tgraph_run_backward(TrtTensorGraph *g, TrtStream stream);

/* ---- device memory ---------------------------------------------------------------- */
/* For programs without a CUDA runtime of their own (tilec run, tests); PyTorch users
 * pass tensor pointers instead. Synchronous; the context's device must be current.
 * trt_mem_alloc gives *out (owned by the caller: trt_mem_free) or 0 on failure.
 * trt_synchronize waits for all work of the device and reports a failed kernel. A kernel
 * fault (CUDA_ERROR_ILLEGAL_ADDRESS and the other sticky errors) leaves the context
 * unusable: the message names the kernels launched since the last successful
 * trt_synchronize and says the process must restart, and every later call on the
 * context fails with TRT_ERROR_DRIVER and that explanation (docs/RUNTIME.md). */
TrtStatus trt_mem_alloc(TrtContext *ctx, size_t bytes, TrtDevicePtr *out);
void trt_mem_free(TrtContext *ctx, TrtDevicePtr p);
TrtStatus trt_memcpy_htod(TrtContext *ctx, TrtDevicePtr dst, const void *src, size_t bytes);
TrtStatus trt_memcpy_dtoh(TrtContext *ctx, void *dst, TrtDevicePtr src, size_t bytes);
TrtStatus trt_synchronize(TrtContext *ctx);

/* ---- introspection ------------------------------------------------------------------ */
/* What a binding (python/tile) needs to check and pack arguments without being told a
 * signature: the kernels of a module and each kernel's parameters as declared, const
 * ones included, before any const value is chosen. Strings are owned by the module. */
typedef struct TrtKernelInfo {
    const char *name;
    uint32_t nparams;          /* declared parameters, const ones included */
    uint32_t nruntime;         /* run-time parameters: the TrtArgs of a launch */
    int has_grid;              /* 1 if it has a grid(...) clause (a launch may omit the grid) */
} TrtKernelInfo;

typedef struct TrtParamInfo {
    const char *name;
    int is_const;              /* 1: a compile-time parameter, given to trt_module_get_kernel */
    int has_default;           /* const only: 1 if default_value holds its default */
    int64_t default_value;     /* a default written as an integer or bool literal */
    int is_pointer;            /* 1 for a *T parameter */
    TrtArgKind kind;           /* the TrtArg kind a run-time parameter takes */
    const char *elem;          /* the pointee for a pointer, else the type: "bf16", "i32",
                                  "bool"; as ir_elem_name spells it */
    uint32_t elem_bytes;       /* the size of one elem in memory (bool: 1) */
    uint32_t runtime_index;    /* run-time parameters: the position among the TrtArgs */
} TrtParamInfo;

/* The number of kernels in m (0 for NULL), and the i-th one's name (NULL past the end). */
uint32_t trt_module_num_kernels(const TrtModule *m);
const char *trt_module_kernel_name(const TrtModule *m, uint32_t i);
/* Kernel `name` of m as declared (TRT_ERROR_NOT_FOUND if there is none). */
TrtStatus trt_module_kernel_info(const TrtModule *m, const char *name, TrtKernelInfo *out);
/* Its parameter i (0 <= i < nparams) as declared. */
TrtStatus trt_module_kernel_param(const TrtModule *m, const char *name, uint32_t i,
                                  TrtParamInfo *out);
/* Run-time parameter i of a kernel handle (0 <= i < trt_kernel_num_params), with the
 * types as lowered (is_const is 0; runtime_index is i). */
TrtStatus trt_kernel_param(const TrtKernel *k, uint32_t i, TrtParamInfo *out);
/* The run-time pointer parameters k may write through: bit i of *mask for parameter i
 * (i < 64), from the lowered kernel's stores and atomics. Conservative: where the
 * compiler cannot trace a stored-through pointer to one parameter (a pointer carried
 * by a loop), or k has no Tile IR (a PTX module), every bit is set. */
TrtStatus trt_kernel_writes(const TrtKernel *k, uint64_t *mask);

/* For tests and tools. */
const char *trt_kernel_name(const TrtKernel *k);
uint32_t trt_kernel_num_params(const TrtKernel *k);
uint32_t trt_kernel_num_variants(const TrtKernel *k);
/* The config the last launch through k ran, as "BM=128 BN=256 BK=64 warps=8 stages=3":
 * for a kernel with @autotune, the value of every key of its space in the config its
 * mode chose for that launch's key (docs/TUNING.md); otherwise the consts k was made
 * with (may be empty). Writes at most n bytes with a NUL, like snprintf, and returns the
 * full length; -1 (and "") before any launch through k. */
int trt_kernel_last_config(const TrtKernel *k, char *buf, size_t n);
/* The driver's CUfunction of the variant used by the last launch (NULL before one).
 * For a kernel with @autotune these describe the handle's own config; a launch that
 * the mode gives another config (TrtMode) runs that config's handle. */
void *trt_kernel_last_function(const TrtKernel *k);

#ifdef __cplusplus
}
#endif
#endif
