/* Source files, locations and diagnostics.
 *
 * Diagnostics are collected, not fatal: every stage records errors in a DiagList and
 * carries on where it can; the tool prints them at the end in the form
 *     file:line:col: error: message
 *         source line
 *                ^
 * Messages are lowercase and name the language's rule. */
#ifndef TILE_IR_DIAG_H
#define TILE_IR_DIAG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct Source {
    const char *name;   /* as given by the user, e.g. "examples/softmax.tile" */
    const char *text;   /* NUL-terminated contents */
    size_t len;
} Source;

typedef struct Loc {
    const Source *src;  /* NULL for locations that come from nowhere (built IR) */
    uint32_t line, col; /* 1-based; col counts bytes */
} Loc;

typedef enum { DIAG_ERROR, DIAG_WARNING, DIAG_NOTE } DiagLevel;

typedef struct Diag {
    DiagLevel level;
    Loc loc;
    char *msg;
} Diag;

typedef struct DiagList {
    Diag *items;
    size_t len, cap;
    size_t nerrors;
    size_t max_errors;  /* stop recording errors after this many (0: 50) */
} DiagList;

void diag_init(DiagList *d);
void diag_free(DiagList *d);
void diag_add(DiagList *d, DiagLevel lvl, Loc loc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void diag_vadd(DiagList *d, DiagLevel lvl, Loc loc, const char *fmt, va_list ap);
/* Whether an error past the cap was counted: stages stop early then, since nothing
 * more would be printed (the list says "too many errors"). */
bool diag_full(const DiagList *d);
/* The edit distance (Levenshtein) of a[0..la) and b, for "did you mean" hints; 99 when
 * either is longer than `cap` characters (at most 63). The frontend and the tools
 * suggest names by it. */
int diag_edit_distance(const char *a, size_t la, const char *b, size_t cap);
#define diag_error(d, loc, ...) diag_add((d), DIAG_ERROR, (loc), __VA_ARGS__)
#define diag_note(d, loc, ...) diag_add((d), DIAG_NOTE, (loc), __VA_ARGS__)
/* Prints every diagnostic with its source line and a caret. */
void diag_print(const DiagList *d, FILE *out);
void diag_print_one(const Diag *g, FILE *out);
/* The same with clang's ANSI colours when color is true (tools decide: a terminal,
 * NO_COLOR unset). */
void diag_print_one_color(const Diag *g, FILE *out, bool color);

/* Reads a whole file into a Source (malloc'd; free with source_free). NULL and errno
 * on failure. */
Source *source_read(const char *path);
Source *source_from_string(const char *name, const char *text);
void source_free(Source *s);

#endif
