/* The frontend's entry points after parsing: name resolution, type and shape
 * inference, const parameters and -D overrides, instantiation and inlining of generic
 * fns, checks of @launch/@autotune/grid, and lowering of kernels to Tile IR; graphs are
 * checked (shapes with symbolic sizes) but not lowered yet. */
#ifndef TILE_FRONTEND_FRONTEND_H
#define TILE_FRONTEND_FRONTEND_H

#include <stdbool.h>
#include <stdint.h>

#include "frontend/ast.h"
#include "ir/graph.h"
#include "ir/ir.h"

typedef struct FeDefine {   /* -D NAME=VALUE, or one key of a config */
    const char *name;
    int64_t value;
} FeDefine;

typedef struct FeOptions {
    const FeDefine *defines;   /* override const parameters (and warps/stages) */
    uint32_t ndefines;
    const char *kernel;        /* lower only this kernel (NULL: every kernel) */
} FeOptions;

/* Checks every item of p and lowers the kernels to a new module in ctx. Errors (with
 * locations) go to diags; returns NULL if there was any. A const parameter's value
 * comes from a define, else from the @autotune default config, else from its default;
 * a kernel that needs a value it has not got is an error naming the parameter. An
 * unknown -D name is an error too (unless it names a const of another kernel). */
IrModule *fe_lower(IrCtx *ctx, const AstProgram *p, const FeOptions *opt, DiagList *diags);

/* Checks one graph item (shapes with symbolic sizes, types, ops); errors to diags.
 * Returns true if it is well-formed. `p` lets graphs call the file's fns. */
bool fe_check_graph(Arena *a, const AstProgram *p, const AstItem *graph, DiagList *diags);

/* Why a graph that checks has no graph IR yet: `what` (e.g. "it has a loop") at loc;
 * what is NULL when it has one. */
typedef struct FeGraphNoIr {
    const char *what;
    Loc loc;
} FeGraphNoIr;
#define FE_MAX_GRAPH_OPS (1 << 20)   /* ops of one graph after inlining its fns */

/* Checks a graph item (as fe_check_graph) and builds its graph IR into m (in arena a):
 * the graph, or NULL when it has errors (in diags) or uses what the graph IR cannot
 * hold (loops, branches: then *why says what and where; the graph is still valid). */
IrGraph *fe_build_graph(Arena *a, const AstProgram *p, const AstItem *graph, IrGraphModule *m,
                        DiagList *diags, FeGraphNoIr *why);

/* The tuning space of a kernel's @autotune, expanded and pruned by `where`, for the
 * runtime's tuner (later). Returns the number of configs (0 without @autotune). */
typedef struct FeConfig {
    FeDefine *keys;            /* const params and "warps"/"stages" */
    uint32_t nkeys;
} FeConfig;
uint32_t fe_autotune_configs(Arena *a, const AstProgram *p, const char *kernel,
                             FeConfig **out, DiagList *diags);

/* The whole @autotune of a kernel, for the tuner (runtime/rt_tune.c): the configs as
 * fe_autotune_configs gives them, the key's parameter names, the default config, and
 * how many configs the expansion made and `where` and duplicate removal dropped.
 * False on an error (diagnostics in diags); true with nconfigs 0 without @autotune.
 * Everything lives in the arena a. */
typedef struct FeTuneSpace {
    FeConfig *configs;
    uint32_t nconfigs;
    const char **key;          /* key = [M, N]: run-time scalar parameter names */
    uint32_t nkey;
    FeConfig dflt;             /* default = {...}, when has_default */
    bool has_default;
    uint32_t expanded;         /* configs of the space or list, before where */
    uint32_t where_removed;    /* dropped by where */
    uint32_t duplicates;       /* dropped as repeats of an earlier config */
} FeTuneSpace;
bool fe_autotune_space(Arena *a, const AstProgram *p, const char *kernel, FeTuneSpace *out,
                       DiagList *diags);

#endif
