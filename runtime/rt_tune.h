/* The tuner (docs/TUNING.md): one implementation for the runtime's modes and for
 * `tilec tune` (which will call rt_tune_run with arguments it made from a manifest).
 *
 * For a kernel with @autotune, its key values and the specialization class of the
 * arguments, rt_tune_run expands the space, drops the configs that the caller's const
 * values rule out and those that exceed a resource of the device (before compiling: the
 * GPU pipeline's threads and shared memory), compiles the rest in parallel (through the
 * disk cache, so the winner's cubin is there afterwards), drops those that fail to
 * compile, spill, need more registers than a block has or cannot be resident, and
 * benchmarks the survivors in a worker process (tools/tile-tune-worker.c) on
 * copies of the launch's buffers, checking each candidate's outputs against the
 * default config's. Every candidate keeps its status, the reason it was dropped and its
 * times; the winner is the fastest correct one, ties going to the default config, then
 * to the lower index in the space. */
#ifndef TILE_RUNTIME_RT_TUNE_H
#define TILE_RUNTIME_RT_TUNE_H

#include "rt_internal.h"

/* What became of a candidate; the names are rt_cand_status_name's. */
typedef enum RtCandStatus {
    RT_CAND_OK,          /* measured, outputs match the default config's */
    RT_CAND_PINNED,      /* conflicts with a const value the caller gave */
    RT_CAND_THREADS,     /* more threads per block than the device runs */
    RT_CAND_SHARED,      /* more shared memory than a block may have */
    RT_CAND_COMPILE,     /* lowering, code generation or the assembler failed */
    RT_CAND_SPILLS,      /* the assembler spilled registers to local memory */
    RT_CAND_REGISTERS,   /* registers x threads exceed a block's register file */
    RT_CAND_OCCUPANCY,   /* not one block fits on an SM */
    RT_CAND_LAUNCH,      /* the driver refused to load or launch it */
    RT_CAND_FAULT,       /* it faulted on the GPU (the worker's context died) */
    RT_CAND_TIMEOUT,     /* it did not finish within the timeout (the worker was killed) */
    RT_CAND_WRONG,       /* its outputs differ from the default config's */
    RT_CAND_NSTATUS
} RtCandStatus;
const char *rt_cand_status_name(RtCandStatus s);

#define RT_TUNE_MAX_KEYS 16    /* config keys (consts, warps, stages) */

typedef struct RtCandidate {
    int index;                 /* in the space (FeTuneSpace order); -1: the default
                                  config, when the space does not hold it */
    bool is_default;           /* the reference the others are checked against */
    uint32_t nkeys;
    TrtConst keys[RT_TUNE_MAX_KEYS];   /* names owned by the result */
    RtCandStatus status;
    char why[200];             /* why it was dropped ("" when ok) */
    double median_ms, min_ms, max_ms;
    uint32_t runs;
    double compile_ms;         /* its compile (or cache load) and resource checks */
    double bench_ms;           /* wall time of its checks and runs in the worker */
    uint32_t threads, shared_bytes, regs, blocks_per_sm;
    bool known;                /* its times came from RtTuneOptions.known: not run again */
} RtCandidate;

typedef struct RtTuneResult {
    char *kernel;
    char *key;                 /* "M=4096 N=4096 K=4096" */
    RtCandidate *cands;
    uint32_t ncands;
    int winner;                /* index into cands */
    uint32_t expanded, where_removed, duplicates;   /* from the space */
    uint32_t removed[RT_CAND_NSTATUS];              /* candidates per status */
    double total_ms;           /* the whole tuning, wall time */
    uint64_t copy_bytes;       /* of the caller's buffers, copied for the worker (not persisted) */
    char *names;               /* storage of the keys' names */
} RtTuneResult;

typedef struct RtTuneOptions {
    double budget_ms;          /* per config: runs stop after it (TILE_TUNE_BUDGET_MS, 100) */
    uint32_t min_runs;         /* at least (TILE_TUNE_MIN_RUNS, 10) */
    uint32_t max_runs;         /* at most (TILE_TUNE_MAX_RUNS, 100) */
    uint32_t warmup;           /* untimed launches first (TILE_TUNE_WARMUP, 3) */
    uint32_t jobs;             /* compile threads (TILE_TUNE_JOBS, else the host's cores) */
    uint32_t max_configs;      /* the first N configs only (TILE_TUNE_MAX_CONFIGS, 0: all) */
    double timeout_ms;         /* a config that runs longer is killed (TILE_TUNE_TIMEOUT_MS, 20000) */
    /* For `tilec tune` (NULL/0 from rt_tune_options_from_env): on_cand is called on the
     * calling thread after each candidate the worker finished (ok or dropped); known
     * lists candidates measured before (by index in the space, from a journal): a
     * non-default one of them is compiled and checked for resources again but not run,
     * and keeps the times given (the default config always runs: it is the reference). */
    void (*on_cand)(void *user, const RtTuneResult *r, const RtCandidate *c);
    void *user;
    const RtCandidate *known;
    uint32_t nknown;
    /* The bytes reachable from each pointer argument (trt_launch_sized's sizes), or NULL;
     * an argument's copy for the worker ends there instead of at the end of its
     * allocation (a tensor inside a PyTorch caching-allocator segment: the rest of the
     * segment is not copied, restored and compared for every config). */
    const uint64_t *bytes;
} RtTuneOptions;
/* The options from the environment (each variable above, else its default). */
void rt_tune_options_from_env(RtTuneOptions *o);
/* How many candidates rt_tune_run(k, ..., o) will have (the default included), for a
 * progress count; 0 for a kernel without tuning state. */
uint32_t rt_tune_num_candidates(const TrtKernel *k, const RtTuneOptions *o);

/* The per-kernel state of a kernel with @autotune (NULL otherwise): its space, key and
 * the configs chosen per key so far. rt_tune_attach makes it when trt_module_get_kernel
 * makes a kernel whose @autotune leaves at least two configs after the caller's const
 * values; rt_tune_detach frees it. */
typedef struct RtTune RtTune;
TrtStatus rt_tune_attach(TrtKernel *k);
void rt_tune_detach(TrtKernel *k);

/* Tunes k (a kernel with tuning state) for this launch's arguments: the buffers they
 * point to are copied to the worker (after synchronizing `stream`), never written.
 * On success *out holds every candidate and the winner. */
TrtStatus rt_tune_run(TrtKernel *k, const TrtArg *args, uint32_t nargs, TrtStream stream,
                      const RtTuneOptions *o, RtTuneResult *out);
void rt_tune_result_free(RtTuneResult *r);

/* The cache payload of a result (docs/TUNING.md: text, one line per candidate) and its
 * parser (false for a malformed payload). */
char *rt_tune_result_format(const RtTuneResult *r, size_t *len);
bool rt_tune_result_parse(const char *text, size_t len, RtTuneResult *out);

/* The cache key of k's tuning result for a launch's key values and class mask, and the
 * same for a launch's (checked) arguments. `tilec tune` stores a result with
 * rt_cache_put(cache, RT_ENTRY_TUNE, &key, rt_tune_result_format(...)). */
RtKey rt_tune_cache_key(const TrtKernel *k, const int64_t *keyvals, uint64_t mask);
RtKey rt_tune_cache_key_for(const TrtKernel *k, const TrtArg *args);

/* The variant's kernel for a launch of k (which has tuning state): the cached winner,
 * else in max-autotune a winner tuned now, else k itself (its default config). */
/* k's config as text ("BM=128 BN=256 BK=64 warps=8 stages=3"): its value of every key of
 * its @autotune space, or the consts it was made with; snprintf's return convention. */
int rt_tune_config_text(const TrtKernel *k, char *buf, size_t n);
/* A candidate's config as text, the same way ("BM=128 BN=256 warps=8"). */
int rt_tune_candidate_text(const RtCandidate *c, char *buf, size_t n);
TrtStatus rt_tune_select(TrtKernel *k, const TrtArg *args, const uint64_t *bytes, uint32_t nargs, TrtStream stream,
                         uint64_t mask, TrtKernel **out);

/* Whether k (which has tuning state) has chosen its config for these arguments in this
 * process already (so rt_tune_select will not benchmark). */
bool rt_tune_known(TrtKernel *k, const TrtArg *args, uint64_t mask);

/* How many tunings (benchmarking runs) this process has started: tests check that
 * default mode never benchmarks and max-autotune tunes once per key. */
extern atomic_uint rt_tune_runs;

/* The worker's protocol (tools/tile-tune-worker.c: tile-tune-worker JOB_FD RESULT_FD
 * START): a job file (a memfd the parent fills, docs/TUNING.md) of a
 * header, the arguments, the buffers ("regions": each allocation the pointer
 * arguments reach, from the lowest of them to the allocation's end) and the candidates'
 * images; the worker writes lines "start I" and "done I STATUS ..." to the result fd. */
#define RT_TUNE_JOB_MAGIC "TILETUN1"
typedef struct RtJobHeader {
    char magic[8];
    uint32_t header_bytes;     /* sizeof(RtJobHeader): the two sides are one build */
    uint32_t nargs, nregions, ncands;
    int32_t device;
    uint32_t warmup, min_runs, max_runs;
    double budget_ms;
    char kernel[128];
} RtJobHeader;
typedef struct RtJobArg {
    int32_t region;            /* -1: a scalar */
    uint32_t kind;             /* TrtArgKind */
    uint64_t offset;           /* into the region */
    uint64_t bits;             /* a scalar's TrtArg value */
} RtJobArg;
typedef struct RtJobRegion {
    uint64_t data;             /* offset of its bytes in the job file */
    uint64_t size;
    uint32_t written;          /* a kernel stores through a pointer into it */
    uint32_t elem;             /* IrElem of that pointer's pointee, for the comparison */
    char name[64];             /* the parameter, for messages */
} RtJobRegion;
typedef struct RtJobCand {
    uint64_t image, image_len; /* offset and length of the cubin (or PTX) in the job file */
    uint32_t grid[3], threads, shared_bytes;
    uint32_t ntma;             /* tensor maps the worker encodes for each launch */
    uint64_t tma;              /* offset of their ntma recipes (CgTmaDesc) in the job file */
} RtJobCand;

/* Whether a parameter of f is stored through (a store or atomic whose address derives
 * from it): bit i for run-time parameter i. */
uint64_t rt_written_params(const IrFunc *f);

#endif
