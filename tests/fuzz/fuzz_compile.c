/* libFuzzer harness of the whole compiler: any bytes through the parser, lowering,
 * the verifier, the -O2 pipeline (verifying after every pass) and, for small kernels,
 * the interpreter on a 1-program grid with small zeroed buffers. A crash, a sanitizer
 * report, a leak, a hang, or IR that the verifier rejects after lowering or after a
 * pass is a bug: every input must end in valid IR or in diagnostics. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "ir/interp.h"
#include "passes/passes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_INTERP_ELEMS = 4096, BUF_ELEMS = 64, MAX_PARAMS = 32 };

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
    InterpOptions io = {.print_out = sink(), .max_loop_iterations = 64};
    interp_run(k, args, k->body.nargs, grid, &io, &d);
    diag_free(&d);
    for (uint32_t i = 0; i < k->body.nargs; i++) free(bufs[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    Source src = {"fuzz.tile", text, size};
    IrCtx *ctx = ir_ctx_create();
    DiagList *d = ir_ctx_diags(ctx);
    AstProgram *p = fe_parse(ir_ctx_arena(ctx), &src, d);
    IrModule *m = p && !d->nerrors ? fe_lower(ctx, p, NULL, d) : NULL;
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
    }
    diag_print(d, sink());
    ir_ctx_destroy(ctx);
    free(text);
    return 0;
}
