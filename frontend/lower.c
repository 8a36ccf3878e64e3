/* fe_lower: from the AST of a .tile file to a Tile IR module.
 *
 * This file holds the item level: the -D checks, const parameter values (define, else
 * the @autotune default config, else the declared default), @launch and @autotune
 * validation, the kernel function and its grid function, plus the helpers every part
 * of the lowering shares (diagnostics, scopes, types). Expressions, built-ins and
 * statements live in lower_expr.c, lower_builtins.c and lower_stmt.c. */
#include <stdarg.h>
#include <string.h>

#include "lower_internal.h"

/* ---- diagnostics ----------------------------------------------------------------- */
static bool loc_eq(Loc a, Loc b) { return a.src == b.src && a.line == b.line && a.col == b.col; }

/* An fn instantiated several times would repeat its errors; each is reported once. */
static void report(Lower *L, DiagLevel lvl, Loc loc, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    for (size_t i = 0; i < L->diags->len; i++) {
        const Diag *d = &L->diags->items[i];
        if (d->level == lvl && loc_eq(d->loc, loc) && !strcmp(d->msg, msg)) return;
    }
    diag_add(L->diags, lvl, loc, "%s", msg);
}

void lw_error(Lower *L, Loc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report(L, DIAG_ERROR, loc, fmt, ap);
    va_end(ap);
}

void lw_warning(Lower *L, Loc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report(L, DIAG_WARNING, loc, fmt, ap);
    va_end(ap);
}

int lw_edit_distance(const char *a, const char *b) { return diag_edit_distance(a, strlen(a), b, 31); }

/* ---- scopes ------------------------------------------------------------------------- */
static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

static NameSlot *name_find(NameTable *t, const char *name)
{
    size_t mask = t->cap - 1;
    for (size_t i = name_hash(name) & mask;; i = (i + 1) & mask)
        if (!t->slots[i].name || !strcmp(t->slots[i].name, name)) return &t->slots[i];
}

static void names_grow(NameTable *t)
{
    NameTable n = {tl_calloc(t->cap ? t->cap * 2 : 64, sizeof *n.slots), t->cap ? t->cap * 2 : 64, t->len};
    if (!n.slots) tl_oom();
    for (size_t i = 0; i < t->cap; i++)
        if (t->slots[i].name) *name_find(&n, t->slots[i].name) = t->slots[i];
    tl_free(t->slots);
    *t = n;
}

/* The slot of name, created (with no binding) if new. Slots never move between
 * grows, so bindings keep their slot's index; a grow renumbers them. */
static NameSlot *name_slot(Lower *L, const char *name)
{
    NameTable *t = &L->names;
    if (2 * (t->len + 1) > t->cap) {
        names_grow(t);
        for (size_t i = 0; i < L->scope.len; i++)
            L->scope.data[i].slot = (uint32_t)(name_find(t, L->scope.data[i].name) - t->slots);
    }
    NameSlot *sl = name_find(t, name);
    if (!sl->name) *sl = (NameSlot){name, -1}, t->len++;
    return sl;
}

Binding *lw_lookup(Lower *L, const char *name)
{
    if (!L->names.cap) return NULL;
    NameSlot *sl = name_find(&L->names, name);
    if (!sl->name || sl->top < (int64_t)L->scope_base) return NULL;
    return &L->scope.data[sl->top];
}

size_t lw_push_binding(Lower *L, Binding bd)
{
    NameSlot *sl = name_slot(L, bd.name);
    bd.shadowed = sl->top;
    bd.slot = (uint32_t)(sl - L->names.slots);
    sl->top = (int64_t)L->scope.len;
    vec_push(&L->scope, bd);
    return L->scope.len - 1;
}

size_t lw_bind(Lower *L, const char *name, Loc loc, BindKind kind, Val v)
{
    return lw_push_binding(L, (Binding){.name = name, .loc = loc, .kind = kind, .val = v});
}

void lw_scope_pop(Lower *L, size_t mark)
{
    while (L->scope.len > mark) {
        const Binding *bd = &L->scope.data[--L->scope.len];
        L->names.slots[bd->slot].top = bd->shadowed;
    }
}

const AstItem *lw_find_item(const Lower *L, const char *name)
{
    NameTable t = L->items;
    const NameSlot *sl = t.cap ? name_find(&t, name) : NULL;
    return sl && sl->name ? &L->prog->items[sl->top] : NULL;
}

/* ---- types ----------------------------------------------------------------------------- */
const IrType *lw_scalar(Lower *L, IrElem e) { return ir_type_scalar(L->ctx, e); }

const IrType *lw_like(Lower *L, const IrType *shape_of, IrElem e)
{
    return ir_type_like(L->ctx, shape_of, ir_type_scalar(L->ctx, e));
}

const IrType *lw_type(Lower *L, const AstType *t)
{
    IrElem e;
    if (t->kind == AST_TYPE_TENSOR) {
        lw_error(L, t->loc, "tensor types like %s[...] are only allowed in graphs", t->name);
        return NULL;
    }
    if (t->kind == AST_TYPE_TUPLE) {
        lw_error(L, t->loc, "a tuple type is only allowed as the result of a fn");
        return NULL;
    }
    if (!t->name || !ir_elem_from_name(t->name, strlen(t->name), &e)) {
        lw_error(L, t->loc, "unknown type '%s'", t->name ? t->name : "?");
        return NULL;
    }
    return t->kind == AST_TYPE_PTR ? ir_type_ptr(L->ctx, e) : ir_type_scalar(L->ctx, e);
}

const char *lw_tstr(Lower *L, const IrType *t)
{
    char buf[64];
    return arena_strdup(L->arena, ir_type_str(t, buf, sizeof buf));
}

const char *lw_shape_str(Lower *L, int rank, const int32_t *shape)
{
    char buf[64];
    int w = snprintf(buf, sizeof buf, "[");
    for (int i = 0; i < rank; i++)
        w += snprintf(buf + w, sizeof buf - (size_t)w, "%s%d", i ? ", " : "", shape[i]);
    snprintf(buf + w, sizeof buf - (size_t)w, "]");
    return arena_strdup(L->arena, buf);
}

bool lw_check_shape(Lower *L, Loc loc, int rank, const int32_t *shape)
{
    int64_t n = 1;
    bool wraps = false;      /* five sizes of 2^20 would wrap i64 to 0 and pass */
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 1 || (shape[i] & (shape[i] - 1))) {
            lw_error(L, loc, "tile shape %s is not a power of two: each size must be 1, 2, 4, ...",
                     lw_shape_str(L, rank, shape));
            return false;
        }
        wraps |= __builtin_mul_overflow(n, shape[i], &n);
    }
    if (wraps) lw_error(L, loc, "tile shape %s has more than 2^63 elements (at most %d)",
                        lw_shape_str(L, rank, shape), IR_MAX_TILE_ELEMS);
    else if (n > IR_MAX_TILE_ELEMS)
        lw_error(L, loc, "tile of %lld elements is too large (at most %d)", (long long)n, IR_MAX_TILE_ELEMS);
    return !wraps && n <= IR_MAX_TILE_ELEMS;
}

/* ---- attributes ---------------------------------------------------------------------- */
static const AstParam *find_param(const AstItem *k, const char *name)
{
    for (uint32_t i = 0; i < k->nparams; i++)
        if (!strcmp(k->params[i].name, name)) return &k->params[i];
    return NULL;
}

static bool is_config_key(const AstItem *k, const char *name)
{
    const AstParam *p = find_param(k, name);
    return (p && p->is_const) || ir_launch_key(name);
}

static const AstExpr *attr_arg(const AstAttr *a, const char *name)
{
    for (uint32_t i = 0; i < a->nargs; i++)
        if (a->arg_names && a->arg_names[i] && !strcmp(a->arg_names[i], name)) return a->args[i];
    return NULL;
}

static Loc attr_arg_loc(const AstAttr *a, uint32_t i)
{
    return a->arg_name_locs ? a->arg_name_locs[i] : a->args[i]->loc;
}

static void check_launch_value(Lower *L, const char *key, Loc loc, int64_t v)
{
    const char *bad = ir_launch_check(key, v);
    if (bad) lw_error(L, loc, "%s, got %lld", bad, (long long)v);
}

/* `@launch(wraps = 8)`: the unknown key, with the launch key it is closest to. */
static void unknown_launch_key(Lower *L, Loc loc, const char *key)
{
    int best = -1, bd = 99;
    for (int k = 0; key && k < IR_NUM_LAUNCH_KEYS; k++) {
        int d = lw_edit_distance(ir_launch_info[k].name, key);
        if (d < bd) bd = d, best = k;
    }
    if (!key) lw_error(L, loc, "@launch takes named values of the launch keys (%s)", ir_launch_names);
    else if (bd <= lw_suggest_limit(key))
        lw_error(L, loc, "unknown launch key '%s'; did you mean '%s'?", key, ir_launch_info[best].name);
    else lw_error(L, loc, "unknown launch key '%s' (@launch takes %s)", key, ir_launch_names);
}

static void lower_launch(Lower *L, const AstAttr *a, IrFunc *f)
{
    for (uint32_t i = 0; i < a->nargs; i++) {
        const char *key = a->arg_names ? a->arg_names[i] : NULL;
        int64_t v;
        if (!key || !ir_launch_key(key)) {
            unknown_launch_key(L, attr_arg_loc(a, i), key);
            continue;
        }
        CeStatus s = ce_eval(L, a->args[i], &v);
        if (s == CE_NONE) lw_error(L, a->args[i]->loc, "the value of %s must be known at compile time", key);
        if (s != CE_OK) continue;
        check_launch_value(L, key, a->args[i]->loc, v);
        ir_launch_set(f, key, v);
    }
}

/* Checks `{NAME: value, ...}`; with lists, each value is a list of integers. */
static void check_config_map(Lower *L, const AstItem *k, const AstExpr *m, bool lists)
{
    if (m->kind != AST_MAP) {
        lw_error(L, m->loc, "expected a config like {BM: 128, warps: 4}");
        return;
    }
    for (uint32_t i = 0; i < m->nargs; i++) {
        const AstExpr *v = m->args[i];
        int64_t x;
        Loc kl = m->arg_name_locs ? m->arg_name_locs[i] : v->loc;
        if (!is_config_key(k, m->arg_names[i]))
            lw_error(L, kl, "'%s' is not a const parameter of '%s' (nor a launch key: %s)", m->arg_names[i],
                     k->name, ir_launch_names);
        if (lists && v->kind != AST_LIST) {
            lw_error(L, v->loc, "the values of '%s' must be a list of integers", m->arg_names[i]);
            continue;
        }
        for (uint32_t j = 0; j < (lists ? v->nargs : 1); j++) {
            const AstExpr *e = lists ? v->args[j] : v;
            CeStatus s = ce_eval(L, e, &x);
            if (s == CE_NONE) lw_error(L, e->loc, "a config value must be an integer");
            else if (s == CE_OK) check_launch_value(L, m->arg_names[i], e->loc, x);
        }
    }
}

static void check_key_list(Lower *L, const AstItem *k, const AstExpr *e)
{
    if (e->kind != AST_LIST) {
        lw_error(L, e->loc, "the autotune key must be a list of parameter names like [M, N]");
        return;
    }
    for (uint32_t i = 0; i < e->nargs; i++) {
        const AstExpr *n = e->args[i];
        const AstParam *p = n->kind == AST_NAME ? find_param(k, n->name) : NULL;
        if (!p || p->is_const || !p->type || p->type->kind != AST_TYPE_SCALAR)
            lw_error(L, n->loc, "an autotune key must name a run-time scalar parameter of '%s'",
                     k->name);
    }
}

static void check_where_names(Lower *L, const AstItem *k, const AstExpr *e)
{
    if (!e) return;
    if (e->kind == AST_NAME && !is_config_key(k, e->name))
        lw_error(L, e->loc, "'where' may only use const parameters and launch keys (%s); '%s' is neither",
                 ir_launch_names, e->name);
    check_where_names(L, k, e->lhs);
    check_where_names(L, k, e->rhs);
    for (uint32_t i = 0; i < e->nargs; i++) check_where_names(L, k, e->args[i]);
}

static void check_autotune(Lower *L, const AstItem *k, const AstAttr *a)
{
    for (uint32_t i = 0; i < a->nargs; i++) {
        const char *key = a->arg_names ? a->arg_names[i] : NULL;
        const AstExpr *v = a->args[i];
        if (!key) lw_error(L, v->loc, "@autotune takes named arguments: key, space, where, default, configs");
        else if (!strcmp(key, "key")) check_key_list(L, k, v);
        else if (!strcmp(key, "space")) check_config_map(L, k, v, true);
        else if (!strcmp(key, "default")) check_config_map(L, k, v, false);
        else if (!strcmp(key, "where")) check_where_names(L, k, v);
        else if (!strcmp(key, "configs")) {
            if (v->kind != AST_LIST) lw_error(L, v->loc, "configs must be a list of configs");
            else for (uint32_t j = 0; j < v->nargs; j++) check_config_map(L, k, v->args[j], false);
        } else
            lw_error(L, attr_arg_loc(a, i), "unknown @autotune argument '%s'", key);
    }
}

static const AstAttr *find_attr(const AstItem *k, const char *name)
{
    for (uint32_t i = 0; i < k->nattrs; i++)
        if (!strcmp(k->attrs[i].name, name)) return &k->attrs[i];
    return NULL;
}

/* The value of `name` in the @autotune default config, if there is one. */
static const AstExpr *default_config_value(const AstItem *k, const char *name)
{
    const AstAttr *at = find_attr(k, "autotune");
    const AstExpr *d = at ? attr_arg(at, "default") : NULL;
    if (!d || d->kind != AST_MAP) return NULL;
    for (uint32_t i = 0; i < d->nargs; i++)
        if (d->arg_names[i] && !strcmp(d->arg_names[i], name)) return d->args[i];
    return NULL;
}

static const FeDefine *find_define(const Lower *L, const char *name)
{
    for (uint32_t i = 0; L->opt && i < L->opt->ndefines; i++)
        if (!strcmp(L->opt->defines[i].name, name)) return &L->opt->defines[i];
    return NULL;
}

/* A launch key's value from -D, else from the @autotune default config, else left as
 * @launch (or the table's default) set it. */
static void default_launch_value(Lower *L, const AstItem *k, IrFunc *f, const char *key)
{
    const AstExpr *e = default_config_value(k, key);
    const FeDefine *d = find_define(L, key);
    int64_t v;
    if (d) v = d->value;
    else if (!e || ce_eval(L, e, &v) != CE_OK) return;
    check_launch_value(L, key, e && !d ? e->loc : k->loc, v);
    ir_launch_set(f, key, v);
}

static void apply_attributes(Lower *L, const AstItem *k, IrFunc *f)
{
    const AstAttr *launch = NULL;
    for (uint32_t i = 0; i < k->nattrs; i++) {
        const AstAttr *a = &k->attrs[i];
        if (!strcmp(a->name, "launch") && launch)
            lw_error(L, a->loc, "kernel '%s' has more than one @launch (the first is at line %u)", k->name,
                     launch->loc.line);
        else if (!strcmp(a->name, "launch")) lower_launch(L, launch = a, f);
        else if (!strcmp(a->name, "autotune")) check_autotune(L, k, a);
        else lw_error(L, a->loc, "unknown attribute '@%s'", a->name);
    }
    for (int i = 0; i < IR_NUM_LAUNCH_KEYS; i++) default_launch_value(L, k, f, ir_launch_info[i].name);
}

/* ---- const parameters ------------------------------------------------------------------ */
static const IrType *const_type(Lower *L, const AstParam *p)
{
    const IrType *t = p->type ? lw_type(L, p->type) : lw_scalar(L, IR_I32);
    if (t && (t->elem == IR_PTR || !ir_elem_is_int(t->elem))) {
        lw_error(L, p->type->loc, "const parameter '%s' must have an integer type, got %s", p->name,
                 lw_tstr(L, t));
        return NULL;
    }
    return t;
}

bool lw_int_fits(int64_t v, bool big, IrElem e)
{
    int bits = ir_elem_bits(e);
    if (big) return e == IR_U64;
    if (e == IR_I1) return v == 0 || v == 1;
    if (ir_elem_is_signed(e))
        return bits == 64 || (v >= -(INT64_C(1) << (bits - 1)) && v < (INT64_C(1) << (bits - 1)));
    return v >= 0 && (bits == 64 || v < (INT64_C(1) << bits));
}

/* A const's value must be a value of its type: `const B: i8 = 1000` would otherwise
 * wrap silently (and the IR would hold an i8 constant 1000). */
static bool check_const_fits(Lower *L, const AstParam *p, int64_t v, bool big, Loc loc, const char *from)
{
    const IrType *t = const_type(L, p);
    if (!t) return false;
    if (lw_int_fits(v, big, t->elem)) return true;
    if (big) lw_error(L, loc, "the value %llu%s does not fit in const parameter '%s' of type %s",
                      (unsigned long long)v, from, p->name, ir_elem_name(t->elem));
    else lw_error(L, loc, "the value %lld%s does not fit in const parameter '%s' of type %s",
                  (long long)v, from, p->name, ir_elem_name(t->elem));
    return false;
}

/* An integer literal above INT64_MAX is a value only of u64: its bits. */
static bool big_literal(const AstExpr *e, int64_t *out)
{
    if (!e || e->kind != AST_INT || e->ival <= INT64_MAX) return false;
    *out = (int64_t)e->ival;
    return true;
}

static bool const_value(Lower *L, const AstItem *k, const AstParam *p, int64_t *out)
{
    const FeDefine *d = find_define(L, p->name);
    const AstExpr *e = default_config_value(k, p->name);
    if (!const_type(L, p)) return false;
    if (d) return check_const_fits(L, p, *out = d->value, false, p->loc,
                                   " given with -D");
    CeStatus s = e ? ce_eval(L, e, out) : CE_NONE;
    if (s != CE_NONE) return s == CE_OK && check_const_fits(L, p, *out, false, e->loc, "");
    if (e && big_literal(e, out)) return check_const_fits(L, p, *out, true, e->loc, "");
    if (p->default_value) {
        s = ce_eval(L, p->default_value, out);
        if (s != CE_NONE) return s == CE_OK && check_const_fits(L, p, *out, false, p->default_value->loc, "");
        if (big_literal(p->default_value, out))
            return check_const_fits(L, p, *out, true, p->default_value->loc, "");
        lw_error(L, p->default_value->loc, "the default of const parameter '%s' must be known at compile time",
                 p->name);
        return false;
    }
    lw_error(L, p->loc, "kernel '%s' needs a value for const parameter '%s' (give it with -D %s=...)",
             k->name, p->name, p->name);
    return false;
}

/* Binds every const parameter of k as a constant of the function being built. */
static void bind_consts(Lower *L, const AstItem *k, const int64_t *vals, const bool *ok)
{
    for (uint32_t i = 0; i < k->nparams; i++) {
        const AstParam *p = &k->params[i];
        if (!p->is_const) continue;
        const IrType *t = ok[i] ? const_type(L, p) : NULL;
        L->b.loc = p->loc;
        Val v = t ? lw_val(L, ir_const_int(&L->b, t, vals[i])) : VERR;
        size_t at = lw_bind(L, p->name, p->loc, BIND_CONST, v);
        L->scope.data[at].has_cval = ok[i];
        L->scope.data[at].cval_error = !ok[i];
        L->scope.data[at].cval = vals[i];
    }
}

/* ---- kernels ---------------------------------------------------------------------------- */
/* The runtime passes at most TRT_MAX_ARGS (64) arguments (8 bytes each: far below the
 * driver's 4 KB of kernel parameters); a kernel with more could never be launched. */
static void report_too_many_params(Lower *L, const AstItem *k)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < k->nparams; i++)
        if (!k->params[i].is_const && ++n == FE_MAX_KERNEL_PARAMS + 1)
            lw_error(L, k->params[i].loc, "kernel '%s' has more than %d run-time parameters (the runtime's limit)",
                     k->name, FE_MAX_KERNEL_PARAMS);
}

static IrFunc *create_func(Lower *L, const AstItem *k, IrFuncKind kind, const char *name)
{
    const IrType **types = arena_alloc(L->arena, (k->nparams + 1) * sizeof *types);
    const char **names = arena_alloc(L->arena, (k->nparams + 1) * sizeof *names);
    uint32_t n = 0;
    for (uint32_t i = 0; i < k->nparams; i++) {
        const AstParam *p = &k->params[i];
        if (p->is_const) continue;
        const IrType *t = p->type ? lw_type(L, p->type) : NULL;
        if (!p->type && kind == IR_FUNC_KERNEL)
            lw_error(L, p->loc, "kernel parameter '%s' needs a type", p->name);
        types[n] = t ? t : lw_scalar(L, IR_I32);
        names[n++] = p->name;
    }
    if (kind == IR_FUNC_KERNEL && n > FE_MAX_KERNEL_PARAMS)
        report_too_many_params(L, k);
    return ir_func_create(L->mod, kind, name, k->loc, types, names, n);
}

static void bind_params(Lower *L, const AstItem *k, IrFunc *f)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < k->nparams; i++) {
        const AstParam *p = &k->params[i];
        if (p->is_const) continue;
        if (lw_lookup(L, p->name)) lw_error(L, p->loc, "parameter '%s' is declared twice", p->name);
        lw_bind(L, p->name, p->loc, BIND_PARAM, lw_val(L, f->body.args[n++]));
    }
}

static void lower_grid(Lower *L, const AstItem *k, IrFunc *kf, const int64_t *vals, const bool *ok)
{
    IrFunc *g = create_func(L, k, IR_FUNC_GRID, arena_printf(L->arena, "%s.grid", k->name));
    enum { MAX_GRID = 3 };       /* x, y, z */
    IrValue outs[MAX_GRID];
    size_t mark = L->scope.len;
    ir_builder_at_end(&L->b, &g->body);
    bind_consts(L, k, vals, ok);
    bind_params(L, k, g);
    L->in_grid = true;
    if (k->ngrid > MAX_GRID) lw_error(L, k->grid[MAX_GRID]->loc, "a grid has at most 3 dimensions");
    for (uint32_t i = 0; i < k->ngrid && i < MAX_GRID; i++) {
        Val v = lower_expr(L, k->grid[i]);
        if (v.t && (v.t->rank || !ir_elem_is_int(v.t->elem) || v.t->elem == IR_I1)) {
            lw_error(L, k->grid[i]->loc, "a grid size must be an integer scalar, got %s", lw_tstr(L, v.t));
            v = VERR;
        }
        outs[i] = v.t ? lw_ir(L, &v) : IR_NO_VALUE;
    }
    L->in_grid = false;
    lw_scope_pop(L, mark);
    L->b.loc = k->loc;
    uint32_t n = k->ngrid < MAX_GRID ? k->ngrid : MAX_GRID;
    for (uint32_t i = 0; i < n; i++)
        if (outs[i] == IR_NO_VALUE) return;
    ir_build(&L->b, IR_OP_RETURN, outs, n, NULL, 0, 0);
    kf->grid = g;
}

static void record_consts(Lower *L, const AstItem *k, IrFunc *f, const int64_t *vals)
{
    f->consts = arena_alloc(L->arena, (k->nparams + 1) * sizeof *f->consts);
    for (uint32_t i = 0; i < k->nparams; i++)
        if (k->params[i].is_const)
            f->consts[f->nconsts++] = (IrConstParam){arena_strdup(L->arena, k->params[i].name), vals[i]};
}

static void lower_kernel(Lower *L, const AstItem *k)
{
    int64_t *vals = arena_alloc(L->arena, (k->nparams + 1) * sizeof *vals);
    bool *ok = arena_alloc(L->arena, (k->nparams + 1) * sizeof *ok);
    IrFunc *f = create_func(L, k, IR_FUNC_KERNEL, k->name);
    size_t mark = L->scope.len;
    ir_builder_at_end(&L->b, &f->body);
    for (uint32_t i = 0; i < k->nparams; i++) {
        if (!k->params[i].is_const) continue;
        ok[i] = const_value(L, k, &k->params[i], &vals[i]);
        /* later defaults may use earlier consts */
        size_t at = lw_bind(L, k->params[i].name, k->params[i].loc, BIND_CONST, VERR);
        L->scope.data[at].has_cval = ok[i];
        L->scope.data[at].cval_error = !ok[i];
        L->scope.data[at].cval = vals[i];
    }
    size_t errors0 = L->diags->nerrors;
    apply_attributes(L, k, f);
    /* The whole tuning space, as the tuner will see it: its size (at most 65536
     * configs), `where` on every config (a division by zero, a shift past 63),
     * space and configs together, keys given twice. */
    FeConfig *configs;
    if (L->diags->nerrors == errors0 && find_attr(k, "autotune"))
        fe_autotune_configs(L->arena, L->prog, k->name, &configs, L->diags);
    lw_scope_pop(L, mark);
    record_consts(L, k, f, vals);
    bind_consts(L, k, vals, ok);
    bind_params(L, k, f);
    L->returned = false;
    lower_block(L, k->body);
    if (!L->returned) {
        L->b.loc = k->loc;
        ir_build(&L->b, IR_OP_RETURN, NULL, 0, NULL, 0, 0);
    }
    L->returned = false;
    lw_scope_pop(L, mark);
    if (k->ngrid) lower_grid(L, k, f, vals, ok);
}

/* ---- the file --------------------------------------------------------------------------- */
/* Fills L->items (name -> first item of that name) and reports the repeats. */
static void check_item_names(Lower *L)
{
    NameTable *t = &L->items;
    t->cap = 64;
    while (t->cap < 2 * ((size_t)L->prog->nitems + 1)) t->cap *= 2;
    if (!(t->slots = tl_calloc(t->cap, sizeof *t->slots))) tl_oom();
    for (uint32_t i = 0; i < L->prog->nitems; i++) {
        const AstItem *it = &L->prog->items[i];
        NameSlot *sl = it->name ? name_find(t, it->name) : NULL;
        if (sl && sl->name)
            lw_error(L, it->name_loc, "'%s' is already defined at line %u", it->name,
                     L->prog->items[sl->top].name_loc.line);
        else if (sl) *sl = (NameSlot){it->name, i}, t->len++;
        if (it->kind == AST_FN && lw_is_builtin(it->name))
            lw_error(L, it->name_loc, "fn '%s' has the name of a built-in function", it->name);
        for (uint32_t j = 0; it->kind == AST_FN && j < it->nattrs; j++)   /* @checkpoint: graphs' fns */
            if (strcmp(it->attrs[j].name, "checkpoint") || it->attrs[j].nargs)
                lw_error(L, it->attrs[j].loc, "attributes like '@%s' are only allowed on kernels (a fn takes "
                         "@checkpoint only)", it->attrs[j].name);
    }
}

/* Whether `name` is a launch key or a const parameter of some kernel; else *near is
 * the nearest of those within a typo's edits (NULL if none). */
static bool names_a_const(const Lower *L, const char *name, const char **near)
{
    if (ir_launch_key(name)) return true;
    int best = lw_suggest_limit(name) + 1;
    *near = NULL;
    for (int k = 0; k < IR_NUM_LAUNCH_KEYS; k++) {
        int d = lw_edit_distance(ir_launch_info[k].name, name);
        if (d < best) best = d, *near = ir_launch_info[k].name;
    }
    for (uint32_t i = 0; i < L->prog->nitems; i++) {
        const AstItem *it = &L->prog->items[i];
        for (uint32_t j = 0; it->kind == AST_KERNEL && j < it->nparams; j++) {
            const AstParam *p = &it->params[j];
            if (!p->is_const) continue;
            if (!strcmp(p->name, name)) return true;
            int d = lw_edit_distance(p->name, name);
            if (d < best) best = d, *near = p->name;
        }
    }
    return false;
}

static void check_defines(Lower *L)
{
    Loc none = {0};
    for (uint32_t i = 0; L->opt && i < L->opt->ndefines; i++) {
        const char *name = L->opt->defines[i].name, *near;
        if (names_a_const(L, name, &near)) continue;
        if (near) lw_error(L, none, "-D %s does not name a const parameter; did you mean '%s'?", name, near);
        else lw_error(L, none, "-D %s does not name a const parameter", name);
    }
}

static bool wanted(const Lower *L, const AstItem *it)
{
    return it->kind == AST_KERNEL && (!L->opt || !L->opt->kernel || !strcmp(L->opt->kernel, it->name));
}

IrModule *fe_lower(IrCtx *ctx, const AstProgram *p, const FeOptions *opt, DiagList *diags)
{
    Lower L = {.ctx = ctx, .arena = ir_ctx_arena(ctx), .diags = diags, .prog = p, .opt = opt};
    size_t errors0 = diags->nerrors;
    L.mod = ir_module_create(ctx);
    check_item_names(&L);
    check_defines(&L);
    if (opt && opt->kernel) {
        const AstItem *k = lw_find_item(&L, opt->kernel);
        if (!k || k->kind != AST_KERNEL) lw_error(&L, (Loc){0}, "no kernel named '%s'", opt->kernel);
    }
    for (uint32_t i = 0; i < p->nitems && !diag_full(diags); i++)
        if (wanted(&L, &p->items[i]) && p->items[i].body) lower_kernel(&L, &p->items[i]);
    /* Graphs are checked (shapes, types) on every compile; fusing them into kernels is
     * the graph compiler's job, not lowering's. */
    for (uint32_t i = 0; i < p->nitems && !(opt && opt->kernel); i++)
        if (p->items[i].kind == AST_GRAPH && p->items[i].body)
            fe_check_graph(L.arena, p, &p->items[i], diags);
    vec_free(&L.scope);
    tl_free(L.names.slots);
    tl_free(L.items.slots);
    return diags->nerrors > errors0 ? NULL : L.mod;
}
