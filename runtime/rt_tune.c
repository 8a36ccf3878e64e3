/* The tuner (rt_tune.h, docs/TUNING.md): candidates, the resource model, parallel
 * compiles, the worker that benchmarks, the winner, the cache entry, and the modes'
 * choice of a config at launch. */
#define _GNU_SOURCE   /* memfd_create, dladdr */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frontend/frontend.h"
#include "ir/arena.h"
#include "ir/target.h"
#include "rt_record.h"
#include "rt_tune.h"

extern char **environ;

atomic_uint rt_tune_runs;

static const char *const status_names[RT_CAND_NSTATUS] = {
    [RT_CAND_OK] = "ok", [RT_CAND_PINNED] = "pinned", [RT_CAND_THREADS] = "threads",
    [RT_CAND_SHARED] = "shared-memory", [RT_CAND_COMPILE] = "compile", [RT_CAND_SPILLS] = "spills",
    [RT_CAND_REGISTERS] = "registers", [RT_CAND_OCCUPANCY] = "occupancy",
    [RT_CAND_LAUNCH] = "launch", [RT_CAND_FAULT] = "fault", [RT_CAND_TIMEOUT] = "timeout",
    [RT_CAND_WRONG] = "wrong-output",
};

const char *rt_cand_status_name(RtCandStatus s)
{
    return (unsigned)s < RT_CAND_NSTATUS ? status_names[s] : "?";
}

static bool status_from_name(const char *n, RtCandStatus *out)
{
    for (int i = 0; i < RT_CAND_NSTATUS; i++)
        if (!strcmp(n, status_names[i])) return *out = (RtCandStatus)i, true;
    return false;
}

/* ---- options ------------------------------------------------------------------------ */
static double env_num(const char *name, double def, double lo)
{
    const char *v = getenv(name);
    char *end;
    if (!v || !*v) return def;
    double d = strtod(v, &end);
    if (*end || d < lo) {
        fprintf(stderr, "tile: %s=%s is not a number of at least %g; using %g\n", name, v, lo, def);
        return def;
    }
    return d;
}

void rt_tune_options_from_env(RtTuneOptions *o)
{
    memset(o, 0, sizeof *o);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    o->budget_ms = env_num("TILE_TUNE_BUDGET_MS", 100, 0);
    o->min_runs = (uint32_t)env_num("TILE_TUNE_MIN_RUNS", 10, 1);
    o->max_runs = (uint32_t)env_num("TILE_TUNE_MAX_RUNS", 100, 1);
    if (o->max_runs < o->min_runs) o->max_runs = o->min_runs;
    o->warmup = (uint32_t)env_num("TILE_TUNE_WARMUP", 3, 0);
    o->jobs = (uint32_t)env_num("TILE_TUNE_JOBS", cores > 0 ? (double)cores : 1, 1);
    o->max_configs = (uint32_t)env_num("TILE_TUNE_MAX_CONFIGS", 0, 0);
    o->timeout_ms = env_num("TILE_TUNE_TIMEOUT_MS", 20000, 1);
}

/* ---- which parameters are written ---------------------------------------------------- */
static void mark_sources(const IrFunc *f, IrValue v, uint64_t *out, uint8_t *seen, int depth)
{
    if (seen[v]) return;
    seen[v] = 1;
    const IrValueInfo *vi = &f->values[v];
    if (!vi->def) {
        if (vi->block == &f->body) *out |= vi->index < 64 ? 1ull << vi->index : 0;
        else *out = ~0ull;   /* a loop-carried pointer: every parameter, to be safe */
        return;
    }
    if (ir_op_info[vi->def->code].flags & IR_R || depth > 10000) return;   /* a loaded value */
    for (uint32_t i = 0; i < vi->def->noperands; i++)
        mark_sources(f, vi->def->operands[i], out, seen, depth + 1);
}

static void scan_block(const IrFunc *f, const IrBlock *b, uint64_t *out, uint8_t *seen)
{
    for (const IrOp *op = b->first; op; op = op->next) {
        if (ir_op_info[op->code].flags & IR_W && op->noperands)
            mark_sources(f, op->operands[0], out, seen, 0);
        for (uint32_t r = 0; r < op->nregions; r++) scan_block(f, &op->regions[r], out, seen);
    }
}

uint64_t rt_written_params(const IrFunc *f)
{
    uint64_t out = 0;
    uint8_t *seen = tl_calloc(f->nvalues + 1, 1);
    if (!seen) return ~0ull;
    scan_block(f, &f->body, &out, seen);
    tl_free(seen);
    return out;
}

/* ---- per-kernel state ---------------------------------------------------------------- */
#define RT_TUNE_MAX_ENTRIES 64
#define RT_TUNE_MAX_KEYVALS 8

typedef struct TuneEntry {
    int64_t keyvals[RT_TUNE_MAX_KEYVALS];
    uint64_t mask;
    TrtKernel *chosen;
} TuneEntry;

struct RtTune {
    Arena *arena;
    FeTuneSpace space;
    uint32_t *cands;           /* indices into space.configs that the caller's consts allow */
    uint32_t ncands, pinned;   /* kept, and removed for conflicting with the caller */
    int default_index;         /* the default config's index in space.configs, or -1 */
    FeConfig dflt;             /* the default config: k's own values of every config key */
    uint32_t key_param[RT_TUNE_MAX_KEYVALS], nkey;
    RtKey space_key;           /* hash of every config */
    pthread_mutex_t lock;      /* held while choosing for a new key */
    TuneEntry entries[RT_TUNE_MAX_ENTRIES];
    atomic_uint nentries;      /* published after the entry is complete */
    bool warned_full;
};

static const TrtConst *user_const(const TrtKernel *k, const char *name)
{
    for (uint32_t i = 0; i < k->nconsts; i++)
        if (!strcmp(k->consts[i].name, name)) return &k->consts[i];
    return NULL;
}

/* The value k was lowered with for a config key (a const, warps or stages). */
static bool own_value(const TrtKernel *k, const char *name, int64_t *v)
{
    if (ir_launch_key(name)) return *v = ir_launch_value(k->func, name), true;
    for (uint32_t i = 0; i < k->func->nconsts; i++)
        if (!strcmp(k->func->consts[i].name, name)) return *v = k->func->consts[i].value, true;
    return false;
}

static bool conflicts(const TrtKernel *k, const FeConfig *c)
{
    for (uint32_t i = 0; i < c->nkeys; i++) {
        const TrtConst *u = user_const(k, c->keys[i].name);
        if (u && u->value != c->keys[i].value) return true;
    }
    return false;
}

static bool same_values(const TrtKernel *k, const FeConfig *c)
{
    for (uint32_t i = 0; i < c->nkeys; i++) {
        int64_t v;
        if (!own_value(k, c->keys[i].name, &v) || v != c->keys[i].value) return false;
    }
    return true;
}

void rt_tune_detach(TrtKernel *k)
{
    if (!k->tune) return;
    pthread_mutex_destroy(&k->tune->lock);
    arena_destroy(k->tune->arena);
    tl_free(k->tune);
    k->tune = NULL;
}

static bool add_default_key(Arena *a, FeConfig *d, const char *name, int64_t v)
{
    for (uint32_t i = 0; i < d->nkeys; i++)
        if (!strcmp(d->keys[i].name, name)) return true;
    if (d->nkeys >= RT_TUNE_MAX_KEYS) return false;
    d->keys[d->nkeys++] = (FeDefine){arena_strdup(a, name), v};
    return true;
}

TrtStatus rt_tune_attach(TrtKernel *k)
{
    if (!k->module->prog || !k->func) return TRT_SUCCESS;
    RtTune *t = tl_calloc(1, sizeof *t);
    if (!t || !(t->arena = arena_create())) {
        tl_free(t);
        return rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
    }
    pthread_mutex_init(&t->lock, NULL);
    k->tune = t;
    DiagList d;
    diag_init(&d);
    bool ok = fe_autotune_space(t->arena, k->module->prog, k->name, &t->space, &d);
    diag_free(&d);   /* lowering reported any error already */
    if (!ok || t->space.nconfigs < 2 || t->space.nkey > RT_TUNE_MAX_KEYVALS) {
        rt_tune_detach(k);
        return TRT_SUCCESS;
    }
    t->cands = arena_alloc(t->arena, t->space.nconfigs * sizeof *t->cands);
    t->default_index = -1;
    t->dflt.keys = arena_alloc(t->arena, RT_TUNE_MAX_KEYS * sizeof *t->dflt.keys);
    RtHasher *h = rt_hasher_create();
    for (uint32_t i = 0; i < t->space.nconfigs; i++) {
        const FeConfig *c = &t->space.configs[i];
        for (uint32_t j = 0; h && j < c->nkeys; j++) {
            rt_hash_str(h, c->keys[j].name);
            rt_hash_u64(h, (uint64_t)c->keys[j].value);
        }
        if (h) rt_hash_u64(h, 0xffff);
        for (uint32_t j = 0; j < c->nkeys; j++) {
            int64_t v;
            if (!own_value(k, c->keys[j].name, &v) || !add_default_key(t->arena, &t->dflt, c->keys[j].name, v))
                ok = false;
        }
        if (conflicts(k, c)) t->pinned++;
        else t->cands[t->ncands++] = i;
    }
    if (h) t->space_key = rt_hasher_key(h);
    rt_hasher_destroy(h);
    for (uint32_t i = 0; i < t->ncands && t->default_index < 0; i++)
        if (same_values(k, &t->space.configs[t->cands[i]])) t->default_index = (int)t->cands[i];
    for (uint32_t i = 0; i < t->space.nkey; i++) {
        uint32_t p = 0;
        while (p < k->nparams && strcmp(k->params[p].name, t->space.key[i])) p++;
        if (p == k->nparams) ok = false;
        t->key_param[t->nkey++] = p;
    }
    /* Nothing left to choose from (the caller fixed every key), or a space we cannot
     * describe: the kernel runs as given, as without @autotune. */
    if (!ok || t->ncands + (t->default_index < 0) < 2) rt_tune_detach(k);
    return TRT_SUCCESS;
}

/* ---- key values ---------------------------------------------------------------------- */
static int64_t arg_int(const TrtArg *a)
{
    switch (a->kind) {
    case TRT_ARG_BOOL: case TRT_ARG_I8: return a->v.i8;
    case TRT_ARG_I16: return a->v.i16;
    case TRT_ARG_I32: return a->v.i32;
    case TRT_ARG_U8: return a->v.u8;
    case TRT_ARG_U16: return a->v.u16;
    case TRT_ARG_U32: return a->v.u32;
    default: return a->v.i64;
    }
}

static void key_values(const TrtKernel *k, const TrtArg *args, int64_t *out)
{
    for (uint32_t i = 0; i < k->tune->nkey; i++) out[i] = arg_int(&args[k->tune->key_param[i]]);
}

static char *key_text(const TrtKernel *k, const int64_t *kv)
{
    char buf[512];
    size_t n = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < k->tune->nkey && n < sizeof buf; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s=%lld", i ? " " : "",
                              k->tune->space.key[i], (long long)kv[i]);
    return tl_strdup(buf);
}

RtKey rt_tune_cache_key(const TrtKernel *k, const int64_t *kv, uint64_t mask)
{
    RtKey key = {{0}};
    const TrtContext *ctx = k->module->ctx;
    RtHasher *h = rt_hasher_create();
    if (!h) return key;
    rt_hash_str(h, "tune");
    rt_hash_str(h, rt_compiler_identity());
    rt_hash_str(h, ctx->knobs_text);   /* the knobs change the code, so its timings */
    rt_hash_bytes(h, k->ir_key.b, sizeof k->ir_key.b);
    rt_hash_bytes(h, k->tune->space_key.b, sizeof k->tune->space_key.b);
    for (uint32_t i = 0; i < k->tune->nkey; i++) rt_hash_u64(h, (uint64_t)kv[i]);
    rt_hash_u64(h, mask);
    rt_hash_str(h, ctx->arch);
    rt_hash_u64(h, (uint64_t)ctx->drv->version);
    rt_hash_u64(h, (uint64_t)(ctx->cc_major * 10 + ctx->cc_minor));
    key = rt_hasher_key(h);
    rt_hasher_destroy(h);
    return key;
}

RtKey rt_tune_cache_key_for(const TrtKernel *k, const TrtArg *args)
{
    int64_t kv[RT_TUNE_MAX_KEYVALS];
    key_values(k, args, kv);
    return rt_tune_cache_key(k, kv, rt_class_mask(k, args));
}

/* ---- results ------------------------------------------------------------------------- */
void rt_tune_result_free(RtTuneResult *r)
{
    if (!r) return;
    tl_free(r->kernel);
    tl_free(r->key);
    tl_free(r->cands);
    tl_free(r->names);
    memset(r, 0, sizeof *r);
}

/* Appends " NAME=VALUE" (no space first) at buf[len]: snprintf's convention, so the
 * returned length counts what did not fit in n bytes too. */
static size_t put_key(char *buf, size_t n, size_t len, const char *name, int64_t value)
{
    return len + (size_t)snprintf(len < n ? buf + len : NULL, len < n ? n - len : 0, "%s%s=%lld",
                                  len ? " " : "", name, (long long)value);
}

int rt_tune_config_text(const TrtKernel *k, char *buf, size_t n)
{
    /* A kernel with @autotune: its value of every key of the space (a chosen config's
     * handle has all of them); otherwise the consts it was made with. */
    size_t len = 0;
    if (n) buf[0] = '\0';
    if (k->tune)
        for (uint32_t i = 0; i < k->tune->dflt.nkeys; i++)
            len = put_key(buf, n, len, k->tune->dflt.keys[i].name, k->tune->dflt.keys[i].value);
    else
        for (uint32_t i = 0; i < k->nconsts; i++) len = put_key(buf, n, len, k->consts[i].name, k->consts[i].value);
    return (int)len;
}

int rt_tune_candidate_text(const RtCandidate *c, char *buf, size_t n)
{
    size_t len = 0;
    if (n) buf[0] = '\0';
    for (uint32_t i = 0; i < c->nkeys; i++) len = put_key(buf, n, len, c->keys[i].name, c->keys[i].value);
    return (int)len;
}

/* Format (docs/TUNING.md):
 *   tile-tune 1
 *   kernel NAME
 *   key M=4096 N=4096
 *   space EXPANDED WHERE_REMOVED DUPLICATES PINNED
 *   winner I          (the position of the winner among the c lines)
 *   total MS
 *   c INDEX DEFAULT STATUS MEDIAN MIN MAX RUNS COMPILE_MS BENCH_MS THREADS SHARED REGS BLOCKS\tCONFIG\tWHY
 */
char *rt_tune_result_format(const RtTuneResult *r, size_t *len)
{
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    if (!f) return NULL;
    fprintf(f, "tile-tune 1\nkernel %s\nkey %s\nspace %u %u %u %u\nwinner %d\ntotal %.3f\n", r->kernel,
            r->key, r->expanded, r->where_removed, r->duplicates, r->removed[RT_CAND_PINNED], r->winner,
            r->total_ms);
    for (uint32_t i = 0; i < r->ncands; i++) {
        const RtCandidate *c = &r->cands[i];
        char cfg[512], why[sizeof c->why];
        rt_tune_candidate_text(c, cfg, sizeof cfg);
        snprintf(why, sizeof why, "%s", c->why);
        for (char *p = why; *p; p++)
            if (*p == '\n' || *p == '\t') *p = ' ';
        fprintf(f, "c %d %d %s %.6f %.6f %.6f %u %.3f %.3f %u %u %u %u\t%s\t%s\n", c->index,
                c->is_default, rt_cand_status_name(c->status), c->median_ms, c->min_ms, c->max_ms,
                c->runs, c->compile_ms, c->bench_ms, c->threads, c->shared_bytes, c->regs,
                c->blocks_per_sm, cfg, why);
    }
    fclose(f);
    char *out = text ? tl_strdup(text) : NULL;
    free(text);
    return out;
}

/* A config "A=1 B=2" into c's keys, the names appended to *names. */
static bool parse_config(const char *s, RtCandidate *c, char **names, size_t *nlen)
{
    c->nkeys = 0;
    while (*s) {
        s += strspn(s, " ");
        if (!*s) break;
        size_t w = strcspn(s, " ");
        const char *eq = memchr(s, '=', w);
        if (!eq || eq == s || c->nkeys >= RT_TUNE_MAX_KEYS) return false;
        char *end;
        long long v = strtoll(eq + 1, &end, 10);
        if (end != s + w) return false;
        size_t nl = (size_t)(eq - s);
        char *nn = tl_realloc(*names, *nlen + nl + 1);
        if (!nn) return false;
        *names = nn;
        memcpy(nn + *nlen, s, nl);
        nn[*nlen + nl] = '\0';
        c->keys[c->nkeys].name = (const char *)(uintptr_t)*nlen;   /* an offset until the end */
        c->keys[c->nkeys++].value = v;
        *nlen += nl + 1;
        s += w;
    }
    return true;
}

bool rt_tune_result_parse(const char *text, size_t len, RtTuneResult *out)
{
    memset(out, 0, sizeof *out);
    char *copy = tl_malloc(len + 1);
    if (!copy) return false;
    memcpy(copy, text, len);
    copy[len] = '\0';
    size_t nlen = 0;
    bool ok = !strncmp(copy, "tile-tune 1\n", 12);
    char *save = NULL;
    uint32_t cap = 0;
    for (char *line = ok ? strtok_r(copy + 12, "\n", &save) : NULL; ok && line;
         line = strtok_r(NULL, "\n", &save)) {
        if (!strncmp(line, "kernel ", 7)) ok = (out->kernel = tl_strdup(line + 7)) != NULL;
        else if (!strncmp(line, "key ", 4) || !strcmp(line, "key"))
            ok = (out->key = tl_strdup(line[3] ? line + 4 : "")) != NULL;
        else if (!strncmp(line, "space ", 6))
            ok = sscanf(line + 6, "%u %u %u %u", &out->expanded, &out->where_removed, &out->duplicates,
                        &out->removed[RT_CAND_PINNED]) == 4;
        else if (!strncmp(line, "winner ", 7)) ok = sscanf(line + 7, "%d", &out->winner) == 1;
        else if (!strncmp(line, "total ", 6)) ok = sscanf(line + 6, "%lf", &out->total_ms) == 1;
        else if (!strncmp(line, "c ", 2)) {
            if (out->ncands == cap) {
                cap = cap ? 2 * cap : 16;
                RtCandidate *nc = tl_realloc(out->cands, cap * sizeof *nc);
                if (!nc) { ok = false; break; }
                out->cands = nc;
            }
            RtCandidate *c = &out->cands[out->ncands];
            memset(c, 0, sizeof *c);
            char st[32];
            int isdef = 0;
            char *tab1 = strchr(line, '\t'), *tab2 = tab1 ? strchr(tab1 + 1, '\t') : NULL;
            if (!tab2) { ok = false; break; }
            *tab1 = *tab2 = '\0';
            ok = sscanf(line + 2, "%d %d %31s %lf %lf %lf %u %lf %lf %u %u %u %u", &c->index, &isdef,
                        st, &c->median_ms, &c->min_ms, &c->max_ms, &c->runs, &c->compile_ms,
                        &c->bench_ms, &c->threads, &c->shared_bytes, &c->regs, &c->blocks_per_sm) == 13 &&
                 status_from_name(st, &c->status) && parse_config(tab1 + 1, c, &out->names, &nlen);
            c->is_default = isdef != 0;
            snprintf(c->why, sizeof c->why, "%s", tab2 + 1);
            if (ok) out->removed[c->status]++, out->ncands++;
        } else ok = false;
    }
    tl_free(copy);
    ok = ok && out->kernel && out->key && out->ncands && out->winner >= 0 &&
         (uint32_t)out->winner < out->ncands && out->cands[out->winner].status == RT_CAND_OK;
    for (uint32_t i = 0; ok && i < out->ncands; i++)
        for (uint32_t j = 0; j < out->cands[i].nkeys; j++)
            out->cands[i].keys[j].name = out->names + (uintptr_t)out->cands[i].keys[j].name;
    if (!ok) rt_tune_result_free(out);
    return ok;
}

/* ---- one run's state ----------------------------------------------------------------- */
typedef struct Run {
    TrtKernel *k;
    const TrtArg *args;
    uint32_t nargs;
    uint64_t mask;
    RtLimits lim;
    RtTuneResult *res;
    RtBlob *images;            /* per candidate, the loaded image (RT_META_BYTES + code) */
    uint32_t (*grids)[3];
    atomic_uint next;
    const RtTuneOptions *opts;
    /* Bit p: a candidate's tensor map of pointer parameter p cannot take these
     * arguments (rt_tma.c); the candidates are compiled again without p's class, as a
     * launch falls back to (rt_pick_variant). */
    _Atomic uint64_t tma_refused;
    uint32_t *chosen;          /* per candidate, the launch keys the schedule chose (RtVariant.chosen) */
} Run;

static void merge_consts(const TrtKernel *k, const RtCandidate *c, TrtConst *out, uint32_t *n)
{
    *n = 0;
    for (uint32_t i = 0; i < k->nconsts && *n < TRT_MAX_ARGS; i++) {
        bool in_config = false;
        for (uint32_t j = 0; j < c->nkeys; j++) in_config |= !strcmp(c->keys[j].name, k->consts[i].name);
        if (!in_config) out[(*n)++] = k->consts[i];
    }
    for (uint32_t j = 0; j < c->nkeys && *n < TRT_MAX_ARGS; j++) out[(*n)++] = c->keys[j];
}

static void drop(RtCandidate *c, RtCandStatus s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void drop(RtCandidate *c, RtCandStatus s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    c->status = s;
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
    c->why[strcspn(c->why, "\n")] = '\0';
}

static void last_error_line(char *buf, size_t n)
{
    const char *e = trt_last_error();
    const char *nl = strchr(e, '\n');
    /* "the kernel has errors:\nt.tile:3:5: error: ..." names the error on line 2 */
    if (nl && nl[1] && nl[-1] == ':') snprintf(buf, n, "%.*s %.*s", (int)(nl - e), e, (int)strcspn(nl + 1, "\n"), nl + 1);
    else snprintf(buf, n, "%.*s", (int)strcspn(e, "\n"), e);
}

/* Resource model, compile, load and the driver's attributes of one candidate. */
static void prepare_candidate(Run *run, uint32_t i)
{
    RtCandidate *c = &run->res->cands[i];
    TrtKernel *k = run->k;
    TrtContext *ctx = k->module->ctx;
    double t0 = tl_now_ms();
    TrtConst consts[TRT_MAX_ARGS];
    uint32_t n;
    char why[200];
    merge_consts(k, c, consts, &n);
    TrtKernel *child = NULL;
    TrtStatus s = rt_kernel_create_detached(k->module, k->name, consts, n, &child);
    if (s) {
        last_error_line(why, sizeof why);
        drop(c, RT_CAND_COMPILE, "%s", why);
        goto out;
    }
    uint32_t min_regs = 0;
    if ((s = rt_kernel_resources(child, run->mask, &c->threads, &c->shared_bytes, &min_regs))) {
        last_error_line(why, sizeof why);
        drop(c, RT_CAND_COMPILE, "%s", why);
        goto out;
    }
    if (c->threads > (uint32_t)run->lim.max_threads) {
        drop(c, RT_CAND_THREADS, "%u threads per block; the device runs at most %d", c->threads,
             run->lim.max_threads);
        goto out;
    }
    if (c->shared_bytes > (uint32_t)run->lim.smem_optin) {
        drop(c, RT_CAND_SHARED, "%u bytes of shared memory per block; the device allows %d",
             c->shared_bytes, run->lim.smem_optin);
        goto out;
    }
    const TileTarget *target = tile_target(run->k->module->ctx->arch);
    uint32_t max_regs = target ? target->regs_per_thread : tile_target_default()->regs_per_thread;
    if (min_regs > max_regs) {
        drop(c, RT_CAND_REGISTERS, "the values its loops carry need at least %u registers per "
             "thread (of %u threads); a thread has at most %u", min_regs, c->threads, max_regs);
        goto out;
    }
    RtOrigin origin;
    RtBlob img = {0};
    if ((s = rt_variant_image(child, run->mask, false, &img, &origin))) {
        last_error_line(why, sizeof why);
        drop(c, RT_CAND_COMPILE, "%s", why);
        goto out;
    }
    RtVariant v = {0};
    if ((s = rt_variant_load(child, &img, &v))) {
        last_error_line(why, sizeof why);
        drop(c, RT_CAND_LAUNCH, "%s", why);
        rt_blob_free(&img);
        goto out;
    }
    if (v.ntma) {
        RtTmaMaps maps;
        char tw[200];
        uint64_t refused = rt_tma_encode_all(ctx->drv, v.tma, v.ntma, run->args, run->nargs, &maps, tw, sizeof tw);
        if (refused) {
            atomic_fetch_or(&run->tma_refused, refused);
            drop(c, RT_CAND_LAUNCH, "arguments cannot be copied by TMA (%s)", tw);
        }
    }
    run->chosen[i] = v.chosen;
    int regs = 0, local = 0;
    ctx->drv->cuFuncGetAttribute(&regs, RT_CU_FUNC_ATTR_NUM_REGS, v.fn);
    ctx->drv->cuFuncGetAttribute(&local, RT_CU_FUNC_ATTR_LOCAL_SIZE_BYTES, v.fn);
    ctx->drv->cuModuleUnload(v.mod);
    tl_free(v.tma);
    c->regs = (uint32_t)regs;
    c->threads = v.threads;
    c->shared_bytes = v.shared_bytes;
    c->blocks_per_sm = rt_blocks_per_sm(&run->lim, c->threads, c->regs, c->shared_bytes);
    /* The default config stays even when it spills: it is the reference the others are
     * checked against, and what runs when nothing is tuned. */
    if (local > 0 && c->is_default)
        snprintf(c->why, sizeof c->why, "kept although the assembler spills %d bytes of local "
                 "memory per thread: the default config is the reference", local);
    else if (local > 0)
        drop(c, RT_CAND_SPILLS, "the assembler spills: %d bytes of local memory per thread", local);
    if (c->status != RT_CAND_OK) {
    } else if ((uint64_t)c->regs * c->threads > (uint64_t)run->lim.regs_per_block)
        drop(c, RT_CAND_REGISTERS, "%u registers x %u threads exceed the %d of a block", c->regs,
             c->threads, run->lim.regs_per_block);
    else if (!c->blocks_per_sm)
        drop(c, RT_CAND_OCCUPANCY, "no block fits on an SM (%u threads, %u registers, %u bytes shared)",
             c->threads, c->regs, c->shared_bytes);
    /* the worker launches the grid a launch of this config runs: a persistent one's
     * capped grid, a cluster kernel's CTAs */
    uint32_t g[3];
    if (c->status == RT_CAND_OK &&
        ((s = rt_kernel_grid(child, run->args, g)) || (s = rt_launch_grid(child, &v, g, run->grids[i])))) {
        last_error_line(why, sizeof why);
        drop(c, RT_CAND_LAUNCH, "%s", why);
    }
    if (c->status == RT_CAND_OK) run->images[i] = img;
    else rt_blob_free(&img);
out:
    rt_kernel_free_detached(child);
    c->compile_ms = tl_now_ms() - t0;
}

static void *compile_thread(void *p)
{
    Run *run = p;
    TrtContext *ctx = run->k->module->ctx;
    ctx->drv->cuCtxSetCurrent(ctx->cuctx);
    for (;;) {
        uint32_t i = atomic_fetch_add(&run->next, 1);
        if (i >= run->res->ncands) break;
        if (run->res->cands[i].status == RT_CAND_OK) prepare_candidate(run, i);
    }
    return NULL;
}

static void compile_all(Run *run, uint32_t jobs)
{
    pthread_t th[64];
    uint32_t n = jobs < 64 ? jobs : 64;
    if (n > run->res->ncands) n = run->res->ncands;
    uint32_t started = 0;
    for (; started + 1 < n; started++)
        if (pthread_create(&th[started], NULL, compile_thread, run)) break;
    compile_thread(run);   /* this thread works too */
    for (uint32_t i = 0; i < started; i++) pthread_join(th[i], NULL);
}

/* ---- the worker ------------------------------------------------------------------------ */
/* $TILE_TUNE_WORKER, else tile-tune-worker beside the object holding this code (the
 * build tree), else in TILE_WORKER_REL from there (the installed layout: libexec/tile
 * relative to the library directory, as CMake's GNUInstallDirs place them). */
#ifndef TILE_WORKER_REL
#define TILE_WORKER_REL "../libexec/tile"
#endif
static bool worker_path(char *buf, size_t n)
{
    const char *env = getenv("TILE_TUNE_WORKER");
    if (env && *env) return snprintf(buf, n, "%s", env), true;
    Dl_info info;
    if (!dladdr((void *)&worker_path, &info) || !info.dli_fname) return false;
    const char *slash = strrchr(info.dli_fname, '/');
    int d = slash ? (int)(slash - info.dli_fname) : 1;
    const char *dir = slash ? info.dli_fname : ".";
    snprintf(buf, n, "%.*s/tile-tune-worker", d, dir);
    if (!access(buf, X_OK)) return true;
    snprintf(buf, n, "%.*s/" TILE_WORKER_REL "/tile-tune-worker", d, dir);
    return !access(buf, X_OK);
}

typedef struct Region {
    CUdeviceptr base, end;     /* copied: [base, end) */
    CUdeviceptr alloc_end;     /* the end of its allocation: one region per allocation */
    uint32_t written, elem;
    const char *name;
} Region;

typedef struct Job {
    int fd;
    size_t size;
    int *cand_of;              /* job candidate -> result candidate */
    uint32_t ncands;
} Job;

static bool put(int fd, const void *p, size_t n, size_t *off)
{
    const char *c = p;
    while (n) {
        ssize_t w = pwrite(fd, c, n, (off_t)*off);
        if (w <= 0) return false;
        c += w, n -= (size_t)w, *off += (size_t)w;
    }
    return true;
}

/* The job file: header, args, regions (their bytes copied from the device), candidates
 * (the default config first) and their images. */
static TrtStatus write_job(Run *run, TrtStream stream, Job *job)
{
    TrtKernel *k = run->k;
    TrtContext *ctx = k->module->ctx;
    const RtDriver *d = ctx->drv;
    uint64_t written = rt_written_params(k->func);
    Region regs[TRT_MAX_ARGS];
    int32_t region_of[TRT_MAX_ARGS];
    uint32_t nreg = 0;
    CUresult r = stream ? d->cuStreamSynchronize(stream) : d->cuCtxSynchronize();
    if (r) return rt_ctx_driver_error(ctx, r, "cuStreamSynchronize (before tuning)");
    for (uint32_t i = 0; i < run->nargs; i++) {
        region_of[i] = -1;
        if (run->args[i].kind != TRT_ARG_PTR || !run->args[i].v.ptr) continue;
        CUdeviceptr p = run->args[i].v.ptr, base;
        size_t size;
        if ((r = d->cuMemGetAddressRange(&base, &size, p)))
            return rt_fail(TRT_ERROR_INVALID_ARGUMENT,
                           "tuning kernel '%s': argument %u ('%s') is not in device memory the "
                           "driver knows (cuMemGetAddressRange: %d)", k->name, i + 1, k->params[i].name, r);
        /* With the caller's size of the buffer, the copy ends there (within the allocation). */
        uint64_t b = run->opts->bytes ? run->opts->bytes[i] : TRT_BYTES_UNKNOWN;
        CUdeviceptr end = b != TRT_BYTES_UNKNOWN && b < base + size - p ? p + b : base + size;
        uint32_t j = 0;
        while (j < nreg && !(regs[j].alloc_end == base + size)) j++;   /* one region per allocation */
        if (j == nreg) regs[nreg++] = (Region){p, end, base + size, 0, k->params[i].pointee, k->params[i].name};
        if (p < regs[j].base) regs[j].base = p;
        if (end > regs[j].end) regs[j].end = end;
        bool w = i < 64 && (written >> i & 1);
        if (w && !regs[j].written) regs[j].written = 1, regs[j].elem = k->params[i].pointee,
                                   regs[j].name = k->params[i].name;
        region_of[i] = (int32_t)j;
    }
    uint64_t total = 0, limit = (uint64_t)env_num("TILE_TUNE_MAX_BYTES", 16.0 * (1ull << 30), 0);
    for (uint32_t j = 0; j < nreg; j++) total += regs[j].end - regs[j].base;
    run->res->copy_bytes = total;
    if (total > limit)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT,
                       "tuning kernel '%s': its buffers hold %llu bytes, more than TILE_TUNE_MAX_BYTES "
                       "(%llu)", k->name, (unsigned long long)total, (unsigned long long)limit);
    job->fd = memfd_create("tile-tune-job", MFD_CLOEXEC);
    if (job->fd < 0) return rt_fail(TRT_ERROR_CACHE_IO, "memfd_create: %s", strerror(errno));
    job->cand_of = tl_calloc(run->res->ncands + 1, sizeof *job->cand_of);
    if (!job->cand_of) return rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
    /* The default config first: the reference of every comparison. */
    for (uint32_t i = 0; i < run->res->ncands; i++)
        if (run->res->cands[i].is_default && run->res->cands[i].status == RT_CAND_OK)
            job->cand_of[job->ncands++] = (int)i;
    for (uint32_t i = 0; !job->ncands && i < run->res->ncands; i++)
        if (run->res->cands[i].is_default)
            return rt_fail(TRT_ERROR_COMPILE, "tuning kernel '%s': its default config cannot run (%s: %s)", k->name,
                           rt_cand_status_name(run->res->cands[i].status), run->res->cands[i].why);
    if (!job->ncands) return rt_fail(TRT_ERROR_COMPILE, "tuning kernel '%s': no default config", k->name);
    for (uint32_t i = 0; i < run->res->ncands; i++)
        if (!run->res->cands[i].is_default && run->res->cands[i].status == RT_CAND_OK &&
            !run->res->cands[i].known)
            job->cand_of[job->ncands++] = (int)i;
    RtJobHeader h = {.header_bytes = sizeof h, .nargs = run->nargs, .nregions = nreg,
                     .ncands = job->ncands, .device = ctx->device, .warmup = 0};
    memcpy(h.magic, RT_TUNE_JOB_MAGIC, 8);
    snprintf(h.kernel, sizeof h.kernel, "%s", k->name);
    RtTuneOptions o;
    rt_tune_options_from_env(&o);
    h.warmup = o.warmup, h.min_runs = o.min_runs, h.max_runs = o.max_runs, h.budget_ms = o.budget_ms;
    size_t off = sizeof h + run->nargs * sizeof(RtJobArg) + nreg * sizeof(RtJobRegion) +
                 job->ncands * sizeof(RtJobCand);
    size_t hoff = 0;
    bool ok = put(job->fd, &h, sizeof h, &hoff);
    for (uint32_t i = 0; ok && i < run->nargs; i++) {
        RtJobArg a = {region_of[i], run->args[i].kind, 0, run->args[i].v.u64};
        if (region_of[i] >= 0) a.offset = run->args[i].v.ptr - regs[region_of[i]].base;
        ok = put(job->fd, &a, sizeof a, &hoff);
    }
    void *host = NULL;
    for (uint32_t j = 0; ok && j < nreg; j++) {
        RtJobRegion jr = {off, regs[j].end - regs[j].base, regs[j].written, regs[j].elem, ""};
        snprintf(jr.name, sizeof jr.name, "%s", regs[j].name);
        ok = put(job->fd, &jr, sizeof jr, &hoff);
        if (!ok || !(host = tl_malloc(jr.size))) break;
        if ((r = d->cuMemcpyDtoH(host, regs[j].base, jr.size))) {
            tl_free(host);
            return rt_ctx_driver_error(ctx, r, "cuMemcpyDtoH (copying a buffer for tuning)");
        }
        ok = put(job->fd, host, jr.size, &off);
        tl_free(host);
        host = NULL;
    }
    for (uint32_t i = 0; ok && i < job->ncands; i++) {
        int ci = job->cand_of[i];
        const RtBlob *img = &run->images[ci];
        const RtCandidate *c = &run->res->cands[ci];
        size_t head = rt_meta_size(img);
        uint32_t ntma = 0;
        if (head > RT_META_BYTES) memcpy(&ntma, (const char *)img->data + 8, sizeof ntma);
        RtJobCand jc = {off + ntma * sizeof(CgTmaDesc), img->len - head,
                        {run->grids[ci][0], run->grids[ci][1], run->grids[ci][2]}, c->threads, c->shared_bytes, ntma,
                        off};
        ok = put(job->fd, &jc, sizeof jc, &hoff) &&
             put(job->fd, (const char *)img->data + RT_META_BYTES, ntma * sizeof(CgTmaDesc), &off) &&
             put(job->fd, (const char *)img->data + head, jc.image_len, &off);
    }
    job->size = off;
    if (!ok) return rt_fail(TRT_ERROR_OUT_OF_MEMORY, "tuning: cannot write the job file");
    return TRT_SUCCESS;
}

/* Runs the worker from job candidate `start`; fills results as lines arrive. Returns the
 * next candidate to run (a restart after a fault or a timeout), or ncands when done,
 * or -1 with the thread's error set when the worker could not run at all. */
static void tell(const Run *run, const RtCandidate *c)
{
    if (run->opts && run->opts->on_cand) run->opts->on_cand(run->opts->user, run->res, c);
}

static long run_worker(Run *run, const Job *job, uint32_t start, const char *path, double timeout_ms)
{
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC)) return rt_fail(TRT_ERROR_CACHE_IO, "pipe: %s", strerror(errno)), -1;
    enum { JOB_FD = 100, RES_FD = 101 };
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, job->fd, JOB_FD);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], RES_FD);
    char jfd[16], rfd[16], st[16];
    snprintf(jfd, sizeof jfd, "%d", JOB_FD);
    snprintf(rfd, sizeof rfd, "%d", RES_FD);
    snprintf(st, sizeof st, "%u", start);
    char *argv[] = {(char *)path, jfd, rfd, st, NULL};
    pid_t pid;
    int e = job->fd == RES_FD || pipefd[1] == JOB_FD ? EBADF
                                                     : posix_spawn(&pid, path, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(pipefd[1]);
    if (e) {
        close(pipefd[0]);
        return rt_fail(TRT_ERROR_NOT_FOUND, "cannot start the tuning worker %s: %s", path, strerror(e)), -1;
    }
    char buf[4096];
    size_t have = 0;
    long current = -1, next = start;
    bool timed_out = false, eof = false, started = false;
    double t_start = tl_now_ms();
    while (!eof && !timed_out) {
        /* Opening the driver and copying the buffers may take longer than a config: the
         * first line gets at least a minute. */
        struct pollfd p = {pipefd[0], POLLIN, 0};
        int pr = poll(&p, 1, (int)(started || timeout_ms > 60000 ? timeout_ms : 60000));
        if (pr == 0) {
            timed_out = true;
            break;
        }
        if (pr < 0 && errno == EINTR) continue;
        ssize_t got = read(pipefd[0], buf + have, sizeof buf - 1 - have);
        if (got <= 0) {
            eof = true;
            break;
        }
        have += (size_t)got;
        buf[have] = '\0';
        started = true;
        char *line = buf, *nl;
        while ((nl = strchr(line, '\n'))) {
            *nl = '\0';
            unsigned idx;
            char status[32] = "", rest[300] = "";
            if (sscanf(line, "start %u", &idx) == 1) {
                current = idx;
                t_start = tl_now_ms();
            } else if (sscanf(line, "done %u %31s %299[^\n]", &idx, status, rest) >= 2 && idx < job->ncands) {
                RtCandidate *c = &run->res->cands[job->cand_of[idx]];
                c->bench_ms = tl_now_ms() - t_start;
                if (!strcmp(status, "ok")) {
                    if (sscanf(rest, "%lf %lf %lf %u", &c->median_ms, &c->min_ms, &c->max_ms, &c->runs) != 4)
                        drop(c, RT_CAND_LAUNCH, "the worker's report is malformed");
                } else {
                    RtCandStatus s = RT_CAND_LAUNCH;
                    status_from_name(status, &s);
                    drop(c, s, "%s", rest);
                }
                current = -1;
                next = (long)idx + 1;
                tell(run, c);
            }
            line = nl + 1;
        }
        have = strlen(line);
        memmove(buf, line, have + 1);
        if (have == sizeof buf - 1) have = 0;   /* a line too long: drop it */
    }
    close(pipefd[0]);
    int wst = 0;
    if (timed_out) kill(pid, SIGKILL);
    while (waitpid(pid, &wst, 0) < 0 && errno == EINTR) {}
    if (current >= 0) {
        RtCandidate *c = &run->res->cands[job->cand_of[current]];
        c->bench_ms = tl_now_ms() - t_start;
        if (timed_out)
            drop(c, RT_CAND_TIMEOUT, "no result within %.0f ms (TILE_TUNE_TIMEOUT_MS); the worker was killed",
                 timeout_ms);
        else if (WIFSIGNALED(wst))
            drop(c, RT_CAND_FAULT, "the worker died of signal %d", WTERMSIG(wst));
        else
            drop(c, RT_CAND_FAULT, "the worker exited with status %d", WEXITSTATUS(wst));
        tell(run, c);
        return current + 1;
    }
    if (next == start)   /* it stopped without running a config: it could not start */
        return rt_fail(TRT_ERROR_DRIVER, "the tuning worker %s stopped before running a config "
                       "(%s %d)", path, WIFSIGNALED(wst) ? "signal" : "exit status",
                       WIFSIGNALED(wst) ? WTERMSIG(wst) : WEXITSTATUS(wst)), -1;
    return next;
}

static TrtStatus benchmark(Run *run, TrtStream stream, const RtTuneOptions *o, const char *path)
{
    Job job = {-1, 0, NULL, 0};
    TrtStatus s = write_job(run, stream, &job);
    atomic_fetch_add(&rt_tune_runs, 1);
    for (long at = 0; !s && at < (long)job.ncands;) {
        long next = run_worker(run, &job, (uint32_t)at, path, o->timeout_ms);
        if (next < 0) s = TRT_ERROR_DRIVER;
        else if (next <= at) s = rt_fail(TRT_ERROR_DRIVER, "the tuning worker made no progress");
        else if (at == 0 && run->res->cands[job.cand_of[0]].status != RT_CAND_OK)
            s = rt_fail(TRT_ERROR_DRIVER, "tuning kernel '%s': its default config failed in the worker "
                        "(%s: %s), so no other config can be checked", run->k->name,
                        rt_cand_status_name(run->res->cands[job.cand_of[0]].status),
                        run->res->cands[job.cand_of[0]].why);
        else at = next;
    }
    if (job.fd >= 0) close(job.fd);
    tl_free(job.cand_of);
    return s;
}

/* ---- the whole run ---------------------------------------------------------------------- */
/* The fastest correct candidate; equal medians go to the default config, then to the
 * lower index in the space (docs/TUNING.md: the tie rule). */
static int pick_winner(const RtTuneResult *r)
{
    int best = -1;
    for (uint32_t i = 0; i < r->ncands; i++) {
        const RtCandidate *c = &r->cands[i], *b = best >= 0 ? &r->cands[best] : NULL;
        if (c->status != RT_CAND_OK) continue;
        if (!b || c->median_ms < b->median_ms ||
            (c->median_ms == b->median_ms && !b->is_default &&
             (c->is_default || c->index < b->index)))
            best = (int)i;
    }
    return best;
}

static bool add_candidate(RtTuneResult *r, const TrtKernel *k, const FeConfig *cfg, int index,
                          bool is_default)
{
    RtCandidate *c = &r->cands[r->ncands++];
    memset(c, 0, sizeof *c);
    c->index = index;
    c->is_default = is_default;
    if (cfg->nkeys > RT_TUNE_MAX_KEYS) return false;
    for (uint32_t i = 0; i < cfg->nkeys; i++) c->keys[c->nkeys++] = (TrtConst){cfg->keys[i].name, cfg->keys[i].value};
    return true;
}

/* The result's key names point into the kernel's space; copy them so a result outlives
 * the kernel (it is formatted, cached and parsed back). */
static bool own_names(RtTuneResult *r)
{
    size_t n = 0;
    for (uint32_t i = 0; i < r->ncands; i++)
        for (uint32_t j = 0; j < r->cands[i].nkeys; j++) n += strlen(r->cands[i].keys[j].name) + 1;
    if (!(r->names = tl_malloc(n + 1))) return false;
    size_t at = 0;
    for (uint32_t i = 0; i < r->ncands; i++)
        for (uint32_t j = 0; j < r->cands[i].nkeys; j++) {
            size_t l = strlen(r->cands[i].keys[j].name) + 1;
            memcpy(r->names + at, r->cands[i].keys[j].name, l);
            r->cands[i].keys[j].name = r->names + at;
            at += l;
        }
    return true;
}

/* Candidates measured before (o->known, by space index) keep those times and are not
 * sent to the worker, if they still pass the resource checks; the default always runs. */
static void apply_known(RtTuneResult *r, const RtTuneOptions *o)
{
    for (uint32_t i = 0; i < r->ncands; i++) {
        RtCandidate *c = &r->cands[i];
        for (uint32_t j = 0; j < o->nknown && !c->is_default && c->status == RT_CAND_OK; j++) {
            const RtCandidate *kn = &o->known[j];
            if (kn->index != c->index) continue;
            c->known = true;
            c->median_ms = kn->median_ms, c->min_ms = kn->min_ms, c->max_ms = kn->max_ms;
            c->runs = kn->runs, c->bench_ms = kn->bench_ms;
            if (kn->status != RT_CAND_OK) drop(c, kn->status, "%s", kn->why);
        }
    }
}

/* The schedule's twins: each candidate for which passes/schedule.c chose launch keys
 * (ws, persistent, overlap, pingpong: the space did not give them) is also tried with
 * those keys given 0, the plain schedule, so the tuner measures the choice instead of
 * trusting it. A twin's space index is past the space's (nconfigs + 1 + the index, the
 * default's -1 counting as nconfigs), so known results and reports tell them apart.
 * Returns the candidates added after `from`. */
static uint32_t add_twins(Run *run, uint32_t from, uint32_t nconfigs)
{
    RtTuneResult *r = run->res;
    uint32_t n = r->ncands, added = 0;
    for (uint32_t i = from; i < n; i++) {
        const RtCandidate *c = &r->cands[i];
        uint32_t chosen = run->chosen[i], nk = 0;
        for (int key = 0; key < IR_NUM_LAUNCH_KEYS; key++) nk += chosen >> key & 1;
        if (c->status != RT_CAND_OK || !chosen || c->nkeys + nk > RT_TUNE_MAX_KEYS) continue;
        RtCandidate *t = &r->cands[r->ncands++];
        memset(t, 0, sizeof *t);
        t->index = (int)nconfigs + 1 + (c->index < 0 ? (int)nconfigs : c->index);
        t->nkeys = c->nkeys;
        memcpy(t->keys, c->keys, c->nkeys * sizeof *c->keys);
        for (int key = 0; key < IR_NUM_LAUNCH_KEYS; key++)
            if (chosen >> key & 1) t->keys[t->nkeys++] = (TrtConst){ir_launch_info[key].name, 0};
        added++;
    }
    return added;
}

uint32_t rt_tune_num_candidates(const TrtKernel *k, const RtTuneOptions *o)
{
    const RtTune *t = k->tune;
    if (!t) return 0;
    uint32_t n = t->ncands;
    if (o->max_configs && n > o->max_configs) n = o->max_configs;
    bool have_default = false;
    for (uint32_t i = 0; i < n; i++) have_default |= (int)t->cands[i] == t->default_index;
    return n + !have_default;
}

TrtStatus rt_tune_run(TrtKernel *k, const TrtArg *args, uint32_t nargs, TrtStream stream,
                      const RtTuneOptions *o, RtTuneResult *out)
{
    memset(out, 0, sizeof *out);
    RtTune *t = k->tune;
    if (!t) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "kernel '%s' has no @autotune space to tune", k->name);
    TrtContext *ctx = k->module->ctx;
    double t0 = tl_now_ms();
    TrtStatus s = rt_check_args(k, args, nargs);
    if (s) return s;
    char path[4096];   /* before compiling anything: without a worker nothing can be measured */
    if (!worker_path(path, sizeof path))
        return rt_fail(TRT_ERROR_NOT_FOUND, "cannot find tile-tune-worker (beside libtileRT, or in "
                       TILE_WORKER_REL " from it): set TILE_TUNE_WORKER to its path");
    int64_t kv[RT_TUNE_MAX_KEYVALS];
    key_values(k, args, kv);
    uint32_t ncfg = t->ncands;
    if (o->max_configs && ncfg > o->max_configs) ncfg = o->max_configs;
    out->kernel = tl_strdup(k->name);
    out->key = key_text(k, kv);
    out->cands = tl_calloc(2 * (ncfg + 1), sizeof *out->cands);   /* and the schedule's twins */
    out->expanded = t->space.expanded;
    out->where_removed = t->space.where_removed;
    out->duplicates = t->space.duplicates;
    if (!out->kernel || !out->key || !out->cands) {
        rt_tune_result_free(out);
        return rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
    }
    bool have_default = false;
    for (uint32_t i = 0; i < ncfg; i++) {
        int idx = (int)t->cands[i];
        have_default |= idx == t->default_index;
        add_candidate(out, k, &t->space.configs[idx], idx, idx == t->default_index);
    }
    if (!have_default) add_candidate(out, k, &t->dflt, t->default_index, true);
    out->removed[RT_CAND_PINNED] = t->pinned;
    Run run = {.k = k, .args = args, .nargs = nargs, .res = out, .opts = o};
    run.mask = rt_class_mask(k, args);
    run.images = tl_calloc(2 * out->ncands, sizeof *run.images);
    run.grids = tl_calloc(2 * out->ncands, sizeof *run.grids);
    run.chosen = tl_calloc(2 * out->ncands, sizeof *run.chosen);
    if (!run.images || !run.grids || !run.chosen) s = rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
    if (!s) s = rt_device_limits(ctx, &run.lim);
    if (!s && !own_names(out)) s = rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
    if (!s) {
        RtCandStatus *before = tl_calloc(out->ncands + 1, sizeof *before);
        if (!before) tl_oom();
        for (uint32_t i = 0; i < out->ncands; i++) before[i] = out->cands[i].status;
        compile_all(&run, o->jobs);
        uint64_t refused = atomic_load(&run.tma_refused);
        if (refused) {   /* again, for the class a launch with these arguments runs */
            for (uint32_t p = 0; p < 32; p++)
                if (refused >> p & 1) run.mask &= ~(UINT64_C(3) << (2 * p));
            for (uint32_t i = 0; i < out->ncands; i++) {
                rt_blob_free(&run.images[i]);
                out->cands[i].status = before[i];
                out->cands[i].why[0] = 0;
            }
            atomic_store(&run.next, 0);
            atomic_store(&run.tma_refused, 0);
            compile_all(&run, o->jobs);
        }
        tl_free(before);
        uint32_t first = out->ncands;
        if (add_twins(&run, 0, t->space.nconfigs)) {
            atomic_store(&run.next, first);
            compile_all(&run, o->jobs);
        }
        apply_known(out, o);
        ctx->drv->cuCtxSetCurrent(ctx->cuctx);
        s = benchmark(&run, stream, o, path);
    }
    for (uint32_t i = 0; run.images && i < out->ncands; i++) rt_blob_free(&run.images[i]);
    tl_free(run.images);
    tl_free(run.grids);
    tl_free(run.chosen);
    if (!s && (out->winner = pick_winner(out)) < 0)
        s = rt_fail(TRT_ERROR_DRIVER, "tuning kernel '%s': no config ran", k->name);
    if (s) {
        rt_tune_result_free(out);
        return s;
    }
    for (uint32_t i = 0; i < out->ncands; i++) out->removed[out->cands[i].status]++;
    out->total_ms = tl_now_ms() - t0;
    return TRT_SUCCESS;
}

/* ---- the modes: which config a launch runs ---------------------------------------------- */
typedef struct TuneBuild {
    TrtKernel *k;
    const TrtArg *args;
    uint32_t nargs;
    TrtStream stream;
    bool ran;
    const uint64_t *bytes;
} TuneBuild;

static TrtStatus build_tune_entry(void *ud, RtBlob *out)
{
    TuneBuild *b = ud;
    RtTuneOptions o;
    RtTuneResult r;
    rt_tune_options_from_env(&o);
    o.bytes = b->bytes;
    b->ran = true;
    TrtStatus s = rt_tune_run(b->k, b->args, b->nargs, b->stream, &o, &r);
    if (s) return s;
    size_t len = 0;
    char *text = rt_tune_result_format(&r, &len);
    rt_tune_result_free(&r);
    if (!text) return rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
    out->data = text;
    out->len = len;
    return TRT_SUCCESS;
}

/* The kernel of the winner: k itself for its default config, else k's consts with the
 * winner's values (a handle of the module, as trt_module_get_kernel gives). */
static TrtStatus winner_kernel(TrtKernel *k, const RtCandidate *w, TrtKernel **out)
{
    if (w->is_default) return *out = k, TRT_SUCCESS;
    TrtConst consts[TRT_MAX_ARGS];
    uint32_t n;
    merge_consts(k, w, consts, &n);
    return trt_module_get_kernel(k->module, k->name, consts, n, out);
}

static void report(const TrtKernel *k, const char *key, const RtTuneResult *r, const char *how)
{
    if (!r) {
        fprintf(stderr, "tile: kernel '%s' %s: default config (%s)\n", k->name, key, how);
        return;
    }
    const RtCandidate *w = &r->cands[r->winner], *d = NULL;
    for (uint32_t i = 0; i < r->ncands; i++)
        if (r->cands[i].is_default) d = &r->cands[i];
    char cfg[512];
    rt_tune_candidate_text(w, cfg, sizeof cfg);
    fprintf(stderr, "tile: kernel '%s' %s: config %s%s (%s: %.4f ms", k->name, key, cfg,
            w->is_default ? " (the default)" : "", how, w->median_ms);
    if (d && d != w && d->status == RT_CAND_OK) fprintf(stderr, " against %.4f ms for the default", d->median_ms);
    fprintf(stderr, "; %u of %u configs measured, tuning took %.0f ms", r->removed[RT_CAND_OK], r->ncands,
            r->total_ms);
    if (r->copy_bytes) fprintf(stderr, " with %.1f MB of buffers copied", (double)r->copy_bytes / 1e6);
    fputs(")\n", stderr);
    /* What each rule removed: where (from the space), then each exclusion's status. */
    fprintf(stderr, "tile:   space %u configs; removed: where %u, duplicates %u, pinned by the caller %u",
            r->expanded, r->where_removed, r->duplicates, r->removed[RT_CAND_PINNED]);
    for (int st = RT_CAND_PINNED + 1; st < RT_CAND_NSTATUS; st++)
        if (r->removed[st]) fprintf(stderr, ", %s %u", rt_cand_status_name((RtCandStatus)st), r->removed[st]);
    fputc('\n', stderr);
}

static TrtStatus choose(TrtKernel *k, const TrtArg *args, const uint64_t *bytes, uint32_t nargs,
                        TrtStream stream, const int64_t *kv, uint64_t mask, TrtKernel **out)
{
    TrtContext *ctx = k->module->ctx;
    bool disk = ctx->cache && !(atomic_load(&ctx->flags) & TRT_FLAG_NO_DISK_CACHE);
    /* a required cache never tunes (that compiles): the tuned config, else the default */
    bool tune = ctx->mode == TRT_MODE_MAX_AUTOTUNE && atomic_load(&ctx->cache_mode) == TRT_CACHE_DEFAULT;
    bool log = rt_log_recompiles(ctx);
    char *key = key_text(k, kv);
    RtKey ck = rt_tune_cache_key(k, kv, mask);
    RtBlob blob = {0};
    TrtStatus s = TRT_SUCCESS;
    TuneBuild b = {k, args, nargs, stream, false, bytes};
    RtTuneResult r;
    bool have = false, miss = false;
    *out = k;
    RtTier from = RT_TIER_LOCAL;
    if (disk && tune) s = rt_cache_get_or_build_from(ctx->cache, RT_ENTRY_TUNE, &ck, build_tune_entry, &b, &blob, &from);
    else if (disk) miss = rt_cache_fetch(ctx->cache, RT_ENTRY_TUNE, &ck, &blob, &from) != RT_GET_HIT;
    else if (tune) s = build_tune_entry(&b, &blob);
    else miss = true;
    if (!s && !miss) {
        have = rt_tune_result_parse(blob.data, blob.len, &r);
        if (!have) s = rt_fail(TRT_ERROR_CACHE_IO, "a tuning entry of '%s' is malformed", k->name);
    }
    rt_blob_free(&blob);
    if (have && !(s = winner_kernel(k, &r.cands[r.winner], out))) {
        if (log) report(k, key, &r, b.ran ? "tuned now" : from == RT_TIER_REMOTE ? "from the remote cache" : "from the cache");
    } else if (miss) {
        if (log) report(k, key, NULL, disk ? "no tuning result in the cache" : "no disk cache, not tuned");
    } else {
        /* A failed tuning or a bad entry costs speed, never the launch. */
        fprintf(stderr, "tile: kernel '%s' %s: %s; using the default config\n", k->name, key,
                trt_last_error());
        *out = k;
    }
    if (have) rt_tune_result_free(&r);
    tl_free(key);
    return TRT_SUCCESS;
}

bool rt_tune_known(TrtKernel *k, const TrtArg *args, uint64_t mask)
{
    RtTune *t = k->tune;
    int64_t kv[RT_TUNE_MAX_KEYVALS];
    key_values(k, args, kv);
    unsigned n = atomic_load_explicit(&t->nentries, memory_order_acquire);
    for (unsigned i = 0; i < n; i++)
        if (t->entries[i].mask == mask && !memcmp(t->entries[i].keyvals, kv, t->nkey * sizeof *kv)) return true;
    return n == RT_TUNE_MAX_ENTRIES;
}

TrtStatus rt_tune_select(TrtKernel *k, const TrtArg *args, const uint64_t *bytes, uint32_t nargs, TrtStream stream,
                         uint64_t mask, TrtKernel **out)
{
    RtTune *t = k->tune;
    int64_t kv[RT_TUNE_MAX_KEYVALS];
    key_values(k, args, kv);
    for (int pass = 0; pass < 2; pass++) {
        unsigned n = atomic_load_explicit(&t->nentries, memory_order_acquire);
        for (unsigned i = 0; i < n; i++)
            if (t->entries[i].mask == mask && !memcmp(t->entries[i].keyvals, kv, t->nkey * sizeof *kv)) {
                *out = t->entries[i].chosen;
                if (pass) pthread_mutex_unlock(&t->lock);
                return TRT_SUCCESS;
            }
        if (!pass) pthread_mutex_lock(&t->lock);
    }
    TrtStatus s = TRT_SUCCESS;
    unsigned n = atomic_load(&t->nentries);
    if (n == RT_TUNE_MAX_ENTRIES) {
        if (!t->warned_full)
            fprintf(stderr, "tile: kernel '%s' has %d tuned keys already; new keys run the default "
                    "config\n", k->name, RT_TUNE_MAX_ENTRIES);
        t->warned_full = true;
        *out = k;
    } else if (!(s = choose(k, args, bytes, nargs, stream, kv, mask, out))) {
        RtRecordKey rk = {(const char *const *)t->space.key, kv, t->key_param, t->nkey};
        rt_record_launch(k, args, &rk, mask);
        TuneEntry *e = &t->entries[n];
        memcpy(e->keyvals, kv, t->nkey * sizeof *kv);
        e->mask = mask;
        e->chosen = *out;
        atomic_store_explicit(&t->nentries, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&t->lock);
    return s;
}
