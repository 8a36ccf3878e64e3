/* The pass registry and pipelines: a straight list of passes, the verifier between
 * them when asked. */
#include "passes.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/*   name            summary                                                 run */
const PassInfo pass_table[] = {
    {"canonicalize", "algebraic identities; constants to the right",         pass_canonicalize},
    {"fold",         "evaluate ops whose operands are all constants",        pass_fold},
    {"cse",          "merge identical pure ops",                             pass_cse},
    {"dce",          "remove pure ops whose results are unused",             pass_dce},
};
const unsigned pass_count = sizeof pass_table / sizeof *pass_table;

/* The GPU level, in pipeline order. */
const PassInfo pass_gpu_table[] = {
    {"ptrblock",     "block-shaped pointer loads and stores as block ops (GPU, first)", pass_ptrblock},
    {"cluster",      "a program's rows split among a cluster's CTAs (cluster = n, GPU)", pass_cluster},
    {"schedule",     "ws, persistent, overlap, pingpong where not given",    pass_schedule},
    {"blockload",    "block loads and stores through pointer tiles (GPU)",   pass_block_load},
    {"dotpad",       "dots below 16 in a dimension padded to 16",            pass_dot_pad},
    {"hoist",        "loop-invariant code out of loops (GPU level)",         pass_hoist},
    {"epichunk",     "a GEMM's epilogue in chunks of 64 columns (GPU level)", pass_epichunk},
    {"layout",       "a blocked layout for every tile (GPU level)",          pass_layout},
    {"rotate",       "attention's softmax under the next P V (overlap = 1)", pass_rotate},
    {"shared",       "dot operands through shared memory, stages deep",      pass_shared},
    {"warpspec",     "a producer warpgroup issues the TMA copies (ws = 1)",  pass_warpspec},
    {"persistent",   "each program walks tiles of the grid (persistent = 1)", pass_persistent},
    {"licm",         "loop invariants (conversions the GPU passes made) out", pass_hoist_invariants},
};
const unsigned pass_gpu_count = sizeof pass_gpu_table / sizeof *pass_gpu_table;

/* Run only when asked (PassOptions.check_bounds, tile-opt --passes=bounds). */
static const PassInfo pass_bounds_info =
    {"bounds",       "checked mode: bounds checks from hidden size parameters", pass_bounds};
/* The last of the GPU pipeline, after the cleanup and the bounds checks. */
static const PassInfo pass_plan_info =
    {"plan",         "the kernel's resource plan: threads, shared memory, tensor maps", pass_plan};

const PassInfo *pass_find(const char *name)
{
    for (unsigned i = 0; i < pass_count; i++)
        if (!strcmp(pass_table[i].name, name)) return &pass_table[i];
    for (unsigned i = 0; i < pass_gpu_count; i++)
        if (!strcmp(pass_gpu_table[i].name, name)) return &pass_gpu_table[i];
    if (!strcmp(pass_plan_info.name, name)) return &pass_plan_info;
    return strcmp(pass_bounds_info.name, name) ? NULL : &pass_bounds_info;
}

static _Noreturn void invalid_ir(IrModule *m, const char *what, const char *stage, FILE *dump)
{
    fprintf(dump, "tile: internal error: the IR is invalid after %s '%s'\n", what, stage);
    diag_print(ir_ctx_diags(m->ctx), dump);
    ir_print_module(m, dump);
    abort();
}

void pass_verify_stage(IrModule *m, const char *stage, FILE *dump)
{
    if (!ir_verify_module(m)) invalid_ir(m, "stage", stage, dump ? dump : stderr);
}

/* FNV-1a of f's printed form: what check_unchanged compares around a pass. */
static uint64_t func_hash(const IrFunc *f)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem) abort();
    ir_print_func(f, mem);
    fclose(mem);
    uint64_t h = 1469598103934665603u;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)text[i]) * 1099511628211u;
    free(text);
    return h;
}

/* A pass that says it changed nothing must have left f as it was: the GPU pipeline
 * verifies only after passes that changed something, and a plan survives them. */
static bool run_checked(IrFunc *f, const PassInfo *p, const PassOptions *opt, IrModule *m, FILE *dump)
{
    bool check = opt && opt->check_unchanged;
    uint64_t before = check ? func_hash(f) : 0;
    bool c = p->run(f);
    if (check && !c && func_hash(f) != before) {
        fprintf(dump, "tile: internal error: pass '%s' reported no change but changed '@%s'\n", p->name, f->name);
        ir_print_module(m, dump);
        abort();
    }
    return c;
}

/* Runs one pass on every function; returns whether anything changed. */
static bool run_one(IrModule *m, const PassInfo *p, const PassOptions *opt, double *ms)
{
    FILE *dump = opt && opt->dump ? opt->dump : stderr;
    bool changed = false;
    double t0 = tl_now_ms();
    for (uint32_t i = 0; i < m->nfuncs; i++) {
        bool c = run_checked(m->funcs[i], p, opt, m, dump);
        /* a plan is of the IR it was made for: a pass that changes the function drops
         * it, and the plan pass, last in the GPU pipeline, makes it anew */
        if (c && p->run != pass_plan) m->funcs[i]->plan = NULL;
        changed |= c;
    }
    *ms += tl_now_ms() - t0;
    bool verify = opt && (opt->verify_each || (opt->verify_changed && changed));
    if (verify && !ir_verify_module(m)) invalid_ir(m, "pass", p->name, dump);
    if (opt && opt->print_after_all) {
        fprintf(dump, "// ----- IR after %s -----\n", p->name);
        ir_print_module(m, dump);
    }
    return changed;
}

static void report_table_times(const PassInfo *table, unsigned n, const PassOptions *opt, const double *ms)
{
    if (!opt || !opt->time_passes) return;
    FILE *dump = opt->dump ? opt->dump : stderr;
    fprintf(dump, "// pass times (ms)\n");
    for (unsigned i = 0; i < n; i++)
        if (ms[i] > 0) fprintf(dump, "//   %-14s %9.3f\n", table[i].name, ms[i]);
}

static void report_times(const PassOptions *opt, const double *ms) { report_table_times(pass_table, pass_count, opt, ms); }

bool pass_run_list(IrModule *m, const char *list, const PassOptions *opt)
{
    double ms[sizeof pass_table / sizeof *pass_table] = {0};
    const char *p = list;
    while (p && *p) {
        size_t n = strcspn(p, ",");
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(n < 63 ? n : 63), p);
        const PassInfo *pi = pass_find(name);
        if (!pi) {
            diag_error(ir_ctx_diags(m->ctx), (Loc){0}, "unknown pass '%s'", name);
            return false;
        }
        double gpu_ms = 0;
        run_one(m, pi, opt, pi >= pass_table && pi < pass_table + pass_count ? &ms[pi - pass_table] : &gpu_ms);
        p += n + (p[n] == ',');
    }
    report_times(opt, ms);
    return true;
}

bool pass_run_default(IrModule *m, int opt_level, const PassOptions *opt)
{
    double ms[sizeof pass_table / sizeof *pass_table] = {0};
    if (opt_level <= 0) return true;
    for (int round = 0; round < 4; round++) {
        bool changed = false;
        for (unsigned i = 0; i < pass_count; i++) changed |= run_one(m, &pass_table[i], opt, &ms[i]);
        if (!changed) break;
    }
    report_times(opt, ms);
    return true;
}

bool pass_run_gpu(IrModule *m, const PassOptions *opt)
{
    double ms[sizeof pass_gpu_table / sizeof *pass_gpu_table] = {0};
    PassOptions o = opt ? *opt : (PassOptions){0};
    o.verify_changed = true;     /* the IR comes verified from lowering (pass_verify_stage) */
    if (o.check_bounds || !m->knobs.tma) m->no_tma = true;   /* bounds checks see pointer loads */
    for (unsigned i = 0; i < pass_gpu_count; i++) run_one(m, &pass_gpu_table[i], &o, &ms[i]);
    double clean_ms = 0;
    run_one(m, pass_find("cse"), &o, &clean_ms);   /* copies the layout propagation made twice */
    run_one(m, pass_find("dce"), &o, &clean_ms);   /* the conversions the GPU passes made dead */
    if (o.check_bounds) run_one(m, &pass_bounds_info, &o, &clean_ms);
    run_one(m, &pass_plan_info, &o, &clean_ms);
    report_table_times(pass_gpu_table, pass_gpu_count, opt, ms);
    return true;
}
