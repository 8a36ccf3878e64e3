/* What tilec and tile-opt share on the command line: options spelled `--flag value`
 * or `--flag=value`, and output files written as clang writes them (a temporary file
 * in the output's directory, renamed over it only on success). */
#ifndef TILE_TOOLS_CLI_H
#define TILE_TOOLS_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "ir/diag.h"

/* The value of `flag=value` or `flag value` (advancing *i); NULL when argv[*i] is not
 * that flag. A flag without its value is a usage error: "TOOL: error: FLAG needs a
 * value" and exit status 2. */
const char *cli_flag_value(const char *tool, int argc, char **argv, int *i, const char *flag);

/* One row of a tool's option table: tilec and tile-opt parse argv through theirs, so
 * both spell options the same way. A table ends with a row whose name is NULL. */
typedef struct CliOption {
    const char *name;                  /* "--emit", "-o", "-Werror" */
    bool takes_value;                  /* NAME VALUE or NAME=VALUE; else a flag alone */
    void (*set)(void *opts, const char *value);   /* value is NULL for a flag */
} CliOption;

/* Runs the row that argv[*i] names (advancing *i past a value); false when no row
 * names it. A missing value is a usage error, as in cli_flag_value. */
bool cli_parse_option(const char *tool, const CliOption *table, int argc, char **argv, int *i, void *opts);

/* An output being written. Standard output ("-" or no path) and files that are not
 * regular (/dev/null, a FIFO) are written directly. */
typedef struct CliOutput {
    FILE *f;
    const char *tool, *path;
    char *tmp;                         /* the temporary file; NULL when written directly */
} CliOutput;

/* Opens the output (mode "w" or "wb"); false, with "TOOL: error: cannot write ...",
 * when it cannot. */
bool cli_output_open(CliOutput *out, const char *tool, const char *path, const char *mode);
/* Closes the output. ok: renames it into place (false, with a message, if that or a
 * write failed); !ok: removes the temporary file, leaving any old file as it was. */
bool cli_output_commit(CliOutput *out, bool ok);

/* Did-you-mean for a name the user typed: offer each name it could have meant; the
 * nearest within the edits of a typo (one for names of up to 3 characters, two beyond,
 * as the frontend's lw_suggest_limit) is the hint. len: the typed name's length (the
 * NAME of NAME=VALUE). */
typedef struct CliNear {
    const char *typed;
    size_t len;
    const char *best;
    int dist;
} CliNear;

void cli_near_init(CliNear *n, const char *typed, size_t len);
void cli_near_offer(CliNear *n, const char *name);
/* "; did you mean 'X'?", or "" when nothing was near. */
const char *cli_near_hint(const CliNear *n, char *buf, size_t size);

/* A diagnostic as diag_print_one_color prints it, except that one without a place
 * ("-D X does not name a const parameter") takes the tool's prefix ("tilec: error:")
 * where the library would write "tile:". */
void cli_print_diag(const char *tool, const Diag *g, FILE *out, bool color);

#endif
