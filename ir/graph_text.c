/* The graph IR's textual form: printer and parser (docs/IR.md, "Graph IR").
 *
 *   graph @ffn(%x: bf16[T, 1024], %w: bf16[1024, 4096]) {
 *     %h = matmul %x, %w : bf16[T, 4096]
 *     %q, %k = split 1 %h : bf16[T, 2048], bf16[T, 2048]
 *     %c = const 0.5 : bf16
 *     return %q
 *   }
 *
 * An op line is `results = name [attribute] operands : result types`. Attributes: an
 * axis (an integer), a permutation `[1, 0]`, a predicate (`lt`), a constant, a size
 * (`64*T+1`), conv2d's layout, strides and padding (`nchw stride [2, 2] pad [1, 1]`).
 * parse(print(g)) prints the same text. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"

/* ---- printer ----------------------------------------------------------------------- */

static bool name_used(const char **names, uint32_t n, const char *s)
{
    for (uint32_t i = 0; i < n; i++)
        if (names[i] && strcmp(names[i], s) == 0) return true;
    return false;
}

static bool numeric(const char *s)
{
    for (; *s; s++)
        if (*s < '0' || *s > '9') return false;
    return true;
}

/* Each value's printed name: its hint made unique (`x`, `x.1`), or a number. */
static const char **value_names(Arena *a, const IrGraph *g)
{
    uint32_t n = (uint32_t)g->values.len, next = 0;
    const char **names = arena_alloc(a, (n + 1) * sizeof *names);
    for (uint32_t i = 0; i < n; i++) {
        const char *h = g->values.data[i].name;
        const char *s = h && *h && !numeric(h) ? h : NULL;
        for (uint32_t k = 1; s && name_used(names, i, s); k++) s = arena_printf(a, "%s.%u", h, k);
        while (!s) {
            s = arena_printf(a, "%u", next++);
            if (name_used(names, i, s)) s = NULL;
        }
        names[i] = s;
    }
    return names;
}

const char **ir_graph_value_names(Arena *a, const IrGraph *g) { return value_names(a, g); }

static void print_values(const char **names, const uint32_t *v, uint32_t n, FILE *out)
{
    for (uint32_t i = 0; i < n; i++) fprintf(out, "%s%%%s", i ? ", " : " ", names[v[i]]);
    if (!n) fputs(" nothing", out);
}

static bool is_param(const IrGraph *g, uint32_t v) { return g->values.data[v].def == IR_GNONE; }

uint32_t ir_gplan_root(const IrGPlan *p, uint32_t v) { return p->root ? p->root[v] : v; }

bool ir_lce_one_chunk(IrSize rows, IrSize whole, const char *const *names, const int64_t *vals, uint32_t n)
{
    int64_t r, w;
    return ir_size_eval(rows, names, vals, n, &r) && ir_size_eval(whole, names, vals, n, &w) && r <= w;
}

bool ir_gbuffer_bytes(const IrGBuffer *B, const char *const *names, const int64_t *vals, uint32_t n, int64_t *out)
{
    if (!B->cond) return ir_size_eval(B->bytes, names, vals, n, out);
    int64_t r, w;
    if (!ir_size_eval(B->rows, names, vals, n, &r) || !ir_size_eval(B->upto, names, vals, n, &w)) return false;
    return ir_size_eval(r <= w ? B->one : B->bytes, names, vals, n, out);
}

uint32_t ir_gplan_num_launched(const IrGPlan *p)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < p->nkernels; k++) n += !p->kernels[k].view;
    return n;
}

void ir_gplan_print(const IrGraph *g, const IrGPlan *p, FILE *out)
{
    Arena *a = arena_create();
    if (!a) tl_oom();
    const char **names = value_names(a, g);
    const IrGOp *ret = &g->ops.data[g->ops.len - 1];
    uint32_t nl = ir_gplan_num_launched(p), nv = p->nkernels - nl;
    fprintf(out, "graph @%s: %u kernel%s", g->name, nl, nl == 1 ? "" : "s");
    if (nv) fprintf(out, ", %u view%s", nv, nv == 1 ? "" : "s");
    fputc('\n', out);
    for (uint32_t k = 0; k < p->nkernels; k++) {
        const IrGKernel *K = &p->kernels[k];
        if (K->store_view) {   /* no kernel: the operand was written into the result's memory */
            fprintf(out, "view k%u: %s %%%s of %%%s (%%%s written in the memory of %%%s)\n", k,
                    ir_gop_name(g->ops.data[K->ops[0]].kind), names[K->writes[0]],
                    names[K->reads[0]], names[K->reads[0]], names[ir_gplan_root(p, K->writes[0])]);
            continue;
        }
        if (K->view) {   /* no kernel: the result is the operand's memory */
            fprintf(out, "view k%u: %s %%%s of %%%s (the memory of %%%s)\n", k, ir_gop_name(g->ops.data[K->ops[0]].kind),
                    names[K->writes[0]], names[K->reads[0]], names[ir_gplan_root(p, K->reads[0])]);
            continue;
        }
        fprintf(out, "kernel k%u %s", k, K->kind);
        if (K->chunk > 0 && ir_size_eq(K->whole, ir_size_const(K->chunk)))
            fprintf(out, " (chunks of %lld rows)", (long long)K->chunk);
        else if (K->chunk > 0)
            fprintf(out, " (chunks of %lld rows, one chunk up to %s rows)", (long long)K->chunk, ir_size_str(a, K->whole));
        if (K->columns) fprintf(out, " (partial sums of %u row blocks, then their sum)", K->partials);
        else if (K->partials) fprintf(out, " (%u programs' partial sums, then their sum)", K->partials);
        fputc(':', out);
        for (uint32_t i = 0; i < K->nops; i++) {
            const IrGOp *op = &g->ops.data[K->ops[i]];
            fprintf(out, "%s %s", i ? "," : "", ir_gop_name(op->kind));
            for (uint32_t r = 0; r < op->nout; r++) fprintf(out, " %%%s", names[op->out[r]]);
        }
        fputs("; reads", out);
        print_values(names, K->reads, K->nreads, out);
        fputs("; writes", out);
        print_values(names, K->writes, K->nwrites, out);
        fputc('\n', out);
    }
    for (uint32_t b = 0; b < p->nbuffers; b++) {
        const IrGBuffer *B = &p->buffers[b];
        const char *bytes = ir_size_eq(B->bytes, ir_size_const(0)) ? "?" : ir_size_str(a, B->bytes);   /* ?: overflows */
        if (!B->cond) fprintf(out, "buffer b%u (%s bytes):", b, bytes);
        else if (ir_size_eq(B->one, ir_size_const(0)))
            fprintf(out, "buffer b%u (%s bytes, only when %s > %s):", b, bytes, ir_size_str(a, B->rows), ir_size_str(a, B->upto));
        else
            fprintf(out, "buffer b%u (%s bytes when %s <= %s, else %s):", b, ir_size_str(a, B->one), ir_size_str(a, B->rows),
                    ir_size_str(a, B->upto), bytes);
        for (uint32_t k = 0; !B->nvalues && k < p->nkernels; k++) {
            const IrGKernel *K = &p->kernels[k];
            if (K->dw_sum && K->sum == b) {
                const IrTensorType *dw = &g->values.data[g->ops.data[K->ops[0]].out[2]].type;
                fprintf(out, " the f32 sums of dw of k%u between its chunks, f32%s", k,
                        ir_shape_str(a, dw->rank, dw->dims));
                continue;
            }
            if ((K->chunk <= 0 && !K->partials && !K->bwd_scratch) || K->scratch != b) continue;
            if (K->columns) {
                const IrGOp *c = &g->ops.data[K->ops[K->nops - 1]];
                const IrTensorType *r = &g->values.data[c->out[0]].type;
                IrSize n;
                fprintf(out, " the partial column sums of k%u, %s[%u, %s]", k,
                        g->values.data[c->in[0]].type.elem == IR_F64 ? "f64" : "f32", K->partials,
                        ir_size_numel(a, r->rank, r->dims, &n) ? ir_size_str(a, n) : "?");
                continue;
            }
            if (K->partials) {
                fprintf(out, " the partial sums of k%u, %s[%u, %u]", k, ir_elem_name(ir_gstats_elem(g, K)), K->nops, K->partials);
                continue;
            }
            const IrGOp *op = &g->ops.data[K->ops[0]];
            if (K->bwd_scratch) {
                fprintf(out, " dO as %s and delta of k%u", ir_elem_name(g->values.data[op->in[0]].type.elem), k);
                if (K->bwd_split)
                    fprintf(out, "%s the f32 partial dK and dV of its %lld query heads a KV head", B->cond ? ", while split:" : ", and",
                            (long long)K->bwd_split);
                continue;
            }
            const char *S = ir_elem_name(ir_lce_scratch_elem(g, op)), *V = ir_size_str(a, g->values.data[op->in[IR_LCE_W]].type.dims[1]);
            const char *N = ir_size_str(a, g->values.data[op->in[IR_LCE_X]].type.dims[0]);
            int64_t nr, wr;   /* known rows: one chunk or several, decided here */
            bool one = ir_size_is_const(g->values.data[op->in[IR_LCE_X]].type.dims[0], &nr) &&
                       ir_size_is_const(K->whole, &wr) && nr <= wr;
            if (!B->cond && !one)
                fprintf(out, " the logits of k%u, %s[%lld, %s] a chunk", k, S, (long long)K->chunk, V);
            else if (!B->cond)
                fprintf(out, " the logits of k%u, %s[%s, %s] in one chunk", k, S, N, V);
            else
                fprintf(out, " the logits of k%u, %s[%s, %s] in one chunk, else %s[%lld, %s] a chunk", k, S, N, V, S,
                        (long long)K->chunk, V);
        }
        for (uint32_t i = 0; i < B->nvalues; i++)
            fprintf(out, "%s %%%s : %s (k%u to k%u)", i ? "," : "", names[B->values[i]],
                    ir_ttype_str(a, &g->values.data[B->values[i]].type), B->first[i], B->last[i]);
        fputc('\n', out);
    }
    for (uint32_t k = 0; k < p->nkernels; k++)   /* a store view's root is written by its operand's kernel */
        for (uint32_t i = 0; !p->kernels[k].view && i < p->kernels[k].nwrites; i++) {
            uint32_t v = ir_gplan_root(p, p->kernels[k].writes[i]);
            bool returned = false;
            for (uint32_t r = 0; r < ret->nin; r++) returned |= ret->in[r] == v;
            if (is_param(g, v) || !returned) continue;
            fprintf(out, "output %%%s : %s (written by k%u)\n", names[v], ir_ttype_str(a, &g->values.data[v].type), k);
        }
    arena_destroy(a);
}

static void print_double(double v, FILE *out)
{
    if (isnan(v)) fputs("nan", out);
    else if (isinf(v)) fputs(v < 0 ? "-inf" : "inf", out);
    else {
        char buf[40];
        snprintf(buf, sizeof buf, "%.17g", v);
        fputs(buf, out);
        if (!strpbrk(buf, ".e")) fputs(".0", out);
    }
}

static void print_attr(Arena *a, const IrGraph *g, const IrGOp *op, FILE *out)
{
    switch (ir_gop_attr(op->kind)) {
    case GA_AXIS: fprintf(out, " %lld", (long long)op->attr.axis); break;
    case GA_CMP: fprintf(out, " %s", ir_gcmp_names[op->attr.cmp]); break;
    case GA_SIZE: fprintf(out, " %s", ir_size_str(a, op->attr.size)); break;
    case GA_PERM: {
        uint32_t r = g->values.data[op->in[0]].type.rank;
        fputs(" [", out);
        for (uint32_t i = 0; i < r; i++) fprintf(out, "%s%u", i ? ", " : "", op->attr.perm[i]);
        fputc(']', out);
        break;
    }
    case GA_CONST: {
        IrElem e = g->values.data[op->out[0]].type.elem;
        fputc(' ', out);
        if (ir_elem_is_float(e)) print_double(op->attr.c.f, out);
        else if (e == IR_U64) fprintf(out, "%llu", (unsigned long long)op->attr.c.i);
        else fprintf(out, "%lld", (long long)op->attr.c.i);
        break;
    }
    case GA_CONV:
        fprintf(out, " %s stride [%u, %u] pad [%u, %u]", op->attr.conv.nhwc ? "nhwc" : "nchw", op->attr.conv.stride[0],
                op->attr.conv.stride[1], op->attr.conv.pad[0], op->attr.conv.pad[1]);
        break;
    case GA_NONE: break;
    }
}

static void print_op(Arena *a, const IrGraph *g, const IrGOp *op, const char **names, FILE *out)
{
    fputs("  ", out);
    for (uint32_t i = 0; i < op->nout; i++) fprintf(out, "%s%%%s", i ? ", " : "", names[op->out[i]]);
    fprintf(out, "%s%s", op->nout ? " = " : "", ir_gop_name(op->kind));
    print_attr(a, g, op, out);
    for (uint32_t i = 0; i < op->nin; i++) fprintf(out, "%s%%%s", i ? ", " : " ", names[op->in[i]]);
    for (uint32_t i = 0; i < op->nout; i++)
        fprintf(out, "%s%s", i ? ", " : " : ", ir_ttype_str(a, &g->values.data[op->out[i]].type));
    if (op->region) fprintf(out, " checkpoint %u", op->region);
    fputc('\n', out);
}

void ir_graph_print(const IrGraph *g, FILE *out)
{
    Arena *a = arena_create();
    if (!a) tl_oom();
    const char **names = value_names(a, g);
    fprintf(out, "graph @%s(", g->name);
    for (size_t i = 0; i < g->params.len; i++) {
        uint32_t v = g->params.data[i];
        fprintf(out, "%s%%%s: %s", i ? ", " : "", names[v], ir_ttype_str(a, &g->values.data[v].type));
    }
    fputs(") {\n", out);
    for (size_t i = 0; i < g->ops.len; i++) {
        if (g->nfwd && i == g->nfwd) fputs("backward:\n", out);   /* the first grad's backward begins */
        print_op(a, g, &g->ops.data[i], names, out);
    }
    fputs("}\n", out);
    arena_destroy(a);
}

void ir_gmodule_print(const IrGraphModule *m, FILE *out)
{
    for (size_t i = 0; i < m->graphs.len; i++) {
        if (i) fputc('\n', out);
        ir_graph_print(m->graphs.data[i], out);
    }
}

/* ---- lexer ------------------------------------------------------------------------------- */

typedef VEC(uint32_t) U32Vec;

typedef enum { T_EOF, T_VAL, T_GLOBAL, T_IDENT, T_NUM, T_PUNCT } TokKind;

typedef struct P {
    const Source *src;
    const char *s;
    size_t pos;
    uint32_t line, col;
    TokKind kind;
    const char *text;   /* the token (arena copy); for % and @ without the sigil */
    Loc loc;
    Arena *a;
    DiagList *diags;
    bool failed;
    IrGraph *g;
    VEC(struct Named { const char *name; uint32_t id; }) names;
} P;

static void advance_char(P *p)
{
    if (p->s[p->pos] == '\n') p->line++, p->col = 1;
    else p->col++;
    p->pos++;
}

static void skip_space(P *p)
{
    for (;;) {
        char c = p->s[p->pos];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') advance_char(p);
        else if (c == '/' && p->s[p->pos + 1] == '/')
            while (p->s[p->pos] && p->s[p->pos] != '\n') advance_char(p);
        else return;
    }
}

static bool ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}

static void next(P *p)
{
    skip_space(p);
    p->loc = (Loc){p->src, p->line, p->col};
    size_t start = p->pos;
    char c = p->s[p->pos];
    if (!c) {
        p->kind = T_EOF;
        p->text = "end of input";
        return;
    }
    if (c == '%' || c == '@') {
        advance_char(p);
        start = p->pos;
        while (ident_char(p->s[p->pos])) advance_char(p);
        p->kind = c == '%' ? T_VAL : T_GLOBAL;
    } else if ((c >= '0' && c <= '9') || (c == '.' && p->s[p->pos + 1] >= '0' && p->s[p->pos + 1] <= '9')) {
        while (ident_char(p->s[p->pos]) ||
               ((p->s[p->pos] == '-' || p->s[p->pos] == '+') && (p->s[p->pos - 1] == 'e' || p->s[p->pos - 1] == 'E')))
            advance_char(p);
        p->kind = T_NUM;
    } else if (ident_char(c)) {
        while (ident_char(p->s[p->pos])) advance_char(p);
        p->kind = T_IDENT;
    } else {
        advance_char(p);
        if (c == '-' && p->s[p->pos] == '>') advance_char(p);
        p->kind = T_PUNCT;
    }
    p->text = arena_strndup(p->a, p->s + start, p->pos - start);
}

static bool perr(P *p, const char *msg)
{
    if (!p->failed) diag_error(p->diags, p->loc, "%s", msg);
    p->failed = true;
    return false;
}

#define PERRF(p, ...) perr((p), arena_printf((p)->a, __VA_ARGS__))

static bool is_punct(const P *p, const char *s) { return p->kind == T_PUNCT && strcmp(p->text, s) == 0; }

static bool accept(P *p, const char *s)
{
    if (!is_punct(p, s)) return false;
    next(p);
    return true;
}

static bool expect(P *p, const char *s)
{
    return accept(p, s) || PERRF(p, "expected '%s', found '%s'", s, p->text);
}

/* ---- sizes and types --------------------------------------------------------------------- */

/* factor := INT | NAME */
static bool parse_factor(P *p, IrSize *out)
{
    if (p->kind == T_NUM) {
        char *end;
        errno = 0;
        long long v = strtoll(p->text, &end, 10);
        if (*end || errno || v > IR_SIZE_MAX) return PERRF(p, "bad size '%s'", p->text);
        *out = ir_size_const(v);
    } else if (p->kind == T_IDENT) *out = ir_size_name(p->a, p->text);
    else return PERRF(p, "expected a size, found '%s'", p->text);
    next(p);
    return true;
}

/* size := term (('+' | '-') term)*, term := factor ('*' factor)* */
static bool parse_size(P *p, IrSize *out)
{
    IrSize sum = ir_size_const(0);
    int64_t sign = 1;
    for (;;) {
        IrSize t, f;
        if (!parse_factor(p, &t)) return false;
        while (accept(p, "*"))
            if (!parse_factor(p, &f) || !ir_size_mul(p->a, t, f, &t)) return perr(p, "size is too large");
        if (!ir_size_add(p->a, sum, t, sign, &sum)) return perr(p, "size is too large");
        if (accept(p, "+")) sign = 1;
        else if (accept(p, "-")) sign = -1;
        else break;
    }
    *out = sum;
    return true;
}

/* type := ELEM ['[' size (',' size)* ']'] */
static bool parse_type(P *p, IrTensorType *out)
{
    IrElem e;
    if (p->kind != T_IDENT || !ir_elem_from_name(p->text, strlen(p->text), &e) || e == IR_PTR)
        return PERRF(p, "expected an element type like f32, found '%s'", p->text);
    next(p);
    *out = (IrTensorType){e, 0, NULL};
    if (!accept(p, "[")) return true;
    VEC(IrSize) d = {0};
    bool ok = true;
    do {
        IrSize s;
        if (!(ok = parse_size(p, &s))) break;
        vec_push(&d, s);
    } while (accept(p, ","));
    ok = ok && expect(p, "]");
    IrSize *dims = arena_alloc(p->a, (d.len + 1) * sizeof *dims);
    if (d.len) memcpy(dims, d.data, d.len * sizeof *dims);
    *out = (IrTensorType){e, (uint32_t)d.len, dims};
    vec_free(&d);
    return ok;
}

/* ---- values ------------------------------------------------------------------------------- */

static bool find_name(const P *p, const char *name, uint32_t *id)
{
    for (size_t i = 0; i < p->names.len; i++)
        if (strcmp(p->names.data[i].name, name) == 0) return *id = p->names.data[i].id, true;
    return false;
}

static bool define(P *p, const char *name, uint32_t id, Loc loc)
{
    uint32_t old;
    if (find_name(p, name, &old)) {
        p->loc = loc;
        return PERRF(p, "value '%%%s' is defined twice", name);
    }
    vec_push(&p->names, ((struct Named){name, id}));
    p->g->values.data[id].name = numeric(name) ? NULL : name;
    return true;
}

static bool parse_operand(P *p, U32Vec *ins)
{
    uint32_t id;
    if (p->kind != T_VAL) return PERRF(p, "expected a value like %%x, found '%s'", p->text);
    if (!find_name(p, p->text, &id)) return PERRF(p, "unknown value '%%%s'", p->text);
    vec_push(ins, id);
    next(p);
    return true;
}

/* ---- ops ----------------------------------------------------------------------------------- */

typedef struct Attr {
    const char *text;            /* a constant's token, read once the type is known */
    bool neg;
    int64_t axis;
    IrGCmp cmp;
    IrSize size;
    VEC(uint32_t) perm;
    uint32_t stride[2], pad[2];
    bool nhwc;
} Attr;

static bool parse_int(P *p, int64_t *out)
{
    bool neg = accept(p, "-");
    char *end;
    errno = 0;
    long long v = p->kind == T_NUM ? strtoll(p->text, &end, 10) : 0;
    if (p->kind != T_NUM || *end || errno) return PERRF(p, "expected an integer, found '%s'", p->text);
    *out = neg ? -v : v;
    next(p);
    return true;
}

static bool parse_attr(P *p, IrGOpKind k, Attr *at)
{
    switch (ir_gop_attr(k)) {
    case GA_AXIS: return parse_int(p, &at->axis);
    case GA_SIZE: return parse_size(p, &at->size);
    case GA_CMP:
        for (int i = 0; i < 6; i++)
            if (p->kind == T_IDENT && !strcmp(p->text, ir_gcmp_names[i])) {
                at->cmp = (IrGCmp)i;
                next(p);
                return true;
            }
        return PERRF(p, "expected a predicate (eq ne lt le gt ge), found '%s'", p->text);
    case GA_PERM:
        if (!expect(p, "[")) return false;
        do {
            int64_t v;
            if (!parse_int(p, &v)) return false;
            if (v < 0 || v >= 64) return perr(p, "axis out of range");
            vec_push(&at->perm, (uint32_t)v);
        } while (accept(p, ","));
        return expect(p, "]");
    case GA_CONST:
        at->neg = accept(p, "-");
        if (p->kind != T_NUM && !(p->kind == T_IDENT && (!strcmp(p->text, "inf") || !strcmp(p->text, "nan"))))
            return PERRF(p, "expected a constant, found '%s'", p->text);
        at->text = p->text;
        next(p);
        return true;
    case GA_CONV:
        if (p->kind != T_IDENT || (strcmp(p->text, "nchw") && strcmp(p->text, "nhwc")))
            return PERRF(p, "expected the layout of conv2d (nchw or nhwc), found '%s'", p->text);
        at->nhwc = !strcmp(p->text, "nhwc");
        next(p);
        for (int w = 0; w < 2; w++) {
            const char *key = w ? "pad" : "stride";
            uint32_t *dst = w ? at->pad : at->stride;
            if (p->kind != T_IDENT || strcmp(p->text, key)) return PERRF(p, "expected '%s', found '%s'", key, p->text);
            next(p);
            if (!expect(p, "[")) return false;
            for (int i = 0; i < 2; i++) {
                int64_t v;
                if (i && !expect(p, ",")) return false;
                long long peek = p->kind == T_NUM ? strtoll(p->text, NULL, 10) : 0;
                if (p->kind == T_NUM && (peek < (w ? 0 : 1) || peek > 65536))
                    return PERRF(p, "conv2d's %s must be in %d..65536", key, w ? 0 : 1);
                if (!parse_int(p, &v)) return false;
                dst[i] = (uint32_t)v;
            }
            if (!expect(p, "]")) return false;
        }
        return true;
    case GA_NONE: return true;
    }
    return true;
}

static bool const_value(P *p, Attr *at, IrElem e, IrGOp *op, Loc loc)
{
    char *end;
    p->loc = loc;
    if (ir_elem_is_float(e)) {
        double v = !strcmp(at->text, "inf") ? INFINITY : !strcmp(at->text, "nan") ? NAN : strtod(at->text, &end);
        if (strcmp(at->text, "inf") && strcmp(at->text, "nan") && *end) return PERRF(p, "bad float constant '%s'", at->text);
        op->attr.c.f = at->neg ? -v : v;
        return true;
    }
    errno = 0;
    unsigned long long v = strtoull(at->text, &end, 0);
    if (*end || errno) return PERRF(p, "bad integer constant '%s' for %s", at->text, ir_elem_name(e));
    op->attr.c.i = at->neg ? -(int64_t)v : (int64_t)v;
    return true;
}

static bool set_attr(P *p, IrGOp *op, Attr *at, Loc loc)
{
    switch (ir_gop_attr(op->kind)) {
    case GA_AXIS: op->attr.axis = at->axis; break;
    case GA_SIZE: op->attr.size = at->size; break;
    case GA_CMP: op->attr.cmp = at->cmp; break;
    case GA_PERM: {
        uint32_t *perm = arena_alloc(p->a, (at->perm.len + 1) * sizeof *perm);
        if (at->perm.len) memcpy(perm, at->perm.data, at->perm.len * sizeof *perm);
        if (at->perm.len != p->g->values.data[op->in[0]].type.rank) {
            p->loc = loc;
            return perr(p, "the permutation of trans needs one entry per axis");
        }
        op->attr.perm = perm;
        break;
    }
    case GA_CONST:
        if (op->nout != 1) return true;
        return const_value(p, at, p->g->values.data[op->out[0]].type.elem, op, loc);
    case GA_CONV:
        memcpy(op->attr.conv.stride, at->stride, sizeof at->stride);
        memcpy(op->attr.conv.pad, at->pad, sizeof at->pad);
        op->attr.conv.nhwc = at->nhwc;
        break;
    case GA_NONE: break;
    }
    return true;
}

typedef struct Line {
    VEC(const char *) results;
    VEC(Loc) result_locs;
    U32Vec ins;
    VEC(IrTensorType) types;
    Attr attr;
    uint32_t region;         /* ' checkpoint N' after the types, else 0 */
} Line;

static void line_free(Line *l)
{
    vec_free(&l->results);
    vec_free(&l->result_locs);
    vec_free(&l->ins);
    vec_free(&l->types);
    vec_free(&l->attr.perm);
}

static bool parse_line(P *p, Line *l, IrGOpKind *k, Loc *oploc)
{
    *oploc = p->loc;
    if (p->kind == T_VAL) {
        do {
            if (p->kind != T_VAL) return PERRF(p, "expected a result name like %%x, found '%s'", p->text);
            vec_push(&l->results, p->text);
            vec_push(&l->result_locs, p->loc);
            next(p);
        } while (accept(p, ","));
        if (!expect(p, "=")) return false;
    }
    if (p->kind != T_IDENT || !ir_gop_from_name(p->text, k)) return PERRF(p, "unknown graph op '%s'", p->text);
    next(p);
    if (!parse_attr(p, *k, &l->attr)) return false;
    if (p->kind == T_VAL)
        do
            if (!parse_operand(p, &l->ins)) return false;
        while (accept(p, ","));
    if (l->results.len && expect(p, ":"))
        do {
            IrTensorType t;
            if (!parse_type(p, &t)) return false;
            vec_push(&l->types, t);
        } while (accept(p, ","));
    if (!p->failed && l->types.len != l->results.len)
        return PERRF(p, "%zu result names but %zu result types", l->results.len, l->types.len);
    if (!p->failed && p->kind == T_IDENT && !strcmp(p->text, "checkpoint")) {   /* ' checkpoint N' */
        next(p);
        int64_t r;
        if (!parse_int(p, &r)) return false;
        if (r < 1 || r > UINT32_MAX - 1) return PERRF(p, "a checkpoint region is a number from 1, not %lld", (long long)r);
        l->region = (uint32_t)r;
    }
    return !p->failed;
}

/* op := [results '='] NAME [attribute] [operands] [':' types] */
static bool parse_op(P *p, bool *is_return)
{
    Line l = {0};
    IrGOpKind k;
    Loc loc;
    bool ok = parse_line(p, &l, &k, &loc);
    if (ok) {
        uint32_t idx = ir_graph_op(p->g, k, loc, l.ins.data, (uint32_t)l.ins.len, l.types.data, (uint32_t)l.types.len);
        IrGOp *op = &p->g->ops.data[idx];
        for (size_t i = 0; ok && i < l.results.len; i++) ok = define(p, l.results.data[i], op->out[i], l.result_locs.data[i]);
        ok = ok && set_attr(p, op, &l.attr, loc);
        op->region = l.region;
        if (l.region > p->g->nregions) p->g->nregions = l.region;
        *is_return = k == IR_GOP_RETURN;
    }
    line_free(&l);
    return ok;
}

static bool parse_params(P *p)
{
    if (!expect(p, "(")) return false;
    if (accept(p, ")")) return true;
    do {
        IrTensorType t;
        Loc loc = p->loc;
        if (p->kind != T_VAL) return PERRF(p, "expected a parameter like %%x: f32[T], found '%s'", p->text);
        const char *name = p->text;
        next(p);
        if (!expect(p, ":") || !parse_type(p, &t)) return false;
        if (!define(p, name, ir_graph_param(p->g, &t, name), loc)) return false;
    } while (accept(p, ","));
    return expect(p, ")");
}

/* graph := 'graph' '@' NAME '(' params ')' '{' op* '}' */
static bool parse_graph(P *p, IrGraphModule *m)
{
    Loc loc = p->loc;
    if (p->kind != T_IDENT || strcmp(p->text, "graph")) return PERRF(p, "expected 'graph', found '%s'", p->text);
    next(p);
    if (p->kind != T_GLOBAL) return PERRF(p, "expected a graph name like @ffn, found '%s'", p->text);
    if (ir_gmodule_find(m, p->text)) return PERRF(p, "graph '@%s' is defined twice", p->text);
    p->g = ir_graph_create(m, p->text, loc);
    p->names.len = 0;
    next(p);
    if (!parse_params(p)) return false;
    ir_graph_collect_sizes(p->g, p->a);
    if (!expect(p, "{")) return false;
    bool ret = false;
    while (!p->failed && !is_punct(p, "}") && p->kind != T_EOF) {
        if (ret) return perr(p, "return must be the graph's last op");
        if (p->kind == T_IDENT && !strcmp(p->text, "backward") && !p->g->nfwd && p->g->ops.len) {
            p->g->nfwd = (uint32_t)p->g->ops.len;   /* 'backward:' ends the forward */
            next(p);
            if (!expect(p, ":")) return false;
            continue;
        }
        parse_op(p, &ret);
    }
    return expect(p, "}");
}

bool ir_gmodule_parse(IrGraphModule *m, const Source *src, DiagList *diags)
{
    P p = {.src = src, .s = src->text, .line = 1, .col = 1, .a = m->arena, .diags = diags};
    next(&p);
    while (p.kind != T_EOF && parse_graph(&p, m)) {}
    vec_free(&p.names);
    return !p.failed;
}
