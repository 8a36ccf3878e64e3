/* The textual IR parser: reads what ir/printer.c writes (docs/IR.md) back into IR.
 *
 * Hand-written recursive descent over a small lexer. Every op gets the location of its
 * first token in the .tir file, so verifier and pass diagnostics point into it. The
 * parser checks syntax, names (no use before definition, no redefinition) and the
 * fixed operand and result counts of ops.def; everything about types is left to the
 * verifier. It stops at the first error: one precise diagnostic beats a cascade. */
#include "ir.h"
#include "layout.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef enum { TK_EOF, TK_VALUE, TK_SYMBOL, TK_IDENT, TK_NUM, TK_STR, TK_PUNCT, TK_CARET } TokKind;

typedef struct Tok {
    TokKind kind;
    const char *s;               /* the token's text; for %x and @x without the sigil */
    size_t n;
    Loc loc;
} Tok;

typedef struct NameSlot {
    const char *name;
    size_t n;
    IrValue v;
} NameSlot;

/* A kernel's `grid @name`, resolved once every function is read. */
typedef struct GridRef {
    IrFunc *kernel;
    Tok name;
} GridRef;

/* A module-level `layout #name = ...`. */
typedef struct LayoutAlias {
    Tok name;
    const IrLayout *l;
} LayoutAlias;

typedef VEC(Tok) TokVec;
typedef VEC(const IrType *) TypeVec;

typedef struct Parser {
    IrCtx *ctx;
    Arena *arena;
    const Source *src;
    const char *p, *end;
    uint32_t line, col;
    Tok tok;
    uint32_t prev_line;          /* the line of the token before tok */
    bool failed;
    IrModule *m;
    IrFunc *f;
    NameSlot *names;             /* the function's %names, open addressing */
    size_t names_cap, names_len;
    VEC(GridRef) grid_refs;
    VEC(LayoutAlias) layouts;
} Parser;

static bool error_at(Parser *ps, Loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static bool error_at(Parser *ps, Loc loc, const char *fmt, ...)
{
    if (ps->failed) return false;
    va_list ap;
    va_start(ap, fmt);
    diag_vadd(ir_ctx_diags(ps->ctx), DIAG_ERROR, loc, fmt, ap);
    va_end(ap);
    ps->failed = true;
    return false;
}

/* ---- lexer ------------------------------------------------------------------------- */
static bool is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.';
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static void advance(Parser *ps, size_t n)
{
    for (size_t i = 0; i < n && ps->p < ps->end; i++, ps->p++) {
        if (*ps->p == '\n') {
            ps->line++;
            ps->col = 1;
        } else {
            ps->col++;
        }
    }
}

static void skip_space(Parser *ps)
{
    while (ps->p < ps->end) {
        char c = *ps->p;
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') advance(ps, 1);
        else if (c == '/' && ps->p + 1 < ps->end && ps->p[1] == '/')
            while (ps->p < ps->end && *ps->p != '\n') advance(ps, 1);
        else break;
    }
}

static size_t name_len(const char *p, const char *end)
{
    size_t n = 0;
    while (p + n < end && is_name_char(p[n])) n++;
    return n;
}

/* A number: [-] digits [. digits] [e [+-] digits], or -inf. */
static size_t number_len(const char *p, const char *end)
{
    size_t n = *p == '-' ? 1 : 0;
    if (end - p >= 4 && !strncmp(p + n, "inf", 3)) return n + 3;
    while (p + n < end && (is_name_char(p[n]) || ((p[n] == '+' || p[n] == '-') &&
                                                  (p[n - 1] == 'e' || p[n - 1] == 'E'))))
        n++;
    return n;
}

/* "...": the body with escapes still in it (decoded by parse_string). */
static size_t string_len(const char *p, const char *end)
{
    size_t n = 1;
    while (p + n < end && p[n] != '"' && p[n] != '\n') n += p[n] == '\\' && p + n + 1 < end ? 2 : 1;
    return p + n < end && p[n] == '"' ? n + 1 : 0;
}

static void next(Parser *ps)
{
    ps->prev_line = ps->tok.loc.line;
    skip_space(ps);
    Tok t = {.kind = TK_EOF, .s = ps->p, .n = 0, .loc = {ps->src, ps->line, ps->col}};
    size_t adv = 0;
    if (ps->p >= ps->end) {
        ps->tok = t;
        return;
    }
    char c = *ps->p;
    if (c == '%' || c == '@') {
        t.kind = c == '%' ? TK_VALUE : TK_SYMBOL;
        t.s = ps->p + 1;
        t.n = name_len(t.s, ps->end);
        adv = t.n + 1;
    } else if (is_digit(c) || (c == '-' && ps->p + 1 < ps->end && (is_digit(ps->p[1]) || ps->p[1] == 'i'))) {
        t.kind = TK_NUM;
        adv = t.n = number_len(ps->p, ps->end);
    } else if (is_name_char(c)) {
        t.kind = TK_IDENT;
        adv = t.n = name_len(ps->p, ps->end);
    } else if (c == '"') {
        t.kind = TK_STR;
        adv = t.n = string_len(ps->p, ps->end);
        if (!adv) error_at(ps, t.loc, "unterminated string");
    } else {
        t.kind = c == '^' ? TK_CARET : TK_PUNCT;
        adv = t.n = 1;
    }
    ps->tok = t;
    advance(ps, adv ? adv : 1);
}

static bool tok_is(const Parser *ps, TokKind k, const char *text)
{
    return ps->tok.kind == k && strlen(text) == ps->tok.n && !memcmp(ps->tok.s, text, ps->tok.n);
}

static bool accept(Parser *ps, TokKind k, const char *text)
{
    if (!tok_is(ps, k, text)) return false;
    next(ps);
    return true;
}

static const char *tok_desc(const Tok *t, char *buf, size_t n)
{
    if (t->kind == TK_EOF) return "end of file";
    snprintf(buf, n, "'%s%.*s'", t->kind == TK_VALUE ? "%" : t->kind == TK_SYMBOL ? "@" : "",
             (int)(t->n > 40 ? 40 : t->n), t->s);
    return buf;
}

static bool expect(Parser *ps, TokKind k, const char *text)
{
    if (accept(ps, k, text)) return true;
    char buf[64];
    return error_at(ps, ps->tok.loc, "expected '%s', got %s", text, tok_desc(&ps->tok, buf, sizeof buf));
}

/* ---- names ------------------------------------------------------------------------- */
static size_t hash_name(const char *s, size_t n)
{
    size_t h = 5381;
    for (size_t i = 0; i < n; i++) h = h * 33 + (unsigned char)s[i];
    return h;
}

static NameSlot *name_slot(Parser *ps, const char *s, size_t n)
{
    size_t mask = ps->names_cap - 1;
    for (size_t i = hash_name(s, n) & mask;; i = (i + 1) & mask) {
        NameSlot *sl = &ps->names[i];
        if (!sl->name || (sl->n == n && !memcmp(sl->name, s, n))) return sl;
    }
}

static void names_grow(Parser *ps)
{
    NameSlot *old = ps->names;
    size_t ocap = ps->names_cap;
    ps->names_cap = ocap ? ocap * 2 : 64;
    ps->names = arena_alloc(ps->arena, ps->names_cap * sizeof *ps->names);
    for (size_t i = 0; i < ocap; i++)
        if (old[i].name) *name_slot(ps, old[i].name, old[i].n) = old[i];
}

/* Binds %name (the token) to v; a name that starts with a digit is a printer's number
 * and gives no name hint. */
static bool define(Parser *ps, const Tok *t, IrValue v)
{
    if (2 * (ps->names_len + 1) > ps->names_cap) names_grow(ps);
    NameSlot *sl = name_slot(ps, t->s, t->n);
    if (sl->name) return error_at(ps, t->loc, "redefinition of value '%%%.*s'", (int)t->n, t->s);
    *sl = (NameSlot){t->s, t->n, v};
    ps->names_len++;
    ps->f->values[v].name = is_digit(t->s[0]) ? NULL : arena_strndup(ps->arena, t->s, t->n);
    return true;
}

static bool expect_value_name(Parser *ps, Tok *out)
{
    if (ps->tok.kind != TK_VALUE || ps->tok.n == 0) {
        char buf[64];
        return error_at(ps, ps->tok.loc, "expected a value name like %%x, got %s",
                        tok_desc(&ps->tok, buf, sizeof buf));
    }
    *out = ps->tok;
    next(ps);
    return true;
}

static bool parse_use(Parser *ps, IrValue *out)
{
    Tok t = {0};
    if (!expect_value_name(ps, &t)) return false;
    NameSlot *sl = ps->names_cap ? name_slot(ps, t.s, t.n) : NULL;
    if (!sl || !sl->name) return error_at(ps, t.loc, "use of undefined value '%%%.*s'", (int)t.n, t.s);
    *out = sl->v;
    return true;
}

/* ---- types and literals ------------------------------------------------------------- */
static bool parse_int_text(const Tok *t, int64_t *out)
{
    char buf[64];
    if (t->kind != TK_NUM || t->n >= sizeof buf) return false;
    memcpy(buf, t->s, t->n);
    buf[t->n] = 0;
    char *e;
    errno = 0;
    if (buf[0] == '-') *out = strtoll(buf, &e, 10);
    else *out = (int64_t)strtoull(buf, &e, 10);
    return !errno && *e == 0 && e != buf;
}

static bool parse_int(Parser *ps, int64_t *out)
{
    if (parse_int_text(&ps->tok, out)) {
        next(ps);
        return true;
    }
    char buf[64];
    return error_at(ps, ps->tok.loc, "expected an integer, got %s", tok_desc(&ps->tok, buf, sizeof buf));
}

/* shape := '[' int (',' int)* ']' */
static bool parse_shape(Parser *ps, int *rank, int32_t *shape)
{
    do {
        Loc loc = ps->tok.loc;
        int64_t d = 0;
        if (!parse_int(ps, &d)) return false;
        if (*rank == IR_MAX_RANK) return error_at(ps, loc, "tile types have at most %d dimensions", IR_MAX_RANK);
        if (d <= 0 || d > IR_MAX_TILE_ELEMS)
            return error_at(ps, loc, "tile dimension %" PRId64 " is out of range", d);
        shape[(*rank)++] = (int32_t)d;
    } while (accept(ps, TK_PUNCT, ","));
    return expect(ps, TK_PUNCT, "]");
}

/* ---- layouts ------------------------------------------------------------------------- */
/* The fields a layout kind takes (layout.h): name, where it goes, a list or one int. */
typedef struct LayoutField {
    const char *name;
    size_t offset;
    bool list;
    unsigned kinds;              /* bit per IrLayoutKind */
} LayoutField;

#define LK(k) (1u << IR_LAYOUT_##k)
static const LayoutField layout_fields[] = {
    {"spt", offsetof(IrLayout, spt), true, LK(BLOCKED)},
    {"tpw", offsetof(IrLayout, tpw), true, LK(BLOCKED)},
    {"wpc", offsetof(IrLayout, wpc), true, LK(BLOCKED) | LK(MMA)},
    {"order", offsetof(IrLayout, order), true, LK(BLOCKED) | LK(SHARED)},
    {"instr", offsetof(IrLayout, instr), true, LK(MMA)},
    {"dim", offsetof(IrLayout, dim), false, LK(SLICE)},
    {"version", offsetof(IrLayout, version), false, LK(MMA)},
    {"op", offsetof(IrLayout, op), false, LK(DOT_OPERAND)},
    {"kwidth", offsetof(IrLayout, kwidth), false, LK(DOT_OPERAND)},
    {"vec", offsetof(IrLayout, vec), false, LK(SHARED)},
    {"per_phase", offsetof(IrLayout, per_phase), false, LK(SHARED)},
    {"max_phase", offsetof(IrLayout, max_phase), false, LK(SHARED)},
    {"pad", offsetof(IrLayout, pad), false, LK(SHARED)},
    {"swizzle", offsetof(IrLayout, swizzle_bytes), false, LK(SHARED)},
};
#undef LK

static bool parse_layout_ref(Parser *ps, const IrLayout **out);

/* '[' int (',' int)* ']' into at most 3 int32s; *n gets the count. */
static bool parse_int_list(Parser *ps, int32_t *v, int *n)
{
    *n = 0;
    if (!expect(ps, TK_PUNCT, "[")) return false;
    do {
        Loc loc = ps->tok.loc;
        int64_t x = 0;
        if (!parse_int(ps, &x)) return false;
        if (*n == IR_MAX_RANK) return error_at(ps, loc, "a layout list has at most %d entries", IR_MAX_RANK);
        if (x < INT32_MIN || x > INT32_MAX) return error_at(ps, loc, "layout value %" PRId64 " is out of range", x);
        v[(*n)++] = (int32_t)x;
    } while (accept(ps, TK_PUNCT, ","));
    return expect(ps, TK_PUNCT, "]");
}

static bool parse_layout_field(Parser *ps, IrLayout *l, int *list_len)
{
    Tok name = ps->tok;
    const LayoutField *fd = NULL;
    for (size_t i = 0; name.kind == TK_IDENT && i < sizeof layout_fields / sizeof *layout_fields; i++)
        if (strlen(layout_fields[i].name) == name.n && !memcmp(layout_fields[i].name, name.s, name.n) &&
            (layout_fields[i].kinds >> l->kind & 1))
            fd = &layout_fields[i];
    bool parent = tok_is(ps, TK_IDENT, "parent") && (l->kind == IR_LAYOUT_SLICE || l->kind == IR_LAYOUT_DOT_OPERAND);
    if (!fd && !parent)
        return error_at(ps, name.loc, "'%.*s' is not a field of a %s layout", (int)name.n, name.s,
                        ir_layout_kind_name(l->kind));
    next(ps);
    if (!expect(ps, TK_PUNCT, "=")) return false;
    if (parent) return parse_layout_ref(ps, &l->parent);
    int32_t *dst = (int32_t *)((char *)l + fd->offset);
    if (!fd->list) {
        int64_t x = 0;
        if (!parse_int(ps, &x)) return false;
        *dst = (int32_t)x;
        return true;
    }
    int n = 0;
    if (!parse_int_list(ps, dst, &n)) return false;
    if (strcmp(fd->name, "instr")) *list_len = n;
    return true;
}

/* body := kind '<' field (',' field)* '>' */
static bool parse_layout_body(Parser *ps, const IrLayout **out)
{
    IrLayout l;
    memset(&l, 0, sizeof l);
    l.kind = IR_NUM_LAYOUT_KINDS;
    for (int k = 0; k < IR_NUM_LAYOUT_KINDS; k++)
        if (tok_is(ps, TK_IDENT, ir_layout_kind_name((IrLayoutKind)k))) l.kind = (IrLayoutKind)k;
    if (l.kind == IR_NUM_LAYOUT_KINDS) {
        char buf[64];
        return error_at(ps, ps->tok.loc, "expected a layout kind (blocked, slice, mma, dot_operand, shared), got %s",
                        tok_desc(&ps->tok, buf, sizeof buf));
    }
    next(ps);
    int list_len = 0;
    if (!expect(ps, TK_PUNCT, "<")) return false;
    do {
        if (!parse_layout_field(ps, &l, &list_len)) return false;
    } while (accept(ps, TK_PUNCT, ","));
    if (!expect(ps, TK_PUNCT, ">")) return false;
    l.rank = l.parent ? l.parent->rank - (l.kind == IR_LAYOUT_SLICE) : list_len;
    *out = ir_layout_intern(ps->ctx, &l);
    return true;
}

/* ref := '#' name | '#' body (a body when a '<' follows the kind) */
static bool parse_layout_ref(Parser *ps, const IrLayout **out)
{
    if (!expect(ps, TK_PUNCT, "#")) return false;
    Tok name = ps->tok;
    if (name.kind != TK_IDENT) return error_at(ps, name.loc, "expected a layout name after '#'");
    const char *after = name.s + name.n;
    if (after < ps->end && *after == '<') return parse_layout_body(ps, out);
    for (size_t i = 0; i < ps->layouts.len; i++) {
        const Tok *t = &ps->layouts.data[i].name;
        if (t->n == name.n && !memcmp(t->s, name.s, name.n)) {
            *out = ps->layouts.data[i].l;
            next(ps);
            return true;
        }
    }
    return error_at(ps, name.loc, "no layout named '#%.*s'", (int)name.n, name.s);
}

/* 'layout' '#' name '=' body, at module level */
static bool parse_layout_alias(Parser *ps)
{
    if (!expect(ps, TK_IDENT, "layout") || !expect(ps, TK_PUNCT, "#")) return false;
    LayoutAlias a = {ps->tok, NULL};
    if (a.name.kind != TK_IDENT) return error_at(ps, a.name.loc, "expected a layout name after '#'");
    for (size_t i = 0; i < ps->layouts.len; i++)
        if (ps->layouts.data[i].name.n == a.name.n && !memcmp(ps->layouts.data[i].name.s, a.name.s, a.name.n))
            return error_at(ps, a.name.loc, "redefinition of layout '#%.*s'", (int)a.name.n, a.name.s);
    next(ps);
    if (!expect(ps, TK_PUNCT, "=") || !parse_layout_body(ps, &a.l)) return false;
    vec_push(&ps->layouts, a);
    return true;
}

/* type := ['*'] elem [shape] [layout-ref] */
static bool parse_type(Parser *ps, const IrType **out)
{
    bool ptr = accept(ps, TK_PUNCT, "*");
    IrElem e;
    if (ps->tok.kind != TK_IDENT || !ir_elem_from_name(ps->tok.s, ps->tok.n, &e)) {
        char buf[64];
        return error_at(ps, ps->tok.loc, "expected a type like f32, *bf16 or f32[64, 64], got %s",
                        tok_desc(&ps->tok, buf, sizeof buf));
    }
    next(ps);
    const IrType *t = ptr ? ir_type_ptr(ps->ctx, e) : ir_type_scalar(ps->ctx, e);
    int rank = 0;
    int32_t shape[IR_MAX_RANK] = {0};
    if (accept(ps, TK_PUNCT, "[")) {
        if (!parse_shape(ps, &rank, shape)) return false;
        t = ir_type_tile(ps->ctx, t, rank, shape);
        const IrLayout *l = NULL;
        if (tok_is(ps, TK_PUNCT, "#") && !parse_layout_ref(ps, &l)) return false;
        if (l) t = ir_type_with_layout(ps->ctx, t, l);
    }
    *out = t;
    return true;
}

static bool parse_type_list(Parser *ps, const IrType ***types, uint32_t *n)
{
    VEC(const IrType *) v = {0};
    do {
        const IrType *t = NULL;
        if (!parse_type(ps, &t)) break;
        vec_push(&v, t);
    } while (accept(ps, TK_PUNCT, ","));
    *types = arena_alloc(ps->arena, (v.len ? v.len : 1) * sizeof **types);
    if (v.len) memcpy(*types, v.data, v.len * sizeof **types);
    *n = (uint32_t)v.len;
    vec_free(&v);
    return !ps->failed;
}

static int hex_digit(char c)
{
    if (is_digit(c)) return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* "..." with \" \\ \n \t \xHH escapes, into the arena. */
static bool parse_string(Parser *ps, const char **out)
{
    if (ps->tok.kind != TK_STR) {
        char buf[64];
        return error_at(ps, ps->tok.loc, "expected a string, got %s", tok_desc(&ps->tok, buf, sizeof buf));
    }
    const char *s = ps->tok.s + 1, *e = ps->tok.s + ps->tok.n - 1;
    char *d = arena_alloc(ps->arena, ps->tok.n), *w = d;
    while (s < e) {
        if (*s != '\\') {
            *w++ = *s++;
            continue;
        }
        char c = s[1];
        if (c == 'x' && e - s >= 4 && hex_digit(s[2]) >= 0 && hex_digit(s[3]) >= 0) {
            *w++ = (char)(hex_digit(s[2]) * 16 + hex_digit(s[3]));
            s += 4;
        } else if (c == 'n' || c == 't' || c == '"' || c == '\\') {
            *w++ = c == 'n' ? '\n' : c == 't' ? '\t' : c;
            s += 2;
        } else {
            return error_at(ps, ps->tok.loc, "unknown escape '\\%c' in string", c);
        }
    }
    *out = d;
    next(ps);
    return true;
}

/* ---- ops ----------------------------------------------------------------------------- */
/* What one op line holds before the op is built. */
typedef struct OpText {
    IrOpcode code;
    Loc loc;
    Tok results[16];
    uint32_t nresults;
    VEC(IrValue) operands;
    const IrType **types;
    uint32_t ntypes;
    IrAttr attr;
    Tok const_tok;               /* a const's value, read once its type is known */
} OpText;

static bool parse_block(Parser *ps, IrBlock *blk);

/* The operand list starts on the op's line: `print "m"` or `return` followed by
 * `%x = ...` on the next line has no operands. */
static bool parse_operands(Parser *ps, OpText *o)
{
    if (ps->tok.kind != TK_VALUE || ps->tok.loc.line != ps->prev_line) return true;
    do {
        IrValue v = IR_NO_VALUE;
        if (!parse_use(ps, &v)) return false;
        vec_push(&o->operands, v);
    } while (accept(ps, TK_PUNCT, ","));
    return true;
}

static bool parse_word_attr(Parser *ps, OpText *o, const char *const *words, int n, const char *what)
{
    for (int i = 0; i < n; i++) {
        if (accept(ps, TK_IDENT, words[i])) {
            o->attr.i = i;
            return true;
        }
    }
    char buf[64];
    return error_at(ps, ps->tok.loc, "expected a %s, got %s", what, tok_desc(&ps->tok, buf, sizeof buf));
}

/* The attribute right after the op name (see print_attr in printer.c). */
static bool parse_attr(Parser *ps, OpText *o)
{
    switch (o->code) {
    case IR_OP_CONST:
        o->const_tok = ps->tok;
        if (ps->tok.kind != TK_NUM && !tok_is(ps, TK_IDENT, "inf") && !tok_is(ps, TK_IDENT, "nan"))
            return error_at(ps, ps->tok.loc, "expected a constant value");
        next(ps);
        return true;
    case IR_OP_CMP: return parse_word_attr(ps, o, ir_cmp_names, 6, "comparison predicate");
    case IR_OP_DOT: return parse_word_attr(ps, o, ir_precision_names, 3, "dot precision");
    case IR_OP_PRINT: return parse_string(ps, &o->attr.s);
    case IR_OP_CHECK_BOUNDS: {        /* the name of the op it guards */
        IrOpcode g;
        if (ps->tok.kind != TK_IDENT || !ir_op_from_name(ps->tok.s, ps->tok.n, &g))
            return error_at(ps, ps->tok.loc, "expected the op that check_bounds guards (load, store, ...)");
        o->attr.i = g;
        next(ps);
        return true;
    }
    case IR_OP_ATOMIC_ADD: case IR_OP_ATOMIC_MAX: case IR_OP_ATOMIC_MIN: case IR_OP_ATOMIC_XCHG:
    case IR_OP_ATOMIC_AND: case IR_OP_ATOMIC_OR: case IR_OP_ATOMIC_XOR: case IR_OP_ATOMIC_CAS:
        /* the memory order; without one, acq_rel (the language's default) */
        if (ps->tok.kind != TK_IDENT) return true;
        return parse_word_attr(ps, o, ir_sem_names, 4, "memory order (relaxed, acquire, release, acq_rel)");
    case IR_OP_CUMSUM: case IR_OP_CUMPROD: case IR_OP_SCAN:      /* the axis, then `reverse` or not */
        if (!parse_int(ps, &o->attr.i)) return false;
        if (accept(ps, TK_IDENT, "reverse")) o->attr.i |= IR_SCAN_REVERSE;
        return true;
    case IR_OP_BLOCK_LOAD: case IR_OP_TMA_COPY:      /* [multicast] [upper] */
        if (accept(ps, TK_IDENT, "multicast")) o->attr.i = IR_BLOCK_MULTICAST;
        if (o->code == IR_OP_BLOCK_LOAD && accept(ps, TK_IDENT, "upper")) o->attr.i |= IR_BLOCK_UPPER;
        return true;
    case IR_OP_TMA_STORE:             /* [seq k] */
        if (accept(ps, TK_IDENT, "seq")) {
            if (!parse_int(ps, &o->attr.i)) return false;
            if (o->attr.i < 0 || o->attr.i > 0xffff) return error_at(ps, o->loc, "a store's place in its sequence out of range");
            o->attr.i++;
        }
        return true;
    case IR_OP_BLOCK_STORE:           /* [upper] */
        if (accept(ps, TK_IDENT, "upper")) o->attr.i = IR_BLOCK_UPPER;
        return true;
    case IR_OP_EXP2:                  /* [ftz] */
        if (accept(ps, TK_IDENT, "ftz")) o->attr.i = 1;
        return true;
    case IR_OP_FOR:                   /* [pingpong] */
        if (accept(ps, TK_IDENT, "pingpong")) o->attr.i = 1;
        return true;
    case IR_OP_MBARRIER_ARRIVE:       /* [cluster] */
        if (accept(ps, TK_IDENT, "cluster")) o->attr.i = 1;
        return true;
    case IR_OP_TURN:                  /* wait, pass, start or end */
        for (int i = 0; i < 4; i++)
            if (accept(ps, TK_IDENT, ir_turn_names[i])) {
                o->attr.i = i;
                return true;
            }
        return error_at(ps, o->loc, "turn takes wait, pass, start or end");
    case IR_OP_PRODUCER: {            /* the producer's and the consumers' registers */
        int64_t p = 0, c = 0;
        if (!parse_int(ps, &p) || !parse_int(ps, &c)) return false;
        if (p < 0 || p > 0xffff || c < 0 || c > 0xffff) return error_at(ps, o->loc, "register counts out of range");
        o->attr.i = p | c << 16;
        return true;
    }
    case IR_OP_PROGRAM_ID: case IR_OP_NUM_PROGRAMS: case IR_OP_ARANGE: case IR_OP_EXPAND_DIMS: case IR_OP_EXTRACT:
    case IR_OP_SUM: case IR_OP_MAX: case IR_OP_MIN: case IR_OP_ARGMAX: case IR_OP_ARGMIN:
    case IR_OP_XOR_SUM: case IR_OP_REDUCE: case IR_OP_MULTIPLE_OF: case IR_OP_MAX_CONTIGUOUS:
    case IR_OP_LOCAL_ALLOC: case IR_OP_ASYNC_WAIT: case IR_OP_LOCAL_LOAD: case IR_OP_LOCAL_STORE: case IR_OP_MBARRIER_INIT: case IR_OP_TMA_WAIT:
    case IR_OP_DOT_WAIT:
        return parse_int(ps, &o->attr.i);
    default:
        return true;
    }
}

/* A const's value: a float for float types, an integer otherwise. */
static bool finish_const(Parser *ps, OpText *o)
{
    if (o->ntypes != 1) return true;
    const Tok *t = &o->const_tok;
    char buf[64];
    snprintf(buf, sizeof buf, "%.*s", (int)(t->n < 63 ? t->n : 63), t->s);
    if (ir_elem_is_float(o->types[0]->elem)) {
        char *e;
        o->attr.f = strtod(buf, &e);
        if (*e || e == buf) return error_at(ps, t->loc, "invalid float constant '%s'", buf);
        return true;
    }
    if (!parse_int_text(t, &o->attr.i))
        return error_at(ps, t->loc, "invalid integer constant '%s' for an integer type", buf);
    o->attr.f = (double)o->attr.i;
    return true;
}

static bool parse_result_types(Parser *ps, OpText *o)
{
    if (!accept(ps, TK_PUNCT, ":")) return true;
    return parse_type_list(ps, &o->types, &o->ntypes);
}

/* ^(%a: T, %b: U): the arguments of a region's block. */
static bool parse_block_args(Parser *ps, IrBlock *blk)
{
    if (!accept(ps, TK_CARET, "^")) return true;
    if (!expect(ps, TK_PUNCT, "(")) return false;
    if (!tok_is(ps, TK_PUNCT, ")")) {
        do {
            Tok name = {0};
            const IrType *t = NULL;
            if (!expect_value_name(ps, &name) || !expect(ps, TK_PUNCT, ":") || !parse_type(ps, &t))
                return false;
            if (!define(ps, &name, ir_block_add_arg(blk, t, NULL))) return false;
        } while (accept(ps, TK_PUNCT, ","));
    }
    return expect(ps, TK_PUNCT, ")") && expect(ps, TK_PUNCT, ":");
}

/* region := '{' [block-args] op* '}' */
static bool parse_region(Parser *ps, IrBlock *blk)
{
    return expect(ps, TK_PUNCT, "{") && parse_block_args(ps, blk) && parse_block(ps, blk) &&
           expect(ps, TK_PUNCT, "}");
}

/* The operands of a control-flow op up to its regions:
 *   for %lo, %hi, %step [iter(%a, ...)]     if %c     while %a, ... */
static bool parse_cf_operands(Parser *ps, OpText *o)
{
    if (!parse_operands(ps, o)) return false;
    if (o->code == IR_OP_FOR && accept(ps, TK_IDENT, "iter"))
        return expect(ps, TK_PUNCT, "(") && parse_operands(ps, o) && expect(ps, TK_PUNCT, ")");
    return true;
}

static bool parse_regions(Parser *ps, IrOp *op)
{
    if (!parse_region(ps, &op->regions[0])) return false;
    if (op->code == IR_OP_IF && accept(ps, TK_IDENT, "else")) return parse_region(ps, &op->regions[1]);
    if (op->code == IR_OP_WHILE) return expect(ps, TK_IDENT, "do") && parse_region(ps, &op->regions[1]);
    return true;
}

/* The fixed counts of ops.def; variable ones are the verifier's. */
static bool check_counts(Parser *ps, const OpText *o)
{
    const IrOpInfo *info = &ir_op_info[o->code];
    if (o->nresults != o->ntypes)
        return error_at(ps, o->loc, "'%s' has %u result name(s) but %u result type(s)", info->text,
                        o->nresults, o->ntypes);
    if (info->nops >= 0 && (size_t)info->nops != o->operands.len)
        return error_at(ps, o->loc, "'%s' takes %d operand(s), got %zu", info->text, info->nops,
                        o->operands.len);
    if (info->nres >= 0 && (uint32_t)info->nres != o->ntypes)
        return error_at(ps, o->loc, "'%s' has %d result(s), got %u", info->text, info->nres, o->ntypes);
    return true;
}

/* Everything after the op name, up to the end of its line (or of its regions). */
static bool parse_op_body(Parser *ps, OpText *o)
{
    if (!parse_attr(ps, o)) return false;
    if (ir_op_info[o->code].nregions) return parse_cf_operands(ps, o) && parse_result_types(ps, o);
    if (!parse_operands(ps, o)) return false;
    if (o->code == IR_OP_ASSERT && !parse_string(ps, &o->attr.s)) return false;
    if (!parse_result_types(ps, o)) return false;
    return o->code != IR_OP_CONST || finish_const(ps, o);
}

static bool build_op(Parser *ps, IrBlock *blk, OpText *o)
{
    IrBuilder b = {0};
    ir_builder_at_end(&b, blk);
    b.loc = o->loc;
    IrOp *op = ir_build(&b, o->code, o->operands.data, (uint32_t)o->operands.len, o->types, o->ntypes,
                        (uint32_t)ir_op_info[o->code].nregions);
    op->attr = o->attr;
    if (op->nregions && !parse_regions(ps, op)) return false;
    for (uint32_t i = 0; i < o->nresults; i++)
        if (!define(ps, &o->results[i], op->results[i])) return false;
    return true;
}

/* results := %name (',' %name)* '=' */
static bool parse_results(Parser *ps, OpText *o)
{
    if (ps->tok.kind != TK_VALUE) return true;
    do {
        if (o->nresults == sizeof o->results / sizeof *o->results)
            return error_at(ps, ps->tok.loc, "too many results");
        if (!expect_value_name(ps, &o->results[o->nresults++])) return false;
    } while (accept(ps, TK_PUNCT, ","));
    return expect(ps, TK_PUNCT, "=");
}

/* op := [results '='] opname attr? operands? [string] [':' types] regions? */
static bool parse_op(Parser *ps, IrBlock *blk)
{
    OpText o;
    memset(&o, 0, sizeof o);
    o.loc = ps->tok.loc;
    bool ok = parse_results(ps, &o);
    if (ok && (ps->tok.kind != TK_IDENT || !ir_op_from_name(ps->tok.s, ps->tok.n, &o.code))) {
        char buf[64];
        ok = error_at(ps, ps->tok.loc, "unknown op %s", tok_desc(&ps->tok, buf, sizeof buf));
    }
    if (ok) next(ps);
    ok = ok && parse_op_body(ps, &o) && check_counts(ps, &o) && build_op(ps, blk, &o);
    vec_free(&o.operands);
    return ok;
}

static bool parse_block(Parser *ps, IrBlock *blk)
{
    while (!ps->failed && !tok_is(ps, TK_PUNCT, "}") && ps->tok.kind != TK_EOF)
        if (!parse_op(ps, blk)) return false;
    return !ps->failed;
}

/* ---- functions ---------------------------------------------------------------------- */
/* params := '(' [%name ':' type (',' %name ':' type)*] ')' */
static bool parse_params(Parser *ps, TokVec *names, TypeVec *types)
{
    if (!expect(ps, TK_PUNCT, "(")) return false;
    if (accept(ps, TK_PUNCT, ")")) return true;
    do {
        Tok name = {0};
        const IrType *t = NULL;
        if (!expect_value_name(ps, &name) || !expect(ps, TK_PUNCT, ":") || !parse_type(ps, &t)) return false;
        vec_push(names, name);
        vec_push(types, t);
    } while (accept(ps, TK_PUNCT, ","));
    return expect(ps, TK_PUNCT, ")");
}

static bool parse_symbol(Parser *ps, Tok *out)
{
    if (ps->tok.kind != TK_SYMBOL || ps->tok.n == 0) {
        char buf[64];
        return error_at(ps, ps->tok.loc, "expected a function name like @k, got %s",
                        tok_desc(&ps->tok, buf, sizeof buf));
    }
    *out = ps->tok;
    next(ps);
    return true;
}

static IrFunc *create_func(Parser *ps, IrFuncKind kind, const Tok *name, Loc loc, TokVec *pn,
                           TypeVec *pt)
{
    const char **names = arena_alloc(ps->arena, (pn->len ? pn->len : 1) * sizeof *names);
    for (size_t i = 0; i < pn->len; i++) names[i] = arena_strndup(ps->arena, pn->data[i].s, pn->data[i].n);
    char *fname = arena_strndup(ps->arena, name->s, name->n);
    IrFunc *f = ir_func_create(ps->m, kind, fname, loc, pt->data, names, (uint32_t)pt->len);
    ps->f = f;
    ps->names = NULL;
    ps->names_cap = ps->names_len = 0;
    for (size_t i = 0; i < pn->len && !ps->failed; i++) define(ps, &pn->data[i], f->body.args[i]);
    return f;
}

/* consts {NAME = int, ...} */
static bool parse_consts(Parser *ps, IrFunc *f)
{
    VEC(IrConstParam) v = {0};
    bool ok = expect(ps, TK_PUNCT, "{");
    while (ok && ps->tok.kind == TK_IDENT) {
        IrConstParam cp = {arena_strndup(ps->arena, ps->tok.s, ps->tok.n), 0};
        next(ps);
        ok = expect(ps, TK_PUNCT, "=") && parse_int(ps, &cp.value);
        vec_push(&v, cp);
        if (!accept(ps, TK_PUNCT, ",")) break;
    }
    ok = ok && expect(ps, TK_PUNCT, "}");
    f->consts = arena_alloc(ps->arena, (v.len ? v.len : 1) * sizeof *f->consts);
    if (v.len) memcpy(f->consts, v.data, v.len * sizeof *f->consts);
    f->nconsts = (uint32_t)v.len;
    vec_free(&v);
    return ok;
}

static int launch_key_at(const Parser *ps)
{
    for (int k = 0; k < IR_NUM_LAUNCH_KEYS; k++)
        if (tok_is(ps, TK_IDENT, ir_launch_info[k].name)) return k;
    return -1;
}

/* One KEY = int of launch {...}: a key of launch.def, given once. Its range is the
 * verifier's rule; only a value that an int cannot hold is refused here. */
static bool parse_launch_key(Parser *ps, IrFunc *f, bool *seen)
{
    Loc loc = ps->tok.loc;
    int k = launch_key_at(ps);
    int64_t v;
    if (k < 0) return error_at(ps, loc, "expected a launch key (%s) in launch {...}", ir_launch_names);
    if (seen[k]) return error_at(ps, loc, "launch key %s is given twice", ir_launch_info[k].name);
    seen[k] = true;
    next(ps);
    if (!expect(ps, TK_PUNCT, "=") || !parse_int(ps, &v)) return false;
    if (v < INT32_MIN || v > INT32_MAX)
        return error_at(ps, loc, "launch key %s = %" PRId64 " does not fit in an i32", ir_launch_info[k].name, v);
    ir_launch_put(f, (IrLaunchKey)k, (int)v);
    f->launch_set |= 1u << k;
    return true;
}

/* launch {KEY = int, ...}: the keys of launch.def in any order, each at most once, the
 * rest their defaults (the printer writes warps and stages, then the others that
 * differ from their defaults, in the table's order) */
static bool parse_launch(Parser *ps, IrFunc *f)
{
    bool seen[IR_NUM_LAUNCH_KEYS] = {0};
    if (!expect(ps, TK_PUNCT, "{")) return false;
    if (accept(ps, TK_PUNCT, "}")) return true;
    do {
        if (!parse_launch_key(ps, f, seen)) return false;
    } while (accept(ps, TK_PUNCT, ","));
    return expect(ps, TK_PUNCT, "}");
}

/* ---- the resource plan (ir/plan.h): the printer's form, in its order ---------------- */
/* NAME = int, into *out (within [lo, hi]) */
static bool plan_field(Parser *ps, const char *name, int64_t lo, int64_t hi, int64_t *out)
{
    Loc loc = ps->tok.loc;
    if (!expect(ps, TK_IDENT, name) || !expect(ps, TK_PUNCT, "=") || !parse_int(ps, out)) return false;
    if (*out < lo || *out > hi) return error_at(ps, loc, "plan %s = %" PRId64 " is out of range", name, *out);
    return true;
}

static bool plan_u32(Parser *ps, const char *name, uint32_t *out)
{
    int64_t v;
    if (!plan_field(ps, name, 0, UINT32_MAX, &v)) return false;
    *out = (uint32_t)v;
    return true;
}

/* {kind = K, at = int, bytes = int, align = int} */
static bool plan_region(Parser *ps, IrSmemRegion *r)
{
    if (!expect(ps, TK_PUNCT, "{") || !expect(ps, TK_IDENT, "kind") || !expect(ps, TK_PUNCT, "=")) return false;
    int k = ps->tok.kind == TK_IDENT ? ir_smem_kind_of(ps->tok.s, ps->tok.n) : -1;
    if (k < 0) return error_at(ps, ps->tok.loc, "expected a region kind (scratch, buffer or barriers)");
    next(ps);
    r->kind = (IrSmemKind)k;
    return expect(ps, TK_PUNCT, ",") && plan_u32(ps, "at", &r->at) && expect(ps, TK_PUNCT, ",") &&
           plan_u32(ps, "bytes", &r->bytes) && expect(ps, TK_PUNCT, ",") && plan_u32(ps, "align", &r->align) &&
           expect(ps, TK_PUNCT, "}");
}

/* [[param, value], ...]: a recipe's dims or strides (at most 4) */
static bool plan_terms(Parser *ps, const char *name, int32_t *param, int64_t *value, uint32_t *rank)
{
    uint32_t n = 0;
    if (!expect(ps, TK_IDENT, name) || !expect(ps, TK_PUNCT, "=") || !expect(ps, TK_PUNCT, "[")) return false;
    do {
        int64_t p;
        if (n == 4) return error_at(ps, ps->tok.loc, "a tensor map has at most 4 dimensions");
        if (!expect(ps, TK_PUNCT, "[") || !parse_int(ps, &p) || !expect(ps, TK_PUNCT, ",") ||
            !parse_int(ps, &value[n]) || !expect(ps, TK_PUNCT, "]"))
            return false;
        if (p < -1 || p > INT32_MAX) return error_at(ps, ps->tok.loc, "a tensor map's parameter index is out of range");
        param[n++] = (int32_t)p;
    } while (accept(ps, TK_PUNCT, ","));
    if (*rank && n != *rank) return error_at(ps, ps->tok.loc, "a tensor map's strides and dims differ in rank");
    *rank = n;
    return expect(ps, TK_PUNCT, "]");
}

/* box = [b, ...]: a recipe's box, 1 to 256 a side (as many sides as its dims) */
static bool plan_box(Parser *ps, IrTmaRecipe *r, uint32_t *n)
{
    *n = 0;
    if (!expect(ps, TK_IDENT, "box") || !expect(ps, TK_PUNCT, "=") || !expect(ps, TK_PUNCT, "[")) return false;
    do {
        int64_t b;
        if (*n == 4) return error_at(ps, ps->tok.loc, "a tensor map has at most 4 dimensions");
        if (!parse_int(ps, &b)) return false;
        if (b < 1 || b > 256) return error_at(ps, ps->tok.loc, "a tensor map's box is 1 to 256 a side");
        r->box[(*n)++] = (uint16_t)b;
    } while (accept(ps, TK_PUNCT, ","));
    return expect(ps, TK_PUNCT, "]");
}

static bool plan_recipe(Parser *ps, IrTmaRecipe *r)
{
    uint32_t nbox;
    memset(r, 0, sizeof *r);
    if (!expect(ps, TK_PUNCT, "{") || !plan_u32(ps, "param", &r->ptr_param) || !expect(ps, TK_PUNCT, ",") ||
        !plan_u32(ps, "elem", &r->elem_bytes) || !expect(ps, TK_PUNCT, ",") || !plan_u32(ps, "swizzle", &r->swizzle) ||
        !expect(ps, TK_PUNCT, ",") || !plan_box(ps, r, &nbox) || !expect(ps, TK_PUNCT, ",") ||
        !plan_u32(ps, "index", &r->index_bits) || !expect(ps, TK_PUNCT, ","))
        return false;
    if (!plan_terms(ps, "dims", r->dim_param, r->dim_value, &r->rank) || !expect(ps, TK_PUNCT, ",") ||
        !plan_terms(ps, "strides", r->stride_param, r->stride_value, &r->rank))
        return false;
    if (nbox != r->rank) return error_at(ps, ps->tok.loc, "a tensor map's box and dims differ in rank");
    return expect(ps, TK_PUNCT, "}");
}

/* [[param, map], ...]: one tma op's pairs */
static bool plan_use(Parser *ps, IrTmaUse *u, uint32_t ntma)
{
    u->n = 0;
    if (!expect(ps, TK_PUNCT, "[")) return false;
    do {
        int64_t p, m;
        if (u->n == 4) return error_at(ps, ps->tok.loc, "a tma op's pointer is one of at most 4 parameters");
        if (!expect(ps, TK_PUNCT, "[") || !parse_int(ps, &p) || !expect(ps, TK_PUNCT, ",") || !parse_int(ps, &m) ||
            !expect(ps, TK_PUNCT, "]"))
            return false;
        if (p < 0 || p > UINT32_MAX || m < 0 || m >= ntma) return error_at(ps, ps->tok.loc, "a tma use names no map of the plan");
        u->param[u->n] = (uint32_t)p, u->map[u->n++] = (uint32_t)m;
    } while (accept(ps, TK_PUNCT, ","));
    return expect(ps, TK_PUNCT, "]");
}

/* NAME = [item, ...] (possibly empty), each item read by one of the three */
static bool plan_list(Parser *ps, const char *name, IrPlan *p, int which)
{
    VEC(IrSmemRegion) regions = {0};
    VEC(IrTmaUse) uses = {0};
    bool ok = expect(ps, TK_IDENT, name) && expect(ps, TK_PUNCT, "=") && expect(ps, TK_PUNCT, "[");
    if (ok && !accept(ps, TK_PUNCT, "]")) {
        do {
            IrSmemRegion r;
            IrTmaUse u;
            if (which == 0 && (ok = plan_region(ps, &r))) vec_push(&regions, r);
            else if (which == 1 && p->ntma == IR_PLAN_MAX_TMA) ok = error_at(ps, ps->tok.loc, "a plan has at most %d tensor maps", IR_PLAN_MAX_TMA);
            else if (which == 1 && (ok = plan_recipe(ps, &p->tma[p->ntma]))) p->ntma++;
            else if (which == 2 && (ok = plan_use(ps, &u, p->ntma))) vec_push(&uses, u);
        } while (ok && accept(ps, TK_PUNCT, ","));
        ok = ok && expect(ps, TK_PUNCT, "]");
    }
    p->nregions = which == 0 ? (uint32_t)regions.len : p->nregions;
    if (which == 0) p->regions = arena_alloc(ps->arena, (regions.len + 1) * sizeof *p->regions);
    if (which == 0 && regions.len) memcpy(p->regions, regions.data, regions.len * sizeof *p->regions);
    if (which == 2) p->nuses = (uint32_t)uses.len, p->uses = arena_alloc(ps->arena, (uses.len + 1) * sizeof *p->uses);
    if (which == 2 && uses.len) memcpy(p->uses, uses.data, uses.len * sizeof *p->uses);
    vec_free(&regions);
    vec_free(&uses);
    return ok;
}

/* chosen = [KEY, ...]: the launch keys passes/schedule.c chose (each given once) */
static bool plan_chosen(Parser *ps, IrFunc *f, IrPlan *p)
{
    if (!expect(ps, TK_IDENT, "chosen") || !expect(ps, TK_PUNCT, "=") || !expect(ps, TK_PUNCT, "[")) return false;
    do {
        Loc loc = ps->tok.loc;
        int k = launch_key_at(ps);
        if (k < 0 || !ir_launch_chosen_key((IrLaunchKey)k))
            return error_at(ps, loc, "expected a key the schedule chooses (ws, persistent, overlap, pingpong) in chosen = [...]");
        if (p->chosen >> k & 1) return error_at(ps, loc, "chosen key %s is given twice", ir_launch_info[k].name);
        p->chosen |= 1u << k;
        next(ps);
    } while (accept(ps, TK_PUNCT, ","));
    f->launch_chosen = p->chosen;
    return expect(ps, TK_PUNCT, "]");
}

static bool parse_plan(Parser *ps, IrFunc *f)
{
    IrPlan *p = arena_alloc(ps->arena, sizeof *p);
    int64_t pers;
    memset(p, 0, sizeof *p);
    f->plan = p;
    return expect(ps, TK_PUNCT, "{") && plan_u32(ps, "threads", &p->threads) && expect(ps, TK_PUNCT, ",") &&
           plan_u32(ps, "groups", &p->groups) && expect(ps, TK_PUNCT, ",") &&
           plan_u32(ps, "group_threads", &p->group_threads) && expect(ps, TK_PUNCT, ",") &&
           plan_u32(ps, "producer_threads", &p->producer_threads) && expect(ps, TK_PUNCT, ",") &&
           expect(ps, TK_IDENT, "regs") && expect(ps, TK_PUNCT, "=") && expect(ps, TK_PUNCT, "{") &&
           plan_u32(ps, "producer", &p->producer_regs) && expect(ps, TK_PUNCT, ",") &&
           plan_u32(ps, "consumers", &p->consumer_regs) && expect(ps, TK_PUNCT, "}") && expect(ps, TK_PUNCT, ",") &&
           expect(ps, TK_IDENT, "smem") && expect(ps, TK_PUNCT, "=") && expect(ps, TK_PUNCT, "{") &&
           plan_u32(ps, "bytes", &p->shared_bytes) && expect(ps, TK_PUNCT, ",") &&
           plan_u32(ps, "scratch", &p->scratch) && expect(ps, TK_PUNCT, ",") &&
           plan_u32(ps, "stride", &p->scratch_stride) && expect(ps, TK_PUNCT, ",") &&
           plan_u32(ps, "buffers_at", &p->buffers_at) && expect(ps, TK_PUNCT, ",") &&
           plan_u32(ps, "align", &p->buffer_align) && expect(ps, TK_PUNCT, "}") && expect(ps, TK_PUNCT, ",") &&
           plan_list(ps, "map", p, 0) && expect(ps, TK_PUNCT, ",") && plan_list(ps, "tma", p, 1) &&
           expect(ps, TK_PUNCT, ",") && plan_list(ps, "tma_uses", p, 2) && expect(ps, TK_PUNCT, ",") &&
           plan_field(ps, "persistent", 0, 1, &pers) && (p->persistent = pers, expect(ps, TK_PUNCT, ",")) &&
           plan_u32(ps, "cluster", &p->cluster) && expect(ps, TK_PUNCT, ",") &&
           plan_u32(ps, "min_ctas", &p->min_ctas) && expect(ps, TK_PUNCT, ",") &&
           expect(ps, TK_IDENT, "occupancy") && expect(ps, TK_PUNCT, "=") && expect(ps, TK_PUNCT, "{") &&
           plan_u32(ps, "ctas", &p->occupancy) && expect(ps, TK_PUNCT, ",") &&
           plan_u32(ps, "max_regs", &p->occupancy_max_regs) && expect(ps, TK_PUNCT, "}") &&
           (!accept(ps, TK_PUNCT, ",") || plan_chosen(ps, f, p)) && expect(ps, TK_PUNCT, "}");
}

static bool parse_kernel_attrs(Parser *ps, IrFunc *f)
{
    if (accept(ps, TK_IDENT, "consts") && !parse_consts(ps, f)) return false;
    if (accept(ps, TK_IDENT, "launch") && !parse_launch(ps, f)) return false;
    if (accept(ps, TK_IDENT, "plan") && !parse_plan(ps, f)) return false;
    if (accept(ps, TK_IDENT, "grid")) {
        GridRef r = {f, {0}};
        if (!parse_symbol(ps, &r.name)) return false;
        vec_push(&ps->grid_refs, r);
    }
    return true;
}

/* func := ('kernel' | 'grid') @name params [kernel-attrs] '{' op* '}' */
static bool parse_func(Parser *ps)
{
    Loc loc = ps->tok.loc;
    IrFuncKind kind = IR_FUNC_KERNEL;
    if (accept(ps, TK_IDENT, "grid")) kind = IR_FUNC_GRID;
    else if (!expect(ps, TK_IDENT, "kernel")) return false;
    Tok name = {0};
    TokVec pn = {0};
    TypeVec pt = {0};
    bool ok = parse_symbol(ps, &name) && parse_params(ps, &pn, &pt);
    if (ok && ir_module_find(ps->m, arena_strndup(ps->arena, name.s, name.n)))
        ok = error_at(ps, name.loc, "redefinition of function '@%.*s'", (int)name.n, name.s);
    IrFunc *f = ok ? create_func(ps, kind, &name, loc, &pn, &pt) : NULL;
    vec_free(&pn);
    vec_free(&pt);
    if (!ok || (kind == IR_FUNC_KERNEL && !parse_kernel_attrs(ps, f))) return false;
    return expect(ps, TK_PUNCT, "{") && parse_block(ps, &f->body) && expect(ps, TK_PUNCT, "}");
}

static bool resolve_grids(Parser *ps)
{
    for (size_t i = 0; i < ps->grid_refs.len; i++) {
        GridRef *r = &ps->grid_refs.data[i];
        IrFunc *g = ir_module_find(ps->m, arena_strndup(ps->arena, r->name.s, r->name.n));
        if (!g || g->kind != IR_FUNC_GRID)
            return error_at(ps, r->name.loc, "no grid function named '@%.*s'", (int)r->name.n, r->name.s);
        r->kernel->grid = g;
    }
    return true;
}

IrModule *ir_parse(IrCtx *c, const Source *src)
{
    Parser ps;
    memset(&ps, 0, sizeof ps);
    ps.ctx = c;
    ps.arena = ir_ctx_arena(c);
    ps.src = src;
    ps.p = src->text;
    ps.end = src->text + src->len;
    ps.line = ps.col = 1;
    ps.m = ir_module_create(c);
    next(&ps);
    while (!ps.failed && ps.tok.kind != TK_EOF) {
        if (tok_is(&ps, TK_IDENT, "layout")) parse_layout_alias(&ps);
        else parse_func(&ps);
    }
    if (!ps.failed) resolve_grids(&ps);
    vec_free(&ps.grid_refs);
    vec_free(&ps.layouts);
    return ps.failed ? NULL : ps.m;
}
