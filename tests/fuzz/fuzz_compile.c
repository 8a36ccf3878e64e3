/* libFuzzer harness of the whole compiler: any bytes through the parser, lowering,
 * the verifier, the -O2 pipeline (verifying after every pass), for small kernels the
 * interpreter on a 1-program grid with small zeroed buffers, and (where the harness is
 * built with the code generator, TILE_FUZZ_CODEGEN) code generation to PTX: the GPU
 * passes, LLVM and the NVPTX backend; and the graph IR of every graph, which must
 * verify, and the Tile kernels its fusion plan lowers to, which must compile. A crash, a sanitizer report, a leak, a hang, or
 * IR that the verifier rejects after lowering or after a pass is a bug: every input
 * must end in valid IR (and PTX) or in diagnostics.
 *
 * An input may start with a line `// defines: NAME=V NAME=V ...` (at most 8): they are
 * passed as -D definitions, so the fuzzer reaches const values and configs too. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "ir/interp.h"
#include "passes/graph_lower.h"
#include "passes/passes.h"
#ifdef TILE_FUZZ_CODEGEN
#include "codegen/codegen.h"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_INTERP_ELEMS = 4096, BUF_ELEMS = 64, MAX_PARAMS = 32, MAX_DEFINES = 8, MAX_CG_OPS = 2000 };

static FILE *sink(void)
{
    static FILE *f;
    if (!f) f = fopen("/dev/null", "w");
    return f;
}

/* Whether every value of f is small enough to interpret quickly. */
static bool small_enough(const IrFunc *f)
{
    for (uint32_t v = 0; v < f->nvalues; v++)
        if (ir_type_numel(f->values[v].type) > MAX_INTERP_ELEMS) return false;
    return f->body.nargs <= MAX_PARAMS;
}

static void interpret(const IrFunc *k)
{
    InterpArg args[MAX_PARAMS];
    void *bufs[MAX_PARAMS] = {0};
    memset(args, 0, sizeof args);
    for (uint32_t i = 0; i < k->body.nargs; i++) {
        const IrType *t = ir_value_type(k, k->body.args[i]);
        if (t->elem == IR_PTR) {
            bufs[i] = calloc(BUF_ELEMS, 8);
            args[i].is_buffer = true;
            args[i].u.buf = (InterpBuffer){t->pointee, bufs[i], BUF_ELEMS};
        } else if (ir_elem_is_float(t->elem)) {
            args[i].u.f = 3.0;
        } else {
            args[i].u.i = 3;
        }
    }
    DiagList d;
    diag_init(&d);
    int64_t grid[3] = {1, 1, 1};
    InterpOptions io = {.print_out = sink(), .max_loop_iterations = 64, .max_work = 1 << 22};
    interp_run(k, args, k->body.nargs, grid, &io, &d);
    diag_free(&d);
    for (uint32_t i = 0; i < k->body.nargs; i++) free(bufs[i]);
}

/* The `// defines: A=1 B=-2` header line, into defs (names point into text, which
 * the parse of the definitions cuts with NULs: the header is a comment, so the rest
 * of the line is not read by the lexer as long as it stays on line 1). */
static uint32_t read_defines(char *text, FeDefine *defs, char **body)
{
    static const char head[] = "// defines:";
    uint32_t n = 0;
    *body = text;
    if (strncmp(text, head, sizeof head - 1)) return 0;
    char *end = strchr(text, '\n');
    if (!end) return 0;
    *end = 0;
    *body = end + 1;
    for (char *save = NULL, *t = strtok_r(text + sizeof head - 1, " ", &save); t && n < MAX_DEFINES;
         t = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(t, '='), *e;
        if (!eq || eq == t) continue;
        *eq = 0;
        long long v = strtoll(eq + 1, &e, 0);
        if (!*e) defs[n++] = (FeDefine){t, v};
    }
    return n;
}

static uint32_t count_ops(const IrBlock *b)
{
    uint32_t n = 0;
    for (const IrOp *op = b->first; op; op = op->next) {
        n++;
        for (uint32_t r = 0; r < op->nregions; r++) n += count_ops(&op->regions[r]);
    }
    return n;
}

#ifdef TILE_FUZZ_CODEGEN
/* PTX for a module whose kernels are all small (LLVM's time grows with the code);
 * the optimization level comes from the input, so both pipelines are reached. */
static void generate(IrModule *m, size_t size, DiagList *d)
{
    for (uint32_t i = 0; i < m->nfuncs; i++)
        if (!small_enough(m->funcs[i]) || count_ops(&m->funcs[i]->body) > MAX_CG_OPS) return;
    CgOptions co = {.arch = size % 3 ? "sm_90a" : "sm_80", .opt_level = size % 2 ? 0 : 3,
                    .aligned_params = size % 5 ? ~UINT64_C(0) : 0};
    pass_run_gpu(m, NULL);
    char *ptx = cg_emit_ptx(m, &co, d);
    tl_free(ptx);
}
#endif

/* The Tile kernels that g's fusion plan lowers to (passes/graph_lower.c) parse and
 * lower without an error: the lowering writes only valid programs. */
static void lowered(const IrGraph *g)
{
    IrCtx *ctx = ir_ctx_create();
    DiagList *d = ir_ctx_diags(ctx);
    const PassGLowered *l = pass_graph_lower(g, pass_graph_fuse(g, ir_ctx_arena(ctx)), ir_ctx_arena(ctx));
    Source src = {"lowered.tile", l->source, strlen(l->source)};
    AstProgram *p = fe_parse(ir_ctx_arena(ctx), &src, d);
    FeOptions fo = {0};
    if (p && !d->nerrors) fe_lower(ctx, p, &fo, d);
    if (!p || d->nerrors) {
        diag_print(d, stderr);
        fputs(l->source, stderr);
        fputs("fuzz_compile: the graph's lowered kernels do not compile\n", stderr);
        abort();
    }
    ir_ctx_destroy(ctx);
}

/* The graph IR of every graph (also of graphs with errors, which build nothing but
 * must not crash the builder); what is built must verify, and its kernels compile. */
static void graphs(IrCtx *ctx, const AstProgram *p)
{
    DiagList d;
    diag_init(&d);
    IrGraphModule *m = ir_gmodule_create(ir_ctx_arena(ctx));
    for (uint32_t i = 0; i < p->nitems; i++) {
        if (p->items[i].kind != AST_GRAPH || !p->items[i].body) continue;
        IrGraph *g = fe_build_graph(ir_ctx_arena(ctx), p, &p->items[i], m, &d, NULL);
        if (g && !ir_graph_verify(g, ir_ctx_arena(ctx), &d)) {
            diag_print(&d, stderr);
            ir_graph_print(g, stderr);
            fputs("fuzz_compile: the graph builder produced invalid graph IR\n", stderr);
            abort();
        }
        if (g) lowered(g);
    }
    ir_gmodule_print(m, sink());
    ir_gmodule_destroy(m);
    diag_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    FeDefine defs[MAX_DEFINES];
    char *body;
    FeOptions fo = {defs, read_defines(text, defs, &body), NULL};
    Source src = {"fuzz.tile", body, size - (size_t)(body - text)};
    IrCtx *ctx = ir_ctx_create();
    DiagList *d = ir_ctx_diags(ctx);
    AstProgram *p = fe_parse(ir_ctx_arena(ctx), &src, d);
    IrModule *m = p && !d->nerrors ? fe_lower(ctx, p, &fo, d) : NULL;
    if (p && !d->nerrors) graphs(ctx, p);
    if (m && !d->nerrors) {
        if (!ir_verify_module(m)) {
            diag_print(d, stderr);
            ir_print_module(m, stderr);
            fputs("fuzz_compile: lowering produced invalid IR\n", stderr);
            abort();
        }
        PassOptions po = {.verify_each = true, .dump = stderr};
        pass_run_default(m, 2, &po);
        ir_print_module(m, sink());
        for (uint32_t i = 0; i < m->nfuncs; i++)
            if (m->funcs[i]->kind == IR_FUNC_KERNEL && small_enough(m->funcs[i])) interpret(m->funcs[i]);
#ifdef TILE_FUZZ_CODEGEN
        generate(m, size, d);
#endif
    }
    diag_print(d, sink());
    ir_ctx_destroy(ctx);
    free(text);
    return 0;
}
