/* Running a test case (run.h): compile at -O0 and -O2, run both in the interpreter on
 * the same inputs, compare bit for bit; then PTX through the code generator (and
 * ptxas), or the GPU through libtileRT compared within the case's tolerances. */
#include "run.h"

#include <math.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "frontend/frontend.h"
#include "ir/interp.h"
#include "passes/axischeck.h"
#include "passes/passes.h"
#include "passes/specialize.h"
#include "tile/tile_rt.h"

static const char *const status_names[DT_NSTATUS] = {
    "ok", "mismatch -O0/-O2", "mismatch interpreter/GPU", "mismatch -O2/GPU-level IR", "compile error", "codegen error",
    "ptxas error", "run error", "GPU error", "timeout", "crash",
};

const char *dt_status_name(DtStatus s) { return s < DT_NSTATUS ? status_names[s] : "?"; }

bool dt_status_reducible(DtStatus s)
{
    return s == DT_MISMATCH_O2 || s == DT_MISMATCH_GPU || s == DT_MISMATCH_GPU_IR || s == DT_CODEGEN_FAIL ||
           s == DT_PTXAS_FAIL;
}

static DtStatus fail(DtResult *r, DtStatus s, const char *fmt, const char *detail)
{
    r->status = s;
    snprintf(r->msg, sizeof r->msg, fmt, detail);
    return s;
}

/* ---- cases from programs ------------------------------------------------------------ */
void dt_case_from_program(const DtProgram *p, DtCase *c)
{
    bool live[DT_MAX_STMTS], live_buf[DT_MAX_BUFS];
    dt_live(p, live, live_buf);
    memset(c, 0, sizeof *c);
    c->text = dt_print(p);
    c->data_seed = p->seed;
    for (int b = 0; b < p->nbufs; b++) {
        if (!live_buf[b]) continue;
        DtArg *a = &c->args[c->nargs++];
        snprintf(a->name, sizeof a->name, "%s", p->bufs[b].name);
        a->kind = p->bufs[b].role == DT_BUF_OUT ? DT_ARG_POISON : DT_ARG_RAND;
        a->count = p->bufs[b].count;
        a->tol = dt_buf_tolerance(p, b);
    }
    static const char *const scalars[3] = {"L", "M", "fs"};
    double values[3] = {p->L, p->M, p->fs};
    for (int i = 0; i < 3; i++) {
        DtArg *a = &c->args[c->nargs++];
        snprintf(a->name, sizeof a->name, "%s", scalars[i]);
        a->kind = DT_ARG_SCALAR;
        a->value = values[i];
    }
}

void dt_case_free(DtCase *c)
{
    free(c->text);
    c->text = NULL;
}

/* ---- compiling ------------------------------------------------------------------------ */
static void diags_to(const DiagList *d, char *out, size_t n)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f) {
        diag_print(d, f);
        fclose(f);
    }
    snprintf(out, n, "%s", text ? text : "");
    free(text);
}

/* --inject-bug: each op of the named kind computes its partner instead at -O2. */
static const struct { IrOpcode from, to; } inject_pairs[] = {
    {IR_OP_ADD, IR_OP_SUB}, {IR_OP_SUB, IR_OP_ADD}, {IR_OP_MUL, IR_OP_ADD},
    {IR_OP_MAXIMUM, IR_OP_MINIMUM}, {IR_OP_MINIMUM, IR_OP_MAXIMUM}, {IR_OP_AND, IR_OP_OR},
    {IR_OP_OR, IR_OP_AND}, {IR_OP_XOR, IR_OP_OR}, {IR_OP_SHL, IR_OP_SHR}, {IR_OP_SHR, IR_OP_SHL},
};

static void inject_op(IrOp *op, void *ud)
{
    const IrOpcode *pair = ud;
    if (op->code == pair[0]) op->code = pair[1];
}

static void inject_bug(IrModule *m, const char *name)
{
    IrOpcode code;
    if (!name || !ir_op_from_name(name, strlen(name), &code)) return;
    for (size_t i = 0; i < sizeof inject_pairs / sizeof *inject_pairs; i++) {
        if (inject_pairs[i].from != code) continue;
        IrOpcode pair[2] = {code, inject_pairs[i].to};
        for (uint32_t f = 0; f < m->nfuncs; f++) ir_walk(&m->funcs[f]->body, inject_op, pair);
    }
}

/* Lowers src and runs the -O pipeline; returns the kernel `k` or NULL with the
 * diagnostics in err. */
static IrFunc *compile(IrCtx *ctx, const Source *src, int opt, const char *inject, char *err, size_t n)
{
    DiagList *d = ir_ctx_diags(ctx);
    AstProgram *p = fe_parse(ir_ctx_arena(ctx), src, d);
    FeOptions fo = {NULL, 0, "k"};
    IrModule *m = p && !d->nerrors ? fe_lower(ctx, p, &fo, d) : NULL;
    if (m && !d->nerrors) {
        PassOptions po = {.verify_each = true};
        pass_run_default(m, opt, &po);
        inject_bug(m, inject);
    }
    IrFunc *k = m && !d->nerrors ? ir_module_find(m, "k") : NULL;
    if (!k) diags_to(d, err, n);
    return k;
}

/* ---- buffers ---------------------------------------------------------------------------- */
typedef struct Bufs {
    InterpArg args[DT_MAX_ARGS];
    uint32_t n;
} Bufs;

static uint64_t mix(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Random data of the element type: floats uniform in [-1, 1] (rounded to the type),
 * signed integers in [-100, 100], unsigned in [0, 200], i1 0 or 1. */
static void fill_random(InterpBuffer *b, uint64_t seed)
{
    unsigned char *p = b->data;
    int w = ir_elem_bytes(b->elem);
    for (int64_t i = 0; i < b->count; i++, p += w) {
        uint64_t r = mix(seed + (uint64_t)i * 0x9E3779B97F4A7C15ull);
        double f = (double)(r >> 11) / 9007199254740992.0 * 2 - 1;
        int64_t v = b->elem == IR_I1 ? (int64_t)(r & 1) : ir_elem_is_signed(b->elem) ? (int64_t)(r % 201) - 100 : (int64_t)(r % 201);
        uint16_t h;
        float x = (float)f;
        switch (b->elem) {
        case IR_F16: h = fp_f32_to_f16(x); memcpy(p, &h, 2); break;
        case IR_BF16: h = fp_f32_to_bf16(x); memcpy(p, &h, 2); break;
        case IR_F32: memcpy(p, &x, 4); break;
        case IR_F64: memcpy(p, &f, 8); break;
        case IR_F8E4M3: *p = fp_f32_to_f8e4m3(x); break;
        case IR_F8E5M2: *p = fp_f32_to_f8e5m2(x); break;
        default: memcpy(p, &v, (size_t)w); break;   /* little-endian: the low bytes */
        }
    }
}

static const DtArg *find_arg(const DtCase *c, const char *name)
{
    for (int i = 0; i < c->nargs; i++)
        if (!strcmp(c->args[i].name, name)) return &c->args[i];
    return NULL;
}

/* The kernel's arguments from the case: fresh buffers in their initial state. */
static bool bind(const DtCase *c, const IrFunc *k, Bufs *b, DtResult *r)
{
    memset(b, 0, sizeof *b);
    b->n = k->body.nargs;
    for (uint32_t p = 0; p < k->body.nargs; p++) {
        const DtArg *a = find_arg(c, k->param_names[p]);
        const IrType *t = ir_value_type(k, k->body.args[p]);
        if (!a || (t->elem == IR_PTR) != (a->kind != DT_ARG_SCALAR))
            return fail(r, DT_RUN_ERROR, "no suitable argument for parameter '%s'", k->param_names[p]), false;
        InterpArg *x = &b->args[p];
        x->is_buffer = t->elem == IR_PTR;
        if (!x->is_buffer) {
            if (ir_elem_is_float(t->elem)) x->u.f = a->value;
            else x->u.i = (int64_t)a->value;
            continue;
        }
        size_t bytes = (size_t)a->count * (size_t)ir_elem_bytes(t->pointee);
        x->u.buf = (InterpBuffer){t->pointee, calloc(bytes ? bytes : 1, 1), a->count};
        if (!x->u.buf.data) abort();
        if (a->kind == DT_ARG_POISON) memset(x->u.buf.data, 0xFF, bytes);
        if (a->kind == DT_ARG_RAND) fill_random(&x->u.buf, c->data_seed * 1000003u + p);
    }
    return true;
}

static void bufs_copy(const Bufs *from, Bufs *to)
{
    *to = *from;
    for (uint32_t p = 0; p < from->n; p++) {
        if (!from->args[p].is_buffer) continue;
        size_t bytes = (size_t)from->args[p].u.buf.count * (size_t)ir_elem_bytes(from->args[p].u.buf.elem);
        to->args[p].u.buf.data = malloc(bytes ? bytes : 1);
        if (!to->args[p].u.buf.data) abort();
        memcpy(to->args[p].u.buf.data, from->args[p].u.buf.data, bytes);
    }
}

static void bufs_free(Bufs *b)
{
    for (uint32_t p = 0; p < b->n; p++)
        if (b->args[p].is_buffer) free(b->args[p].u.buf.data);
    b->n = 0;
}

/* ---- comparing ------------------------------------------------------------------------ */
static double elem_value(IrElem e, const unsigned char *p)
{
    uint16_t h;
    float f;
    double d;
    int64_t v = 0;
    switch (e) {
    case IR_F16: memcpy(&h, p, 2); return fp_f16_to_f32(h);
    case IR_BF16: memcpy(&h, p, 2); return fp_bf16_to_f32(h);
    case IR_F32: memcpy(&f, p, 4); return f;
    case IR_F64: memcpy(&d, p, 8); return d;
    case IR_F8E4M3: return fp_f8e4m3_to_f32(*p);
    case IR_F8E5M2: return fp_f8e5m2_to_f32(*p);
    default: break;
    }
    int w = ir_elem_bytes(e);
    memcpy(&v, p, (size_t)w);
    if (ir_elem_is_signed(e) && w < 8) v = (int64_t)((uint64_t)v << (64 - 8 * w)) >> (64 - 8 * w);
    return e == IR_U64 ? (double)(uint64_t)v : (double)v;
}

/* Equal bits, or two NaNs: a NaN's sign and payload are not part of a program's
 * meaning (docs/INTERPRETER.md; the GPU's default NaN is positive, x86's negative).
 * zeros_equal: +0 and -0 are one value too (float atomics: which zero a min or max
 * keeps depends on the order of the programs). */
static bool close_enough(IrElem e, const unsigned char *x, const unsigned char *y, double tol, bool zeros_equal)
{
    int w = ir_elem_bytes(e);
    if (!memcmp(x, y, (size_t)w)) return true;
    if (!ir_elem_is_float(e)) return false;
    double a = elem_value(e, x), b = elem_value(e, y);
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    if (zeros_equal && a == 0 && b == 0) return true;
    if (tol == 0) return false;
    if (isinf(a) || isinf(b)) return a == b;
    return fabs(a - b) <= tol;
}

static void note_dot(IrOp *op, void *ud)
{
    if (op->code == IR_OP_DOT) *(bool *)ud = true;
}

/* A program with a dot compares +0 and -0 as one value: tensor cores add products
 * without IEEE's rules for the sign of a zero sum (the H200 gives -0 for +0 + -0
 * products where IEEE gives +0; docs/INTERPRETER.md), so the sign of a zero a dot
 * gives, and of what is computed from it, is not part of a program's meaning. */
static bool has_dot(const IrFunc *k)
{
    bool found = false;
    ir_walk((IrBlock *)&k->body, note_dot, &found);
    return found;
}

/* Compares every buffer of x (reference) with y; on a difference writes where. */
static bool compare(const IrFunc *k, const DtCase *c, const Bufs *x, const Bufs *y, bool tolerant,
                    const char *xn, const char *yn, char *msg, size_t n)
{
    bool dot = has_dot(k);
    for (uint32_t p = 0; p < x->n; p++) {
        if (!x->args[p].is_buffer) continue;
        const InterpBuffer *a = &x->args[p].u.buf, *b = &y->args[p].u.buf;
        const DtArg *arg = find_arg(c, k->param_names[p]);
        double tol = tolerant && arg ? arg->tol : 0;
        int w = ir_elem_bytes(a->elem);
        int64_t first = -1, bad = 0;
        for (int64_t i = 0; i < a->count; i++)
            if (!close_enough(a->elem, (unsigned char *)a->data + i * w, (unsigned char *)b->data + i * w, tol,
                              dot || !strncmp(k->param_names[p], "acc", 3)))
                bad++, first = first < 0 ? i : first;
        if (!bad) continue;
        double va = elem_value(a->elem, (unsigned char *)a->data + first * w);
        double vb = elem_value(a->elem, (unsigned char *)b->data + first * w);
        snprintf(msg, n, "%s[%lld] (*%s, %lld elements): %s gives %.9g, %s gives %.9g "
                 "(tolerance %.3g); %lld elements differ", k->param_names[p], (long long)first,
                 ir_elem_name(a->elem), (long long)a->count, xn, va, yn, vb, tol, (long long)bad);
        return false;
    }
    return true;
}

/* ---- PTX and ptxas ------------------------------------------------------------------------ */
static bool run_ptxas(const DtRunOptions *o, const char *ptx, const char *arch, char *msg, size_t n)
{
    char path[512], out[512], log[512], archflag[32];
    snprintf(path, sizeof path, "%s/dt-%d.ptx", o->tmpdir, (int)getpid());
    snprintf(out, sizeof out, "%s/dt-%d.cubin", o->tmpdir, (int)getpid());
    snprintf(log, sizeof log, "%s/dt-%d.log", o->tmpdir, (int)getpid());
    snprintf(archflag, sizeof archflag, "-arch=%s", arch);
    FILE *f = fopen(path, "w");
    if (!f || fputs(ptx, f) < 0 || fclose(f)) return snprintf(msg, n, "cannot write %s", path), false;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    char *argv[] = {(char *)o->ptxas_path, archflag, path, "-o", out, NULL};
    extern char **environ;
    pid_t pid;
    int st = 0;
    bool ok = !posix_spawn(&pid, o->ptxas_path, &fa, NULL, argv, environ) && waitpid(pid, &st, 0) == pid &&
              WIFEXITED(st) && WEXITSTATUS(st) == 0;
    posix_spawn_file_actions_destroy(&fa);
    if (!ok) {
        char text[600] = "";
        FILE *l = fopen(log, "r");
        size_t got = l ? fread(text, 1, sizeof text - 1, l) : 0;
        text[got] = 0;
        if (l) fclose(l);
        snprintf(msg, n, "ptxas -arch=%s rejects the PTX: %s", arch, text);
    }
    remove(path);
    remove(out);
    remove(log);
    return ok;
}

/* The code generator on the kernel as the runtime compiles it (-O3, aligned
 * pointers), for both targets. */
static DtStatus check_ptx(const DtCase *c, const Source *src, const DtRunOptions *o, DtResult *r)
{
    static const char *const archs[2] = {"sm_90a", "sm_80"};
    DtStatus st = DT_OK;
    for (int a = 0; a < 2 && st == DT_OK; a++) {
        IrCtx *ctx = ir_ctx_create();
        IrFunc *k = compile(ctx, src, 3, NULL, r->msg, sizeof r->msg);
        CgOptions co = {.arch = archs[a], .opt_level = 3, .aligned_params = ~UINT64_C(0)};
        if (k) pass_run_gpu(k->module, NULL);
        char *ptx = k ? cg_emit_ptx(k->module, &co, ir_ctx_diags(ctx)) : NULL;
        if (!k) st = DT_COMPILE_FAIL;
        else if (!ptx) {
            st = DT_CODEGEN_FAIL;
            diags_to(ir_ctx_diags(ctx), r->msg, sizeof r->msg);
        } else if (o->ptxas && !run_ptxas(o, ptx, archs[a], r->msg, sizeof r->msg)) {
            st = DT_PTXAS_FAIL;
        }
        tl_free(ptx);
        ir_ctx_destroy(ctx);
    }
    return r->status = st;
}

/* ---- the GPU ---------------------------------------------------------------------------- */
static TrtArg gpu_scalar(IrElem e, const InterpArg *a)
{
    TrtArg t;
    memset(&t, 0, sizeof t);
    switch (e) {
    case IR_F32: t.kind = TRT_ARG_F32; t.v.f32 = (float)a->u.f; break;
    case IR_F64: t.kind = TRT_ARG_F64; t.v.f64 = a->u.f; break;
    case IR_I64: t.kind = TRT_ARG_I64; t.v.i64 = a->u.i; break;
    default: t.kind = TRT_ARG_I32; t.v.i32 = (int32_t)a->u.i; break;
    }
    return t;
}

static size_t buf_bytes(const InterpArg *a) { return (size_t)a->u.buf.count * (size_t)ir_elem_bytes(a->u.buf.elem); }

/* Runs the kernel through libtileRT on b's buffers (copied there and back). */
static TrtStatus gpu_run(const DtCase *c, const DtRunOptions *o, const IrFunc *k, Bufs *b,
                         const int64_t grid[3], bool *compile_error)
{
    TrtModule *m = NULL;
    TrtKernel *kern = NULL;
    CUdeviceptr dev[DT_MAX_ARGS] = {0};
    TrtArg targs[DT_MAX_ARGS];
    TrtStatus st = trt_module_load_string(o->gpu_ctx, "difftest.tile", c->text, &m);
    if (!st) st = trt_module_get_kernel(m, "k", NULL, 0, &kern);
    for (uint32_t p = 0; p < b->n && !st; p++) {
        if (b->args[p].is_buffer && !(st = trt_mem_alloc(o->gpu_ctx, buf_bytes(&b->args[p]) + 16, &dev[p])))
            st = trt_memcpy_htod(o->gpu_ctx, dev[p], b->args[p].u.buf.data, buf_bytes(&b->args[p]));
        targs[p] = b->args[p].is_buffer ? trt_arg_ptr(dev[p]) : gpu_scalar(ir_value_type(k, k->body.args[p])->elem, &b->args[p]);
    }
    uint32_t g[3] = {(uint32_t)grid[0], (uint32_t)grid[1], (uint32_t)grid[2]};
    uint64_t sizes[DT_MAX_ARGS];   /* for TILE_DEBUG=bounds: the checked variants on the GPU */
    for (uint32_t p = 0; p < b->n; p++) sizes[p] = b->args[p].is_buffer ? buf_bytes(&b->args[p]) : 0;
    if (!st) st = trt_launch_sized(kern, targs, sizes, b->n, g, NULL);
    *compile_error = st == TRT_ERROR_COMPILE;
    if (!st) st = trt_synchronize(o->gpu_ctx);
    for (uint32_t p = 0; p < b->n && !st; p++)
        if (b->args[p].is_buffer) st = trt_memcpy_dtoh(o->gpu_ctx, b->args[p].u.buf.data, dev[p], buf_bytes(&b->args[p]));
    for (uint32_t p = 0; p < b->n; p++) trt_mem_free(o->gpu_ctx, dev[p]);
    trt_module_destroy(m);
    return st;
}

static DtStatus check_gpu(const DtCase *c, const DtRunOptions *o, const IrFunc *k, const Bufs *init,
                          const Bufs *ref, const int64_t grid[3], DtResult *r)
{
    Bufs g;
    bufs_copy(init, &g);
    bool compile_error = false;
    TrtStatus st = gpu_run(c, o, k, &g, grid, &compile_error);
    if (st) {
        fail(r, compile_error ? DT_CODEGEN_FAIL : DT_GPU_ERROR, "libtileRT: %s", trt_last_error());
    } else if (!compare(k, c, ref, &g, true, "-O2", "GPU", r->msg, sizeof r->msg)) {
        r->status = DT_MISMATCH_GPU;
    }
    bufs_free(&g);
    return r->status;
}

/* ---- one case ----------------------------------------------------------------------------- */
/* Runs the interpreter on a copy of init into out; false with the diagnostics in err. */
static bool interp(const IrFunc *k, const Bufs *init, const int64_t grid[3], Bufs *out, char *err, size_t n)
{
    bufs_copy(init, out);
    DiagList d;
    diag_init(&d);
    InterpOptions io = {.print_out = stderr, .max_loop_iterations = 1 << 20};
    bool ok = interp_run(k, out->args, out->n, grid, &io, &d);
    if (!ok) diags_to(&d, err, n);
    diag_free(&d);
    return ok;
}

/* The checked variant (TILE_DEBUG=bounds): the bounds pass on the prepared kernel k
 * (what the GPU pipeline runs last in the checked mode), in the interpreter with each
 * buffer's size: the programs stay in bounds, so it must compute what -O2 computes and
 * report nothing. */
static void check_bounds_variant(IrFunc *k, const DtCase *c, const Bufs *init, const Bufs *ref,
                                 const int64_t grid[3], DtResult *r)
{
    pass_bounds(k);
    pass_verify_stage(k->module, "bounds", stderr);
    Bufs out = {0};
    bufs_copy(init, &out);
    InterpArg *args = calloc(k->body.nargs + 1, sizeof *args);
    int64_t report[IR_BOUNDS_WORDS];
    if (!args) abort();
    memcpy(args, out.args, out.n * sizeof *args);
    uint32_t n = bounds_bind_args(k, args, out.n, report);
    DiagList d;
    diag_init(&d);
    char err[640];
    InterpOptions io = {.print_out = stderr, .max_loop_iterations = 1 << 20};
    bool ran = interp_run(k, args, n, grid, &io, &d);
    bool reported = ran && bounds_report_diag(report, k->name, k->param_names, out.n, NULL, &d);
    if (!ran || reported) {
        diags_to(&d, err, sizeof err);
        fail(r, DT_MISMATCH_GPU_IR, "the checked variant in the interpreter: %s", err);
    } else if (!compare(k, c, ref, &out, false, "-O2", "checked variant", r->msg, sizeof r->msg)) {
        r->status = DT_MISMATCH_GPU_IR;
    }
    diag_free(&d);
    free(args);
    bufs_free(&out);
}

/* The kernel as the runtime compiles it for these arguments (specialized to their
 * classes, -O3, the GPU pipeline with its layouts), run in the interpreter with every
 * fact of the axis analysis checked on the values (passes/axischeck.c): it must
 * compute what -O2 computes. Wrong axis facts and GPU passes that change a program's
 * meaning show here, on the CPU. */
static DtStatus check_gpu_ir(const DtCase *c, const Source *src, const Bufs *init, const Bufs *ref,
                             const int64_t grid[3], DtResult *r)
{
    IrCtx *ctx = ir_ctx_create();
    IrFunc *k = compile(ctx, src, 3, NULL, r->msg, sizeof r->msg);
    if (!k) {
        ir_ctx_destroy(ctx);
        return r->status = DT_COMPILE_FAIL;
    }
    SpecClass cls[DT_MAX_ARGS] = {0};
    spec_classes_of_args(k, init->args, cls);
    PassOptions po = {.verify_each = true};
    uint64_t aligned = pass_prepare_gpu(k, cls, &po);
    Bufs out = {0};
    bufs_copy(init, &out);
    DiagList d;
    diag_init(&d);
    char err[640];
    InterpOptions io = {.print_out = stderr, .max_loop_iterations = 1 << 20};
    if (!axisinfo_check_run(k, aligned, out.args, out.n, grid, &io, &d)) {
        diags_to(&d, err, sizeof err);
        fail(r, DT_MISMATCH_GPU_IR, "the GPU-level IR in the interpreter: %s", err);
    } else if (!compare(k, c, ref, &out, false, "-O2", "GPU-level IR", r->msg, sizeof r->msg)) {
        r->status = DT_MISMATCH_GPU_IR;
    } else {
        check_bounds_variant(k, c, init, ref, grid, r);
    }
    diag_free(&d);
    bufs_free(&out);
    ir_ctx_destroy(ctx);
    return r->status;
}

static DtStatus run_compiled(const DtCase *c, const DtRunOptions *o, const Source *src, IrFunc *k0, IrFunc *k2,
                             DtResult *r)
{
    Bufs init, a = {0}, b = {0};
    if (!bind(c, k0, &init, r)) return r->status;
    int64_t grid[3] = {1, 1, 1};
    DiagList d;
    diag_init(&d);
    char err[768];
    if (!k0->grid || interp_eval_grid(k0->grid, init.args, init.n, grid, &d) < 0) fail(r, DT_RUN_ERROR, "%s", "no grid");
    else if (!interp(k0, &init, grid, &a, err, sizeof err)) fail(r, DT_RUN_ERROR, "the interpreter at -O0: %s", err);
    else if (!interp(k2, &init, grid, &b, err, sizeof err)) fail(r, DT_MISMATCH_O2, "the interpreter at -O2 fails (-O0 runs): %s", err);
    else if (!compare(k0, c, &a, &b, false, "-O0", "-O2", r->msg, sizeof r->msg)) r->status = DT_MISMATCH_O2;
    else if (check_gpu_ir(c, src, &init, &b, grid, r) != DT_OK) {}
    else if (o->gpu) check_gpu(c, o, k2, &init, &b, grid, r);
    else if (o->ptx) check_ptx(c, src, o, r);
    diag_free(&d);
    bufs_free(&init);
    bufs_free(&a);
    bufs_free(&b);
    return r->status;
}

DtStatus dt_run_case(const DtCase *c, const DtRunOptions *o, DtResult *r)
{
    memset(r, 0, sizeof *r);
    Source *src = source_from_string("difftest.tile", c->text);
    if (!src) abort();
    IrCtx *c0 = ir_ctx_create(), *c2 = ir_ctx_create();
    IrFunc *k0 = compile(c0, src, 0, NULL, r->msg, sizeof r->msg);
    IrFunc *k2 = k0 ? compile(c2, src, 2, o->inject, r->msg, sizeof r->msg) : NULL;
    if (!k0 || !k2) r->status = DT_COMPILE_FAIL;
    else run_compiled(c, o, src, k0, k2, r);
    ir_ctx_destroy(c0);
    ir_ctx_destroy(c2);
    source_free(src);
    return r->status;
}
