/* libFuzzer harness: any bytes through the lexer, the parser, the AST printer and the
 * diagnostic printer. A crash, a sanitizer report, a leak or a hang is a bug: the
 * parser must turn every input into an AST and a list of errors. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/ast.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every diagnostic must point into the file (1-based line and column). */
static void check_diags(const DiagList *d)
{
    for (size_t i = 0; i < d->len; i++)
        if (!d->items[i].loc.src || d->items[i].loc.line == 0 || d->items[i].loc.col == 0) {
            fprintf(stderr, "diagnostic without a location: %s\n", d->items[i].msg);
            abort();
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *sink;
    if (!sink) sink = fopen("/dev/null", "w");
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    Source src = {"fuzz.tile", text, size};

    Arena *a = arena_create();
    DiagList d;
    diag_init(&d);
    AstProgram *p = fe_parse(a, &src, &d);
    if (p) ast_print(p, sink);
    check_diags(&d);
    diag_print(&d, sink);
    diag_free(&d);
    arena_destroy(a);

    diag_init(&d);
    fe_dump_tokens(&src, sink, &d);
    check_diags(&d);
    diag_free(&d);
    free(text);
    return 0;
}
