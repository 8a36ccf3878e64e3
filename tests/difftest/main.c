/* tile-difftest: the differential tester (docs/DIFFTEST.md).
 *
 *   tile-difftest --cpu|--gpu [--seeds A..B | --count N [--seed S]] [--jobs N]
 *                 [--time-limit SECONDS] [--out DIR] [--verbose] [--replay DIR]
 *                 [--ptxas-every N] [--timeout SECONDS] [--max-reduce N]
 *   tile-difftest --print SEED
 *
 * Generates a random kernel per seed, runs it in the interpreter at -O0 and -O2 (and
 * on the GPU, or through the code generator and ptxas in --cpu mode) and compares.
 * Programs run in N forked workers that take seeds one by one; the parent kills a
 * worker that takes longer than --timeout on a program (reported as a timeout) and
 * starts another. Failures are reduced afterwards (in a child of their own) and saved
 * under --out. Exit status: 0 all passed, 1 a failure, 2 usage, 77 no GPU. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "gen.h"
#include "run.h"
#include "tile/tile_rt.h"

enum { MAX_JOBS = 64, MAX_FAILS = 256, MAX_FILES = 4096 };

typedef struct Config {
    bool gpu, verbose;
    uint64_t first, count;        /* seeds first .. first + count - 1 */
    int jobs, ptxas_every, max_reduce;
    double time_limit, timeout, reduce_time;
    const char *out, *replay, *inject, *ptxas;
    char *files[MAX_FILES];       /* --replay: the regression files */
    int nfiles;
} Config;

typedef struct Fail {
    uint64_t item;
    DtStatus status;
} Fail;

typedef struct Worker {
    pid_t pid;
    int cmd, res;                 /* pipe ends: items to the worker, results back */
    int64_t item;                 /* in progress, or -1 */
    double started;
} Worker;

/* ---- one item, in a worker --------------------------------------------------------------- */
static void run_options(const Config *cf, TrtContext *ctx, DtRunOptions *o)
{
    const char *tmp = getenv("TMPDIR");
    *o = (DtRunOptions){.gpu = cf->gpu, .ptx = !cf->gpu && cf->ptxas_every > 0, .ptxas_path = cf->ptxas,
                        .tmpdir = tmp && *tmp ? tmp : "/tmp", .inject = cf->inject, .gpu_ctx = ctx};
}

/* Builds the case of item i: a regression file, or the program of a seed. */
static bool item_case(const Config *cf, uint64_t i, DtCase *c, DtResult *r)
{
    if (cf->replay) return dt_case_read(cf->files[i], c, r->msg, sizeof r->msg);
    DtProgram *p = malloc(sizeof *p);
    if (!p) abort();
    dt_generate(p, cf->first + i);
    dt_case_from_program(p, c);
    free(p);
    return true;
}

static void report(const Config *cf, uint64_t i, const DtCase *c, const DtResult *r)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return;
    if (cf->replay) fprintf(f, "FAIL %s: %s: %s\n", cf->files[i], dt_status_name(r->status), r->msg);
    else fprintf(f, "FAIL seed %llu: %s: %s\n", (unsigned long long)(cf->first + i), dt_status_name(r->status), r->msg);
    if (cf->verbose && c->text) fprintf(f, "%s", c->text);
    fclose(f);
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    free(text);
}

static DtStatus run_item(const Config *cf, TrtContext *ctx, uint64_t i)
{
    DtCase c;
    DtResult r = {0};
    DtRunOptions o;
    run_options(cf, ctx, &o);
    o.ptxas = o.ptx && cf->ptxas && (cf->replay || (cf->first + i) % (uint64_t)cf->ptxas_every == 0);
    if (!item_case(cf, i, &c, &r)) r.status = DT_RUN_ERROR;
    else dt_run_case(&c, &o, &r);
    if (r.status != DT_OK) report(cf, i, &c, &r);
    else if (cf->verbose && cf->replay) printf("ok %s\n", cf->files[i]);
    else if (cf->verbose) printf("ok seed %llu\n", (unsigned long long)(cf->first + i));
    fflush(stdout);
    dt_case_free(&c);
    return r.status;
}

static TrtContext *open_gpu(const Config *cf)
{
    TrtContext *ctx = NULL;
    if (cf->gpu && trt_context_create(0, TRT_MODE_DEFAULT, "", &ctx) != TRT_SUCCESS) {
        fprintf(stderr, "tile-difftest: worker: %s\n", trt_last_error());
        _exit(3);
    }
    return ctx;
}

/* A worker: reads item numbers, answers (item, status) until its input closes. */
static void worker_main(const Config *cf, int cmd, int res)
{
    TrtContext *ctx = open_gpu(cf);
    int64_t item;
    while (read(cmd, &item, sizeof item) == (ssize_t)sizeof item) {
        int64_t answer[2] = {item, run_item(cf, ctx, (uint64_t)item)};
        if (write(res, answer, sizeof answer) != (ssize_t)sizeof answer) break;
    }
    trt_context_destroy(ctx);
    _exit(0);
}

/* ---- the pool, in the parent ------------------------------------------------------------- */
typedef struct Pool {
    const Config *cf;
    Worker w[MAX_JOBS];
    uint64_t nitems, next, done;
    int counts[DT_NSTATUS];
    Fail fails[MAX_FAILS];
    int nfails;
    double t0;
} Pool;

static bool spawn(Pool *pl, Worker *w)
{
    int cmd[2], res[2];
    if (pipe(cmd) || pipe(res)) return false;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
        setpgid(0, 0);   /* its own group: a kill takes its ptxas along */
        close(cmd[1]);
        close(res[0]);
        for (int j = 0; j < pl->cf->jobs; j++)
            if (pl->w[j].pid > 0) close(pl->w[j].cmd), close(pl->w[j].res);
        worker_main(pl->cf, cmd[0], res[1]);
    }
    close(cmd[0]);
    close(res[1]);
    *w = (Worker){pid, cmd[1], res[0], -1, 0};
    return true;
}

static void record(Pool *pl, uint64_t item, DtStatus st)
{
    pl->done++;
    pl->counts[st]++;
    if (st != DT_OK && pl->nfails < MAX_FAILS) pl->fails[pl->nfails++] = (Fail){item, st};
}

static bool may_start(const Pool *pl)
{
    return pl->next < pl->nitems && (pl->cf->time_limit <= 0 || dt_now_s() - pl->t0 < pl->cf->time_limit);
}

static void give(Pool *pl, Worker *w)
{
    if (!may_start(pl)) return;
    int64_t item = (int64_t)pl->next++;
    if (write(w->cmd, &item, sizeof item) != (ssize_t)sizeof item) return;
    w->item = item;
    w->started = dt_now_s();
}

/* The worker ends and a new one (a new process, a new CUDA context) takes its place. */
static void respawn(Pool *pl, Worker *w)
{
    kill(-w->pid, SIGKILL);
    kill(w->pid, SIGKILL);
    waitpid(w->pid, NULL, 0);
    close(w->cmd);
    close(w->res);
    w->pid = -1;
    w->item = -1;
    if (may_start(pl) && spawn(pl, w)) give(pl, w);
}

/* A worker that died or hung: its item is a failure, and a new worker takes over. */
static void replace(Pool *pl, Worker *w, DtStatus st)
{
    const Config *cf = pl->cf;
    if (cf->replay) printf("FAIL %s: %s\n", cf->files[w->item], dt_status_name(st));
    else printf("FAIL seed %llu: %s\n", (unsigned long long)(cf->first + (uint64_t)w->item), dt_status_name(st));
    record(pl, (uint64_t)w->item, st);
    respawn(pl, w);
}

static void on_readable(Pool *pl, Worker *w)
{
    int64_t answer[2];
    ssize_t n = read(w->res, answer, sizeof answer);
    if (n != (ssize_t)sizeof answer) {
        replace(pl, w, DT_CRASH);
        return;
    }
    record(pl, (uint64_t)answer[0], (DtStatus)answer[1]);
    w->item = -1;
    /* a kernel fault leaves the CUDA context unusable for the rest of the process: the
     * programs after it get a fresh worker, not the same error */
    if (answer[1] == DT_GPU_ERROR) respawn(pl, w);
    else give(pl, w);
}

static int busy(const Pool *pl)
{
    int n = 0;
    for (int j = 0; j < pl->cf->jobs; j++) n += pl->w[j].pid > 0 && pl->w[j].item >= 0;
    return n;
}

static void pool_step(Pool *pl)
{
    struct pollfd fds[MAX_JOBS];
    int who[MAX_JOBS], n = 0;
    for (int j = 0; j < pl->cf->jobs; j++)
        if (pl->w[j].pid > 0 && pl->w[j].item >= 0) fds[n] = (struct pollfd){pl->w[j].res, POLLIN, 0}, who[n++] = j;
    if (poll(fds, (nfds_t)n, 200) < 0 && errno != EINTR) return;
    for (int i = 0; i < n; i++)
        if (fds[i].revents) on_readable(pl, &pl->w[who[i]]);
    for (int j = 0; j < pl->cf->jobs; j++) {
        Worker *w = &pl->w[j];
        if (w->pid > 0 && w->item >= 0 && dt_now_s() - w->started > pl->cf->timeout) replace(pl, w, DT_TIMEOUT);
    }
}

static void pool_run(Pool *pl)
{
    for (int j = 0; j < pl->cf->jobs; j++) {
        pl->w[j].pid = -1;
        if (may_start(pl) && spawn(pl, &pl->w[j])) give(pl, &pl->w[j]);
    }
    while (busy(pl)) pool_step(pl);
    for (int j = 0; j < pl->cf->jobs; j++) {
        if (pl->w[j].pid <= 0) continue;
        close(pl->w[j].cmd);
        close(pl->w[j].res);
        waitpid(pl->w[j].pid, NULL, 0);
    }
}

/* ---- reducing a failure, in a child ------------------------------------------------------- */
typedef struct Oracle {
    DtRunOptions o;
    DtStatus want;
} Oracle;

static bool still_fails(const DtProgram *p, void *ud)
{
    Oracle *or = ud;
    DtCase c;
    DtResult r;
    dt_case_from_program(p, &c);
    DtStatus st = dt_run_case(&c, &or->o, &r);
    dt_case_free(&c);
    return st == or->want;
}

static const char *file_stem(DtStatus st)
{
    switch (st) {
    case DT_MISMATCH_O2: return "o2-mismatch";
    case DT_MISMATCH_GPU: return "gpu-mismatch";
    case DT_MISMATCH_GPU_IR: return "gpu-ir-mismatch";
    case DT_CODEGEN_FAIL: return "codegen";
    default: return "ptxas";
    }
}

/* Reduces the program of `seed`, which failed with st, and saves it (or prints it). */
static void reduce_one(const Config *cf, uint64_t seed, DtStatus st, double seconds)
{
    Oracle or = {.want = st};
    TrtContext *ctx = open_gpu(cf);
    run_options(cf, ctx, &or.o);
    or.o.ptxas = or.o.ptx && cf->ptxas;
    DtProgram *p = malloc(sizeof *p);
    if (!p) abort();
    dt_generate(p, seed);
    int tests = dt_reduce(p, still_fails, &or, 3000, seconds);
    DtCase c;
    DtResult r;
    dt_case_from_program(p, &c);
    dt_run_case(&c, &or.o, &r);
    char comment[1400], path[4096];
    snprintf(comment, sizeof comment, "seed %llu, reduced in %d runs: %s:\n%s", (unsigned long long)seed, tests,
             dt_status_name(r.status), r.msg);
    printf("difftest: seed %llu reduced (%d runs):\n", (unsigned long long)seed, tests);
    dt_case_fprint(&c, stdout, comment);
    if (cf->out) {
        snprintf(path, sizeof path, "%s/%s-seed%llu.tile", cf->out, file_stem(st), (unsigned long long)seed);
        mkdir(cf->out, 0755);
        printf("difftest: saved as %s\n", dt_case_write(&c, path, comment) ? path : "(cannot write it)");
    }
    fflush(stdout);
    dt_case_free(&c);
    free(p);
    trt_context_destroy(ctx);
}

/* Reduces the first --max-reduce reducible failures, one child each. With a time
 * limit, all of it ends by half that limit again after the start. */
static void reduce_failures(const Config *cf, const Pool *pl)
{
    int reduced = 0;
    double end = cf->time_limit > 0 ? pl->t0 + 1.5 * cf->time_limit : dt_now_s() + 1e9;
    for (int i = 0; i < pl->nfails && reduced < cf->max_reduce; i++) {
        if (!dt_status_reducible(pl->fails[i].status)) continue;
        double seconds = end - dt_now_s() - 5 < cf->reduce_time ? end - dt_now_s() - 5 : cf->reduce_time;
        if (seconds < 5) {
            printf("difftest: no time left to reduce seed %llu\n", (unsigned long long)(cf->first + pl->fails[i].item));
            break;
        }
        reduced++;
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            reduce_one(cf, cf->first + pl->fails[i].item, pl->fails[i].status, seconds);
            _exit(0);
        }
        double t0 = dt_now_s();
        int st;
        while (pid > 0 && waitpid(pid, &st, WNOHANG) == 0) {
            if (dt_now_s() - t0 > seconds + 60) {
                kill(pid, SIGKILL);
                waitpid(pid, &st, 0);
                printf("difftest: reducing seed %llu took too long; stopped\n",
                       (unsigned long long)(cf->first + pl->fails[i].item));
            }
            nanosleep(&(struct timespec){0, 50000000}, NULL);
        }
    }
}

/* ---- options ----------------------------------------------------------------------------- */
static void usage(void)
{
    fputs("usage: tile-difftest --cpu|--gpu [--seeds A..B | --count N [--seed S]] [--jobs N]\n"
          "                     [--time-limit SECONDS] [--out DIR] [--verbose] [--replay DIR]\n"
          "                     [--ptxas-every N] [--timeout SECONDS] [--max-reduce N]\n"
          "       tile-difftest --print SEED\n",
          stderr);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static bool list_replay(Config *cf)
{
    DIR *d = opendir(cf->replay);
    if (!d) return fprintf(stderr, "tile-difftest: cannot open %s\n", cf->replay), false;
    for (struct dirent *e; (e = readdir(d)) && cf->nfiles < MAX_FILES;) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".tile")) continue;
        char *path = malloc(strlen(cf->replay) + n + 2);
        if (!path) abort();
        sprintf(path, "%s/%s", cf->replay, e->d_name);
        cf->files[cf->nfiles++] = path;
    }
    closedir(d);
    qsort(cf->files, (size_t)cf->nfiles, sizeof *cf->files, cmp_str);
    cf->first = 0;
    cf->count = (uint64_t)cf->nfiles;
    return true;
}

static const char *find_ptxas(void)
{
    const char *env = getenv("PTXAS");
    if (env && *env) return access(env, X_OK) ? NULL : env;
    return access("/usr/local/cuda/bin/ptxas", X_OK) ? NULL : "/usr/local/cuda/bin/ptxas";
}

static int print_seed(uint64_t seed)
{
    DtProgram *p = malloc(sizeof *p);
    if (!p) abort();
    dt_generate(p, seed);
    DtCase c;
    dt_case_from_program(p, &c);
    char comment[64];
    snprintf(comment, sizeof comment, "seed %llu, as generated", (unsigned long long)seed);
    dt_case_fprint(&c, stdout, comment);
    dt_case_free(&c);
    free(p);
    return 0;
}

/* Parses argv into cf; returns -1 to go on, else an exit status. */
static int parse(int argc, char **argv, Config *cf)
{
    bool mode = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        unsigned long long x, y;
        if (!strcmp(a, "--cpu") || !strcmp(a, "--gpu")) cf->gpu = a[2] == 'g', mode = true;
        else if (!strcmp(a, "--verbose")) cf->verbose = true;
        else if (!strcmp(a, "--print") && v) return print_seed(strtoull(argv[++i], NULL, 0));
        else if (!strcmp(a, "--seeds") && v && sscanf(v, "%llu..%llu", &x, &y) == 2 && y >= x)
            cf->first = x, cf->count = y - x + 1, i++;
        else if (!strcmp(a, "--count") && v) cf->count = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(a, "--seed") && v) cf->first = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(a, "--jobs") && v) cf->jobs = atoi(argv[++i]);
        else if (!strcmp(a, "--time-limit") && v) cf->time_limit = atof(argv[++i]);
        else if (!strcmp(a, "--timeout") && v) cf->timeout = atof(argv[++i]);
        else if (!strcmp(a, "--reduce-time") && v) cf->reduce_time = atof(argv[++i]);
        else if (!strcmp(a, "--max-reduce") && v) cf->max_reduce = atoi(argv[++i]);
        else if (!strcmp(a, "--ptxas-every") && v) cf->ptxas_every = atoi(argv[++i]);
        else if (!strcmp(a, "--out") && v) cf->out = argv[++i];
        else if (!strcmp(a, "--replay") && v) cf->replay = argv[++i];
        else if (!strcmp(a, "--inject-bug") && v) cf->inject = argv[++i];
        else return usage(), 2;
    }
    if (!mode || cf->jobs < 1 || cf->jobs > MAX_JOBS || cf->count == 0) return usage(), 2;
    if (cf->replay && !list_replay(cf)) return 2;
    return -1;
}

/* Whether a GPU can be opened, asked in a child: the parent must not touch CUDA before
 * it forks. */
static bool have_gpu(void)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        TrtContext *ctx = NULL;
        TrtStatus st = trt_context_create(0, TRT_MODE_DEFAULT, "", &ctx);
        if (st) fprintf(stderr, "tile-difftest: %s: %s\n", trt_status_name(st), trt_last_error());
        _exit(st ? 1 : 0);
    }
    int st = 1;
    return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void summary(const Config *cf, const Pool *pl)
{
    int mism = pl->counts[DT_MISMATCH_O2] + pl->counts[DT_MISMATCH_GPU] + pl->counts[DT_MISMATCH_GPU_IR];
    int other = (int)(pl->done - (uint64_t)pl->counts[DT_OK]) - mism;
    const char *what = cf->replay ? "regressions" : "programs";
    printf("difftest: %llu %s, %d mismatches", (unsigned long long)pl->done, what, mism);
    for (int s = DT_COMPILE_FAIL; s < DT_NSTATUS && other; s++)
        if (pl->counts[s]) printf(", %d %s", pl->counts[s], dt_status_name(s));
    if (cf->replay) printf(" (%s, %.0f s)\n", cf->replay, dt_now_s() - pl->t0);
    else printf(" (seeds %llu..%llu, %.0f s)\n", (unsigned long long)cf->first,
                (unsigned long long)(cf->first + pl->next - 1), dt_now_s() - pl->t0);
}

int main(int argc, char **argv)
{
    static Config cf = {.first = 1, .count = 100, .jobs = 1, .ptxas_every = 8, .max_reduce = 3,
                        .timeout = 0, .reduce_time = 120};
    int rc = parse(argc, argv, &cf);
    if (rc >= 0) return rc;
    if (cf.timeout <= 0) cf.timeout = cf.gpu ? 120 : 60;
    cf.ptxas = find_ptxas();
    if (cf.gpu && !have_gpu()) {
        printf("difftest: no GPU here; skipped\n");
        return 77;
    }
    signal(SIGPIPE, SIG_IGN);
    static Pool pl;
    pl.cf = &cf;
    pl.nitems = cf.count;
    pl.t0 = dt_now_s();
    pool_run(&pl);
    summary(&cf, &pl);
    if (!cf.replay) reduce_failures(&cf, &pl);
    return pl.done == (uint64_t)pl.counts[DT_OK] ? 0 : 1;
}
