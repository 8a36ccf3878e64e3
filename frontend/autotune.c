/* The tuning space of a kernel's @autotune (LANGUAGE.md section 3.1), for the tuner.
 *
 *     @autotune(key = [M, N, K], space = {BM: [64, 128], ..., warps: [4, 8]},
 *               where = BM * BN <= 128 * 256, default = {BM: 128, ..., warps: 4})
 *
 * `space` is expanded as a cross product in the order written, the last key varying
 * fastest (so the list reads like nested loops), or `configs` lists the configs
 * explicitly; `where` is then evaluated over each config's values plus the kernel's
 * const parameter defaults and prunes the configs where it is zero. Keys must be const
 * parameters of the kernel or warps/stages, since a config is a set of -D overrides.
 * Errors carry the location of the offending key or expression; any error gives no
 * configs at all, so a tuner never runs half a space. */
#include <string.h>

#include "frontend/frontend.h"
#include "frontend/intops.h"

#define MAX_CONFIGS 65536   /* a tuner that benchmarks each config must finish */

typedef struct At {
    Arena *a;
    DiagList *diags;
    const AstItem *k;
    const AstAttr *attr;
    const AstExpr *key, *space, *where, *configs, *dflt;
} At;

#define ERR(t, loc, ...) diag_error((t)->diags, (loc), __VA_ARGS__)

static const AstParam *find_param(const AstItem *k, const char *name)
{
    for (uint32_t i = 0; i < k->nparams; i++)
        if (k->params[i].name && strcmp(k->params[i].name, name) == 0) return &k->params[i];
    return NULL;
}

static Loc key_loc(const AstExpr *m, uint32_t i)
{
    return m->arg_name_locs ? m->arg_name_locs[i] : m->args[i] ? m->args[i]->loc : m->loc;
}

static const int64_t *lookup(const FeConfig *c, const char *name)
{
    for (uint32_t i = 0; c && i < c->nkeys; i++)
        if (strcmp(c->keys[i].name, name) == 0) return &c->keys[i].value;
    return NULL;
}

/* ---- evaluating `where` ------------------------------------------------------------ */

static bool eval(At *t, const AstExpr *e, const FeConfig *c, int depth, int64_t *out);

/* A name: the config's value, else the const parameter's default. */
static bool eval_name(At *t, const AstExpr *e, const FeConfig *c, int depth, int64_t *out)
{
    const int64_t *v = lookup(c, e->name);
    if (v) {
        *out = *v;
        return true;
    }
    const AstParam *p = find_param(t->k, e->name);
    if (p && p->is_const && p->default_value) return eval(t, p->default_value, c, depth + 1, out);
    if (p && p->is_const)
        ERR(t, e->loc, "'%s' has no value in this autotune config (a const parameter without a "
            "default)", e->name);
    else
        ERR(t, e->loc, "unknown name '%s' in autotune where (it may use the config's keys and the "
            "kernel's const parameters)", e->name);
    return false;
}

/* a OP b of `where`; the arithmetic is the compile-time arithmetic of kernels. */
static bool eval_binop(At *t, const AstExpr *e, int64_t a, int64_t b, int64_t *out)
{
    if (e->op == AST_MATMUL) {
        ERR(t, e->loc, "operator '%s' is not allowed in autotune where", ast_binop_text[e->op]);
        return false;
    }
    FeIntStatus s = fe_int_binop(e->op, a, b, out);
    if (s == FE_INT_OK) return true;
    if (s == FE_INT_OVERFLOW)
        ERR(t, e->loc, "autotune where overflows i64 here (%lld %s %lld)", (long long)a, ast_binop_text[e->op],
            (long long)b);
    else
        ERR(t, e->loc, "autotune where divides by zero or shifts out of range here (%lld %s %lld)",
            (long long)a, ast_binop_text[e->op], (long long)b);
    return false;
}

static bool eval_cdiv(At *t, const AstExpr *e, const FeConfig *c, int depth, int64_t *out)
{
    int64_t a, b;
    if (strcmp(e->name, "cdiv") != 0 || e->nargs != 2) {
        ERR(t, e->loc, "autotune where may call only cdiv(a, b)");
        return false;
    }
    if (!eval(t, e->args[0], c, depth + 1, &a) || !eval(t, e->args[1], c, depth + 1, &b)) return false;
    if (b <= 0) {
        ERR(t, e->loc, "cdiv by %lld in autotune where", (long long)b);
        return false;
    }
    *out = (int64_t)(((uint64_t)a + (uint64_t)b - 1) / (uint64_t)b);
    return true;
}

static bool eval(At *t, const AstExpr *e, const FeConfig *c, int depth, int64_t *out)
{
    int64_t a, b;
    if (!e) return false;
    if (depth > FE_MAX_NESTING) {
        ERR(t, e->loc, "autotune where nests too deeply");
        return false;
    }
    switch (e->kind) {
    case AST_INT:
        if (e->ival > INT64_MAX) break;
        *out = (int64_t)e->ival;
        return true;
    case AST_BOOL: *out = (int64_t)e->ival; return true;
    case AST_NAME: return e->name && eval_name(t, e, c, depth, out);
    case AST_CALL: return e->name && eval_cdiv(t, e, c, depth, out);
    case AST_UNARY:
        if (!eval(t, e->lhs, c, depth + 1, &a)) return false;
        if (fe_int_unop(e->op, a, out) == FE_INT_OK) return true;
        ERR(t, e->loc, "autotune where overflows i64 here (-(%lld))", (long long)a);
        return false;
    case AST_BINARY:
        if (e->op < 0 || e->op > AST_LOR) break;
        return eval(t, e->lhs, c, depth + 1, &a) && eval(t, e->rhs, c, depth + 1, &b) &&
               eval_binop(t, e, a, b, out);
    default: break;
    }
    ERR(t, e->loc, "autotune where must be an integer expression of the config's keys");
    return false;
}

/* ---- keys and values ----------------------------------------------------------------- */

static bool key_ok(At *t, const char *name, Loc loc, const char *what)
{
    if (ir_launch_key(name)) return true;
    const AstParam *p = find_param(t->k, name);
    if (p && p->is_const) return true;
    ERR(t, loc, "autotune %s key '%s' is not a const parameter of kernel '%s'", what, name, t->k->name);
    return false;
}

/* One value of a config: an integer literal, maybe negated. */
static bool int_value(At *t, const AstExpr *e, int64_t *out)
{
    bool neg = e && e->kind == AST_UNARY && e->op == '-';
    const AstExpr *lit = neg ? e->lhs : e;
    if (!lit || lit->kind != AST_INT || lit->ival > INT64_MAX) {
        if (e) ERR(t, e->loc, "an autotune value must be an integer literal");
        return false;
    }
    *out = neg ? -(int64_t)lit->ival : (int64_t)lit->ival;
    return true;
}

/* The names of a map: each a valid key, none twice. */
static bool map_keys_ok(At *t, const AstExpr *m, const char *what)
{
    bool ok = true;
    for (uint32_t i = 0; i < m->nargs; i++) {
        const char *name = m->arg_names ? m->arg_names[i] : NULL;
        if (!name) {
            ERR(t, key_loc(m, i), "an autotune %s needs NAME: value entries", what);
            return false;
        }
        ok &= key_ok(t, name, key_loc(m, i), what);
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(m->arg_names[j], name) == 0) {
                ERR(t, key_loc(m, i), "autotune %s key '%s' appears twice", what, name);
                ok = false;
            }
    }
    return ok;
}

/* A map {NAME: v, ...} as a config. */
static bool map_config(At *t, const AstExpr *m, const char *what, FeConfig *out)
{
    if (!m || m->kind != AST_MAP) {
        if (m) ERR(t, m->loc, "an autotune %s must be a map like {BM: 128, warps: 4}", what);
        return false;
    }
    if (!map_keys_ok(t, m, what)) return false;
    FeDefine *d = arena_alloc(t->a, (m->nargs + 1) * sizeof *d);
    for (uint32_t i = 0; i < m->nargs; i++) {
        d[i].name = m->arg_names[i];
        if (!int_value(t, m->args[i], &d[i].value)) return false;
    }
    *out = (FeConfig){d, m->nargs};
    return true;
}

/* ---- the configs ------------------------------------------------------------------- */

/* The kept configs, with a hash table of their indices (+1) so that dropping
 * duplicates stays linear at the 65536-config limit. */
typedef struct ConfigSet {
    VEC(FeConfig) v;
    uint32_t *tab;
    size_t cap;
    uint32_t expanded, where_removed, duplicates;   /* for the tuner's report */
} ConfigSet;

/* Independent of the order of the keys: explicit configs may write them in any order. */
static uint64_t config_hash(const FeConfig *c)
{
    uint64_t h = 0;
    for (uint32_t i = 0; i < c->nkeys; i++) {
        uint64_t k = 1469598103934665603ull ^ (uint64_t)c->keys[i].value * 0x9E3779B97F4A7C15ull;
        for (const char *s = c->keys[i].name; *s; s++) k = (k ^ (unsigned char)*s) * 1099511628211ull;
        h += k ^ (k >> 31);
    }
    return h;
}

static bool same_config(const FeConfig *x, const FeConfig *y)
{
    if (x->nkeys != y->nkeys) return false;
    for (uint32_t i = 0; i < x->nkeys; i++) {
        const int64_t *v = lookup(y, x->keys[i].name);
        if (!v || *v != x->keys[i].value) return false;
    }
    return true;
}

/* The slot of c's table entry, or of the empty slot where it would go. */
static size_t find_slot(const ConfigSet *s, const FeConfig *c)
{
    size_t i = config_hash(c) & (s->cap - 1);
    while (s->tab[i] && !same_config(&s->v.data[s->tab[i] - 1], c)) i = (i + 1) & (s->cap - 1);
    return i;
}

static void grow(ConfigSet *s)
{
    tl_free(s->tab);
    s->cap = s->cap ? s->cap * 2 : 64;
    s->tab = tl_calloc(s->cap, sizeof *s->tab);
    if (!s->tab) tl_oom();
    for (size_t i = 0; i < s->v.len; i++) s->tab[find_slot(s, &s->v.data[i])] = (uint32_t)i + 1;
}

/* Keeps c unless where rejects it or it is already there; false on an error. */
static bool add_config(At *t, ConfigSet *s, FeConfig c)
{
    int64_t keep = 1;
    s->expanded++;
    if (t->where && !eval(t, t->where, &c, 0, &keep)) return false;
    if (!keep) return s->where_removed++, true;
    if (2 * (s->v.len + 1) > s->cap) grow(s);
    size_t slot = find_slot(s, &c);
    if (s->tab[slot]) return s->duplicates++, true;
    vec_push(&s->v, c);
    s->tab[slot] = (uint32_t)s->v.len;
    return true;
}

/* The number of configs of the space; 0 with an error if too many or malformed. */
static uint64_t space_size(At *t, const AstExpr *s)
{
    uint64_t n = 1;
    for (uint32_t i = 0; i < s->nargs; i++) {
        const AstExpr *l = s->args[i];
        if (!l || l->kind != AST_LIST || l->nargs == 0) {
            ERR(t, l ? l->loc : s->loc, "autotune space key '%s' needs a non-empty list of values",
                s->arg_names[i]);
            return 0;
        }
        n *= l->nargs;
        if (n > MAX_CONFIGS) {
            ERR(t, s->loc, "the autotune space has more than %d configs", MAX_CONFIGS);
            return 0;
        }
    }
    return n;
}

/* The cross product in the order written, the last key fastest. */
static bool expand_space(At *t, const AstExpr *s, ConfigSet *v)
{
    if (s->kind != AST_MAP || s->nargs == 0) {
        ERR(t, s->loc, "autotune space must be a non-empty map like {BM: [64, 128], warps: [4, 8]}");
        return false;
    }
    uint64_t n = map_keys_ok(t, s, "space") ? space_size(t, s) : 0;
    for (uint64_t idx = 0; idx < n; idx++) {
        FeDefine *d = arena_alloc(t->a, (s->nargs + 1) * sizeof *d);
        uint64_t rest = idx;
        for (uint32_t i = s->nargs; i-- > 0;) {
            const AstExpr *l = s->args[i];
            d[i].name = s->arg_names[i];
            if (!int_value(t, l->args[rest % l->nargs], &d[i].value)) return false;
            rest /= l->nargs;
        }
        if (!add_config(t, v, (FeConfig){d, s->nargs})) return false;
    }
    return n > 0;
}

static bool list_configs(At *t, const AstExpr *l, ConfigSet *v)
{
    if (l->kind != AST_LIST || l->nargs == 0) {
        ERR(t, l->loc, "autotune configs must be a non-empty list of maps like [{BM: 64}, {BM: 128}]");
        return false;
    }
    if (l->nargs > MAX_CONFIGS) {
        ERR(t, l->loc, "autotune lists more than %d configs", MAX_CONFIGS);
        return false;
    }
    for (uint32_t i = 0; i < l->nargs; i++) {
        FeConfig c;
        if (!map_config(t, l->args[i], "config", &c) || !add_config(t, v, c)) return false;
    }
    return true;
}

/* ---- the attribute's arguments -------------------------------------------------------- */

static bool take_args(At *t)
{
    static const char *const names[] = {"key", "space", "where", "configs", "default"};
    const AstExpr **slots[] = {&t->key, &t->space, &t->where, &t->configs, &t->dflt};
    const AstAttr *at = t->attr;
    for (uint32_t i = 0; i < at->nargs; i++) {
        const char *n = at->arg_names ? at->arg_names[i] : NULL;
        Loc loc = n && at->arg_name_locs ? at->arg_name_locs[i] : at->args[i] ? at->args[i]->loc : at->loc;
        size_t k = 0;
        while (n && k < 5 && strcmp(names[k], n) != 0) k++;
        if (!n || k == 5) {
            ERR(t, loc, "unknown autotune argument%s%s%s (expected key, space, where, configs or default)",
                n ? " '" : "", n ? n : "", n ? "'" : "");
            return false;
        }
        if (*slots[k]) {
            ERR(t, loc, "autotune argument '%s' is given twice", n);
            return false;
        }
        *slots[k] = at->args[i];
    }
    return true;
}

/* key = [M, N, K]: run-time scalar parameters. */
static bool check_key(At *t)
{
    const AstExpr *l = t->key;
    if (!l) return true;
    if (l->kind != AST_LIST) {
        ERR(t, l->loc, "autotune key must be a list of parameters like [M, N, K]");
        return false;
    }
    bool ok = true;
    for (uint32_t i = 0; i < l->nargs; i++) {
        const AstExpr *e = l->args[i];
        const AstParam *p = e && e->kind == AST_NAME ? find_param(t->k, e->name) : NULL;
        if (p && !p->is_const && p->type && p->type->kind == AST_TYPE_SCALAR) continue;
        if (e && e->kind == AST_NAME)
            ERR(t, e->loc, "autotune key '%s' is not a run-time scalar parameter of kernel '%s'",
                e->name, t->k->name);
        else if (e) ERR(t, e->loc, "autotune key must name parameters");
        ok = false;
    }
    return ok;
}

/* default = {...}: every key of the configs, and it must satisfy where. */
static bool check_default(At *t, const ConfigSet *v, FeConfig *out)
{
    FeConfig d;
    if (!t->dflt) return true;
    if (!map_config(t, t->dflt, "default", &d)) return false;
    *out = d;
    for (size_t i = 0; i < v->v.len; i++)
        for (uint32_t k = 0; k < v->v.data[i].nkeys; k++)
            if (!lookup(&d, v->v.data[i].keys[k].name)) {
                ERR(t, t->dflt->loc, "the autotune default lacks '%s', a key of the configs",
                    v->v.data[i].keys[k].name);
                return false;
            }
    int64_t keep = 1;
    if (t->where && !eval(t, t->where, &d, 0, &keep)) return false;
    if (!keep) ERR(t, t->dflt->loc, "the autotune default does not satisfy where");
    return keep != 0;
}

static bool collect(At *t, ConfigSet *v, FeConfig *dflt)
{
    if (!take_args(t) || !check_key(t)) return false;
    if (t->space && t->configs) {
        ERR(t, t->configs->loc, "autotune takes either space or configs, not both");
        return false;
    }
    if (!t->space && !t->configs) {
        ERR(t, t->attr->loc, "autotune needs a space or a list of configs");
        return false;
    }
    if (!(t->space ? expand_space(t, t->space, v) : list_configs(t, t->configs, v))) return false;
    if (v->v.len == 0) ERR(t, t->where ? t->where->loc : t->attr->loc, "autotune where rejects every config");
    return v->v.len > 0 && check_default(t, v, dflt);
}

static const AstItem *find_kernel(const AstProgram *p, const char *name)
{
    for (uint32_t i = 0; i < p->nitems; i++)
        if (p->items[i].kind == AST_KERNEL && p->items[i].name && strcmp(p->items[i].name, name) == 0)
            return &p->items[i];
    return NULL;
}

static const AstAttr *find_autotune(At *t)
{
    const AstAttr *found = NULL;
    for (uint32_t i = 0; i < t->k->nattrs; i++) {
        const AstAttr *at = &t->k->attrs[i];
        if (!at->name || strcmp(at->name, "autotune") != 0) continue;
        if (found) ERR(t, at->loc, "kernel '%s' has more than one @autotune", t->k->name);
        else found = at;
    }
    return found;
}

bool fe_autotune_space(Arena *a, const AstProgram *p, const char *kernel, FeTuneSpace *out,
                       DiagList *diags)
{
    At t = {.a = a, .diags = diags, .k = find_kernel(p, kernel)};
    memset(out, 0, sizeof *out);
    if (!t.k) {
        diag_error(diags, (Loc){0}, "no kernel named '%s'", kernel);
        return false;
    }
    if (!(t.attr = find_autotune(&t))) return true;
    size_t nerr = diags->nerrors;
    ConfigSet s = {0};
    FeConfig dflt = {0};
    bool ok = collect(&t, &s, &dflt) && diags->nerrors == nerr;
    if (ok) {
        out->nconfigs = (uint32_t)s.v.len;
        out->configs = arena_alloc(a, (s.v.len + 1) * sizeof *out->configs);
        memcpy(out->configs, s.v.data, s.v.len * sizeof *out->configs);
        out->dflt = dflt;
        out->has_default = t.dflt != NULL;
        out->expanded = s.expanded;
        out->where_removed = s.where_removed;
        out->duplicates = s.duplicates;
        uint32_t nk = t.key ? t.key->nargs : 0;
        out->key = arena_alloc(a, (nk + 1) * sizeof *out->key);
        for (uint32_t i = 0; i < nk; i++) out->key[i] = t.key->args[i]->name;
        out->nkey = nk;
    }
    vec_free(&s.v);
    tl_free(s.tab);
    return ok;
}

uint32_t fe_autotune_configs(Arena *a, const AstProgram *p, const char *kernel, FeConfig **out,
                             DiagList *diags)
{
    FeTuneSpace s;
    *out = NULL;
    if (!fe_autotune_space(a, p, kernel, &s, diags)) return 0;
    *out = s.nconfigs ? s.configs : NULL;
    return s.nconfigs;
}
