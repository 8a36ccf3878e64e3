/* Diagnostics with source lines and carets (see diag.h). */
#include "diag.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"

void diag_init(DiagList *d) { memset(d, 0, sizeof *d); }

void diag_free(DiagList *d)
{
    for (size_t i = 0; i < d->len; i++) tl_free(d->items[i].msg);
    tl_free(d->items);
    memset(d, 0, sizeof *d);
}

void diag_vadd(DiagList *d, DiagLevel lvl, Loc loc, const char *fmt, va_list ap)
{
    size_t max = d->max_errors ? d->max_errors : 50;
    if (lvl == DIAG_ERROR && d->nerrors >= max) {
        d->nerrors++;
        return;
    }
    if (lvl == DIAG_NOTE && d->nerrors > max) return;
    if (d->len == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 8;
        Diag *ni = tl_realloc(d->items, nc * sizeof *ni);
        if (!ni) tl_oom();
        d->items = ni;
        d->cap = nc;
    }
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *msg = tl_malloc((size_t)(n < 0 ? 0 : n) + 1);
    if (!msg) tl_oom();
    vsnprintf(msg, (size_t)(n < 0 ? 0 : n) + 1, fmt, ap2);
    va_end(ap2);
    d->items[d->len++] = (Diag){lvl, loc, msg};
    if (lvl == DIAG_ERROR) d->nerrors++;
}

bool diag_full(const DiagList *d) { return d->nerrors > (d->max_errors ? d->max_errors : 50); }

void diag_add(DiagList *d, DiagLevel lvl, Loc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    diag_vadd(d, lvl, loc, fmt, ap);
    va_end(ap);
}

static const char *const level_names[] = {"error", "warning", "note"};

enum { CARET_WINDOW = 160 };   /* a longer line shows only this much around the caret */

/* Prints line `line` of src and a caret under column `col` (tabs kept so the caret
 * lines up); of a very long line (a generated chain), only a window around the
 * caret, marked with "...". */
static void print_caret(const Source *src, uint32_t line, uint32_t col, FILE *out, bool color)
{
    const char *p = src->text, *end = src->text + src->len;
    for (uint32_t l = 1; l < line && p < end; p++)
        if (*p == '\n') l++;
    if (p >= end && line > 1) return;
    const char *e = p;
    while (e < end && *e != '\n') e++;
    const char *from = p, *to = e;
    if (col > CARET_WINDOW / 2 && e - p > CARET_WINDOW) from = p + col - 1 - CARET_WINDOW / 2;
    if (from > e) from = e;
    if (to - from > CARET_WINDOW) to = from + CARET_WINDOW;
    fprintf(out, "    %s%.*s%s\n    %s", from > p ? "..." : "", (int)(to - from), from, to < e ? "..." : "",
            from > p ? "   " : "");
    for (const char *c = from; c < p + col - 1 && c < to; c++) fputc(*c == '\t' ? '\t' : ' ', out);
    fputs(color ? "\033[1;32m^\033[0m\n" : "^\n", out);
}

/* Clang's colours: the location and message bold, the level red (error), magenta
 * (warning) or cyan (note), the caret green. */
static const char *const level_colors[] = {"\033[1;31m", "\033[1;35m", "\033[1;36m"};

void diag_print_one_color(const Diag *g, FILE *out, bool color)
{
    const char *bold = color ? "\033[1m" : "", *lvl = color ? level_colors[g->level] : "";
    const char *reset = color ? "\033[0m" : "";
    if (g->loc.src)
        fprintf(out, "%s%s:%u:%u: %s%s:%s %s%s%s\n", bold, g->loc.src->name, g->loc.line, g->loc.col,
                lvl, level_names[g->level], reset, bold, g->msg, reset);
    else
        fprintf(out, "%stile: %s%s:%s %s%s%s\n", bold, lvl, level_names[g->level], reset, bold, g->msg, reset);
    if (g->loc.src && g->loc.line > 0) print_caret(g->loc.src, g->loc.line, g->loc.col, out, color);
}

void diag_print_one(const Diag *g, FILE *out) { diag_print_one_color(g, out, false); }

void diag_print(const DiagList *d, FILE *out)
{
    for (size_t i = 0; i < d->len; i++) diag_print_one(&d->items[i], out);
    size_t max = d->max_errors ? d->max_errors : 50;
    if (d->nerrors > max)
        fprintf(out, "tile: error: too many errors (%zu), stopped after %zu\n", d->nerrors, max);
}

Source *source_from_string(const char *name, const char *text)
{
    Source *s = tl_calloc(1, sizeof *s);
    if (!s) return NULL;
    s->name = tl_strdup(name);
    s->text = tl_strdup(text);
    if (!s->name || !s->text) {
        source_free(s);
        return NULL;
    }
    s->len = strlen(text);
    return s;
}

Source *source_read(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, len = 0;
    char *buf = tl_malloc(cap);
    for (size_t n; buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0;) {
        len += n;
        if (cap - len - 1 == 0) {
            char *nb = tl_realloc(buf, cap *= 2);
            if (!nb) tl_free(buf);
            buf = nb;
        }
    }
    int err = ferror(f) ? errno : 0;
    fclose(f);
    Source *s = buf && !err ? tl_calloc(1, sizeof *s) : NULL;
    if (!s) {
        tl_free(buf);
        errno = err ? err : ENOMEM;
        return NULL;
    }
    buf[len] = 0;
    s->name = tl_strdup(path);
    s->text = buf;
    s->len = len;
    return s;
}

void source_free(Source *s)
{
    if (!s) return;
    tl_free((void *)s->name);
    tl_free((void *)s->text);
    tl_free(s);
}

int diag_edit_distance(const char *a, size_t la, const char *b, size_t cap)
{
    size_t lb = strlen(b);
    if (cap > 63) cap = 63;
    if (la > cap || lb > cap) return 99;
    int row[64];
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[lb];
}
