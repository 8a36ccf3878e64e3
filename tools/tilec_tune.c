/* tilec tune MANIFEST (docs/TUNING.md "tilec tune"): tunes every key of every kernel of a
 * manifest with the runtime's tuner (rt_tune_run, the one max-autotune uses) and
 * stores each result in the disk cache, where a later process in default mode finds it.
 *
 * Resumable: a journal (append-only, one fsync'd line per finished config and key) lets
 * a restart after kill -9 skip the keys done and the configs measured (passed to the
 * tuner as known: not run again). --devices 0,1,... forks one worker process per GPU
 * (before any driver call: a CUDA context does not survive fork), key i going to
 * worker i mod N. The report (--report DIR) is made from the cache afterwards. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ir/arena.h"
#include "runtime/rt_tune.h"
#include "tools/cli.h"
#include "tools/tune_manifest.h"
#include "tools/tune_report.h"

enum { TUNE_MAX_DEVICES = 64, EXIT_NO_GPU = 4 /* a worker's status (never the tool's): its GPU did not open */ };

typedef struct TuneOptions {
    const char *manifest, *journal, *report;
    int devices[TUNE_MAX_DEVICES];
    uint32_t ndevices;
    double budget_min;         /* 0: none */
    uint64_t seed;
    bool dry_run;
} TuneOptions;

static const char tune_usage[] =
    "usage: tilec tune MANIFEST [--devices 0,1,...] [--budget MINUTES] [--journal FILE]\n"
    "                  [--report DIR] [--seed N] [--dry-run]\n"
    "MANIFEST   the kernels, their keys and how to make their arguments: a JSON manifest\n"
    "           or the JSON Lines that TILE_RECORD writes (docs/TUNING.md)\n"
    "--devices  one worker process per GPU, keys shared round-robin (default 0)\n"
    "--budget   stop starting keys after MINUTES (a key under way finishes); the rest are\n"
    "           left for the next run\n"
    "--journal  the journal that makes a run resumable (default MANIFEST.journal): a key\n"
    "           done and a config measured are not measured again after a restart\n"
    "--report   write DIR/report.md (winners, speedup over the default config) and an SVG\n"
    "           chart of time per config for each key\n"
    "--seed     of the random input data (default 1)\n"
    "--dry-run  check the manifest and list the keys; tune nothing\n"
    "Results go to the disk cache (TILE_CACHE_DIR, docs/CACHE.md), where default mode\n"
    "finds them. Per config: TILE_TUNE_BUDGET_MS and the other TILE_TUNE_* variables.\n"
    "exit status: 0 every key tuned (or done earlier), 1 an error in the manifest or a\n"
    "key that could not be tuned, 2 usage error, 3 the budget ran out first\n";

static _Noreturn void tune_usage_error(const char *fmt, const char *arg)
{
    fputs("tilec tune: error: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\n(run 'tilec tune --help' for usage)\n", stderr);
    exit(2);
}

static void set_journal(void *o, const char *v) { ((TuneOptions *)o)->journal = v; }
static void set_report(void *o, const char *v) { ((TuneOptions *)o)->report = v; }
static void set_dry_run(void *o, const char *v) { (void)v, ((TuneOptions *)o)->dry_run = true; }

static void set_devices(void *opts, const char *v)
{
    TuneOptions *o = opts;
    o->ndevices = 0;
    for (const char *p = v; *p;) {
        char *end;
        long d = strtol(p, &end, 10);
        if (end == p || d < 0 || d > 4096 || (*end && *end != ',') || o->ndevices == TUNE_MAX_DEVICES)
            tune_usage_error("--devices takes GPU ordinals such as 0,1,2, got '%s'", v);
        for (uint32_t i = 0; i < o->ndevices; i++)
            if (o->devices[i] == d) tune_usage_error("--devices names a GPU twice: '%s'", v);
        o->devices[o->ndevices++] = (int)d;
        p = *end ? end + 1 : end;
    }
    if (!o->ndevices) tune_usage_error("--devices needs at least one GPU ordinal%s", "");
}

static void set_budget(void *o, const char *v)
{
    char *end;
    double d = strtod(v, &end);
    if (*end || !(d > 0)) tune_usage_error("--budget takes a positive number of minutes, got '%s'", v);
    ((TuneOptions *)o)->budget_min = d;
}

static void set_seed(void *o, const char *v)
{
    char *end;
    unsigned long long s = strtoull(v, &end, 10);
    if (*end || !*v) tune_usage_error("--seed takes a non-negative integer, got '%s'", v);
    ((TuneOptions *)o)->seed = s;
}

static const CliOption tune_options[] = {
    /* name          takes a value  set */
    {"--devices", true, set_devices},
    {"--budget", true, set_budget},
    {"--journal", true, set_journal},
    {"--report", true, set_report},
    {"--seed", true, set_seed},
    {"--dry-run", false, set_dry_run},
    {NULL, false, NULL},
};

static void parse_tune_args(int argc, char **argv, TuneOptions *o)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(tune_usage, stdout);
            exit(0);
        }
        if (cli_parse_option("tilec", tune_options, argc, argv, &i, o)) continue;
        if (argv[i][0] == '-' && argv[i][1]) tune_usage_error("unknown option '%s'", argv[i]);
        if (o->manifest) tune_usage_error("more than one manifest ('%s')", argv[i]);
        o->manifest = argv[i];
    }
    if (!o->manifest) tune_usage_error("no manifest%s", "");
}

/* ---- the journal ---------------------------------------------------------------------- */
/* Lines (docs/TUNING.md "The journal"):
 *   tile-tune-journal 1
 *   cand ID INDEX STATUS MEDIAN MIN MAX RUNS BENCH_MS<TAB>WHY
 *   done ID WINNER_MEDIAN DEFAULT_MEDIAN<TAB>KERNEL KEY
 * ID is the hex of the key's tuning cache key (compiler, IR, space, key values,
 * specialization, arch, driver, GPU): a new compiler or GPU tunes afresh. */
typedef struct JournalCand {
    char id[33];
    RtCandidate c;
} JournalCand;

typedef struct Journal {
    int fd;
    const char *path;
    char (*done)[33];          /* the IDs of the keys done */
    uint32_t ndone;
    JournalCand *cands;        /* the configs measured */
    uint32_t ncands;
    bool created;              /* by this run: removed at the end if it records nothing */
} Journal;

/* One line being read: p walks its fields; bad names the first field that is wrong. */
typedef struct JLine {
    const char *p;
    const char *bad;
} JLine;

static bool jl_sep(JLine *l, char sep, const char *field)
{
    if (*l->p != sep) return l->bad = field, false;
    l->p++;
    return true;
}

static bool jl_id(JLine *l, char id[33])
{
    if (strspn(l->p, "0123456789abcdef") != 32) return l->bad = "ID (32 hex digits)", false;
    memcpy(id, l->p, 32);
    id[32] = '\0';
    l->p += 32;
    return jl_sep(l, ' ', "ID (32 hex digits)");
}

/* A time in ms: a finite number, at least 0 (strtod alone takes "nan", "-1", " 1"). */
static bool jl_ms(JLine *l, double *out, const char *field, char sep)
{
    char *end;
    if (!isdigit((unsigned char)*l->p)) return l->bad = field, false;
    *out = strtod(l->p, &end);
    if (!isfinite(*out)) return l->bad = field, false;
    l->p = end;
    return jl_sep(l, sep, field);
}

static bool jl_count(JLine *l, uint32_t *out, const char *field)
{
    char *end;
    errno = 0;
    unsigned long v = isdigit((unsigned char)*l->p) ? strtoul(l->p, &end, 10) : ULONG_MAX;
    if (v > INT32_MAX || errno) return l->bad = field, false;
    *out = (uint32_t)v;
    l->p = end;
    return jl_sep(l, ' ', field);
}

static bool jl_status(JLine *l, RtCandStatus *out)
{
    size_t n = strcspn(l->p, " \t");
    for (int s = 0; s < RT_CAND_NSTATUS; s++) {
        const char *name = rt_cand_status_name((RtCandStatus)s);
        if (strlen(name) == n && !strncmp(l->p, name, n)) {
            *out = (RtCandStatus)s;
            l->p += n;
            return jl_sep(l, ' ', "STATUS");
        }
    }
    return l->bad = "STATUS", false;
}

/* cand ID INDEX STATUS MEDIAN MIN MAX RUNS BENCH_MS<TAB>WHY */
static bool jl_cand(JLine *l, JournalCand *jc)
{
    RtCandidate *c = &jc->c;
    uint32_t index = 0;
    memset(jc, 0, sizeof *jc);
    bool ok = jl_id(l, jc->id) && jl_count(l, &index, "INDEX") && jl_status(l, &c->status) &&
              jl_ms(l, &c->median_ms, "MEDIAN", ' ') && jl_ms(l, &c->min_ms, "MIN", ' ') &&
              jl_ms(l, &c->max_ms, "MAX", ' ') && jl_count(l, &c->runs, "RUNS") && jl_ms(l, &c->bench_ms, "BENCH_MS", '\t');
    c->index = (int)index;
    if (ok) snprintf(c->why, sizeof c->why, "%.*s", (int)strcspn(l->p, "\n"), l->p);
    return ok;
}

/* done ID WINNER_MS DEFAULT_MS<TAB>KERNEL KEY */
static bool jl_done(JLine *l, char id[33])
{
    double winner, dflt;
    return jl_id(l, id) && jl_ms(l, &winner, "WINNER_MS", ' ') && jl_ms(l, &dflt, "DEFAULT_MS", '\t');
}

static void journal_add_line(Journal *j, const char *line, uint32_t lineno)
{
    JLine l = {line + 5, NULL};
    if (!strncmp(line, "cand ", 5)) {
        JournalCand c;
        if (jl_cand(&l, &c)) {
            if (!(j->ncands & (j->ncands + 1)) && !(j->cands = realloc(j->cands, (2 * j->ncands + 1) * sizeof c))) abort();
            j->cands[j->ncands++] = c;
            return;
        }
    } else if (!strncmp(line, "done ", 5)) {
        char id[33];
        if (jl_done(&l, id)) {
            if (!(j->ndone & (j->ndone + 1)) && !(j->done = realloc(j->done, (2 * j->ndone + 1) * sizeof id))) abort();
            memcpy(j->done[j->ndone++], id, sizeof id);
            return;
        }
    } else {
        l.bad = "kind (cand or done)";
    }
    fprintf(stderr, "tilec tune: warning: %s:%u: malformed journal line (its %s is wrong); skipped: what it records is "
            "measured again\n", j->path, lineno, l.bad);
}

/* Every whole line after the header; a torn last line (a crash of the machine) is
 * skipped without a word, a malformed one with a warning naming its line. */
static void journal_parse(Journal *j, const char *text)
{
    uint32_t lineno = 1;
    for (const char *p = strchr(text, '\n'); p && p[1]; lineno++) {
        const char *line = p + 1;
        p = strchr(line, '\n');
        if (!p) break;
        journal_add_line(j, line, lineno + 1);
    }
}

static bool journal_open(Journal *j, const char *path)
{
    j->path = path;
    j->fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (j->fd < 0) return false;
    struct stat st;
    fstat(j->fd, &st);
    char *text = calloc((size_t)st.st_size + 1, 1);
    bool ok = text && pread(j->fd, text, (size_t)st.st_size, 0) == st.st_size;
    j->created = !st.st_size;
    if (ok && !st.st_size) {
        static const char head[] = "tile-tune-journal 1\n";
        ok = write(j->fd, head, sizeof head - 1) == sizeof head - 1;
    } else if (ok && strncmp(text, "tile-tune-journal 1\n", 20)) {
        errno = EINVAL;
        ok = false;
    }
    if (ok) journal_parse(j, text);
    free(text);
    return ok;
}

/* A journal this run made that records nothing (no GPU, every key failing at once) is
 * not left beside the manifest. */
static void journal_close(Journal *j)
{
    struct stat st;
    if (j->fd > 0 && j->created && !fstat(j->fd, &st) && st.st_size == 20) unlink(j->path);
    if (j->fd > 0) close(j->fd);
    free(j->done), free(j->cands);
}

/* One line in one write, then fsync: a kill leaves whole lines (a torn last line, from
 * a crash of the machine, is skipped when read). */
static void journal_line(Journal *j, const char *line)
{
    size_t n = strlen(line);
    if (write(j->fd, line, n) != (ssize_t)n || fsync(j->fd))
        fprintf(stderr, "tilec tune: warning: cannot write the journal: %s\n", strerror(errno));
}

static bool journal_done(const Journal *j, const char *id)
{
    for (uint32_t i = 0; i < j->ndone; i++)
        if (!strcmp(j->done[i], id)) return true;
    return false;
}

/* The configs of key id measured before, from its "cand" lines; *n of them. */
static RtCandidate *journal_known(const Journal *j, const char *id, uint32_t *n)
{
    RtCandidate *out = calloc(j->ncands + 1, sizeof *out);
    if (!out) abort();
    *n = 0;
    for (uint32_t i = 0; i < j->ncands; i++)
        if (!strcmp(j->cands[i].id, id)) out[(*n)++] = j->cands[i].c;
    return out;
}

/* ---- progress ---------------------------------------------------------------------------- */
typedef struct Progress {
    bool tty;
    const char *prefix;        /* "[gpu 1] " with several workers */
    uint32_t done, total;      /* configs, over every key of this worker */
    uint32_t measured;         /* run in this process (for the ETA) */
    double t0;
    const char *what;          /* the key under way: "matmul_bf16 M=512 ..." */
    double best;
    char best_cfg[256];
    Journal *journal;
    const char *id;
    uint32_t exit_after;       /* TILE_TUNE_EXIT_AFTER: _exit(137) after N configs (tests) */
} Progress;

static void eta_text(const Progress *p, char *buf, size_t n)
{
    double el = tl_now_ms() / 1e3 - p->t0;
    if (!p->measured) snprintf(buf, n, "ETA ?");
    else {
        double left = el / p->measured * (p->total - p->done);
        snprintf(buf, n, "ETA %d:%02d", (int)(left / 60), (int)fmod(left, 60));
    }
}

static void progress_show(Progress *p, const RtCandidate *c)
{
    char eta[32], cfg[256];
    eta_text(p, eta, sizeof eta);
    rt_tune_candidate_text(c, cfg, sizeof cfg);
    if (p->tty)
        printf("\r\033[K%s[%u/%u configs] %s  %s: best %.4f ms (%s)", p->prefix, p->done, p->total, eta, p->what,
               p->best, p->best_cfg);
    else
        printf("%stune: %u/%u %s: %s: %s %.4f ms; best %.4f ms (%s); %s\n", p->prefix, p->done, p->total, p->what,
               cfg, rt_cand_status_name(c->status), c->median_ms, p->best, p->best_cfg, eta);
    fflush(stdout);
}

/* The tuner's callback: journal the config, then show it. */
static void on_cand(void *user, const RtTuneResult *r, const RtCandidate *c)
{
    (void)r;
    Progress *p = user;
    char line[512];
    snprintf(line, sizeof line, "cand %s %d %s %.6f %.6f %.6f %u %.3f\t%s\n", p->id, c->index,
             rt_cand_status_name(c->status), c->median_ms, c->min_ms, c->max_ms, c->runs, c->bench_ms, c->why);
    if (!c->is_default) journal_line(p->journal, line);
    p->done++, p->measured++;
    if (c->status == RT_CAND_OK && (!p->best_cfg[0] || c->median_ms < p->best)) {
        p->best = c->median_ms;
        rt_tune_candidate_text(c, p->best_cfg, sizeof p->best_cfg);
    }
    progress_show(p, c);
    if (p->exit_after && p->measured >= p->exit_after) _exit(137);   /* as kill -9 would */
}

/* ---- arguments ---------------------------------------------------------------------------- */
static uint64_t rng_next(uint64_t *s)
{
    *s += 0x9E3779B97F4A7C15ull;
    uint64_t z = *s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint16_t f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

static uint16_t f32_to_f16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000, e = (u >> 23) & 0xff, m = u & 0x7fffff;
    if (e < 113) return (uint16_t)sign;                      /* tiny: zero (random data is in [-1, 1]) */
    return (uint16_t)(sign | ((e - 112) << 10) | (m >> 13));
}

/* Random elements: floats uniform in [-1, 1), integers in [0, 16), bools 0 or 1. */
static void fill_random(void *buf, uint64_t n, const char *elem, int bytes, uint64_t *seed)
{
    for (uint64_t i = 0; i < n; i++) {
        uint64_t r = rng_next(seed);
        float f = (float)((double)(r >> 11) / 9007199254740992.0 * 2 - 1);
        char *p = (char *)buf + i * (uint64_t)bytes;
        if (!strcmp(elem, "f32")) memcpy(p, &f, 4);
        else if (!strcmp(elem, "f64")) { double d = f; memcpy(p, &d, 8); }
        else if (!strcmp(elem, "bf16")) { uint16_t h = f32_to_bf16(f); memcpy(p, &h, 2); }
        else if (!strcmp(elem, "f16")) { uint16_t h = f32_to_f16(f); memcpy(p, &h, 2); }
        else if (!strcmp(elem, "bool") || !strcmp(elem, "i1")) *p = (char)(r & 1);
        else { uint64_t v = r & 15; memcpy(p, &v, (size_t)bytes); }   /* little-endian integers */
    }
}

typedef struct KeyArgs {
    TrtArg args[TRT_MAX_ARGS];
    TrtDevicePtr bufs[TRT_MAX_ARGS];
    uint32_t nargs;
} KeyArgs;

static const TmArg *entry_arg(const TmEntry *e, const char *name)
{
    for (uint32_t i = 0; i < e->nargs; i++)
        if (!strcmp(e->args[i].name, name)) return &e->args[i];
    return NULL;
}

static TrtArg scalar_arg(const TrtParamInfo *p, TmValue v)
{
    switch (p->kind) {
    case TRT_ARG_F32: return trt_arg_f32((float)v.d);
    case TRT_ARG_F64: return trt_arg_f64(v.d);
    case TRT_ARG_BF16: return trt_arg_bf16(f32_to_bf16((float)v.d));
    case TRT_ARG_F16: return trt_arg_f16(f32_to_f16((float)v.d));
    default: { TrtArg a = trt_arg_i64(v.i); a.kind = p->kind; return a; }   /* little-endian: the low bytes */
    }
}

static bool is_real(const TrtParamInfo *p)
{
    return p->kind == TRT_ARG_F32 || p->kind == TRT_ARG_F64 || p->kind == TRT_ARG_F16 || p->kind == TRT_ARG_BF16;
}

/* The value of run-time parameter p for key k: its expression, else the key's value. */
static TmValue param_value(const TmEntry *e, const TmKey *k, const TrtParamInfo *p, const TmArg **a)
{
    TmScope sc;
    TmValue v = {0, 0};
    char err[200];
    size_t col;
    tm_scope(e, k, &sc);
    if ((*a = entry_arg(e, p->name))) tm_eval((*a)->expr, &sc, is_real(p) && !(*a)->dtype, &v, err, sizeof err, &col);
    else
        for (uint32_t i = 0; i < k->n; i++)
            if (!strcmp(k->vals[i].name, p->name)) v = (TmValue){k->vals[i].value, (double)k->vals[i].value};
    return v;
}

/* Allocates and fills key k's arguments (alloc false: scalars and fake aligned
 * pointers only, enough for the cache key). */
static TrtStatus make_args(TrtContext *ctx, TrtKernel *kern, const TmEntry *e, const TmKey *k, bool alloc,
                           uint64_t *seed, KeyArgs *out)
{
    memset(out, 0, sizeof *out);
    out->nargs = trt_kernel_num_params(kern);
    for (uint32_t i = 0; i < out->nargs; i++) {
        TrtParamInfo p;
        const TmArg *a;
        TrtStatus s = trt_kernel_param(kern, i, &p);
        if (s) return s;
        TmValue v = param_value(e, k, &p, &a);
        if (!p.is_pointer) {
            out->args[i] = scalar_arg(&p, v);
            continue;
        }
        size_t bytes = (size_t)v.i * p.elem_bytes;
        if (!alloc) {
            out->args[i] = trt_arg_ptr((TrtDevicePtr)1 << 20);
            continue;
        }
        void *host = malloc(bytes);
        if (!host) return TRT_ERROR_OUT_OF_MEMORY;
        fill_random(host, (uint64_t)v.i, p.elem, (int)p.elem_bytes, seed);
        if (!(s = trt_mem_alloc(ctx, bytes, &out->bufs[i]))) s = trt_memcpy_htod(ctx, out->bufs[i], host, bytes);
        free(host);
        if (s) return s;
        out->args[i] = trt_arg_ptr(out->bufs[i]);
    }
    return TRT_SUCCESS;
}

static void free_args(TrtContext *ctx, KeyArgs *a)
{
    for (uint32_t i = 0; i < a->nargs; i++)
        if (a->bufs[i]) trt_mem_free(ctx, a->bufs[i]);
}

/* ---- the run --------------------------------------------------------------------------------- */
typedef struct Work {
    const TmEntry *e;
    const TmKey *k;
    uint32_t entry, key;
    char what[300];            /* "kernel M=512 N=512" */
} Work;

typedef struct Tuner {
    const TuneOptions *o;
    TrtContext *ctx;
    TrtModule **mods;          /* per entry */
    TrtKernel **kerns;
    Work *work;
    uint32_t nwork;
    Journal journal;
    Progress prog;
    double deadline;           /* monotonic seconds after which no key starts; 0: none */
    uint32_t failed, skipped, tuned, left;
    bool no_gpu;               /* no worker could open its GPU (said once each): no report */
} Tuner;

/* Entry i's kernel on the tuning context, or NULL with a located error (the manifest
 * check compiled it on the CPU, so this is a GPU context's failure, or no @autotune). */
static TrtKernel *load_kernel(Tuner *t, const TmManifest *m, uint32_t i)
{
    const TmEntry *e = &m->entries[i];
    TrtKernel *k = NULL;
    TrtStatus s = trt_module_load_file(t->ctx, e->file, &t->mods[i]);
    if (!s) s = trt_module_get_kernel(t->mods[i], e->kernel, e->consts, e->nconsts, &k);
    if (s)
        fprintf(stderr, "%s:%u:%u: error: kernel '%s': %s\n", m->path, e->loc.line, e->loc.col, e->kernel,
                trt_last_error());
    else if (!k->tune)
        fprintf(stderr, "%s:%u:%u: error: kernel '%s' has nothing to tune: no @autotune, or fewer than two "
                "configs left after its consts\n", m->path, e->loc.line, e->loc.col, e->kernel);
    return s || !k->tune ? NULL : k;
}

/* Every entry's kernel; the keys of one that did not load fail (tune_key). */
static void load_kernels(Tuner *t, const TmManifest *m)
{
    t->mods = calloc(m->nentries, sizeof *t->mods);
    t->kerns = calloc(m->nentries, sizeof *t->kerns);
    for (uint32_t i = 0; i < m->nentries; i++) t->kerns[i] = load_kernel(t, m, i);
}

static void key_id(Tuner *t, const Work *w, char id[33])
{
    KeyArgs a;
    uint64_t seed = 0;
    make_args(t->ctx, t->kerns[w->entry], w->e, w->k, false, &seed, &a);
    RtKey key = rt_tune_cache_key_for(t->kerns[w->entry], a.args);
    rt_key_hex(&key, id);
}

static void store_result(Tuner *t, const Work *w, const char *id, const RtTuneResult *r)
{
    size_t len = 0;
    char *text = rt_tune_result_format(r, &len);
    RtKey key;
    rt_key_from_hex(id, &key);
    if (!text || rt_cache_put(t->ctx->cache, RT_ENTRY_TUNE, &key, text, len))
        fprintf(stderr, "tilec tune: error: %s: cannot store the result in the cache: %s\n", w->what, trt_last_error());
    free(text);
    const RtCandidate *win = &r->cands[r->winner], *d = NULL;
    for (uint32_t i = 0; i < r->ncands; i++)
        if (r->cands[i].is_default) d = &r->cands[i];
    char line[512], cfg[256];
    snprintf(line, sizeof line, "done %s %.6f %.6f\t%s\n", id, win->median_ms,
             d && d->status == RT_CAND_OK ? d->median_ms : 0.0, w->what);
    journal_line(&t->journal, line);
    rt_tune_candidate_text(win, cfg, sizeof cfg);
    if (t->prog.tty) putchar('\n');
    printf("%stune: %s: winner %s%s: %.4f ms", t->prog.prefix, w->what, cfg, win->is_default ? " (the default)" : "",
           win->median_ms);
    if (d && d->status == RT_CAND_OK && win->median_ms > 0)
        printf(", %.2fx the default's %.4f ms", d->median_ms / win->median_ms, d->median_ms);
    printf(" (%u of %u configs ok)\n", r->removed[RT_CAND_OK], r->ncands);
}

static void tune_key(Tuner *t, const Work *w)
{
    if (!t->kerns[w->entry]) {
        printf("%stune: %s: failed: its kernel did not load\n", t->prog.prefix, w->what);
        t->failed++;
        return;
    }
    char id[33];
    key_id(t, w, id);
    RtTuneOptions o;
    rt_tune_options_from_env(&o);
    uint32_t n = rt_tune_num_candidates(t->kerns[w->entry], &o);
    if (journal_done(&t->journal, id)) {
        printf("%stune: %s: done in an earlier run (journal)\n", t->prog.prefix, w->what);
        t->prog.done += n;
        t->skipped++;
        return;
    }
    if (t->deadline && tl_now_ms() / 1e3 > t->deadline) {
        printf("%stune: %s: not started: the budget ran out\n", t->prog.prefix, w->what);
        t->left++;
        return;
    }
    o.known = journal_known(&t->journal, id, &o.nknown);
    o.on_cand = on_cand, o.user = &t->prog;
    uint32_t done_before = t->prog.done;
    t->prog.done += o.nknown;
    t->prog.what = w->what, t->prog.id = id, t->prog.best_cfg[0] = '\0';
    for (uint32_t i = 0; i < o.nknown; i++)   /* the best so far includes the journal's */
        if (o.known[i].status == RT_CAND_OK && (!t->prog.best_cfg[0] || o.known[i].median_ms < t->prog.best)) {
            t->prog.best = o.known[i].median_ms;
            snprintf(t->prog.best_cfg, sizeof t->prog.best_cfg, "index %d, from the journal", o.known[i].index);
        }
    if (o.nknown) printf("%stune: %s: %u configs measured in an earlier run\n", t->prog.prefix, w->what, o.nknown);
    KeyArgs a;
    uint64_t seed = t->o->seed + w->entry * 1000003u + w->key;
    RtTuneResult r;
    TrtStatus s = make_args(t->ctx, t->kerns[w->entry], w->e, w->k, true, &seed, &a);
    if (!s) s = rt_tune_run(t->kerns[w->entry], a.args, a.nargs, NULL, &o, &r);
    free_args(t->ctx, &a);
    free((void *)o.known);
    if (s) {
        if (t->prog.tty) putchar('\n');
        fprintf(stderr, "%stilec tune: error: %s: %s\n", t->prog.prefix, w->what, trt_last_error());
        t->failed++;
        return;
    }
    /* configs the worker never ran (excluded before running) count as done now */
    t->prog.done = done_before + n;
    store_result(t, w, id, &r);
    rt_tune_result_free(&r);
    t->tuned++;
}

static bool same_consts(const TrtConst *a, uint32_t na, const TrtConst *b, uint32_t nb)
{
    if (na != nb) return false;
    for (uint32_t i = 0; i < na; i++)
        if (strcmp(a[i].name, b[i].name) || a[i].value != b[i].value) return false;
    return true;
}

static bool same_args(const TmEntry *a, const TmEntry *b)
{
    if (a->nargs != b->nargs) return false;
    for (uint32_t i = 0; i < a->nargs; i++) {
        const TmArg *x = &a->args[i], *y = &b->args[i];
        if (strcmp(x->name, y->name) || strcmp(x->expr, y->expr) || !x->dtype != !y->dtype ||
            (x->dtype && strcmp(x->dtype, y->dtype)))
            return false;
    }
    return true;
}

/* The same kernel, consts, key and arguments: a record lists a key once per process
 * that ran it, and it is tuned once. */
static bool same_work(const Work *a, const Work *b)
{
    return !strcmp(a->e->file, b->e->file) && !strcmp(a->e->kernel, b->e->kernel) &&
           same_consts(a->e->consts, a->e->nconsts, b->e->consts, b->e->nconsts) &&
           same_consts(a->k->vals, a->k->n, b->k->vals, b->k->n) && same_args(a->e, b->e);
}

static uint32_t list_work(const TmManifest *m, Work **out)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->nentries; i++) n += m->entries[i].nkeys;
    Work *w = calloc(n + 1, sizeof *w);
    n = 0;
    for (uint32_t i = 0; i < m->nentries; i++)
        for (uint32_t k = 0; k < m->entries[i].nkeys; k++) {
            Work *x = &w[n];
            const TmKey *key = &m->entries[i].keys[k];
            *x = (Work){&m->entries[i], key, i, k, ""};
            bool dup = false;
            for (uint32_t j = 0; j < n && !dup; j++) dup = same_work(&w[j], x);
            if (dup) continue;
            n++;
            size_t at = (size_t)snprintf(x->what, sizeof x->what, "%s", m->entries[i].kernel);
            for (uint32_t j = 0; j < key->n && at < sizeof x->what; j++)
                at += (size_t)snprintf(x->what + at, sizeof x->what - at, " %s=%" PRId64, key->vals[j].name,
                                       key->vals[j].value);
        }
    *out = w;
    return n;
}

/* Worker `slot` of nslots, on GPU `device`: keys slot, slot + nslots, ... */
static int run_worker_slot(Tuner *t, const TmManifest *m, int device, uint32_t slot, uint32_t nslots)
{
    static char prefix[32];
    if (nslots > 1) snprintf(prefix, sizeof prefix, "[gpu %d] ", device);
    t->prog.prefix = prefix;
    t->prog.tty = nslots == 1 && isatty(STDOUT_FILENO);
    TrtStatus s = trt_context_create(device, TRT_MODE_DEFAULT, NULL, &t->ctx);
    if (s) {
        fprintf(stderr, "%stilec tune: error: GPU %d: %s\n", prefix, device, trt_last_error());
        return EXIT_NO_GPU;
    }
    if (!t->ctx->cache) {
        fprintf(stderr, "tilec tune: error: it stores its results in the disk cache, and there is none\n");
        trt_context_destroy(t->ctx);
        return 1;
    }
    load_kernels(t, m);
    for (uint32_t i = slot; i < t->nwork; i += nslots) {
        RtTuneOptions o;
        rt_tune_options_from_env(&o);
        if (t->kerns[t->work[i].entry]) t->prog.total += rt_tune_num_candidates(t->kerns[t->work[i].entry], &o);
    }
    t->prog.t0 = tl_now_ms() / 1e3;
    for (uint32_t i = slot; i < t->nwork; i += nslots) tune_key(t, &t->work[i]);
    for (uint32_t i = 0; t->mods && i < m->nentries; i++) trt_module_destroy(t->mods[i]);
    free(t->mods), free(t->kerns);
    t->mods = NULL, t->kerns = NULL;
    trt_context_destroy(t->ctx);
    t->ctx = NULL;
    printf("%stune: %u keys tuned, %u done earlier, %u failed, %u left for the next run\n", prefix, t->tuned,
           t->skipped, t->failed, t->left);
    return t->failed ? 1 : t->left ? 3 : 0;
}

/* Forks one worker per device (no driver has been opened yet) and combines their
 * exit statuses: the worst one wins. */
static int run_workers(Tuner *t, const TmManifest *m)
{
    const TuneOptions *o = t->o;
    if (o->ndevices == 1) {
        int rc = run_worker_slot(t, m, o->devices[0], 0, 1);
        t->no_gpu = rc == EXIT_NO_GPU;
        return t->no_gpu ? 1 : rc;
    }
    pid_t pids[TUNE_MAX_DEVICES];
    fflush(stdout);
    for (uint32_t i = 0; i < o->ndevices; i++) {
        if ((pids[i] = fork()) == 0) {
            int rc = run_worker_slot(t, m, o->devices[i], i, o->ndevices);
            fflush(stdout);
            _exit(rc);
        }
        if (pids[i] < 0) fprintf(stderr, "tilec tune: error: fork: %s\n", strerror(errno));
    }
    int rc = 0;
    uint32_t no_gpu = 0;
    for (uint32_t i = 0; i < o->ndevices; i++) {
        int st = 0, code;
        if (pids[i] < 0) rc = 1;
        else if (waitpid(pids[i], &st, 0) < 0 || !WIFEXITED(st)) rc = rc ? rc : 1;
        else if ((code = WEXITSTATUS(st)) == EXIT_NO_GPU) no_gpu++, rc = 1;
        else if (code == 1 || !rc) rc = code ? code : rc;
    }
    t->no_gpu = no_gpu == o->ndevices;
    return rc;
}

static void dry_run(const Tuner *t)
{
    for (uint32_t i = 0; i < t->nwork; i++) printf("tune: %s\n", t->work[i].what);
    printf("tune: %u keys\n", t->nwork);
}

/* The report, from the cache: every key's result as stored by whichever worker tuned it. */
static int write_report(Tuner *t, const TmManifest *m)
{
    if (trt_context_create(t->o->devices[0], TRT_MODE_DEFAULT, NULL, &t->ctx)) {
        fprintf(stderr, "tilec tune: error: the report: %s\n", trt_last_error());
        return 1;
    }
    load_kernels(t, m);
    TrReport rep;
    tr_begin(&rep, t->o->report, m->path);
    for (uint32_t i = 0; i < t->nwork; i++) {
        char id[33];
        RtKey key;
        RtBlob blob = {0};
        RtTuneResult r;
        if (!t->kerns[t->work[i].entry]) {
            tr_key(&rep, t->work[i].what, NULL);
            continue;
        }
        key_id(t, &t->work[i], id);
        rt_key_from_hex(id, &key);
        bool have = rt_cache_get(t->ctx->cache, RT_ENTRY_TUNE, &key, &blob) == RT_GET_HIT &&
                    rt_tune_result_parse(blob.data, blob.len, &r);
        tr_key(&rep, t->work[i].what, have ? &r : NULL);
        if (have) rt_tune_result_free(&r);
        rt_blob_free(&blob);
    }
    int rc = tr_end(&rep) ? 0 : 1;
    for (uint32_t i = 0; i < m->nentries; i++) trt_module_destroy(t->mods[i]);
    free(t->mods), free(t->kerns);
    trt_context_destroy(t->ctx);
    return rc;
}

/* In the build tree the worker is build/runtime/tile-tune-worker, beside tilec's
 * build/tools; the runtime looks beside libtileRT, which is linked into tilec. */
static void find_worker(void)
{
    char exe[4096], path[4200];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (getenv("TILE_TUNE_WORKER") || n <= 0) return;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return;
    *slash = '\0';
    static const char *const beside[] = {"../runtime", "runtime"};   /* build tree; the GPU bundle */
    for (size_t i = 0; i < sizeof beside / sizeof *beside; i++) {
        snprintf(path, sizeof path, "%s/%s/tile-tune-worker", exe, beside[i]);
        if (access(path, X_OK) == 0) {
            setenv("TILE_TUNE_WORKER", path, 0);
            return;
        }
    }
}

int tilec_tune_main(int argc, char **argv)
{
    find_worker();
    TuneOptions o = {.ndevices = 1, .seed = 1};
    parse_tune_args(argc, argv, &o);
    TmManifest m;
    if (!tm_read(o.manifest, &m, stderr)) {
        fprintf(stderr, "tilec tune: error: cannot read '%s': %s\n", o.manifest, strerror(errno));
        tm_free(&m);
        return 1;
    }
    Tuner t = {.o = &o};
    int rc = m.nerrors ? 1 : 0;
    if (!rc) t.nwork = list_work(&m, &t.work);
    char jpath[4096];
    snprintf(jpath, sizeof jpath, "%s%s", o.journal ? o.journal : o.manifest, o.journal ? "" : ".journal");
    char why[512];
    if (!rc && o.dry_run) dry_run(&t);
    else if (!rc && !rt_driver_loadable(why, sizeof why)) {   /* said once, before any worker or journal */
        fprintf(stderr, "tilec tune: error: no CUDA driver (%s): tuning measures each config on a GPU; "
                "--dry-run lists the keys without one\n", why);
        rc = 1;
    } else if (!rc && !journal_open(&t.journal, jpath)) {
        fprintf(stderr, "tilec tune: error: cannot use the journal '%s': %s\n", jpath,
                errno == EINVAL ? "not a tilec tune journal" : strerror(errno));
        rc = 1;
    } else if (!rc) {
        const char *ea = getenv("TILE_TUNE_EXIT_AFTER");
        t.prog.journal = &t.journal;
        t.prog.exit_after = ea ? (uint32_t)atoi(ea) : 0;
        t.deadline = o.budget_min ? tl_now_ms() / 1e3 + o.budget_min * 60 : 0;
        rc = run_workers(&t, &m);
        if (o.report && !t.no_gpu && write_report(&t, &m)) rc = 1;
    }
    journal_close(&t.journal);
    free(t.work);
    tm_free(&m);
    return rc;
}
