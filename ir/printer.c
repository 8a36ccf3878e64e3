/* The textual form of Tile IR (docs/IR.md): MLIR-like, one op per line.
 *
 *   kernel @k(%x: *f32, %n: i32) consts {BLOCK = 64} launch {warps = 4, stages = 2} {
 *     %0 = arange 0 : i32[64]
 *     %mask = cmp lt %0, %1 : i1[64]
 *     %acc.1 = for %lo, %hi, %step iter(%acc0) : f32[64] {
 *     ^(%i: i32, %acc: f32[64]):
 *       yield %acc
 *     }
 *     return
 *   }
 *
 * The text is stable: ir_parse reads it back into IR that prints the same text. To
 * keep it so, values print under their name hint made unique within the function
 * (%acc, %acc.1, ...) or as %N numbered in print order, floats print with 17
 * significant digits (exact for doubles) and integers in decimal. */
#include "ir.h"
#include "layout.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Names given so far in one function: names[v] (NULL until the value is first
 * printed) and a hash set of the names in use, for uniqueness. */
typedef struct Namer {
    const IrFunc *f;
    char **names;
    char **set;                  /* open addressing, cap a power of two */
    size_t cap, len;
    uint32_t next_num;           /* the next %N to try */
    FILE *out;
    int indent;
    const struct Aliases *aliases;   /* layout names of a module print, or NULL */
} Namer;

/* The layouts of a module print, each under a name made of its kind and a number in
 * order of first use (#blocked, #blocked1, #mma, ...), printed as `layout #name = ...`
 * lines before the functions; parents come before the layouts that name them. */
typedef struct Aliases {
    const IrLayout **l;
    char **name;
    uint32_t len, cap;
} Aliases;

static const char *alias_of(const Aliases *a, const IrLayout *l)
{
    for (uint32_t i = 0; a && i < a->len; i++)
        if (a->l[i] == l) return a->name[i];
    return NULL;
}

static void alias_add(Aliases *a, const IrLayout *l)
{
    if (alias_of(a, l)) return;
    if (l->parent) alias_add(a, l->parent);
    if (a->len == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 8;
        a->l = tl_realloc(a->l, a->cap * sizeof *a->l);
        a->name = tl_realloc(a->name, a->cap * sizeof *a->name);
        if (!a->l || !a->name) tl_oom();
    }
    uint32_t same = 0;
    for (uint32_t i = 0; i < a->len; i++) same += a->l[i]->kind == l->kind;
    char buf[48];
    if (same) snprintf(buf, sizeof buf, "%s%u", ir_layout_kind_name(l->kind), same);
    else snprintf(buf, sizeof buf, "%s", ir_layout_kind_name(l->kind));
    a->l[a->len] = l;
    a->name[a->len] = tl_strdup(buf);
    if (!a->name[a->len]) tl_oom();
    a->len++;
}

static void alias_block(Aliases *a, const IrFunc *f, const IrBlock *blk)
{
    for (uint32_t i = 0; i < blk->nargs; i++)
        if (ir_value_type(f, blk->args[i])->layout) alias_add(a, ir_value_type(f, blk->args[i])->layout);
    for (const IrOp *op = blk->first; op; op = op->next) {
        for (uint32_t i = 0; i < op->nresults; i++)
            if (ir_value_type(f, op->results[i])->layout) alias_add(a, ir_value_type(f, op->results[i])->layout);
        for (uint32_t r = 0; r < op->nregions; r++) alias_block(a, f, &op->regions[r]);
    }
}

static void aliases_free(Aliases *a)
{
    for (uint32_t i = 0; i < a->len; i++) tl_free(a->name[i]);
    tl_free(a->l);
    tl_free(a->name);
}

static size_t str_hash(const char *s)
{
    size_t h = 5381;
    while (*s) h = h * 33 + (unsigned char)*s++;
    return h;
}

static bool set_has(const Namer *n, const char *s)
{
    if (!n->cap) return false;
    for (size_t i = str_hash(s) & (n->cap - 1); n->set[i]; i = (i + 1) & (n->cap - 1))
        if (!strcmp(n->set[i], s)) return true;
    return false;
}

static void set_insert(Namer *n, char *s)
{
    if (2 * (n->len + 1) > n->cap) {
        char **old = n->set;
        size_t ocap = n->cap;
        n->cap = ocap ? ocap * 2 : 64;
        n->set = tl_calloc(n->cap, sizeof *n->set);
        if (!n->set) tl_oom();
        n->len = 0;
        for (size_t i = 0; i < ocap; i++)
            if (old[i]) set_insert(n, old[i]);
        tl_free(old);
    }
    size_t i = str_hash(s) & (n->cap - 1);
    while (n->set[i]) i = (i + 1) & (n->cap - 1);
    n->set[i] = s;
    n->len++;
}

static bool isalnum_ascii(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* A name hint reduced to the characters the parser accepts in %names. */
static char *sanitize(const char *hint)
{
    char *s = tl_strdup(hint);
    if (!s) tl_oom();
    for (char *p = s; *p; p++)
        if (!(isalnum_ascii(*p) || *p == '_' || *p == '.')) *p = '_';
    return s;
}

static char *fresh_name(Namer *n, const char *hint)
{
    char buf[300];
    /* a hint that starts with a digit would read back as a number, not a name */
    if (hint && *hint && !(*hint >= '0' && *hint <= '9')) {
        char *base = sanitize(hint);
        if (!set_has(n, base)) return base;
        for (unsigned k = 1;; k++) {
            snprintf(buf, sizeof buf, "%.250s.%u", base, k);
            if (!set_has(n, buf)) break;
        }
        tl_free(base);
    } else {
        do snprintf(buf, sizeof buf, "%u", n->next_num++);
        while (set_has(n, buf));
    }
    char *s = tl_strdup(buf);
    if (!s) tl_oom();
    return s;
}

/* The value's name, given on first sight (its definition, in valid IR). */
static const char *value_name(Namer *n, IrValue v)
{
    if (v >= n->f->nvalues) return "<invalid>";
    if (!n->names[v]) {
        n->names[v] = fresh_name(n, n->f->values[v].name);
        set_insert(n, n->names[v]);
    }
    return n->names[v];
}

static void name_block(Namer *n, const IrBlock *blk);

static void namer_init(Namer *n, const IrFunc *f, FILE *out)
{
    memset(n, 0, sizeof *n);
    n->f = f;
    n->out = out;
    n->names = tl_calloc(f->nvalues ? f->nvalues : 1, sizeof *n->names);
    if (!n->names) tl_oom();
    name_block(n, &f->body);
}

/* Names every value in print order (parameters; then per op its results, then its
 * regions' arguments and ops), so a single op prints with the names it has in the
 * whole function. */
static void name_block(Namer *n, const IrBlock *blk)
{
    for (uint32_t i = 0; i < blk->nargs; i++) value_name(n, blk->args[i]);
    for (const IrOp *op = blk->first; op; op = op->next) {
        for (uint32_t i = 0; i < op->nresults; i++) value_name(n, op->results[i]);
        for (uint32_t r = 0; r < op->nregions; r++) name_block(n, &op->regions[r]);
    }
}

static void namer_free(Namer *n)
{
    for (uint32_t v = 0; v < n->f->nvalues; v++) tl_free(n->names[v]);
    tl_free(n->names);
    tl_free(n->set);
}

/* ---- pieces of a line ------------------------------------------------------------- */
/* A laid-out type adds its layout: by name in a module print, else written out. */
static void print_type(const Namer *n, const IrType *t)
{
    char buf[512];
    fputs(ir_type_str(t, buf, sizeof buf), n->out);
    if (!t->layout) return;
    const char *name = alias_of(n->aliases, t->layout);
    if (name) fprintf(n->out, " #%s", name);
    else fprintf(n->out, " #%s", ir_layout_str(t->layout, NULL, buf, sizeof buf));
}

static void print_values(Namer *n, const IrValue *vs, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++) fprintf(n->out, "%s%%%s", i ? ", " : "", value_name(n, vs[i]));
}

static void print_value_types(Namer *n, const IrValue *vs, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++) {
        fputs(i ? ", " : "", n->out);
        print_type(n, ir_value_type(n->f, vs[i]));
    }
}

static void print_string(const char *s, FILE *out)
{
    fputc('"', out);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(out, "\\%c", c);
        else if (c == '\n') fputs("\\n", out);
        else if (c == '\t') fputs("\\t", out);
        else if (c < 32 || c >= 127) fprintf(out, "\\x%02x", c);
        else fputc(c, out);
    }
    fputc('"', out);
}

/* Floats with 17 significant digits read back to the same double; inf and nan are
 * words (the sign of a nan and its payload are not kept). */
static void print_float(double d, FILE *out)
{
    if (isnan(d)) fputs("nan", out);
    else if (isinf(d)) fputs(d < 0 ? "-inf" : "inf", out);
    else {
        char buf[40];
        snprintf(buf, sizeof buf, "%.17g", d);
        /* keep a float looking like one, so a reader never mistakes it for an int */
        if (!strpbrk(buf, ".e")) strcat(buf, ".0");
        fputs(buf, out);
    }
}

static void print_const(const IrOp *op, const IrType *t, FILE *out)
{
    if (ir_elem_is_float(t->elem)) print_float(op->attr.f, out);
    else if (t->elem == IR_U64) fprintf(out, "%" PRIu64, (uint64_t)op->attr.i);
    else fprintf(out, "%" PRId64, op->attr.i);
}

/* The attribute that comes right after the op name, if the op has one. */
static void print_attr(const IrFunc *f, const IrOp *op, FILE *out)
{
    switch (op->code) {
    case IR_OP_CONST:
        fputc(' ', out);
        print_const(op, ir_value_type(f, op->results[0]), out);
        break;
    case IR_OP_CMP:
        fprintf(out, " %s", op->attr.i >= 0 && op->attr.i < 6 ? ir_cmp_names[op->attr.i] : "?");
        break;
    case IR_OP_DOT:
        fprintf(out, " %s", op->attr.i >= 0 && op->attr.i < 3 ? ir_precision_names[op->attr.i] : "?");
        break;
    case IR_OP_ATOMIC_ADD: case IR_OP_ATOMIC_MAX: case IR_OP_ATOMIC_MIN: case IR_OP_ATOMIC_XCHG:
    case IR_OP_ATOMIC_AND: case IR_OP_ATOMIC_OR: case IR_OP_ATOMIC_XOR: case IR_OP_ATOMIC_CAS:
        fprintf(out, " %s", op->attr.i >= 0 && op->attr.i < 4 ? ir_sem_names[op->attr.i] : "?");
        break;
    case IR_OP_PRINT:
        fputc(' ', out);
        print_string(op->attr.s, out);
        break;
    case IR_OP_CHECK_BOUNDS:          /* the op it guards: check_bounds store %p, ... */
        fprintf(out, " %s", op->attr.i >= 0 && op->attr.i < IR_NUM_OPS ? ir_op_info[op->attr.i].text : "?");
        break;
    case IR_OP_CUMSUM: case IR_OP_CUMPROD: case IR_OP_SCAN:      /* cumsum 0 reverse %x */
        fprintf(out, " %" PRId64 "%s", op->attr.i & IR_AXIS_MASK, op->attr.i & IR_SCAN_REVERSE ? " reverse" : "");
        break;
    case IR_OP_BLOCK_LOAD: case IR_OP_TMA_COPY:      /* block_load multicast upper %p, ... */
        if (op->attr.i & IR_BLOCK_MULTICAST) fputs(" multicast", out);
        if (op->code == IR_OP_BLOCK_LOAD && (op->attr.i & IR_BLOCK_UPPER)) fputs(" upper", out);
        break;
    case IR_OP_TMA_STORE:             /* tma_store seq 3 %buf, ...: the 4th store of a sequence through one area */
        if (op->attr.i) fprintf(out, " seq %" PRId64, op->attr.i - 1);
        break;
    case IR_OP_BLOCK_STORE:           /* block_store upper %p, ... */
        if (op->attr.i & IR_BLOCK_UPPER) fputs(" upper", out);
        break;
    case IR_OP_EXP2:                  /* exp2 ftz %x */
        if (op->attr.i) fputs(" ftz", out);
        break;
    case IR_OP_FOR:                   /* for pingpong %lo, %hi, %step */
        if (op->attr.i) fputs(" pingpong", out);
        break;
    case IR_OP_MBARRIER_ARRIVE:       /* mbarrier_arrive cluster %bars, %s */
        if (op->attr.i) fputs(" cluster", out);
        break;
    case IR_OP_TURN:                  /* turn wait */
        fprintf(out, " %s", op->attr.i >= 0 && op->attr.i < 4 ? ir_turn_names[op->attr.i] : "?");
        break;
    case IR_OP_PRODUCER:              /* producer 40 232 { ... }: the two register counts */
        fprintf(out, " %" PRId64 " %" PRId64, op->attr.i & 0xffff, op->attr.i >> 16);
        break;
    case IR_OP_PROGRAM_ID: case IR_OP_NUM_PROGRAMS: case IR_OP_ARANGE: case IR_OP_EXPAND_DIMS: case IR_OP_EXTRACT:
    case IR_OP_SUM: case IR_OP_MAX: case IR_OP_MIN: case IR_OP_ARGMAX: case IR_OP_ARGMIN:
    case IR_OP_XOR_SUM: case IR_OP_REDUCE: case IR_OP_MULTIPLE_OF: case IR_OP_MAX_CONTIGUOUS:
    case IR_OP_LOCAL_ALLOC: case IR_OP_ASYNC_WAIT: case IR_OP_LOCAL_LOAD: case IR_OP_LOCAL_STORE: case IR_OP_MBARRIER_INIT: case IR_OP_TMA_WAIT:
    case IR_OP_DOT_WAIT:
        fprintf(out, " %" PRId64, op->attr.i);
        break;
    default:
        break;
    }
}

static void print_indent(Namer *n) { fprintf(n->out, "%*s", 2 * n->indent, ""); }

static void print_block(Namer *n, const IrBlock *blk);

/* ^(%i: i32, %acc: f32[64]): the entry values of a region. */
static void print_block_args(Namer *n, const IrBlock *blk)
{
    if (!blk->nargs) return;
    print_indent(n);
    fputs("^(", n->out);
    for (uint32_t i = 0; i < blk->nargs; i++) {
        fprintf(n->out, "%s%%%s: ", i ? ", " : "", value_name(n, blk->args[i]));
        print_type(n, ir_value_type(n->f, blk->args[i]));
    }
    fputs("):\n", n->out);
}

/* " {\n" region "}" */
static void print_region(Namer *n, const IrBlock *blk)
{
    fputs(" {\n", n->out);
    print_block_args(n, blk);
    n->indent++;
    print_block(n, blk);
    n->indent--;
    print_indent(n);
    fputc('}', n->out);
}

static void print_result_types(Namer *n, const IrOp *op)
{
    if (!op->nresults) return;
    fputs(" : ", n->out);
    print_value_types(n, op->results, op->nresults);
}

/* for %lo, %hi, %step iter(%a, %b) : T, U { ... } */
static void print_for(Namer *n, const IrOp *op)
{
    print_values(n, op->operands, op->noperands < 3 ? op->noperands : 3);
    if (op->noperands > 3) {
        fputs(" iter(", n->out);
        print_values(n, op->operands + 3, op->noperands - 3);
        fputc(')', n->out);
    }
    print_result_types(n, op);
    if (op->nregions > 0) print_region(n, &op->regions[0]);
}

/* if %c : T { ... } else { ... }; while %x0 : T { ... } do { ... } */
static void print_two_regions(Namer *n, const IrOp *op, const char *second)
{
    print_values(n, op->operands, op->noperands);
    print_result_types(n, op);
    if (op->nregions > 0) print_region(n, &op->regions[0]);
    if (op->nregions > 1 && (op->code == IR_OP_WHILE || op->regions[1].first)) {
        fprintf(n->out, " %s", second);
        print_region(n, &op->regions[1]);
    }
}

static void print_op_line(Namer *n, const IrOp *op)
{
    FILE *out = n->out;
    if (op->nresults) {
        print_values(n, op->results, op->nresults);
        fputs(" = ", out);
    }
    fputs(op->code < IR_NUM_OPS ? ir_op_info[op->code].text : "<bad-op>", out);
    print_attr(n->f, op, out);
    if (op->nregions) {          /* for, if, while; reduce and scan with their combine region */
        if (op->code == IR_OP_PRODUCER) {
            print_region(n, &op->regions[0]);
            return;
        }
        fputc(' ', out);
        if (op->code == IR_OP_FOR) print_for(n, op);
        else print_two_regions(n, op, op->code == IR_OP_IF ? "else" : "do");
        return;
    }
    if (op->noperands) fputc(' ', out);
    print_values(n, op->operands, op->noperands);
    if (op->code == IR_OP_ASSERT) {
        fputc(' ', out);
        print_string(op->attr.s, out);
    }
    print_result_types(n, op);
}

static void print_block(Namer *n, const IrBlock *blk)
{
    for (const IrOp *op = blk->first; op; op = op->next) {
        print_indent(n);
        print_op_line(n, op);
        fputc('\n', n->out);
    }
}

/* ---- functions and modules ---------------------------------------------------------- */
/* launch {warps = 4, stages = 2[, KEY = V]...}: the keys of launch.def in its order,
 * warps and stages always, the others when not their default */
static void print_launch(const IrFunc *f, FILE *out)
{
    const char *sep = " launch {";
    for (int k = 0; k < IR_NUM_LAUNCH_KEYS; k++)
        if (ir_launch_shown(f, (IrLaunchKey)k)) {
            fprintf(out, "%s%s = %d", sep, ir_launch_info[k].name, ir_launch_get(f, (IrLaunchKey)k));
            sep = ", ";
        }
    fputc('}', out);
}

static void print_header(Namer *n, const IrFunc *f)
{
    FILE *out = n->out;
    fprintf(out, "%s @%s(", f->kind == IR_FUNC_KERNEL ? "kernel" : "grid", f->name);
    for (uint32_t i = 0; i < f->body.nargs; i++) {
        fprintf(out, "%s%%%s: ", i ? ", " : "", value_name(n, f->body.args[i]));
        print_type(n, ir_value_type(f, f->body.args[i]));
    }
    fputc(')', out);
    if (f->kind != IR_FUNC_KERNEL) return;
    if (f->nconsts) {
        fputs(" consts {", out);
        for (uint32_t i = 0; i < f->nconsts; i++)
            fprintf(out, "%s%s = %" PRId64, i ? ", " : "", f->consts[i].name, f->consts[i].value);
        fputc('}', out);
    }
    print_launch(f, out);
    ir_plan_print(f, out);
    if (f->grid) fprintf(out, " grid @%s", f->grid->name);
}

static void print_func(const IrFunc *f, const Aliases *aliases, FILE *out)
{
    Namer n;
    namer_init(&n, f, out);
    n.aliases = aliases;
    print_header(&n, f);
    fputs(" {\n", out);
    n.indent = 1;
    print_block(&n, &f->body);
    fputs("}\n", out);
    namer_free(&n);
}

void ir_print_func(const IrFunc *f, FILE *out) { print_func(f, NULL, out); }

void ir_print_module(const IrModule *m, FILE *out)
{
    Aliases a = {0};
    for (uint32_t i = 0; i < m->nfuncs; i++) alias_block(&a, m->funcs[i], &m->funcs[i]->body);
    for (uint32_t i = 0; i < a.len; i++) {
        char buf[512];
        const char *parent = a.l[i]->parent ? alias_of(&a, a.l[i]->parent) : NULL;
        char pname[64];
        if (parent) snprintf(pname, sizeof pname, "#%s", parent);
        fprintf(out, "layout #%s = %s\n", a.name[i], ir_layout_str(a.l[i], parent ? pname : NULL, buf, sizeof buf));
    }
    if (a.len) fputc('\n', out);
    for (uint32_t i = 0; i < m->nfuncs; i++) {
        if (i) fputc('\n', out);
        print_func(m->funcs[i], &a, out);
    }
    aliases_free(&a);
}

/* One op (and its regions), with the value names of a whole-function print. */
void ir_print_op(const IrFunc *f, const IrOp *op, FILE *out)
{
    Namer n;
    namer_init(&n, f, out);
    print_op_line(&n, op);
    fputc('\n', out);
    namer_free(&n);
}
