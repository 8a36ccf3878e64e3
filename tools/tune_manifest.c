/* The manifest of `tilec tune` (tune_manifest.h): cJSON for the syntax, the checks of
 * each entry against its kernel's parameters, and the expression evaluator.
 *
 * cJSON keeps no positions, so a value's line is found in the text: an entry's start is
 * its line (JSON Lines) or the n-th `"kernel"` of the file (a manifest), and a value is
 * the first occurrence of its quoted name after the entry's start. */
#define _GNU_SOURCE
#include "tune_manifest.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- expressions ------------------------------------------------------------------- */
/* expr  := term (('+' | '-') term)*
 * term  := unary (('*' | '/') unary)*
 * unary := '-' unary | NUMBER | NAME | '(' expr ')' */
typedef struct Ex {
    const char *s, *p;
    const TmScope *scope;
    bool real, failed;
    char *err;
    size_t errlen, errcol;
} Ex;

static void ex_fail(Ex *x, const char *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void ex_fail(Ex *x, const char *at, const char *fmt, ...)
{
    if (x->failed) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->err, x->errlen, fmt, ap);
    va_end(ap);
    x->failed = true;
    x->errcol = (size_t)(at - x->s);
}

static void ex_space(Ex *x)
{
    while (*x->p == ' ' || *x->p == '\t') x->p++;
}

static TmValue ex_num(int64_t i, double d) { return (TmValue){i, d}; }

static TmValue ex_expr(Ex *x);

static TmValue ex_name(Ex *x)
{
    const char *start = x->p;
    while (isalnum((unsigned char)*x->p) || *x->p == '_') x->p++;
    size_t n = (size_t)(x->p - start);
    for (uint32_t i = 0; i < x->scope->n; i++)
        if (strlen(x->scope->names[i]) == n && !strncmp(x->scope->names[i], start, n))
            return ex_num(x->scope->values[i], (double)x->scope->values[i]);
    ex_fail(x, start, "unknown name '%.*s' (the key's names and the consts may be used)", (int)n, start);
    return ex_num(0, 0);
}

static TmValue ex_number(Ex *x)
{
    const char *start = x->p;
    char *end;
    errno = 0;
    if (x->real) {
        double d = strtod(start, &end);
        x->p = end;
        return ex_num((int64_t)d, d);
    }
    long long v = strtoll(start, &end, 10);
    x->p = end;
    if (errno == ERANGE) ex_fail(x, start, "the number is too large");
    if (*end == '.' || *end == 'e' || *end == 'E') ex_fail(x, end, "an integer is expected here");
    return ex_num(v, (double)v);
}

static TmValue ex_unary(Ex *x)
{
    ex_space(x);
    char c = *x->p;
    if (c == '-') {
        x->p++;
        TmValue v = ex_unary(x);
        if (!x->real && v.i == INT64_MIN) ex_fail(x, x->p, "overflow");
        return ex_num(-v.i, -v.d);
    }
    if (c == '(') {
        x->p++;
        TmValue v = ex_expr(x);
        ex_space(x);
        if (*x->p != ')') ex_fail(x, x->p, "expected ')'");
        else x->p++;
        return v;
    }
    if (isdigit((unsigned char)c) || (x->real && c == '.')) return ex_number(x);
    if (isalpha((unsigned char)c) || c == '_') return ex_name(x);
    ex_fail(x, x->p, *x->p ? "expected a number, a name or '('" : "the expression ends too soon");
    return ex_num(0, 0);
}

static TmValue ex_apply(Ex *x, const char *at, char op, TmValue a, TmValue b)
{
    int64_t r = 0;
    bool over = false;
    if (op == '/' && (x->real ? b.d == 0 : b.i == 0)) {
        ex_fail(x, at, "division by zero");
        return a;
    }
    if (x->real) return ex_num(0, op == '+' ? a.d + b.d : op == '-' ? a.d - b.d : op == '*' ? a.d * b.d : a.d / b.d);
    if (op == '+') over = __builtin_add_overflow(a.i, b.i, &r);
    else if (op == '-') over = __builtin_sub_overflow(a.i, b.i, &r);
    else if (op == '*') over = __builtin_mul_overflow(a.i, b.i, &r);
    else if (a.i == INT64_MIN && b.i == -1) over = true;
    else r = a.i / b.i;
    if (over) ex_fail(x, at, "overflow");
    return ex_num(r, (double)r);
}

static TmValue ex_term(Ex *x)
{
    TmValue v = ex_unary(x);
    for (ex_space(x); !x->failed && (*x->p == '*' || *x->p == '/'); ex_space(x)) {
        const char *at = x->p++;
        v = ex_apply(x, at, *at, v, ex_unary(x));
    }
    return v;
}

static TmValue ex_expr(Ex *x)
{
    TmValue v = ex_term(x);
    for (ex_space(x); !x->failed && (*x->p == '+' || *x->p == '-'); ex_space(x)) {
        const char *at = x->p++;
        v = ex_apply(x, at, *at, v, ex_term(x));
    }
    return v;
}

bool tm_eval(const char *expr, const TmScope *scope, bool real, TmValue *out, char *err, size_t errlen,
             size_t *errcol)
{
    Ex x = {expr, expr, scope, real, false, err, errlen, 0};
    *out = ex_expr(&x);
    ex_space(&x);
    if (!x.failed && *x.p) ex_fail(&x, x.p, "unexpected '%c'", *x.p);
    *errcol = x.errcol;
    return !x.failed;
}

/* ---- positions and errors ------------------------------------------------------------ */
typedef struct Reader {
    TmManifest *m;
    FILE *err;
    const char *text;
    size_t base;               /* the current entry's start in text */
    size_t limit;              /* its end (JSON Lines), else the text's */
} Reader;

static TmLoc loc_at(const char *text, size_t off)
{
    TmLoc l = {1, 1};
    for (size_t i = 0; i < off && text[i]; i++) {
        if (text[i] == '\n') l.line++, l.col = 1;
        else l.col++;
    }
    return l;
}

/* The offset of `"name"` at or after from (within the entry), else from. */
static size_t find_quoted(const Reader *r, size_t from, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = r->text + from; (p = strstr(p, name)) && (size_t)(p - r->text) < r->limit; p++)
        if (p > r->text && p[-1] == '"' && p[n] == '"') return (size_t)(p - r->text - 1);
    return from;
}

static TmLoc loc_of(const Reader *r, const char *name)
{
    return loc_at(r->text, find_quoted(r, r->base, name));
}

void tm_error(TmManifest *m, FILE *err, TmLoc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(err, "%s:%u:%u: error: ", m->path, loc.line, loc.col);
    vfprintf(err, fmt, ap);
    fputc('\n', err);
    va_end(ap);
    m->nerrors++;
}

static char *dup(const char *s)
{
    char *d = strdup(s);
    if (!d) {
        fputs("tilec tune: error: out of memory\n", stderr);
        abort();
    }
    return d;
}

/* ---- one entry ------------------------------------------------------------------------- */
static const char *const entry_fields[] = {"file", "kernel", "consts", "keys", "args", "spec", "comment", NULL};

static bool known_field(const char *name)
{
    for (const char *const *f = entry_fields; *f; f++)
        if (!strcmp(*f, name)) return true;
    return false;
}

static const char *want_string(Reader *r, const cJSON *o, const char *field)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, field);
    if (cJSON_IsString(v)) return v->valuestring;
    tm_error(r->m, r->err, loc_of(r, v ? field : "kernel"), v ? "\"%s\" must be a string" : "the entry has no \"%s\"",
             field);
    return NULL;
}

/* An object of integers (consts, a key) into vals. */
static uint32_t int_object(Reader *r, const cJSON *o, const char *what, TrtConst *vals)
{
    uint32_t n = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, o) {
        if (!cJSON_IsNumber(it) || !(it->valuedouble >= -0x1p63 && it->valuedouble < 0x1p63) ||
            it->valuedouble != (double)(int64_t)it->valuedouble)
            tm_error(r->m, r->err, loc_of(r, it->string), "%s '%s' must be an integer", what, it->string);
        else if (n == TM_MAX_NAMES) tm_error(r->m, r->err, loc_of(r, it->string), "more than %d %ss", TM_MAX_NAMES, what);
        else vals[n++] = (TrtConst){dup(it->string), (int64_t)it->valuedouble};
    }
    return n;
}

static void read_keys(Reader *r, const cJSON *o, TmEntry *e)
{
    const cJSON *keys = cJSON_GetObjectItemCaseSensitive(o, "keys");
    if (!cJSON_IsArray(keys) || !cJSON_GetArraySize(keys)) {
        tm_error(r->m, r->err, loc_of(r, keys ? "keys" : "kernel"), "\"keys\" must be a list of objects such as {\"M\": 512}");
        return;
    }
    e->keys = calloc((size_t)cJSON_GetArraySize(keys), sizeof *e->keys);
    size_t at = find_quoted(r, r->base, "keys");
    const cJSON *k;
    cJSON_ArrayForEach(k, keys) {
        const char *brace = strchr(r->text + at + 1, '{');
        if (brace && (size_t)(brace - r->text) < r->limit) at = (size_t)(brace - r->text);
        TmKey *key = &e->keys[e->nkeys++];
        key->loc = loc_at(r->text, at);
        if (!cJSON_IsObject(k)) tm_error(r->m, r->err, key->loc, "a key must be an object such as {\"M\": 512}");
        else key->n = int_object(r, k, "key value", key->vals);
        for (uint32_t j = 0; j < key->n; j++) key->locs[j] = loc_at(r->text, find_quoted(r, at, key->vals[j].name));
    }
}

static void read_args(Reader *r, const cJSON *o, TmEntry *e)
{
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(o, "args"), *a;
    if (!args) return;
    if (!cJSON_IsObject(args)) {
        tm_error(r->m, r->err, loc_of(r, "args"), "\"args\" must be an object");
        return;
    }
    e->args = calloc((size_t)cJSON_GetArraySize(args) + 1, sizeof *e->args);
    cJSON_ArrayForEach(a, args) {
        TmArg *t = &e->args[e->nargs];
        size_t at = find_quoted(r, find_quoted(r, r->base, "args"), a->string);
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(a, "dtype");
        const cJSON *ne = cJSON_GetObjectItemCaseSensitive(a, "numel");
        const cJSON *ex = cJSON_IsString(a) ? a : ne;
        if (cJSON_IsObject(a) && (!cJSON_IsString(dt) || !cJSON_IsString(ne))) {
            tm_error(r->m, r->err, loc_at(r->text, at), "buffer '%s' needs \"dtype\" and \"numel\" strings", a->string);
            continue;
        }
        if (!cJSON_IsString(ex)) {
            tm_error(r->m, r->err, loc_at(r->text, at),
                     "argument '%s' must be an expression string or {\"dtype\": ..., \"numel\": ...}", a->string);
            continue;
        }
        Reader sub = *r;
        sub.base = at;
        t->loc = loc_at(r->text, cJSON_IsObject(a) ? find_quoted(&sub, at, "numel") : at);
        /* the value's string follows its name: step over `"name": ` to the quote */
        const char *q = strchr(r->text + find_quoted(&sub, at, cJSON_IsObject(a) ? "numel" : a->string) + 1, '"');
        q = q ? strchr(q + 1, '"') : NULL;
        if (q) t->loc = loc_at(r->text, (size_t)(q - r->text) + 1);
        t->name = dup(a->string);
        t->dtype = cJSON_IsObject(a) ? dup(dt->valuestring) : NULL;
        t->expr = dup(ex->valuestring);
        e->nargs++;
    }
}

/* FILE relative to the manifest's directory, unless absolute. */
static char *resolve(const char *manifest, const char *file)
{
    const char *slash = strrchr(manifest, '/');
    if (file[0] == '/' || !slash) return dup(file);
    size_t n = (size_t)(slash - manifest) + 1 + strlen(file) + 1;
    char *p = malloc(n);
    if (!p) abort();
    snprintf(p, n, "%.*s/%s", (int)(slash - manifest), manifest, file);
    return p;
}

static void read_entry(Reader *r, const cJSON *o)
{
    TmManifest *m = r->m;
    if (!cJSON_IsObject(o)) {
        tm_error(m, r->err, loc_at(r->text, r->base), "an entry must be an object");
        return;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, o)
        if (!known_field(it->string))
            tm_error(m, r->err, loc_of(r, it->string), "unknown field \"%s\" (file, kernel, consts, keys, args)", it->string);
    const char *file = want_string(r, o, "file"), *kernel = want_string(r, o, "kernel");
    if (!file || !kernel) return;
    TmEntry *e = &m->entries[m->nentries++];
    memset(e, 0, sizeof *e);
    e->loc = loc_of(r, "kernel");
    e->file = resolve(m->path, file);
    e->kernel = dup(kernel);
    const cJSON *consts = cJSON_GetObjectItemCaseSensitive(o, "consts");
    e->consts_loc = consts ? loc_of(r, "consts") : e->loc;
    if (consts && !cJSON_IsObject(consts)) tm_error(m, r->err, loc_of(r, "consts"), "\"consts\" must be an object");
    else if (consts) e->nconsts = int_object(r, consts, "const", e->consts);
    read_keys(r, o, e);
    read_args(r, o, e);
}

/* ---- the checks against the kernel ----------------------------------------------------- */
void tm_scope(const TmEntry *e, const TmKey *k, TmScope *out)
{
    out->n = 0;
    for (uint32_t i = 0; i < k->n; i++) out->names[out->n] = k->vals[i].name, out->values[out->n++] = k->vals[i].value;
    for (uint32_t i = 0; i < e->nconsts; i++) out->names[out->n] = e->consts[i].name, out->values[out->n++] = e->consts[i].value;
}

static const TmArg *find_arg(const TmEntry *e, const char *name)
{
    for (uint32_t i = 0; i < e->nargs; i++)
        if (!strcmp(e->args[i].name, name)) return &e->args[i];
    return NULL;
}

static bool in_key(const TmKey *k, const char *name)
{
    for (uint32_t i = 0; i < k->n; i++)
        if (!strcmp(k->vals[i].name, name)) return true;
    return false;
}

static void check_expr(TmManifest *m, FILE *err, const TmEntry *e, const TmArg *a, bool real)
{
    for (uint32_t k = 0; k < e->nkeys; k++) {
        TmScope sc;
        TmValue v;
        char msg[200];
        size_t col;
        tm_scope(e, &e->keys[k], &sc);
        if (!tm_eval(a->expr, &sc, real, &v, msg, sizeof msg, &col)) {
            tm_error(m, err, (TmLoc){a->loc.line, a->loc.col + (uint32_t)col}, "in '%s' of argument '%s': %s",
                     a->expr, a->name, msg);
            return;
        } else if (a->dtype && v.i <= 0) {
            tm_error(m, err, a->loc, "buffer '%s' has %lld elements for key %u: it needs at least one", a->name,
                     (long long)v.i, k + 1);
            return;
        }
    }
}

static void check_param(TmManifest *m, FILE *err, const TmEntry *e, const TrtParamInfo *p)
{
    const TmArg *a = find_arg(e, p->name);
    bool keyed = e->nkeys && in_key(&e->keys[0], p->name);
    if (!a && !keyed) {
        tm_error(m, err, e->loc, "kernel '%s': argument '%s' is not given in \"args\"%s", e->kernel, p->name,
                 p->is_pointer ? " (a buffer: {\"dtype\": ..., \"numel\": ...})" : "");
        return;
    }
    if (!a) return;
    if (p->is_pointer && !a->dtype) tm_error(m, err, a->loc, "argument '%s' is a buffer: give {\"dtype\": \"%s\", \"numel\": ...}", a->name, p->elem);
    else if (!p->is_pointer && a->dtype) tm_error(m, err, a->loc, "argument '%s' is a scalar (%s), not a buffer", a->name, p->elem);
    else if (a->dtype && strcmp(a->dtype, p->elem))
        tm_error(m, err, a->loc, "buffer '%s' holds %s, not %s", a->name, p->elem, a->dtype);
    else check_expr(m, err, e, a, !p->is_pointer && (p->elem[0] == 'f' || p->elem[0] == 'b') && strcmp(p->elem, "bool"));
}

/* The values an integer parameter of kind k holds (false for other kinds). */
static bool int_range(TrtArgKind k, int64_t *lo, int64_t *hi)
{
    static const struct { TrtArgKind kind; int64_t lo, hi; } ranges[] = {
        {TRT_ARG_BOOL, 0, 1}, {TRT_ARG_I8, INT8_MIN, INT8_MAX}, {TRT_ARG_I16, INT16_MIN, INT16_MAX},
        {TRT_ARG_I32, INT32_MIN, INT32_MAX}, {TRT_ARG_I64, INT64_MIN, INT64_MAX}, {TRT_ARG_U8, 0, UINT8_MAX},
        {TRT_ARG_U16, 0, UINT16_MAX}, {TRT_ARG_U32, 0, UINT32_MAX}, {TRT_ARG_U64, 0, INT64_MAX},
    };
    for (size_t i = 0; i < sizeof ranges / sizeof *ranges; i++)
        if (ranges[i].kind == k) return *lo = ranges[i].lo, *hi = ranges[i].hi, true;
    return false;
}

/* Value j of key k names a run-time scalar parameter and fits its type: a value that
 * does not would be cut to the parameter's width at launch and tune (and overwrite)
 * another key's result. */
static void check_key_value(TmManifest *m, FILE *err, TrtModule *mod, const TmEntry *e, const TmKey *k, uint32_t j,
                            uint32_t nparams)
{
    const TrtConst *v = &k->vals[j];
    TrtParamInfo p = {0};
    bool found = false;
    for (uint32_t i = 0; i < nparams && !found; i++)
        found = !trt_module_kernel_param(mod, e->kernel, i, &p) && !p.is_const && !p.is_pointer && !strcmp(p.name, v->name);
    int64_t lo, hi;
    if (!found)
        tm_error(m, err, k->loc, "key '%s' is not a run-time scalar parameter of kernel '%s'", v->name, e->kernel);
    else if (int_range(p.kind, &lo, &hi) && (v->value < lo || v->value > hi))
        tm_error(m, err, k->locs[j], "key value %s = %" PRId64 " does not fit parameter '%s' of type %s (%" PRId64 " to %" PRId64 ")",
                 v->name, v->value, p.name, p.elem, lo, hi);
}

/* The kernel with the entry's consts compiles (the frontend, on the CPU context: no
 * GPU), so that a dry run finds what a real run would fail on. */
static void check_instance(TmManifest *m, FILE *err, TrtModule *mod, const TmEntry *e)
{
    TrtKernel *k;
    if (!trt_module_get_kernel(mod, e->kernel, e->consts, e->nconsts, &k)) return;
    char cs[256] = "";
    for (uint32_t i = 0, n = 0; i < e->nconsts && n < sizeof cs; i++)
        n += (size_t)snprintf(cs + n, sizeof cs - n, "%s%s=%" PRId64, i ? " " : "", e->consts[i].name, e->consts[i].value);
    tm_error(m, err, e->consts_loc, "kernel '%s' with consts {%s} does not compile: %s", e->kernel, cs, trt_last_error());
}

static void check_entry(TmManifest *m, FILE *err, TrtContext *cpu, const TmEntry *e)
{
    TrtModule *mod = NULL;
    TrtKernelInfo ki;
    if (trt_module_load_file(cpu, e->file, &mod)) {
        tm_error(m, err, e->loc, "cannot load '%s': %s", e->file, trt_last_error());
        return;
    }
    if (trt_module_kernel_info(mod, e->kernel, &ki)) {
        char names[512] = "";
        for (uint32_t i = 0, n = 0; i < trt_module_num_kernels(mod) && n < sizeof names; i++)
            n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "", trt_module_kernel_name(mod, i));
        tm_error(m, err, e->loc, "unknown kernel '%s' in %s (it has: %s)", e->kernel, e->file, names);
        trt_module_destroy(mod);
        return;
    }
    for (uint32_t k = 0; k < e->nkeys; k++)
        for (uint32_t j = 0; j < e->keys[k].n; j++) check_key_value(m, err, mod, e, &e->keys[k], j, ki.nparams);
    for (uint32_t i = 0; i < ki.nparams; i++) {
        TrtParamInfo p;
        if (trt_module_kernel_param(mod, e->kernel, i, &p) || p.is_const) continue;
        check_param(m, err, e, &p);
    }
    for (uint32_t i = 0; i < e->nargs; i++) {
        bool found = false;
        for (uint32_t j = 0; j < ki.nparams; j++) {
            TrtParamInfo p;
            found |= !trt_module_kernel_param(mod, e->kernel, j, &p) && !p.is_const && !strcmp(p.name, e->args[i].name);
        }
        if (!found)
            tm_error(m, err, e->args[i].loc, "kernel '%s' has no run-time parameter '%s'", e->kernel, e->args[i].name);
    }
    check_instance(m, err, mod, e);
    trt_module_destroy(mod);
}

/* ---- the file ---------------------------------------------------------------------------- */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0, got;
    do {
        if (n + 4096 + 1 > cap && !(buf = realloc(buf, cap = 2 * cap + 8192))) abort();
        got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
    } while (got > 0);
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

static void parse_error(Reader *r, const char *where)
{
    tm_error(r->m, r->err, loc_at(r->text, (size_t)(where - r->text)), "malformed JSON here");
}

/* A manifest {"kernels": [...]}: entry i starts at the i-th "kernel". */
static void read_manifest(Reader *r, const cJSON *root)
{
    const cJSON *ks = cJSON_GetObjectItemCaseSensitive(root, "kernels"), *e;
    if (!cJSON_IsArray(ks)) {
        tm_error(r->m, r->err, loc_at(r->text, 0), "a manifest is an object with a \"kernels\" list (docs/TUNING.md)");
        return;
    }
    r->m->entries = calloc((size_t)cJSON_GetArraySize(ks) + 1, sizeof *r->m->entries);
    size_t at = 0;
    cJSON_ArrayForEach(e, ks) {
        r->base = find_quoted(r, at, "kernel");
        while (r->base > 0 && r->text[r->base] != '{') r->base--;
        read_entry(r, e);
        at = find_quoted(r, r->base, "kernel") + 2;   /* past its quote and first letter */
    }
}

/* JSON Lines: one entry per non-empty line. */
static void read_lines(Reader *r, char *text, size_t len)
{
    uint32_t lines = 1;
    for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
    r->m->entries = calloc(lines + 1, sizeof *r->m->entries);
    for (size_t at = 0; at < len;) {
        size_t end = at + strcspn(text + at, "\n");
        r->base = at, r->limit = end;
        char save = text[end];
        text[end] = '\0';
        const char *bad = NULL;
        cJSON *o = strspn(text + at, " \t\r") == end - at ? NULL : cJSON_ParseWithOpts(text + at, &bad, true);
        if (o) read_entry(r, o);
        else if (strspn(text + at, " \t\r") != end - at) parse_error(r, bad ? bad : text + at);
        cJSON_Delete(o);
        text[end] = save;
        at = end + 1;
    }
}

bool tm_read(const char *path, TmManifest *m, FILE *err)
{
    memset(m, 0, sizeof *m);
    m->path = dup(path);
    size_t len;
    char *text = slurp(path, &len);
    if (!text) return false;
    Reader r = {m, err, text, 0, len};
    const char *bad = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &bad, true);
    size_t first = strcspn(text, "\n");
    char save = text[first];
    text[first] = '\0';
    cJSON *line1 = root ? NULL : cJSON_Parse(text);
    text[first] = save;
    if (root && cJSON_IsObject(root) && cJSON_GetObjectItemCaseSensitive(root, "kernels")) read_manifest(&r, root);
    else if (root || line1) read_lines(&r, text, len);
    else parse_error(&r, bad ? bad : text);
    cJSON_Delete(root);
    cJSON_Delete(line1);
    if (!m->nerrors && !m->nentries) tm_error(m, err, (TmLoc){1, 1}, "no kernels to tune");
    TrtContext *cpu = NULL;
    if (!m->nerrors && !trt_context_create(TRT_DEVICE_CPU, TRT_MODE_DEFAULT, "", &cpu))
        for (uint32_t i = 0; i < m->nentries; i++) check_entry(m, err, cpu, &m->entries[i]);
    trt_context_destroy(cpu);
    free(text);
    return true;
}

void tm_free(TmManifest *m)
{
    for (uint32_t i = 0; i < m->nentries; i++) {
        TmEntry *e = &m->entries[i];
        for (uint32_t j = 0; j < e->nconsts; j++) free((void *)e->consts[j].name);
        for (uint32_t k = 0; k < e->nkeys; k++)
            for (uint32_t j = 0; j < e->keys[k].n; j++) free((void *)e->keys[k].vals[j].name);
        for (uint32_t j = 0; j < e->nargs; j++) free(e->args[j].name), free(e->args[j].dtype), free(e->args[j].expr);
        free(e->keys), free(e->args), free(e->file), free(e->kernel);
    }
    free(m->entries);
    free(m->path);
    memset(m, 0, sizeof *m);
}
