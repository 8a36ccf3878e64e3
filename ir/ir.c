/* Tile IR core: element kinds, interned types, functions, the builder, editing. */
#include "ir.h"
#include "layout.h"

#include <stdlib.h>
#include <string.h>

/* ---- element kinds -------------------------------------------------------------- */
static const struct {
    const char *name;
    int bits;
    char cls;
} elem_info[] = {
#define X(n, t, b, c) {t, b, c},
    IR_ELEMS(X)
#undef X
};

const char *ir_elem_name(IrElem e) { return e < IR_NUM_ELEMS ? elem_info[e].name : "?"; }
int ir_elem_bits(IrElem e) { return elem_info[e].bits; }
int ir_elem_bytes(IrElem e) { return e == IR_I1 ? 1 : elem_info[e].bits / 8; }
bool ir_elem_is_int(IrElem e) { return elem_info[e].cls == 'i' || elem_info[e].cls == 'u'; }
bool ir_elem_is_signed(IrElem e) { return elem_info[e].cls == 'i' && e != IR_I1; }
bool ir_elem_is_float(IrElem e) { return elem_info[e].cls == 'f'; }

bool ir_elem_from_name(const char *s, size_t n, IrElem *out)
{
    if (n == 4 && !memcmp(s, "bool", 4)) {
        *out = IR_I1;
        return true;
    }
    for (int e = 0; e < IR_PTR; e++) {
        if (strlen(elem_info[e].name) == n && !memcmp(s, elem_info[e].name, n)) {
            *out = (IrElem)e;
            return true;
        }
    }
    return false;
}

/* ---- ops ------------------------------------------------------------------------- */
const IrOpInfo ir_op_info[IR_NUM_OPS] = {
#define OP(name, text, nops, nres, nreg, flags, attr) {text, nops, nres, nreg, flags},
#include "ops.def"
#undef OP
};

const char *const ir_cmp_names[6] = {"eq", "ne", "lt", "le", "gt", "ge"};
const char *const ir_precision_names[3] = {"default", "tf32", "ieee"};
const char *const ir_turn_names[4] = {"wait", "pass", "start", "end"};
const char *const ir_sem_names[4] = {"acq_rel", "relaxed", "acquire", "release"};

uint32_t ir_func_hidden_params(const IrFunc *f)
{
    uint32_t n = f->body.nargs;
    if (f->kind != IR_FUNC_KERNEL || !n || !f->param_names || !f->param_names[n - 1] ||
        strcmp(f->param_names[n - 1], IR_BOUNDS_REPORT_NAME))
        return 0;
    const IrType *t = ir_value_type(f, f->body.args[n - 1]);
    if (t->elem != IR_PTR || t->pointee != IR_I64 || t->rank) return 0;
    uint32_t ptrs = 0;
    for (uint32_t i = 0; i + 1 < n; i++) ptrs += ir_value_type(f, f->body.args[i])->elem == IR_PTR;
    return 2 * ptrs + 1 <= n ? ptrs + 1 : 0;   /* the user's pointers and their counts */
}

bool ir_op_is_atomic(IrOpcode code)
{
    switch (code) {
    case IR_OP_ATOMIC_ADD: case IR_OP_ATOMIC_MAX: case IR_OP_ATOMIC_MIN: case IR_OP_ATOMIC_XCHG:
    case IR_OP_ATOMIC_AND: case IR_OP_ATOMIC_OR: case IR_OP_ATOMIC_XOR: case IR_OP_ATOMIC_CAS:
        return true;
    default:
        return false;
    }
}

uint32_t ir_block_outer(const IrFunc *f, const IrOp *op)
{
    uint32_t r, n = op->noperands;
    switch (op->code) {
    case IR_OP_BLOCK_LOAD:
        r = (uint32_t)ir_value_type(f, op->results[0])->rank;
        return n == 3 + 3 * r ? 1 + 3 * r : 0;
    case IR_OP_BLOCK_STORE:
        r = n ? (uint32_t)ir_value_type(f, op->operands[n - 1])->rank : 0;
        return n == 4 + 3 * r ? 1 + 3 * r : 0;
    case IR_OP_TMA_COPY:          /* (buf, stage, bars, ptr, 3 r block operands[, x, s][, i1]) */
        r = n ? (uint32_t)ir_value_type(f, op->operands[0])->rank - 1 : 0;
        return n >= 6 + 3 * r ? 4 + 3 * r : 0;
    case IR_OP_TMA_STORE: return n == 11 ? 9 : 0;
    default: return 0;
    }
}

bool ir_op_from_name(const char *s, size_t n, IrOpcode *out)
{
    for (int i = 0; i < IR_NUM_OPS; i++) {
        if (strlen(ir_op_info[i].text) == n && !memcmp(s, ir_op_info[i].text, n)) {
            *out = (IrOpcode)i;
            return true;
        }
    }
    return false;
}

/* ---- context and interned types ----------------------------------------------------- */
enum { TYPE_BUCKETS = 1024 };

typedef struct TypeNode {
    IrType t;
    struct TypeNode *next;
} TypeNode;

typedef struct LayoutNode {
    IrLayout l;
    struct LayoutNode *next;
} LayoutNode;

struct IrCtx {
    Arena *arena;
    DiagList diags;
    TypeNode *buckets[TYPE_BUCKETS];
    LayoutNode *layouts;         /* few per module: a list */
};

IrCtx *ir_ctx_create(void)
{
    IrCtx *c = tl_calloc(1, sizeof *c);
    if (!c) return NULL;
    c->arena = arena_create();
    if (!c->arena) {
        tl_free(c);
        return NULL;
    }
    diag_init(&c->diags);
    return c;
}

void ir_ctx_destroy(IrCtx *c)
{
    if (!c) return;
    arena_destroy(c->arena);
    diag_free(&c->diags);
    tl_free(c);
}

Arena *ir_ctx_arena(IrCtx *c) { return c->arena; }
DiagList *ir_ctx_diags(IrCtx *c) { return &c->diags; }

static uint32_t type_hash(const IrType *t)
{
    uint32_t h = 2166136261u;
    const uint32_t parts[] = {t->elem, t->pointee, t->rank, (uint32_t)t->shape[0],
                              (uint32_t)t->shape[1], (uint32_t)t->shape[2],
                              (uint32_t)(uintptr_t)t->layout};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) h = (h ^ parts[i]) * 16777619u;
    return h;
}

static const IrType *intern(IrCtx *c, const IrType *key)
{
    uint32_t b = type_hash(key) % TYPE_BUCKETS;
    for (TypeNode *n = c->buckets[b]; n; n = n->next)
        if (!memcmp(&n->t, key, sizeof *key)) return &n->t;
    TypeNode *n = arena_alloc(c->arena, sizeof *n);
    n->t = *key;
    n->next = c->buckets[b];
    c->buckets[b] = n;
    return &n->t;
}

static IrType type_key(IrElem elem, IrElem pointee)
{
    IrType k;
    memset(&k, 0, sizeof k);  /* padding too: keys are compared with memcmp */
    k.elem = elem;
    k.pointee = elem == IR_PTR ? pointee : IR_I1;
    return k;
}

const IrType *ir_type_scalar(IrCtx *c, IrElem e)
{
    IrType k = type_key(e, IR_I1);
    return intern(c, &k);
}

const IrType *ir_type_ptr(IrCtx *c, IrElem pointee)
{
    IrType k = type_key(IR_PTR, pointee);
    return intern(c, &k);
}

const IrType *ir_type_tile(IrCtx *c, const IrType *scalar, int rank, const int32_t *shape)
{
    IrType k = type_key(scalar->elem, scalar->pointee);
    k.rank = (uint8_t)rank;
    for (int i = 0; i < rank && i < IR_MAX_RANK; i++) k.shape[i] = shape[i];
    return intern(c, &k);
}

const IrType *ir_type_elem(IrCtx *c, const IrType *t)
{
    IrType k = type_key(t->elem, t->pointee);
    return intern(c, &k);
}

const IrType *ir_type_like(IrCtx *c, const IrType *shape_of, const IrType *elem_of)
{
    return ir_type_tile(c, elem_of, shape_of->rank, shape_of->shape);
}

const IrLayout *ir_layout_intern(IrCtx *c, const IrLayout *key)
{
    for (LayoutNode *n = c->layouts; n; n = n->next)
        if (!memcmp(&n->l, key, sizeof *key)) return &n->l;
    LayoutNode *n = arena_alloc(c->arena, sizeof *n);
    n->l = *key;
    n->next = c->layouts;
    c->layouts = n;
    return &n->l;
}

const IrType *ir_type_with_layout(IrCtx *c, const IrType *t, const IrLayout *l)
{
    IrType k = *t;
    k.layout = l;
    return intern(c, &k);
}

int64_t ir_type_numel(const IrType *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= t->shape[i];
    return n;
}

bool ir_type_is_tile(const IrType *t) { return t->rank > 0; }

char *ir_type_str(const IrType *t, char *buf, size_t n)
{
    int w = t->elem == IR_PTR ? snprintf(buf, n, "*%s", ir_elem_name(t->pointee))
                              : snprintf(buf, n, "%s", ir_elem_name(t->elem));
    for (int i = 0; i < t->rank && w >= 0 && (size_t)w < n; i++)
        w += snprintf(buf + w, n - (size_t)w, "%s%d%s", i ? ", " : "[", t->shape[i],
                      i + 1 == t->rank ? "]" : "");
    return buf;
}

/* ---- modules, functions, values ------------------------------------------------------- */
IrModule *ir_module_create(IrCtx *c)
{
    IrModule *m = arena_alloc(c->arena, sizeof *m);
    m->ctx = c;
    m->knobs = tile_knobs_default();
    return m;
}

static void *grow(Arena *a, void *old, uint32_t len, uint32_t *cap, size_t elem)
{
    if (len < *cap) return old;
    uint32_t nc = *cap ? *cap * 2 : 16;
    void *n = arena_alloc(a, nc * elem);
    if (old) memcpy(n, old, len * elem);
    *cap = nc;
    return n;
}

IrValue ir_value_new(IrFunc *f, const IrType *t, const char *name)
{
    Arena *a = f->module->ctx->arena;
    f->values = grow(a, f->values, f->nvalues, &f->cap_values, sizeof *f->values);
    IrValue v = f->nvalues++;
    f->values[v] = (IrValueInfo){.type = t, .name = name ? arena_strdup(a, name) : NULL};
    return v;
}

static void block_init(IrBlock *blk, IrFunc *f, IrOp *parent)
{
    memset(blk, 0, sizeof *blk);
    blk->func = f;
    blk->parent_op = parent;
}

IrFunc *ir_func_create(IrModule *m, IrFuncKind kind, const char *name, Loc loc,
                       const IrType *const *param_types, const char *const *param_names,
                       uint32_t nparams)
{
    Arena *a = m->ctx->arena;
    IrFunc *f = arena_alloc(a, sizeof *f);
    f->kind = kind;
    f->name = arena_strdup(a, name);
    f->loc = loc;
    f->module = m;
    for (int k = 0; k < IR_NUM_LAUNCH_KEYS; k++) ir_launch_put(f, (IrLaunchKey)k, ir_launch_info[k].def);
    block_init(&f->body, f, NULL);
    f->param_names = arena_alloc(a, (nparams ? nparams : 1) * sizeof *f->param_names);
    for (uint32_t i = 0; i < nparams; i++) {
        const char *pn = param_names ? param_names[i] : NULL;
        f->param_names[i] = pn ? arena_strdup(a, pn) : arena_printf(a, "arg%u", i);
        ir_block_add_arg(&f->body, param_types[i], f->param_names[i]);
    }
    m->funcs = grow(a, m->funcs, m->nfuncs, &m->cap_funcs, sizeof *m->funcs);
    m->funcs[m->nfuncs++] = f;
    return f;
}

IrFunc *ir_module_find(const IrModule *m, const char *name)
{
    for (uint32_t i = 0; i < m->nfuncs; i++)
        if (!strcmp(m->funcs[i]->name, name)) return m->funcs[i];
    return NULL;
}

/* ---- launch keys (launch.def) ---------------------------------------------------------- */
#define RULE_INT(name, lo, hi) name " must be from " #lo " to " #hi
#define RULE_POW2(name, lo, hi) name " must be a power of two from " #lo " to " #hi
#define RULE_BOOL(name, lo, hi) name " must be 0 or 1 (false or true)"
#define POW2_INT 0
#define POW2_POW2 1
#define POW2_BOOL 0

const IrLaunchInfo ir_launch_info[IR_NUM_LAUNCH_KEYS] = {
#define LAUNCH(NAME, field, def, lo, hi, rule, shown, meaning) \
    {#field, def, lo, hi, POW2_##rule, shown, RULE_##rule(#field, lo, hi), meaning},
#include "launch.def"
#undef LAUNCH
};

static const char launch_names[] =
#define LAUNCH(NAME, field, def, lo, hi, rule, shown, meaning) ", " #field
#include "launch.def"
#undef LAUNCH
    ;
const char *const ir_launch_names = launch_names + 2;   /* without the first ", " */

int ir_launch_find(const char *name)
{
    for (int k = 0; k < IR_NUM_LAUNCH_KEYS; k++)
        if (!strcmp(name, ir_launch_info[k].name)) return k;
    return -1;
}

bool ir_launch_key(const char *name)
{
    return ir_launch_find(name) >= 0;
}

static int *launch_field(IrFunc *f, IrLaunchKey k)
{
    switch (k) {
#define LAUNCH(NAME, field, def, lo, hi, rule, shown, meaning) \
    case IR_LAUNCH_##NAME: return &f->field;
#include "launch.def"
#undef LAUNCH
    default: return NULL;
    }
}

int ir_launch_get(const IrFunc *f, IrLaunchKey k)
{
    const int *p = launch_field((IrFunc *)f, k);
    return p ? *p : 0;
}

void ir_launch_put(IrFunc *f, IrLaunchKey k, int v)
{
    int *p = launch_field(f, k);
    if (p) *p = v;
}

int64_t ir_launch_value(const IrFunc *f, const char *name)
{
    int k = ir_launch_find(name);
    return k < 0 ? 0 : ir_launch_get(f, (IrLaunchKey)k);
}

void ir_launch_set(IrFunc *f, const char *name, int64_t v)
{
    int k = ir_launch_find(name);
    if (k < 0) return;
    ir_launch_put(f, (IrLaunchKey)k, (int)v);
    f->launch_set |= 1u << k;
}

bool ir_launch_given(const IrFunc *f, IrLaunchKey k)
{
    return f->launch_set >> k & 1;
}

bool ir_launch_valid(IrLaunchKey k, int64_t v)
{
    const IrLaunchInfo *i = &ir_launch_info[k];
    return v >= i->min && v <= i->max && (!i->pow2 || !(v & (v - 1)));
}

const char *ir_launch_check(const char *name, int64_t v)
{
    int k = ir_launch_find(name);
    return k < 0 || ir_launch_valid((IrLaunchKey)k, v) ? NULL : ir_launch_info[k].rule;
}

bool ir_launch_chosen_key(IrLaunchKey k)
{
    return k == IR_LAUNCH_WS || k == IR_LAUNCH_PERSISTENT || k == IR_LAUNCH_OVERLAP || k == IR_LAUNCH_PINGPONG;
}

/* A key the schedule pass may choose is shown also when given at its default: `ws = 0`
 * given and ws left to the pass compile differently, so the text (which the cache keys
 * hash) tells them apart, and the parser reads `ws = 0` back as given. */
bool ir_launch_shown(const IrFunc *f, IrLaunchKey k)
{
    return ir_launch_info[k].shown || ir_launch_get(f, k) != ir_launch_info[k].def ||
           (ir_launch_chosen_key(k) && ir_launch_given(f, k));
}

int ir_func_warps(const IrFunc *f)
{
    return f->warps > 0 ? f->warps : ir_launch_info[IR_LAUNCH_WARPS].def;
}

int ir_cluster_size(const IrFunc *f)
{
    return f->cluster > 1 ? f->cluster : 1;
}

int ir_consumer_groups(const IrFunc *f)
{
    return f->kind == IR_FUNC_KERNEL && f->pingpong && f->ws && f->persistent && f->warps == 4 && f->grid ? 2 : 1;
}

IrValue ir_block_add_arg(IrBlock *blk, const IrType *t, const char *name)
{
    IrFunc *f = blk->func;
    Arena *a = f->module->ctx->arena;
    IrValue v = ir_value_new(f, t, name);
    IrValue *na = arena_alloc(a, (blk->nargs + 1) * sizeof *na);
    if (blk->nargs) memcpy(na, blk->args, blk->nargs * sizeof *na);
    na[blk->nargs] = v;
    f->values[v].block = blk;
    f->values[v].index = blk->nargs;
    blk->args = na;
    blk->nargs++;
    return v;
}

/* ---- builder ------------------------------------------------------------------------ */
void ir_builder_at_end(IrBuilder *b, IrBlock *blk)
{
    b->func = blk->func;
    b->block = blk;
    b->before = NULL;
}

void ir_builder_before(IrBuilder *b, IrOp *op)
{
    b->func = op->parent->func;
    b->block = op->parent;
    b->before = op;
}

static void link_at_end(IrBlock *blk, IrOp *op)
{
    op->parent = blk;
    op->prev = blk->last;
    op->next = NULL;
    if (blk->last) blk->last->next = op;
    else blk->first = op;
    blk->last = op;
}

void ir_op_insert_before(IrOp *op, IrOp *before)
{
    IrBlock *blk = before->parent;
    op->parent = blk;
    op->next = before;
    op->prev = before->prev;
    if (before->prev) before->prev->next = op;
    else blk->first = op;
    before->prev = op;
}

void ir_op_remove(IrOp *op)
{
    IrBlock *blk = op->parent;
    if (!blk) return;
    if (op->prev) op->prev->next = op->next;
    else blk->first = op->next;
    if (op->next) op->next->prev = op->prev;
    else blk->last = op->prev;
    op->prev = op->next = NULL;
    op->parent = NULL;
}

IrOp *ir_build(IrBuilder *b, IrOpcode code, const IrValue *operands, uint32_t noperands,
               const IrType *const *result_types, uint32_t nresults, uint32_t nregions)
{
    IrFunc *f = b->func;
    Arena *a = f->module->ctx->arena;
    IrOp *op = arena_alloc(a, sizeof *op);
    op->code = code;
    op->loc = b->loc;
    op->noperands = noperands;
    op->operands = arena_alloc(a, (noperands ? noperands : 1) * sizeof *op->operands);
    if (noperands) memcpy(op->operands, operands, noperands * sizeof *operands);
    op->nresults = nresults;
    op->results = arena_alloc(a, (nresults ? nresults : 1) * sizeof *op->results);
    for (uint32_t i = 0; i < nresults; i++) {
        IrValue v = ir_value_new(f, result_types[i], NULL);
        f->values[v].def = op;
        f->values[v].index = i;
        op->results[i] = v;
    }
    op->nregions = nregions;
    op->regions = arena_alloc(a, (nregions ? nregions : 1) * sizeof *op->regions);
    for (uint32_t i = 0; i < nregions; i++) block_init(&op->regions[i], f, op);
    if (b->before) ir_op_insert_before(op, b->before);
    else link_at_end(b->block, op);
    return op;
}

IrValue ir_build1(IrBuilder *b, IrOpcode code, const IrType *t, const IrValue *ops, uint32_t n)
{
    return ir_build(b, code, ops, n, &t, 1, 0)->results[0];
}

IrValue ir_build_binary(IrBuilder *b, IrOpcode code, IrValue x, IrValue y)
{
    IrValue ops[2] = {x, y};
    return ir_build1(b, code, ir_value_type(b->func, x), ops, 2);
}

IrValue ir_build_cmp(IrBuilder *b, IrCmp how, IrValue x, IrValue y)
{
    IrCtx *c = b->func->module->ctx;
    const IrType *xt = ir_value_type(b->func, x);
    const IrType *t = ir_type_like(c, xt, ir_type_scalar(c, IR_I1));
    if (xt->layout) t = ir_type_with_layout(c, t, xt->layout);
    IrValue ops[2] = {x, y};
    IrOp *op = ir_build(b, IR_OP_CMP, ops, 2, &t, 1, 0);
    op->attr.i = how;
    return op->results[0];
}

IrValue ir_const_int(IrBuilder *b, const IrType *t, int64_t v)
{
    IrOp *op = ir_build(b, IR_OP_CONST, NULL, 0, &t, 1, 0);
    op->attr.i = v;
    op->attr.f = (double)v;
    return op->results[0];
}

IrValue ir_const_float(IrBuilder *b, const IrType *t, double v)
{
    IrOp *op = ir_build(b, IR_OP_CONST, NULL, 0, &t, 1, 0);
    op->attr.f = v;
    op->attr.i = 0;
    return op->results[0];
}

/* ---- editing ------------------------------------------------------------------------ */
static void replace_in_block(IrBlock *blk, IrValue from, IrValue to)
{
    for (IrOp *op = blk->first; op; op = op->next) {
        for (uint32_t i = 0; i < op->noperands; i++)
            if (op->operands[i] == from) op->operands[i] = to;
        for (uint32_t r = 0; r < op->nregions; r++) replace_in_block(&op->regions[r], from, to);
    }
}

void ir_replace_all_uses(IrFunc *f, IrValue from, IrValue to) { replace_in_block(&f->body, from, to); }

void ir_forward_init(IrForward *fw, const IrFunc *f)
{
    fw->n = f->nvalues;
    fw->to = tl_malloc(((size_t)fw->n + 1) * sizeof *fw->to);
    if (!fw->to) tl_oom();
    for (uint32_t v = 0; v < fw->n; v++) fw->to[v] = v;
}

void ir_forward_free(IrForward *fw)
{
    tl_free(fw->to);
    fw->to = NULL;
}

/* `to` may itself have been replaced earlier: the chain is followed once, here. */
void ir_forward_set(IrForward *fw, IrValue from, IrValue to)
{
    if (from < fw->n) fw->to[from] = to < fw->n ? fw->to[to] : to;
}

void ir_forward_operands(const IrForward *fw, IrOp *op)
{
    for (uint32_t i = 0; i < op->noperands; i++)
        if (op->operands[i] < fw->n) op->operands[i] = fw->to[op->operands[i]];
}

IrOp *ir_clone_op(IrBuilder *b, const IrFunc *src, const IrOp *op, IrValue *map, uint32_t nmap)
{
    IrValue ops[32];
    const IrType *rt[4];
    for (uint32_t i = 0; i < op->noperands && i < 32; i++) {
        IrValue v = op->operands[i];
        ops[i] = v < nmap && map[v] != IR_NO_VALUE ? map[v] : v;
    }
    for (uint32_t i = 0; i < op->nresults && i < 4; i++) rt[i] = ir_value_type(src, op->results[i]);
    IrOp *n = ir_build(b, op->code, ops, op->noperands, rt, op->nresults, 0);
    n->attr = op->attr;
    n->loc = op->loc;
    for (uint32_t i = 0; i < op->nresults; i++)
        if (op->results[i] < nmap) map[op->results[i]] = n->results[i];
    return n;
}

void ir_walk(IrBlock *blk, void (*fn)(IrOp *op, void *ud), void *ud)
{
    for (IrOp *op = blk->first, *next; op; op = next) {
        next = op->next;
        fn(op, ud);
        for (uint32_t r = 0; r < op->nregions; r++) ir_walk(&op->regions[r], fn, ud);
    }
}

int ir_count_ops(const IrBlock *blk, IrOpcode code)
{
    int n = 0;
    for (const IrOp *op = blk->first; op; op = op->next) {
        n += op->code == code;
        for (uint32_t r = 0; r < op->nregions; r++) n += ir_count_ops(&op->regions[r], code);
    }
    return n;
}

static void count_uses(IrOp *op, void *ud)
{
    uint32_t *counts = ud;
    for (uint32_t i = 0; i < op->noperands; i++) counts[op->operands[i]]++;
}

uint32_t *ir_use_counts(const IrFunc *f)
{
    uint32_t *counts = tl_calloc(f->nvalues ? f->nvalues : 1, sizeof *counts);
    if (!counts) tl_oom();
    ir_walk((IrBlock *)&f->body, count_uses, counts);
    return counts;
}

bool ir_value_defined_in(const IrFunc *f, IrValue v, const IrBlock *blk)
{
    const IrOp *d = f->values[v].def;
    const IrBlock *b = d ? d->parent : f->values[v].block;
    while (b) {
        if (b == blk) return true;
        b = b->parent_op ? b->parent_op->parent : NULL;
    }
    return false;
}
