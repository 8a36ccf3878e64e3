/* tilec: the command-line compiler.
 *
 *   tilec FILE|- [-o OUT|-] [--emit=tokens|ast|ir|ir-opt|ir-gpu|llvm|ptx|cubin|graph-ir|fusion|graph-kernels] [-D NAME=VALUE]...
 *         [--kernel NAME] [--arch sm_90a|sm_90|sm_80|sm_86|sm_89] [-O0..3] [--print-after-all]
 *         [--verify-each] [--time-passes] [-Werror] [-w] [--color=auto|always|never]
 *   tilec run FILE|- [--kernel NAME] [--grid X[,Y[,Z]]] [--device cpu|gpu]
 *         [-D NAME=VALUE]... --arg NAME=VALUE... [--print NAME]... [--print-to DIR]
 *         [--max-iterations N] [--max-ops N]
 *   tilec run FILE|- --graph NAME --arg NAME=VALUE... [--print NAME]...
 *   tilec tune MANIFEST [--devices 0,1,...] [--budget MINUTES] [--journal FILE] [--report DIR]
 *
 * Outputs are written as clang writes them: to a temporary file in the output's
 * directory, renamed over it only when the compile succeeded, so a failed compile
 * leaves an existing file as it was. Exit status: 0 success, 1 an error in the input
 * (diagnostics printed), 2 a usage error. This is the only place in the project that
 * calls exit(). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frontend/ast.h"
#include "frontend/frontend.h"
#include "ir/graph_interp.h"
#include "passes/graph_lower.h"
#include "passes/graph_remat.h"
#include "passes/graph_split.h"
#include "ir/interp.h"
#include "ir/ir.h"
#include "ir/target.h"
#include "passes/axischeck.h"
#include "passes/passes.h"
#include "passes/specialize.h"
#include "runtime/rt_cache_cli.h"
#include "tools/cli.h"
#include "tools/tilec_graph.h"
#include "tools/tilec_tune.h"
#include "tile/tile_rt.h"
#ifdef TILE_HAVE_CODEGEN
#include <spawn.h>
#include <sys/wait.h>

#include <llvm/Config/llvm-config.h>

#include "codegen/codegen.h"
#endif

#define TILE_VERSION "0.1.0"
/* The PTX ISA that codegen targets (CG_PTX_FEATURES "+ptx83" in codegen/cg_module.c;
 * tests/lit/cli/version.tile checks that the two agree). */
#define TILE_PTX_ISA "8.3"

enum { EXIT_INPUT = 1, EXIT_USAGE = 2, MAX_LIST = 256 };

typedef struct Options {
    const char *file, *out, *emit, *kernel, *graph, *arch, *device;
    bool fused, compare_fused;   /* run --graph: through the fusion plan; both ways, compared */
    bool split;              /* run --graph: forward then backward through the saved values, and joint, compared */
    const char *print_to;              /* run: directory of NAME.bin files of the buffers */
    const Source *src;                 /* the program, once read */
    FeDefine defines[MAX_LIST];
    uint32_t ndefines;
    const char *args[MAX_LIST];        /* NAME=VALUE of `run` */
    uint32_t nargs;
    const char *prints[MAX_LIST];
    uint32_t nprints;
    int64_t grid[3];
    int64_t max_iterations;            /* run: loop bound of the interpreter (0: default) */
    int64_t max_ops;                   /* run: work bound of the interpreter (0: default) */
    bool has_grid, run;
    bool check_axis_info;              /* run: check the axis analysis on the values */
    bool gpu_ir;                       /* run: interpret the IR after the GPU passes */
    SpecClass spec;                    /* --spec: SPEC_NONE, or every integer DIV16 or DIV8 */
    bool werror, no_warnings;          /* -Werror, -w */
    bool color;                        /* diagnostics in colour (--color, a terminal, NO_COLOR) */
    int opt_level;
    PassOptions passes;
    TileKnobs knobs;                   /* the environment's (TILE_SINK=0, ...), then --knob */
    const char *knob_args[MAX_LIST];   /* --knob NAME=VALUE, also for run --device gpu */
    uint32_t nknobs;
    const char *recompute, *memory_budget;   /* over a graph's @recompute (passes/graph_remat.c) */
    const char *size_args[MAX_LIST];   /* --size NAME=N: sizes the budget compares at */
    uint32_t nsize_args;
    int64_t steps;                     /* run --graph: train steps (0: one run) */
    const char *feeds[MAX_LIST];       /* run --graph: retK=PARAM, result K is PARAM's next value */
    uint32_t nfeeds;
} Options;

static const char usage_compile[] =
    "tilec FILE|- [-o OUT|-] [--emit=tokens|ast|ir|ir-opt|ir-gpu|llvm|ptx|cubin|graph-ir|fusion|graph-kernels] [-D NAME=VALUE]...\n"
    "             [--kernel NAME] [--arch sm_90a|sm_90|sm_80|sm_86|sm_89] [-O0..3] [--spec=none|div8|div16]\n"
    "             [--print-after-all] [--verify-each] [--time-passes] [--check-unchanged] [--check-bounds]\n"
    "             [--knob NAME=VALUE]... [-Werror] [-w] [--color=auto|always|never]\n";
static const char usage_run[] =
    "tilec run FILE|- [--kernel NAME] [--grid X[,Y[,Z]]] [--device cpu|gpu]\n"
    "             [-D NAME=VALUE]... --arg NAME=VALUE... [--print NAME]... [--print-to DIR]\n"
    "             [--max-iterations N] [--max-ops N] [--check-axis-info] [--gpu-ir] [--check-bounds]\n"
    "             [--graph NAME [--fused|--compare-fused|--split] [--steps N [--feed retK=PARAM]...]]\n";
static const char usage_other[] =
    "       tilec cache ls|stats|verify|prune|clear [--dir DIR] [--max-bytes N] [--fix]\n"
    "       tilec cache export KERNEL...|--all -o FILE | import FILE [--dir DIR]\n"
    "       tilec tune MANIFEST [--devices 0,1,...] [--budget MINUTES] [--journal FILE] [--report DIR]\n"
    "       tilec --help | --version | run --help | cache --help | tune --help\n";

static const char help_compile[] =
    "FILE     the program; '-' reads it from standard input\n"
    "-o OUT   where --emit writes (default standard output; '-' is standard output);\n"
    "         written only when the compile succeeds, through a temporary file\n"
    "--emit   what to write: the tokens, the syntax tree, the Tile IR as lowered\n"
    "         (ir), after the cleanup passes (ir-opt), after the GPU passes with\n"
    "         every layout (ir-gpu), LLVM IR, PTX, or a cubin\n"
    "         (through ptxas; needs -o), the graph IR of the graphs (graph-ir) or\n"
    "         their fusion plans (fusion: one line per kernel, then the buffers),\n"
    "         or the Tile kernels the plans lower to (graph-kernels, a program);\n"
    "         as the joint run builds them, with --split as the forward/backward\n"
    "         split does (the LM head in Liger's order, docs/GRAPHS.md);\n"
    "         without --emit the file is only checked\n"
    "-D       set a const parameter (or a launch key, listed below) of the kernels\n"
    "--arch   sm_90a (default) or sm_80; sm_90 means sm_90a, sm_86 and sm_89 get sm_80\n"
    "         code; also spelled --arch=X, -arch=X, -arch X\n"
    "--spec   the variant to compile (ir-gpu, llvm, ptx, cubin): none (default)\n"
    "         knows nothing of the integer arguments; div16 (div8) is the variant\n"
    "         the runtime compiles when every integer argument is a multiple of 16\n"
    "         (a multiple of 8, not of 16)\n"
    "-Werror  warnings are errors; -w  no warnings\n"
    "--check-bounds  compile the checked variant (ir-gpu, llvm, ptx, cubin): the\n"
    "         bounds pass after the GPU passes, with the hidden size parameters\n"
    "--color  diagnostics in colour: auto (default: on a terminal, unless NO_COLOR is set)\n"
    "--knob   a setting of the code generator (docs/CACHE.md, ir/knobs.def): NAME=VALUE\n"
    "         over its environment variable (TILE_SINK=0 is --knob sink=0)\n"
    "--recompute save-all|selective|checkpoint, --memory-budget BYTES|FRACTION, --size\n"
    "         NAME=N: what the backward of a graph's grad keeps (over its @recompute;\n"
    "         docs/GRAPHS.md \"Recomputation\"), the budget compared at those sizes\n";
static const char help_run[] =
    "run      runs one kernel (--kernel may be left out when the file has one); a\n"
    "         scalar argument takes a literal in its type's range, a pointer argument\n"
    "         zeros:N, iota:N, rand:N[:SEED], poison:N or @FILE (raw little-endian\n"
    "         elements); --print NAME prints that buffer after the run, one value per\n"
    "         line; --print-to DIR writes them (every buffer, without --print) to\n"
    "         DIR/NAME.bin instead; an empty grid runs nothing; --device gpu runs it\n"
    "         through libtileRT on GPU 0; --check-bounds runs the checked variant\n"
    "         (docs/RUNTIME.md): an access outside a buffer is masked off and reported\n"
    "         in the interpreter's words, on the GPU without a fault (on the CPU the\n"
    "         interpreter runs the checked IR)\n"
    "run --graph NAME  runs a graph in the graph IR interpreter (CPU), op by op:\n"
    "         --arg SIZE=N gives each size name of its parameters, a tensor takes a\n"
    "         buffer as above with its element count, a scalar a literal; --print\n"
    "         ret0, ret1, ... prints the returned tensors (or a parameter); --fused\n"
    "         runs the Tile kernels its fusion plan lowers to instead (through\n"
    "         libtileRT, in the Tile IR interpreter; --device gpu: on GPU 0, always\n"
    "         so); --compare-fused runs it op by op, through the plan interpreter\n"
    "         (same bits) and through the kernels (within rounding), an error if\n"
    "         they differ; --steps N runs it N times (train steps), each --feed\n"
    "         retK=PARAM making result K that parameter's value in the next step, a\n"
    "         buffer of N times a tensor's elements giving one slice per step (the\n"
    "         batches), and --print printing after every step; --split (a graph with a\n"
    "         grad) runs the kernels joint, then the forward part, the backward part\n"
    "         through the saved values (the graph's other buffers overwritten in\n"
    "         between), an error unless the two give the same bits (docs/GRAPHS.md)\n";
static const char help_cache[] = "cache    looks inside the persistent kernel cache (docs/CACHE.md)\n"
                                 "tune     tunes a manifest's kernels into the cache (docs/TUNING.md)\n";
static const char exit_status[] = "exit status: 0 success, 1 error in the input, 2 usage error\n";

/* The launch keys of ir/launch.def, one a line: name, default, rule, meaning. */
static void print_launch_keys(FILE *out)
{
    fputs("launch keys (-D, @launch, @autotune; the default in brackets):\n", out);
    for (int k = 0; k < IR_NUM_LAUNCH_KEYS; k++) {
        const IrLaunchInfo *i = &ir_launch_info[k];
        fprintf(out, "  %-10s [%d] %s: %s\n", i->name, i->def, i->rule, i->meaning);
    }
}

static void usage(FILE *out, bool run)
{
    if (run) {
        fprintf(out, "usage: %s\n%s%s", usage_run, help_run, exit_status);
        return;
    }
    fprintf(out, "usage: %s       %s%s\n%s", usage_compile, usage_run, usage_other, help_compile);
    print_launch_keys(out);
    fprintf(out, "%s%s%s", help_run, help_cache, exit_status);
}

static _Noreturn void usage_error(const char *fmt, const char *arg)
{
    fputs("tilec: error: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\n(run 'tilec --help' for usage)\n", stderr);
    exit(EXIT_USAGE);
}

static bool parse_i64(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 0);
    if (errno || end == s || *end) return false;
    *out = v;
    return true;
}

static void parse_define(Options *o, const char *s)
{
    const char *eq = strchr(s, '=');
    int64_t v;
    if (!eq || eq == s || !parse_i64(eq + 1, &v))
        usage_error("-D takes NAME=INTEGER, got '%s'", s);
    if (o->ndefines == MAX_LIST) usage_error("too many -D options%s", "");
    o->defines[o->ndefines++] = (FeDefine){strndup(s, (size_t)(eq - s)), v};
}

static void parse_grid(Options *o, const char *s)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", s);
    o->grid[0] = o->grid[1] = o->grid[2] = 1;
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n == 3 || !parse_i64(t, &o->grid[n]) || o->grid[n] < 0)
            usage_error("--grid takes 1 to 3 non-negative integers X[,Y[,Z]], got '%s'", s);
        n++;
    }
    if (n == 0) usage_error("--grid takes 1 to 3 non-negative integers X[,Y[,Z]], got '%s'", s);
    o->has_grid = true;
}

static void push(const char **list, uint32_t *n, const char *v, const char *what)
{
    if (*n == MAX_LIST) usage_error("too many %s options", what);
    list[(*n)++] = v;
}

static void print_version(void)
{
#ifdef TILE_HAVE_CODEGEN
    printf("tilec %s (LLVM %s, PTX ISA %s; targets sm_90a, sm_80; compiler %s)\n", TILE_VERSION,
           LLVM_VERSION_STRING, TILE_PTX_ISA, tile_compiler_id());
#else
    printf("tilec %s (Tile IR interpreter only: built without LLVM; compiler %s)\n", TILE_VERSION,
           tile_compiler_id());
#endif
}

/* --color=auto (a terminal, NO_COLOR unset or empty, https://no-color.org), always
 * (even with NO_COLOR: a flag overrides the environment), never. */
static void parse_color(Options *o, const char *v)
{
    const char *no = getenv("NO_COLOR");
    if (!strcmp(v, "always")) o->color = true;
    else if (!strcmp(v, "never")) o->color = false;
    else if (!strcmp(v, "auto")) o->color = isatty(STDERR_FILENO) && !(no && *no);
    else usage_error("--color takes auto, always or never, got '%s'", v);
}

/* The options of tilec and tilec run, one setter each (tools/cli.h). */
static void set_out(void *o, const char *v) { ((Options *)o)->out = v; }
static void set_emit(void *o, const char *v) { ((Options *)o)->emit = v; }
static void set_kernel(void *o, const char *v) { ((Options *)o)->kernel = v; }
static void set_graph(void *o, const char *v) { ((Options *)o)->graph = v; }
static void set_fused(void *o, const char *v) { ((Options *)o)->fused = true; }
static void set_compare_fused(void *o, const char *v) { ((Options *)o)->compare_fused = true; }
static void set_split(void *o, const char *v) { ((Options *)o)->split = true; }
static void set_arch(void *o, const char *v) { ((Options *)o)->arch = v; }
static void set_device(void *o, const char *v) { ((Options *)o)->device = v; }
static void set_print_to(void *o, const char *v) { ((Options *)o)->print_to = v; }
static void set_color(void *o, const char *v) { parse_color(o, v); }
static void set_grid(void *o, const char *v) { parse_grid(o, v); }
static void set_werror(void *o, const char *v) { ((Options *)o)->werror = true; }
static void set_no_warnings(void *o, const char *v) { ((Options *)o)->no_warnings = true; }
static void set_check_axis_info(void *o, const char *v) { ((Options *)o)->check_axis_info = true; }
static void set_gpu_ir(void *o, const char *v) { ((Options *)o)->gpu_ir = true; }
static void set_print_after_all(void *o, const char *v) { ((Options *)o)->passes.print_after_all = true; }
static void set_verify_each(void *o, const char *v) { ((Options *)o)->passes.verify_each = true; }
static void set_time_passes(void *o, const char *v) { ((Options *)o)->passes.time_passes = true; }
static void set_check_unchanged(void *o, const char *v) { ((Options *)o)->passes.check_unchanged = true; }
static void set_check_bounds(void *o, const char *v) { ((Options *)o)->passes.check_bounds = true; }

static void set_arg(void *o, const char *v)
{
    push(((Options *)o)->args, &((Options *)o)->nargs, v, "--arg");
}

static void set_print(void *o, const char *v)
{
    push(((Options *)o)->prints, &((Options *)o)->nprints, v, "--print");
}

static void set_feed(void *o, const char *v)
{
    push(((Options *)o)->feeds, &((Options *)o)->nfeeds, v, "--feed");
}

static void set_steps(void *o, const char *v)
{
    int64_t *n = &((Options *)o)->steps;
    if (!parse_i64(v, n) || *n < 1 || *n > 1000000) usage_error("--steps takes a positive integer (at most 1000000), got '%s'", v);
}

static void set_max_iterations(void *o, const char *v)
{
    int64_t *n = &((Options *)o)->max_iterations;
    if (!parse_i64(v, n) || *n < 1) usage_error("--max-iterations takes a positive integer, got '%s'", v);
}

static void set_max_ops(void *o, const char *v)
{
    int64_t *n = &((Options *)o)->max_ops;
    if (!parse_i64(v, n) || *n < 1) usage_error("--max-ops takes a positive integer, got '%s'", v);
}

/* --knob NAME=VALUE: checked now, applied over the environment's values. */
static void set_knob(void *o, const char *v)
{
    Options *opt = o;
    char name[64], why[256];
    size_t n = strcspn(v, "=");
    if (!v[n] || n == 0 || n >= sizeof name) usage_error("--knob takes NAME=VALUE, got '%s'", v);
    snprintf(name, sizeof name, "%.*s", (int)n, v);
    if (!tile_knobs_set(&opt->knobs, name, v + n + 1, why, sizeof why)) usage_error("--knob: %s", why);
    push(opt->knob_args, &opt->nknobs, v, "--knob");
}

static void set_recompute(void *o, const char *v)
{
    IrRematPolicy p;
    if (!ir_remat_policy_from_name(v, &p)) usage_error("--recompute takes save-all, selective or checkpoint, got '%s'", v);
    ((Options *)o)->recompute = v;
}

static void set_memory_budget(void *o, const char *v)
{
    IrRemat r;
    if (!ir_remat_parse_budget(v, &r))
        usage_error("--memory-budget takes bytes (1073741824, 2GiB) or a fraction of save-all's in (0, 1] (0.5), got '%s'", v);
    ((Options *)o)->memory_budget = v;
}

static void set_size(void *o, const char *v)
{
    int64_t n;
    const char *eq = strchr(v, '=');
    if (!eq || eq == v || !parse_i64(eq + 1, &n) || n < 1) usage_error("--size takes NAME=N (N >= 1), got '%s'", v);
    push(((Options *)o)->size_args, &((Options *)o)->nsize_args, v, "--size");
}

static void set_spec(void *o, const char *v)
{
    Options *opt = o;
    if (!strcmp(v, "none")) opt->spec = SPEC_NONE;
    else if (!strcmp(v, "div16")) opt->spec = SPEC_DIV16;
    else if (!strcmp(v, "div8")) opt->spec = SPEC_DIV8;
    else usage_error("--spec takes none, div8 or div16, got '%s'", v);
}

static const CliOption options[] = {
    /* name                takes a value  set */
    {"-o", true, set_out},
    {"--emit", true, set_emit},
    {"--kernel", true, set_kernel},
    {"--graph", true, set_graph},
    {"--fused", false, set_fused},
    {"--compare-fused", false, set_compare_fused},
    {"--split", false, set_split},
    {"--arch", true, set_arch},
    {"-arch", true, set_arch},             /* nvcc's spelling */
    {"--device", true, set_device},
    {"--grid", true, set_grid},
    {"--arg", true, set_arg},
    {"--print", true, set_print},
    {"--print-to", true, set_print_to},
    {"--steps", true, set_steps},
    {"--feed", true, set_feed},
    {"--max-iterations", true, set_max_iterations},
    {"--max-ops", true, set_max_ops},
    {"--spec", true, set_spec},
    {"--color", true, set_color},
    {"-Werror", false, set_werror},
    {"-w", false, set_no_warnings},
    {"--check-axis-info", false, set_check_axis_info},
    {"--gpu-ir", false, set_gpu_ir},
    {"--print-after-all", false, set_print_after_all},
    {"--verify-each", false, set_verify_each},
    {"--time-passes", false, set_time_passes},
    {"--check-unchanged", false, set_check_unchanged},
    {"--check-bounds", false, set_check_bounds},
    {"--knob", true, set_knob},
    {"--recompute", true, set_recompute},
    {"--memory-budget", true, set_memory_budget},
    {"--size", true, set_size},
    {NULL, false, NULL},
};

/* argv through the option table; -D NAME=VALUE / -DNAME=VALUE and -O0..3 are the two
 * spellings a table row does not express. */
static void parse_args(int argc, char **argv, Options *o)
{
    int i = 1;
    if (argc > 1 && !strcmp(argv[1], "run")) {
        o->run = true;
        i = 2;
    }
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout, o->run);
            exit(0);
        } else if (!strcmp(a, "--version")) {
            print_version();
            exit(0);
        } else if (cli_parse_option("tilec", options, argc, argv, &i, o)) continue;
        else if (!strncmp(a, "-D", 2)) parse_define(o, a[2] ? a + 2 : (++i < argc ? argv[i] : ""));
        else if (a[0] == '-' && a[1] == 'O' && a[2] >= '0' && a[2] <= '3' && !a[3]) o->opt_level = a[2] - '0';
        else if (a[0] == '-' && a[1]) usage_error("unknown option '%s'", a);
        else if (o->file) usage_error("more than one input file ('%s')", a);
        else o->file = a;
    }
    if (!o->file) usage_error("no input file%s", "");
}

/* The architectures accepted, as nvcc and clang spell them, and the target of
 * ir/target.h each compiles for: sm_90 has no wgmma without the "a", and tile's sm_90
 * code is sm_90a code; sm_86 and sm_89 run sm_80 code (same major version). */
static const struct { const char *name, *target; } arches[] = {
    {"sm_90a", "sm_90a"}, {"sm_90", "sm_90a"}, {"sm_80", "sm_80"}, {"sm_86", "sm_80"}, {"sm_89", "sm_80"},
};

static void check_arch(Options *o)
{
    for (size_t i = 0; i < sizeof arches / sizeof *arches; i++)
        if (!strcmp(o->arch, arches[i].name) && tile_target(arches[i].target)) {
            o->arch = arches[i].target;
            return;
        }
    usage_error("unknown --arch '%s' (sm_90a, sm_90, sm_80, sm_86 or sm_89)", o->arch);
}

static void check_options(Options *o)
{
    static const char *const emits[] = {"tokens", "ast", "ir", "ir-opt", "ir-gpu", "llvm", "ptx", "cubin", "check",
                                        "graph-ir", "fusion", "graph-kernels"};
    bool ok = false;
    for (size_t k = 0; k < sizeof emits / sizeof *emits; k++) ok |= !strcmp(o->emit, emits[k]);
    if (!ok) usage_error("unknown --emit kind '%s' (tokens, ast, ir, ir-opt, ir-gpu, llvm, ptx, cubin, graph-ir, fusion, graph-kernels)", o->emit);
    check_arch(o);
    if (strcmp(o->device, "cpu") && strcmp(o->device, "gpu"))
        usage_error("unknown --device '%s' (cpu or gpu)", o->device);
    if (!o->run && (o->nargs || o->nprints || o->has_grid || o->max_iterations || o->max_ops || o->print_to))
        usage_error("--arg, --print, --print-to, --grid, --max-iterations and --max-ops belong to 'tilec run'%s", "");
    if (!o->run && (o->check_axis_info || o->gpu_ir)) usage_error("--check-axis-info and --gpu-ir belong to 'tilec run'%s", "");
    if (o->graph && !o->run) usage_error("--graph belongs to 'tilec run'%s", "");
    if ((o->fused || o->compare_fused) && !o->graph)
        usage_error("--fused and --compare-fused belong to 'tilec run --graph'%s", "");
    bool graph_emit = !strcmp(o->emit, "graph-ir") || !strcmp(o->emit, "fusion") || !strcmp(o->emit, "graph-kernels");
    if (o->split && !o->graph && (o->run || !graph_emit))
        usage_error("--split belongs to 'tilec run --graph' and to --emit=graph-ir, fusion and graph-kernels%s", "");
    if (o->split && o->compare_fused) usage_error("--split compares on its own: it does not go with --compare-fused%s", "");
    if ((o->steps || o->nfeeds) && !o->graph) usage_error("--steps and --feed belong to 'tilec run --graph'%s", "");
    if (o->graph && (o->kernel || o->has_grid || o->print_to))
        usage_error("%s does not go with --graph (tilec run --graph takes --arg, --print, --device, --fused, "
                    "--compare-fused and --max-ops)", o->kernel ? "--kernel" : o->has_grid ? "--grid" : "--print-to");
    if (o->gpu_ir && strcmp(o->device, "cpu")) usage_error("--gpu-ir runs in the interpreter: it takes --device cpu%s", "");
    if (o->check_axis_info && strcmp(o->device, "cpu"))
        usage_error("--check-axis-info runs in the interpreter: it takes --device cpu%s", "");
    if (o->check_axis_info && o->passes.check_bounds)
        usage_error("--check-axis-info checks the unchecked variant: leave out --check-bounds%s", "");
    if (o->passes.check_bounds && !o->run && strcmp(o->emit, "ir-gpu") && strcmp(o->emit, "llvm") &&
        strcmp(o->emit, "ptx") && strcmp(o->emit, "cubin"))
        usage_error("--check-bounds takes 'tilec run' or --emit=ir-gpu, llvm, ptx or cubin%s", "");
}

/* ---- run: buffers and scalars ------------------------------------------------------ */
static void store_elem(IrElem e, void *data, int64_t i, double f, int64_t n)
{
    unsigned char *p = (unsigned char *)data + i * ir_elem_bytes(e);
    switch (e) {
    case IR_I1: *p = n != 0; break;
    case IR_I8: case IR_U8: *p = (uint8_t)n; break;
    case IR_I16: case IR_U16: { uint16_t v = (uint16_t)n; memcpy(p, &v, 2); break; }
    case IR_I32: case IR_U32: { uint32_t v = (uint32_t)n; memcpy(p, &v, 4); break; }
    case IR_I64: case IR_U64: memcpy(p, &n, 8); break;
    case IR_F16: { uint16_t v = fp_f32_to_f16((float)f); memcpy(p, &v, 2); break; }
    case IR_BF16: { uint16_t v = fp_f32_to_bf16((float)f); memcpy(p, &v, 2); break; }
    case IR_F32: { float v = (float)f; memcpy(p, &v, 4); break; }
    case IR_F64: memcpy(p, &f, 8); break;
    case IR_F8E4M3: *p = fp_f32_to_f8e4m3((float)f); break;
    case IR_F8E5M2: *p = fp_f32_to_f8e5m2((float)f); break;
    default: break;
    }
}

static void print_elem(FILE *out, IrElem e, const void *data, int64_t i)
{
    const unsigned char *p = (const unsigned char *)data + i * ir_elem_bytes(e);
    uint16_t h;
    uint32_t w;
    uint64_t d;
    float f;
    double g;
    switch (e) {
    case IR_I1: fprintf(out, "%d\n", *p != 0); break;
    case IR_I8: fprintf(out, "%d\n", (int8_t)*p); break;
    case IR_U8: fprintf(out, "%u\n", *p); break;
    case IR_I16: memcpy(&h, p, 2); fprintf(out, "%d\n", (int16_t)h); break;
    case IR_U16: memcpy(&h, p, 2); fprintf(out, "%u\n", h); break;
    case IR_I32: memcpy(&w, p, 4); fprintf(out, "%" PRId32 "\n", (int32_t)w); break;
    case IR_U32: memcpy(&w, p, 4); fprintf(out, "%" PRIu32 "\n", w); break;
    case IR_I64: memcpy(&d, p, 8); fprintf(out, "%" PRId64 "\n", (int64_t)d); break;
    case IR_U64: memcpy(&d, p, 8); fprintf(out, "%" PRIu64 "\n", d); break;
    case IR_F16: memcpy(&h, p, 2); fprintf(out, "%.9g\n", fp_f16_to_f32(h)); break;
    case IR_BF16: memcpy(&h, p, 2); fprintf(out, "%.9g\n", fp_bf16_to_f32(h)); break;
    case IR_F32: memcpy(&f, p, 4); fprintf(out, "%.9g\n", f); break;
    case IR_F64: memcpy(&g, p, 8); fprintf(out, "%.17g\n", g); break;
    case IR_F8E4M3: fprintf(out, "%.9g\n", fp_f8e4m3_to_f32(*p)); break;
    case IR_F8E5M2: fprintf(out, "%.9g\n", fp_f8e5m2_to_f32(*p)); break;
    default: break;
    }
}

static bool read_file_buffer(const char *path, IrElem e, InterpBuffer *b)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "tilec: error: cannot open '%s': %s\n", path, strerror(errno));
        return false;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    int eb = ir_elem_bytes(e);
    if (size < 0 || size % eb) {
        fprintf(stderr, "tilec: error: '%s' has %ld bytes, not a whole number of %s elements\n",
                path, size, ir_elem_name(e));
        fclose(f);
        return false;
    }
    b->count = size / eb;
    b->data = calloc((size_t)(size ? size : 1), 1);
    bool ok = b->data && fread(b->data, 1, (size_t)size, f) == (size_t)size;
    fclose(f);
    if (!ok) fprintf(stderr, "tilec: error: cannot read '%s'\n", path);
    return ok;
}

/* A decimal count of a buffer spec: digits only, at most 2^31. */
static bool parse_count(const char *s, size_t len, long long *out)
{
    char buf[24];
    if (!len || len >= sizeof buf || strspn(s, "0123456789") < len) return false;
    memcpy(buf, s, len);
    buf[len] = 0;
    *out = strtoll(buf, NULL, 10);
    return *out <= (1LL << 31);
}

/* KIND:N or rand:N:SEED, with nothing after: "iota:3abc" and "iota:3,4" are errors. */
static bool parse_buffer_spec(const char *spec, char kind[8], long long *n, long long *seed)
{
    size_t k = strcspn(spec, ":");
    if (k == 0 || k > 6 || spec[k] != ':') return false;
    memcpy(kind, spec, k);
    kind[k] = 0;
    if (strcmp(kind, "zeros") && strcmp(kind, "iota") && strcmp(kind, "rand") && strcmp(kind, "poison"))
        return false;
    const char *num = spec + k + 1, *colon = strchr(num, ':');
    if (!parse_count(num, colon ? (size_t)(colon - num) : strlen(num), n)) return false;
    *seed = 0;
    if (!colon) return true;
    if (strcmp(kind, "rand") || !colon[1]) return false;
    char *end;
    errno = 0;
    *seed = strtoll(colon + 1, &end, 0);
    return !errno && !*end;
}

/* zeros:N, iota:N, rand:N[:SEED] (floats uniform in [0, 1), integers in [0, 100)),
 * poison:N (every byte 0xFF: NaN for floats, -1 for integers; for outputs, so that an
 * element a kernel fails to write shows). */
static bool make_buffer(const char *name, const char *spec, IrElem e, InterpBuffer *b)
{
    b->elem = e;
    if (spec[0] == '@') return read_file_buffer(spec + 1, e, b);
    char kind[8] = {0};
    long long n = 0, seed = 0;
    if (!parse_buffer_spec(spec, kind, &n, &seed)) {
        fprintf(stderr, "tilec: error: argument '%s' is a pointer: give zeros:N, iota:N, "
                        "rand:N[:SEED], poison:N or @FILE, not '%s'\n", name, spec);
        return false;
    }
    b->count = n;
    b->data = calloc((size_t)(n ? n : 1), (size_t)ir_elem_bytes(e));
    if (!b->data) return false;
    if (!strcmp(kind, "poison")) memset(b->data, 0xFF, (size_t)n * (size_t)ir_elem_bytes(e));
    for (int64_t i = 0; i < n && strcmp(kind, "zeros") && strcmp(kind, "poison"); i++) {
        double r = kind[0] == 'i' ? (double)i : tile_rand((uint64_t)seed, i);
        int64_t ri = kind[0] == 'i' ? i : (int64_t)(r * 100.0);
        store_elem(e, b->data, i, r, ri);
    }
    return true;
}

/* The range of an integer element type, for --arg; i64 and u64 are checked by strtoll
 * and strtoull themselves. */
static bool int_range(IrElem e, int64_t *lo, int64_t *hi)
{
    switch (e) {
    case IR_I1: *lo = 0; *hi = 1; return true;
    case IR_I8: *lo = INT8_MIN; *hi = INT8_MAX; return true;
    case IR_U8: *lo = 0; *hi = UINT8_MAX; return true;
    case IR_I16: *lo = INT16_MIN; *hi = INT16_MAX; return true;
    case IR_U16: *lo = 0; *hi = UINT16_MAX; return true;
    case IR_I32: *lo = INT32_MIN; *hi = INT32_MAX; return true;
    case IR_U32: *lo = 0; *hi = UINT32_MAX; return true;
    default: return false;
    }
}

static bool out_of_range(const char *name, const char *val, IrElem e, const char *range)
{
    fprintf(stderr, "tilec: error: argument '%s' is %s: %s is out of its range %s\n", name, ir_elem_name(e),
            val, range);
    return false;
}

/* An integer literal of type e: in its range (a u64 above INT64_MAX keeps its bits). */
static bool make_int_scalar(const char *name, const char *val, IrElem e, InterpArg *a, char **end)
{
    char range[64];
    int64_t lo, hi;
    errno = 0;
    if (e == IR_U64) {
        a->u.i = (int64_t)strtoull(val, end, 0);
        if (strchr(val, '-') || (errno == ERANGE && *end != val))
            return out_of_range(name, val, e, "[0, 18446744073709551615]");
        return true;
    }
    a->u.i = strtoll(val, end, 0);
    if (errno == ERANGE && *end != val && !**end)
        return out_of_range(name, val, e, "[-9223372036854775808, 9223372036854775807]");
    if (*end != val && !**end && int_range(e, &lo, &hi) && (a->u.i < lo || a->u.i > hi)) {
        snprintf(range, sizeof range, "[%" PRId64 ", %" PRId64 "]", lo, hi);
        return out_of_range(name, val, e, range);
    }
    return true;
}

static bool make_scalar(const char *name, const char *val, IrElem e, InterpArg *a)
{
    char *end;
    errno = 0;
    if (ir_elem_is_float(e)) {
        a->u.f = strtod(val, &end);
        bool inf32 = e == IR_F32 && isfinite(a->u.f) && isinf((float)a->u.f);
        if (*end == 0 && end != val && ((errno == ERANGE && isinf(a->u.f)) || inf32))
            return out_of_range(name, val, e, e == IR_F32 ? "of finite f32" : "of finite values");
    } else if (!strcmp(val, "true") || !strcmp(val, "false")) {
        a->u.i = val[0] == 't';
        end = (char *)val + strlen(val);
    } else if (!make_int_scalar(name, val, e, a, &end)) {
        return false;
    }
    if (errno || end == val || *end) {
        fprintf(stderr, "tilec: error: argument '%s' is %s: '%s' is not a literal of that type\n",
                name, ir_elem_name(e), val);
        return false;
    }
    return true;
}

/* The length of the NAME of --arg NAME=VALUE (the whole string without '='). */
static size_t arg_name_len(const char *arg)
{
    const char *eq = strchr(arg, '=');
    return eq ? (size_t)(eq - arg) : strlen(arg);
}

/* A parameter given twice would be bound twice (and its first buffer lost): an error,
 * as a repeated option value is for the compilers. */
static bool check_repeated_args(const Options *o)
{
    bool ok = true;
    for (uint32_t i = 0; i < o->nargs; i++)
        for (uint32_t j = 0; j < i; j++) {
            size_t n = arg_name_len(o->args[i]);
            if (n != arg_name_len(o->args[j]) || strncmp(o->args[i], o->args[j], n)) continue;
            fprintf(stderr, "tilec: error: --arg %.*s is given twice ('%s' and '%s')\n", (int)n, o->args[i],
                    o->args[j], o->args[i]);
            ok = false;
            break;
        }
    return ok;
}

/* Binds every parameter of k to its --arg; returns false (with a message) if one is
 * missing, unknown, repeated or malformed. */
static bool bind_args(const Options *o, const IrFunc *k, InterpArg *args)
{
    if (!check_repeated_args(o)) return false;
    bool ok = true;
    for (uint32_t i = 0; i < o->nargs; i++) {
        const char *eq = strchr(o->args[i], '=');
        uint32_t p = 0;
        while (eq && p < k->body.nargs &&
               (strlen(k->param_names[p]) != (size_t)(eq - o->args[i]) ||
                strncmp(k->param_names[p], o->args[i], (size_t)(eq - o->args[i]))))
            p++;
        if (!eq || p == k->body.nargs) {
            CliNear near;
            char hint[160];
            cli_near_init(&near, o->args[i], arg_name_len(o->args[i]));
            for (uint32_t q = 0; q < k->body.nargs; q++) cli_near_offer(&near, k->param_names[q]);
            fprintf(stderr, "tilec: error: --arg '%s' names no parameter of kernel '%s'%s\n", o->args[i], k->name,
                    cli_near_hint(&near, hint, sizeof hint));
            ok = false;
            continue;
        }
        const IrType *t = ir_value_type(k, k->body.args[p]);
        args[p].is_buffer = t->elem == IR_PTR;
        ok &= args[p].is_buffer ? make_buffer(k->param_names[p], eq + 1, t->pointee, &args[p].u.buf)
                                : make_scalar(k->param_names[p], eq + 1, t->elem, &args[p]);
    }
    for (uint32_t p = 0; p < k->body.nargs; p++) {
        bool given = false;
        for (uint32_t i = 0; i < o->nargs; i++) {
            size_t n = strlen(k->param_names[p]);
            given |= !strncmp(o->args[i], k->param_names[p], n) && o->args[i][n] == '=';
        }
        if (!given) {
            fprintf(stderr, "tilec: error: kernel '%s' needs --arg %s=...\n", k->name, k->param_names[p]);
            ok = false;
        }
    }
    return ok;
}

/* DIR/NAME.bin: the buffer's raw little-endian elements, as @FILE reads them. */
static int write_buffer_file(const char *dir, const char *name, const InterpBuffer *b)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "tilec: error: cannot create '%s': %s\n", dir, strerror(errno));
        return EXIT_INPUT;
    }
    size_t n = strlen(dir) + strlen(name) + 6, bytes = (size_t)b->count * ir_elem_bytes(b->elem);
    char *path = malloc(n);
    if (!path) tl_oom();
    snprintf(path, n, "%s/%s.bin", dir, name);
    CliOutput of;
    bool ok = cli_output_open(&of, "tilec", path, "wb");
    if (ok) ok = cli_output_commit(&of, fwrite(b->data, 1, bytes, of.f) == bytes);
    free(path);
    return ok ? 0 : EXIT_INPUT;
}

/* The --print buffers, in order: as text on out, or as files in --print-to DIR (there
 * every buffer when no --print is given). */
static int print_buffers(const Options *o, const IrFunc *k, const InterpArg *args, FILE *out)
{
    for (uint32_t p = 0; o->print_to && !o->nprints && p < k->body.nargs; p++)
        if (args[p].is_buffer && write_buffer_file(o->print_to, k->param_names[p], &args[p].u.buf)) return EXIT_INPUT;
    for (uint32_t i = 0; i < o->nprints; i++) {
        uint32_t p = 0;
        while (p < k->body.nargs && strcmp(k->param_names[p], o->prints[i])) p++;
        if (p == k->body.nargs || !args[p].is_buffer) {
            CliNear near;
            char hint[160];
            cli_near_init(&near, o->prints[i], strlen(o->prints[i]));
            for (uint32_t q = 0; q < k->body.nargs; q++)
                if (args[q].is_buffer) cli_near_offer(&near, k->param_names[q]);
            fprintf(stderr, "tilec: error: --print '%s' names no pointer parameter of kernel '%s'%s\n",
                    o->prints[i], k->name, cli_near_hint(&near, hint, sizeof hint));
            return EXIT_INPUT;
        }
        if (o->print_to) {
            if (write_buffer_file(o->print_to, o->prints[i], &args[p].u.buf)) return EXIT_INPUT;
            continue;
        }
        for (int64_t e = 0; e < args[p].u.buf.count; e++)
            print_elem(out, args[p].u.buf.elem, args[p].u.buf.data, e);
    }
    return 0;
}

/* ---- run --device gpu: the same buffers through libtileRT ------------------------------- */
static int gpu_fail(TrtStatus st)
{
    fprintf(stderr, "tilec: error: %s: %s\n", trt_status_name(st), trt_last_error());
    return EXIT_INPUT;
}

/* A scalar argument as the runtime takes it: the parameter's own width and kind. */
static TrtArg gpu_scalar(IrElem e, const InterpArg *a)
{
    TrtArg t;
    memset(&t, 0, sizeof t);
    switch (e) {
    case IR_I1: t.kind = TRT_ARG_BOOL; t.v.i8 = (int8_t)(a->u.i != 0); break;
    case IR_I8: t.kind = TRT_ARG_I8; t.v.i8 = (int8_t)a->u.i; break;
    case IR_I16: t.kind = TRT_ARG_I16; t.v.i16 = (int16_t)a->u.i; break;
    case IR_I32: t.kind = TRT_ARG_I32; t.v.i32 = (int32_t)a->u.i; break;
    case IR_U8: t.kind = TRT_ARG_U8; t.v.u8 = (uint8_t)a->u.i; break;
    case IR_U16: t.kind = TRT_ARG_U16; t.v.u16 = (uint16_t)a->u.i; break;
    case IR_U32: t.kind = TRT_ARG_U32; t.v.u32 = (uint32_t)a->u.i; break;
    case IR_U64: t.kind = TRT_ARG_U64; t.v.u64 = (uint64_t)a->u.i; break;
    case IR_F16: t.kind = TRT_ARG_F16; t.v.u16 = fp_f32_to_f16((float)a->u.f); break;
    case IR_BF16: t.kind = TRT_ARG_BF16; t.v.u16 = fp_f32_to_bf16((float)a->u.f); break;
    case IR_F32: t.kind = TRT_ARG_F32; t.v.f32 = (float)a->u.f; break;
    case IR_F64: t.kind = TRT_ARG_F64; t.v.f64 = a->u.f; break;
    default: t.kind = TRT_ARG_I64; t.v.i64 = a->u.i; break;
    }
    return t;
}

/* The -D values that name consts of k (or launch keys), for trt_module_get_kernel. */
static uint32_t gpu_consts(const Options *o, const IrFunc *k, TrtConst *out)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < o->ndefines; i++) {
        bool mine = ir_launch_key(o->defines[i].name);
        for (uint32_t c = 0; c < k->nconsts; c++) mine |= !strcmp(k->consts[c].name, o->defines[i].name);
        if (mine) out[n++] = (TrtConst){o->defines[i].name, o->defines[i].value};
    }
    return n;
}

/* Copies the buffers to the device, launches k through the runtime, and copies every
 * buffer back, so --print shows what the GPU computed. */
static int gpu_launch(TrtContext *ctx, const Options *o, const IrFunc *k, InterpArg *args,
                      const int64_t grid[3], CUdeviceptr *dev, TrtArg *targs)
{
    TrtModule *mod = NULL;
    TrtKernel *kern = NULL;
    TrtConst consts[MAX_LIST];
    TrtStatus st = trt_module_load_string(ctx, o->src->name, o->src->text, &mod);
    if (!st) st = trt_module_get_kernel(mod, k->name, consts, gpu_consts(o, k, consts), &kern);
    for (uint32_t p = 0; p < k->body.nargs && !st; p++) {
        const IrType *t = ir_value_type(k, k->body.args[p]);
        size_t bytes = args[p].is_buffer ? (size_t)args[p].u.buf.count * ir_elem_bytes(args[p].u.buf.elem) : 0;
        if (args[p].is_buffer && !(st = trt_mem_alloc(ctx, bytes, &dev[p])))
            st = trt_memcpy_htod(ctx, dev[p], args[p].u.buf.data, bytes);
        targs[p] = args[p].is_buffer ? trt_arg_ptr(dev[p]) : gpu_scalar(t->elem, &args[p]);
    }
    uint32_t g[3] = {(uint32_t)grid[0], (uint32_t)grid[1], (uint32_t)grid[2]};
    uint64_t *sizes = calloc(k->body.nargs + 1, sizeof *sizes);   /* bytes of each buffer */
    for (uint32_t p = 0; sizes && p < k->body.nargs; p++)
        sizes[p] = args[p].is_buffer ? (uint64_t)args[p].u.buf.count * ir_elem_bytes(args[p].u.buf.elem) : 0;
    if (!st && !sizes) st = TRT_ERROR_OUT_OF_MEMORY;
    /* Without --grid, a kernel with a grid(...) clause launches as a job's would: the
     * runtime evaluates the clause and picks the config (TILE_MODE, a tuned winner in
     * the cache; TILE_RECORD records it). */
    TrtKernelInfo ki = {0};
    bool own_grid = !o->has_grid && mod && !trt_module_kernel_info(mod, k->name, &ki) && ki.has_grid;
    if (!st) st = trt_launch_sized(kern, targs, sizes, k->body.nargs, own_grid ? NULL : g, NULL);
    free(sizes);
    if (!st) st = trt_synchronize(ctx);
    for (uint32_t p = 0; p < k->body.nargs && !st; p++)
        if (args[p].is_buffer)
            st = trt_memcpy_dtoh(ctx, args[p].u.buf.data, dev[p],
                                 (size_t)args[p].u.buf.count * ir_elem_bytes(args[p].u.buf.elem));
    int rc = st ? gpu_fail(st) : 0;
    trt_module_destroy(mod);
    return rc;
}

static int run_on_gpu(const Options *o, const IrFunc *k, InterpArg *args, const int64_t grid[3])
{
    TrtContext *ctx = NULL;
    TrtStatus st = trt_context_create(0, TRT_MODE_FROM_ENV, NULL, &ctx);
    if (!st && o->passes.check_bounds) st = trt_context_set_debug(ctx, TRT_DEBUG_BOUNDS);
    for (uint32_t i = 0; i < o->nknobs && !st; i++) {   /* checked by set_knob: NAME=VALUE */
        char name[64];
        size_t n = strcspn(o->knob_args[i], "=");
        snprintf(name, sizeof name, "%.*s", (int)n, o->knob_args[i]);
        st = trt_context_set_knob(ctx, name, o->knob_args[i] + n + 1);
    }
    if (st) {
        trt_context_destroy(ctx);
        return gpu_fail(st);
    }
    CUdeviceptr *dev = calloc(k->body.nargs + 1, sizeof *dev);
    TrtArg *targs = calloc(k->body.nargs + 1, sizeof *targs);
    int rc = dev && targs ? gpu_launch(ctx, o, k, args, grid, dev, targs) : EXIT_INPUT;
    for (uint32_t p = 0; dev && p < k->body.nargs; p++) trt_mem_free(ctx, dev[p]);
    free(dev);
    free(targs);
    trt_context_destroy(ctx);
    return rc;
}

/* The kernel as the runtime compiles it for these arguments (specialized to their
 * classes, pointers taken as 16-byte aligned, optimized at -O3), run in the
 * interpreter with every fact of the axis analysis checked on the values. */
static bool run_checking_axis_info(IrFunc *k, const InterpArg *args, const int64_t grid[3],
                                   const InterpOptions *io, DiagList *diags)
{
    SpecClass *classes = calloc(k->body.nargs + 1, sizeof *classes);
    if (!classes) return false;
    spec_classes_of_args(k, args, classes);
    uint64_t aligned = pass_prepare_gpu(k, classes, &(PassOptions){0});
    free(classes);
    return axisinfo_check_run(k, aligned, args, k->body.nargs, grid, io, diags);
}

/* --check-bounds on the CPU: the bounds pass on k (after the GPU passes with --gpu-ir),
 * then the interpreter on the checked IR with the hidden arguments of the buffers' sizes
 * and a report; a report of an access outside becomes the same error the interpreter
 * gives for an unchecked run, made from the report (as libtileRT makes it on the GPU). */
static bool run_checked(const Options *o, IrFunc *k, const InterpArg *args, const int64_t grid[3],
                        const InterpOptions *io, DiagList *diags)
{
    uint32_t nuser = k->body.nargs;
    pass_bounds(k);
    pass_verify_stage(k->module, "bounds", stderr);
    InterpArg *full = calloc(k->body.nargs + 1, sizeof *full);
    int64_t report[IR_BOUNDS_WORDS];
    if (!full) return false;
    memcpy(full, args, nuser * sizeof *full);
    uint32_t n = bounds_bind_args(k, full, nuser, report);
    bool ok = interp_run(k, full, n, grid, io, diags);
    free(full);
    return ok && !bounds_report_diag(report, k->name, k->param_names, nuser, o->src, diags);
}

static void specialize_ints(IrModule *m, SpecClass ints);

/* tilec's GPU code is the variant whose pointer arguments are 16-byte aligned (the
 * runtime's allocations, tilec run's buffers): the GPU passes may then copy by TMA. */
static void assume_aligned(IrModule *m)
{
    for (uint32_t i = 0; i < m->nfuncs; i++) m->funcs[i]->aligned_params = ~UINT64_C(0);
}

/* The grid of a run, from --grid or grid(...), on either device: what a GPU can
 * launch, or empty (*empty set: a size 0, as a grid(cdiv(n, B)) of n = 0 gives; the
 * run is then a no-op, as a Triton launch of an empty grid is). A negative size or
 * one past the limits is an error. */
static int check_grid(const IrFunc *k, const int64_t grid[3], bool *empty)
{
    *empty = false;
    for (int d = 0; d < 3; d++) {
        *empty |= grid[d] == 0;
        if (grid[d] < 0 || grid[d] > (d ? INTERP_MAX_GRID_YZ : INTERP_MAX_GRID_X)) {
            fprintf(stderr, "tilec: error: the grid of kernel '%s' is %" PRId64 " x %" PRId64 " x %" PRId64
                            ": each size must be at least 0 and at most 2147483647 x 65535 x 65535\n",
                    k->name, grid[0], grid[1], grid[2]);
            return EXIT_INPUT;
        }
    }
    if (*empty)
        fprintf(stderr, "tilec: note: the grid of kernel '%s' is %" PRId64 " x %" PRId64 " x %" PRId64
                        ": nothing runs\n", k->name, grid[0], grid[1], grid[2]);
    return 0;
}

static int run_kernel(const Options *o, IrModule *m, DiagList *diags, FILE *out)
{
    IrFunc *k = ir_module_find(m, o->kernel);
    if (!k || k->kind != IR_FUNC_KERNEL) {
        fprintf(stderr, "tilec: error: no kernel named '%s' in '%s'\n", o->kernel, o->file);
        return EXIT_INPUT;
    }
    /* room for the hidden arguments of --check-bounds (run_checked), left zero here */
    InterpArg *args = calloc(2 * k->body.nargs + 1, sizeof *args);
    int rc = bind_args(o, k, args) ? 0 : EXIT_INPUT;
    int64_t grid[3] = {1, 1, 1};
    if (!rc && o->has_grid) memcpy(grid, o->grid, sizeof grid);
    else if (!rc && k->grid) rc = interp_eval_grid(k->grid, args, k->body.nargs, grid, diags) < 0 ? EXIT_INPUT : 0;
    else if (!rc) {
        fprintf(stderr, "tilec: error: kernel '%s' has no grid(...) clause: give --grid X[,Y[,Z]]\n", k->name);
        rc = EXIT_INPUT;
    }
    bool empty = false;
    if (!rc) rc = check_grid(k, grid, &empty);
    InterpOptions io = {.print_out = out, .max_loop_iterations = o->max_iterations, .max_work = o->max_ops};
    if (!rc && o->gpu_ir) {                    /* the interpreter ignores layouts */
        if (o->spec != SPEC_NONE) specialize_ints(m, o->spec);
        assume_aligned(m);
        pass_run_gpu(m, &(PassOptions){0});
    }
    bool go = !rc && !empty;
    if (go && !strcmp(o->device, "gpu")) rc = run_on_gpu(o, k, args, grid);
    else if (go && o->check_axis_info) rc = run_checking_axis_info(k, args, grid, &io, diags) ? 0 : EXIT_INPUT;
    else if (go && o->passes.check_bounds) rc = run_checked(o, k, args, grid, &io, diags) ? 0 : EXIT_INPUT;
    else if (go && !interp_run(k, args, k->body.nargs, grid, &io, diags)) rc = EXIT_INPUT;
    if (!rc) rc = print_buffers(o, k, args, out);
    for (uint32_t p = 0; p < k->body.nargs; p++)
        if (args[p].is_buffer) free(args[p].u.buf.data);
    free(args);
    return rc;
}

/* ---- GPU code (codegen/) ---------------------------------------------------------------- */
#ifdef TILE_HAVE_CODEGEN
/* ptxas PTX -o OUT, without a shell (file names are passed as they are). */
static int run_ptxas(const Options *o, const char *ptx_path, const char *cubin_path)
{
    char arch[32];
    snprintf(arch, sizeof arch, "-arch=%s", o->arch);
    char *argv[] = {"ptxas", arch, (char *)ptx_path, "-o", (char *)cubin_path, NULL};
    extern char **environ;
    pid_t pid;
    int status = 0;
    if (posix_spawnp(&pid, "ptxas", NULL, NULL, argv, environ) != 0 ||
        waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fputs("tilec: error: ptxas (CUDA's assembler, on PATH) failed or is missing\n", stderr);
        return EXIT_INPUT;
    }
    return 0;
}

/* The cubin of PTX `text`, through ptxas, copied to out (a temporary file of
 * cli_output_open or standard output). */
static int emit_cubin(const Options *o, const char *text, FILE *out)
{
    char ptx[] = "/tmp/tilec-ptx-XXXXXX", cubin[] = "/tmp/tilec-cubin-XXXXXX";
    int fd = mkstemp(ptx), cfd = mkstemp(cubin);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    bool written = f && fputs(text, f) >= 0;
    if (f) written &= fclose(f) == 0;
    else if (fd >= 0) close(fd);
    int rc = written && cfd >= 0 ? run_ptxas(o, ptx, cubin) : EXIT_INPUT;
    FILE *in = !rc ? fdopen(cfd, "rb") : NULL;
    char buf[65536];
    for (size_t n; in && (n = fread(buf, 1, sizeof buf, in)) > 0;)
        if (fwrite(buf, 1, n, out) != n) rc = EXIT_INPUT;
    if (in) fclose(in);
    else if (cfd >= 0) close(cfd);
    if (fd >= 0) remove(ptx);
    if (cfd >= 0) remove(cubin);
    return rc;
}

/* PTX from tilec is the variant whose pointer arguments are 16-byte aligned (what the
 * runtime compiles for aligned arguments, and what Triton assumes by default). */
static int emit_gpu(const Options *o, IrModule *m, DiagList *diags, FILE *out)
{
    CgOptions co = {.arch = o->arch, .opt_level = o->opt_level, .aligned_params = ~UINT64_C(0)};
    bool llvm = !strcmp(o->emit, "llvm");
    if (!strcmp(o->emit, "cubin") && !o->out) {
        fputs("tilec: error: --emit=cubin needs -o FILE (or -o - for standard output)\n", stderr);
        return EXIT_USAGE;
    }
    PassOptions po = o->passes;
    po.dump = stderr;
    assume_aligned(m);
    pass_run_gpu(m, &po);
    CgTimes ct = {0};
    if (po.time_passes) co.times = &ct;
    char *text = llvm ? cg_emit_llvm(m, &co, diags) : cg_emit_ptx(m, &co, diags);
    if (text && po.time_passes) {
        fprintf(stderr, "// code generation times (ms)\n//   %-14s %9.3f\n//   %-14s %9.3f\n", "llvm-ir",
                ct.lower_ms, "llvm-opt", ct.opt_ms);
        if (!llvm) fprintf(stderr, "//   %-14s %9.3f\n", "nvptx", ct.emit_ms);
    }
    if (!text) return EXIT_INPUT;
    int rc = 0;
    if (strcmp(o->emit, "cubin")) fputs(text, out);
    else rc = emit_cubin(o, text, out);
    tl_free(text);
    return rc;
}
#else
static int emit_gpu(const Options *o, IrModule *m, DiagList *diags, FILE *out)
{
    fputs("tilec: error: this build has no GPU code generator (LLVM 19 was not found)\n", stderr);
    return EXIT_INPUT;
}
#endif

/* ---- the compile pipeline ------------------------------------------------------------ */
/* --spec=div16 (div8): every kernel as the runtime specializes it when its pointers are
 * 16-byte aligned and its integer arguments multiples of 16 (multiples of 8, not of 16;
 * passes/specialize.h): ints is SPEC_DIV16 or SPEC_DIV8. */
static void specialize_ints(IrModule *m, SpecClass ints)
{
    for (uint32_t i = 0; i < m->nfuncs; i++) {
        IrFunc *f = m->funcs[i];
        if (f->kind != IR_FUNC_KERNEL) continue;
        SpecClass *classes = calloc(f->body.nargs + 1, sizeof *classes);
        if (!classes) tl_oom();
        for (uint32_t p = 0; p < f->body.nargs; p++) {
            IrElem e = ir_value_type(f, f->body.args[p])->elem;
            classes[p] = e == IR_PTR ? SPEC_ALIGN16 : ir_elem_is_int(e) && e != IR_I1 ? ints : SPEC_NONE;
        }
        pass_specialize(f, classes);
        free(classes);
    }
}

/* ---- kernels by name ------------------------------------------------------------------ */
static bool is_kernel(const AstItem *it) { return it->kind == AST_KERNEL && it->body; }

/* "  add(c: *i32, n: i32, const BLOCK: i32)": a kernel and its parameters as written. */
static void print_kernel_line(const AstItem *k)
{
    fprintf(stderr, "  %s(", k->name);
    for (uint32_t p = 0; p < k->nparams; p++) {
        const AstParam *q = &k->params[p];
        const AstType *t = q->type;
        fprintf(stderr, "%s%s%s: %s%s", p ? ", " : "", q->is_const ? "const " : "", q->name,
                t && t->kind == AST_TYPE_PTR ? "*" : "", t && t->name ? t->name : "?");
    }
    fputs(")\n", stderr);
}

static void list_kernels(const Options *o, const AstProgram *prog)
{
    fprintf(stderr, "tilec: note: the kernels of '%s':\n", o->src->name);
    for (uint32_t i = 0; i < prog->nitems; i++)
        if (is_kernel(&prog->items[i])) print_kernel_line(&prog->items[i]);
}

/* --kernel names a kernel of the file (else the kernels are listed, with the nearest
 * name); `run` without --kernel takes the file's only kernel. */
static int select_kernel(Options *o, const AstProgram *prog)
{
    const AstItem *only = NULL;
    uint32_t nkernels = 0;
    CliNear near;
    char hint[160];
    cli_near_init(&near, o->kernel ? o->kernel : "", o->kernel ? strlen(o->kernel) : 0);
    for (uint32_t i = 0; i < prog->nitems; i++) {
        const AstItem *it = &prog->items[i];
        if (!is_kernel(it)) continue;
        nkernels++;
        only = it;
        if (o->kernel && !strcmp(o->kernel, it->name)) return 0;
        cli_near_offer(&near, it->name);
    }
    if (!o->kernel && (!o->run || nkernels == 1)) {
        if (o->run) o->kernel = only->name;
        return 0;
    }
    if (o->kernel)
        fprintf(stderr, "tilec: error: no kernel named '%s' in '%s'%s\n", o->kernel, o->src->name,
                cli_near_hint(&near, hint, sizeof hint));
    else if (nkernels) fprintf(stderr, "tilec: error: '%s' has %u kernels: give --kernel NAME\n", o->src->name, nkernels);
    else fprintf(stderr, "tilec: error: '%s' has no kernel to run\n", o->src->name);
    if (nkernels) list_kernels(o, prog);
    return EXIT_INPUT;
}

/* ---- diagnostics ------------------------------------------------------------------- */
/* -Werror: every warning so far becomes an error (after lowering, so that a run
 * stops before it starts, and again before printing). */
static void apply_werror(const Options *o, DiagList *d)
{
    for (size_t i = 0; o->werror && i < d->len; i++)
        if (d->items[i].level == DIAG_WARNING) {
            d->items[i].level = DIAG_ERROR;
            d->nerrors++;
        }
}

/* Prints the diagnostics as -Werror and -w ask (a note belongs to the diagnostic
 * before it and goes with it), then clang's count: "2 errors generated.". */
static void print_diags(const Options *o, DiagList *d)
{
    size_t nwarnings = 0;
    bool shown = true;
    apply_werror(o, d);
    for (size_t i = 0; i < d->len; i++) {
        const Diag *g = &d->items[i];
        if (g->level != DIAG_NOTE) shown = !(g->level == DIAG_WARNING && o->no_warnings);
        if (!shown) continue;
        nwarnings += g->level == DIAG_WARNING;
        cli_print_diag("tilec", g, stderr, o->color);
    }
    size_t max = d->max_errors ? d->max_errors : 50;
    if (d->nerrors > max) fprintf(stderr, "tilec: error: too many errors (%zu), stopped after %zu\n", d->nerrors, max);
    if (nwarnings)
        fprintf(stderr, "%zu warning%s%s", nwarnings, nwarnings == 1 ? "" : "s", d->nerrors ? " and " : " generated.\n");
    if (d->nerrors) fprintf(stderr, "%zu error%s generated.\n", d->nerrors, d->nerrors == 1 ? "" : "s");
}

/* The graph IR of every graph of the program (already checked by fe_lower) into m;
 * a graph that the graph IR cannot hold yet is an error naming why. */
static bool build_graphs(IrCtx *ctx, const AstProgram *prog, IrGraphModule *m, DiagList *diags)
{
    bool ok = true;
    for (uint32_t i = 0; i < prog->nitems; i++) {
        const AstItem *it = &prog->items[i];
        if (it->kind != AST_GRAPH || !it->body) continue;
        FeGraphNoIr why;
        IrGraph *g = fe_build_graph(ir_ctx_arena(ctx), prog, it, m, diags, &why);
        if (!g && why.what) {
            diag_error(diags, why.loc, "graph '%s' cannot be compiled yet: %s (the graph IR has no control flow)",
                       it->name, why.what);
            ok = false;
        }
        if (g && !ir_graph_verify(g, ir_ctx_arena(ctx), diags)) {
            fprintf(stderr, "tilec: internal error: the graph IR of '%s' does not verify:\n", it->name);
            ir_graph_print(g, stderr);
            ok = false;
        }
    }
    return ok;
}

/* ---- recomputation (passes/graph_remat.c) --------------------------------------------- */

/* The sizes of --size for g's size names, or NULL when --size gives none of them (a name
 * it leaves out counts as PASS_REMAT_DEFAULT_SIZE). */
static const int64_t *compile_sizes(const Options *o, const IrGraph *g, Arena *a)
{
    int64_t *sizes = arena_alloc(a, (g->nsizes + 1) * sizeof *sizes);
    bool any = false;
    for (uint32_t k = 0; k < g->nsizes; k++) {
        sizes[k] = PASS_REMAT_DEFAULT_SIZE;
        size_t n = strlen(g->sizes[k]);
        for (uint32_t i = 0; i < o->nsize_args; i++)
            if (!strncmp(o->size_args[i], g->sizes[k], n) && o->size_args[i][n] == '=')
                any = parse_i64(o->size_args[i] + n + 1, &sizes[k]);
    }
    return any ? sizes : NULL;
}

/* Rewrites g by the recomputation pass, with its @recompute under --recompute and
 * --memory-budget; policy, when not NULL, replaces both (the comparison of policies).
 * liger: the LM head in Liger's order, as the runtime's split builds it (else as its
 * joint run does; docs/GRAPHS.md "The LM head"). */
static const PassRemat *remat(const Options *o, IrGraph *g, const int64_t *sizes, const char *policy, bool liger,
                              Arena *a)
{
    IrRemat r;
    const char *err;
    if (!pass_remat_options(g, policy ? policy : o->recompute, policy ? NULL : o->memory_budget, &r, &err))
        usage_error("%s", err);
    if (policy) r.budget_kind = IR_BUDGET_NONE;
    if (g->lce_chunk) pass_graph_lmce(g, g->lce_chunk, liger, a);   /* @linear_cross_entropy: before the cut */
    const PassRemat *rep = pass_graph_remat(g, &r, sizes, a);
    pass_graph_seed_input(g);   /* the backward's seed an input, every op a phase */
    DiagList d;
    diag_init(&d);
    if (!ir_graph_verify(g, a, &d)) {
        fprintf(stderr, "tilec: internal error: graph '%s' does not verify after recomputation:\n", g->name);
        for (size_t i = 0; i < d.len; i++) fprintf(stderr, "%s\n", d.items[i].msg);
        ir_graph_print(g, stderr);
        abort();
    }
    diag_free(&d);
    return rep;
}

/* One line per policy: the bytes it saves and its plan's buffers (the peak), for g as
 * built (before the pass). */
static void print_policies(const Options *o, const IrGraph *g, const int64_t *sizes, Arena *a, FILE *out)
{
    for (int p = 0; p < 3; p++) {
        IrGraphModule *m = ir_gmodule_create(a);
        IrGraph *c = ir_graph_clone(m, g);
        const PassRemat *rep = remat(o, c, sizes, ir_remat_policy_names[p], o->split, a);
        const IrGPlan *plan = pass_graph_fuse(c, a);
        IrSize mem = pass_gplan_buffer_bytes(c, plan, sizes, a);
        fprintf(out, "policy %s: saves %s bytes (%.0f), recomputes %u value%s; %u kernels, buffers %s bytes (%.0f)\n",
                ir_remat_policy_names[p], ir_size_str(a, rep->saved_bytes), rep->saved_at, rep->nrecomputed,
                rep->nrecomputed == 1 ? "" : "s", ir_gplan_num_launched(plan), ir_size_str(a, mem),
                pass_remat_eval(c, sizes, mem));
        ir_gmodule_destroy(m);
    }
}

/* Whether g (after remat) runs its LM head in Liger's order: a linear_cross_entropy in
 * the forward. */
static bool has_liger(const IrGraph *g)
{
    for (uint32_t o = 0; o < g->nfwd; o++)
        if (g->ops.data[o].kind == IR_GOP_LINEAR_CROSS_ENTROPY) return true;
    return false;
}

/* The forward/backward split of g's plan (passes/graph_split.c), for a graph with a grad.
 * built: g as built (before remat), NULL with --split (g is the split's own). Without
 * --split, a g whose split builds the LM head in Liger's order has a plan of its own
 * there: a line says so instead. */
static void print_split(const Options *o, const IrGraph *g, const IrGraph *built, const IrGPlan *plan, Arena *a,
                        FILE *out)
{
    if (built && g->lce_chunk) {
        IrGraphModule *m = ir_gmodule_create(a);
        IrGraph *c = ir_graph_clone(m, built);
        remat(o, c, compile_sizes(o, c, a), NULL, true, a);
        bool own = has_liger(c);
        ir_gmodule_destroy(m);
        if (own) {
            fprintf(out, "split @%s: a plan of its own, the LM head in Liger's order (tilec --emit=fusion --split)\n",
                    g->name);
            return;
        }
    }
    const char *err;
    const PassSplit *s = pass_graph_split(g, plan, a, &err);
    if (err) {
        fprintf(stderr, "tilec: internal error: graph '%s': the split of its plan: %s\n", g->name, err);
        ir_gplan_print(g, plan, stderr);
        abort();
    }
    if (s) pass_graph_split_print(g, plan, s, out);
}

/* graph-ir: the graphs' IR; fusion: their plans; graph-kernels: the Tile source of the
 * plans' kernels (passes/graph_lower.c), a program that tilec compiles as it is. Graphs
 * with a grad go through the recomputation pass first; fusion then also prints what it
 * saves and recomputes, the plan's memory and every policy's. */
static int emit_graph_ir(const Options *o, IrCtx *ctx, const AstProgram *prog, DiagList *diags, FILE *out)
{
    Arena *a = ir_ctx_arena(ctx);
    IrGraphModule *m = ir_gmodule_create(a);
    bool ok = build_graphs(ctx, prog, m, diags), fusion = !strcmp(o->emit, "fusion");
    size_t n = m->graphs.len;
    const PassRemat **reps = arena_alloc(a, (n + 1) * sizeof *reps);
    IrGraphModule *before = ir_gmodule_create(a);
    for (size_t i = 0; ok && i < n; i++) {
        IrGraph *g = m->graphs.data[i];
        if (fusion && g->nfwd) ir_graph_clone(before, g);
        reps[i] = remat(o, g, compile_sizes(o, g, a), NULL, o->split, a);
    }
    if (ok && !strcmp(o->emit, "graph-ir")) ir_gmodule_print(m, out);
    for (size_t i = 0, b = 0; ok && strcmp(o->emit, "graph-ir") && i < n; i++) {
        const IrGraph *g = m->graphs.data[i];
        const IrGPlan *plan = pass_graph_fuse(g, a);
        if (!fusion) {
            fputs(pass_graph_lower(g, plan, a)->source, out);
            continue;
        }
        ir_gplan_print(g, plan, out);
        pass_graph_remat_print(g, reps[i], plan, out);
        const IrGraph *built = g->nfwd ? before->graphs.data[b++] : NULL;
        print_split(o, g, o->split ? NULL : built, plan, a, out);
        if (built) print_policies(o, built, compile_sizes(o, g, a), a, out);
    }
    ir_gmodule_destroy(before);
    ir_gmodule_destroy(m);
    return ok ? 0 : EXIT_INPUT;
}

/* ---- run --graph: the graph IR interpreter ------------------------------------------- */

/* The --arg NAME=VALUE of name, or NULL. */
static const char *arg_value(const Options *o, const char *name)
{
    for (uint32_t i = 0; i < o->nargs; i++) {
        size_t n = arg_name_len(o->args[i]);
        if (strlen(name) == n && !strncmp(o->args[i], name, n) && o->args[i][n] == '=') return o->args[i] + n + 1;
    }
    return NULL;
}

/* Every --arg names a parameter or a size of g. */
static bool graph_args_known(const Options *o, const IrGraph *g)
{
    for (uint32_t i = 0; i < o->nargs; i++) {
        size_t n = arg_name_len(o->args[i]);
        bool known = false;
        CliNear near;
        char hint[160];
        cli_near_init(&near, o->args[i], n);
        for (size_t p = 0; p < g->params.len && !known; p++) {
            const char *pn = g->values.data[g->params.data[p]].name;
            known = pn && strlen(pn) == n && !strncmp(pn, o->args[i], n);
            cli_near_offer(&near, pn);
        }
        for (uint32_t k = 0; k < g->nsizes && !known; k++) {
            known = strlen(g->sizes[k]) == n && !strncmp(g->sizes[k], o->args[i], n);
            cli_near_offer(&near, g->sizes[k]);
        }
        if (!known) {
            fprintf(stderr, "tilec: error: --arg '%s' names no parameter or size of graph '%s'%s\n", o->args[i],
                    g->name, cli_near_hint(&near, hint, sizeof hint));
            return false;
        }
    }
    return true;
}

static bool graph_sizes(const Options *o, const IrGraph *g, int64_t *sizes)
{
    for (uint32_t k = 0; k < g->nsizes; k++) {
        const char *v = arg_value(o, g->sizes[k]);
        InterpArg a;
        if (!v) {
            fprintf(stderr, "tilec: error: graph '%s' needs --arg %s=N (a size of its parameters)\n", g->name, g->sizes[k]);
            return false;
        }
        if (!make_scalar(g->sizes[k], v, IR_I64, &a)) return false;
        if (a.u.i < 0) {
            fprintf(stderr, "tilec: error: size %s must not be negative, not %s\n", g->sizes[k], v);
            return false;
        }
        sizes[k] = a.u.i;
    }
    return true;
}

/* One parameter's tensor from its --arg: a literal for a scalar, a buffer otherwise (of
 * `steps` times its elements under --steps: slice `step`). */
static bool graph_param(const Options *o, const IrGraph *g, const int64_t *sizes, size_t p, IrGTensor *t, int64_t step,
                        int64_t steps)
{
    const IrGValue *pv = &g->values.data[g->params.data[p]];
    const char *v = arg_value(o, pv->name);
    int64_t dims[64];
    if (!v) {
        fprintf(stderr, "tilec: error: graph '%s' needs --arg %s=...\n", g->name, pv->name);
        return false;
    }
    for (uint32_t k = 0; k < pv->type.rank && k < 64; k++)
        ir_size_eval(pv->type.dims[k], g->sizes, sizes, g->nsizes, &dims[k]);
    if (pv->type.rank > 64 || !ir_gtensor_alloc(t, pv->type.elem, pv->type.rank, dims)) {
        fprintf(stderr, "tilec: error: parameter '%s' is too large\n", pv->name);
        return false;
    }
    if (pv->type.rank == 0) {
        InterpArg a;
        if (!make_scalar(pv->name, v, pv->type.elem, &a)) return false;
        if (t->f) t->f[0] = fp_round(t->elem, a.u.f);
        else t->i[0] = a.u.i;
        return true;
    }
    InterpBuffer b;
    if (!make_buffer(pv->name, v, pv->type.elem, &b)) return false;
    bool sliced = steps > 1 && b.count == t->n * steps, ok = b.count == t->n || sliced;
    if (ok) ir_gtensor_load(t, (const char *)b.data + (sliced ? step * t->n * ir_elem_bytes(t->elem) : 0));
    else fprintf(stderr, "tilec: error: parameter '%s' of type %s needs %lld elements%s; the buffer holds %lld\n",
                 pv->name, ir_ttype_str(g->arena, &pv->type), (long long)t->n, steps > 1 ? " (or one slice per step)" : "",
                 (long long)b.count);
    free(b.data);
    return ok;
}

static void print_tensor(FILE *out, const IrGTensor *t)
{
    void *data = calloc((size_t)(t->n ? t->n : 1), (size_t)ir_elem_bytes(t->elem));
    if (!data) tl_oom();
    ir_gtensor_store(t, data);
    for (int64_t e = 0; e < t->n; e++) print_elem(out, t->elem, data, e);
    free(data);
}

/* --print retK or a parameter's name. */
static int print_graph_values(const Options *o, const IrGraph *g, const IrGTensor *params, const IrGTensor *outs,
                              uint32_t nouts, FILE *out)
{
    for (uint32_t i = 0; i < o->nprints; i++) {
        const char *n = o->prints[i];
        char *end;
        long k = !strncmp(n, "ret", 3) && n[3] ? strtol(n + 3, &end, 10) : -1;
        const IrGTensor *t = k >= 0 && !*end && k < (long)nouts ? &outs[k] : NULL;
        for (size_t p = 0; !t && p < g->params.len; p++)
            if (!strcmp(g->values.data[g->params.data[p]].name, n)) t = &params[p];
        if (!t) {
            CliNear near;
            char hint[160], ret[16];
            cli_near_init(&near, n, strlen(n));
            for (size_t p = 0; p < g->params.len; p++) cli_near_offer(&near, g->values.data[g->params.data[p]].name);
            snprintf(ret, sizeof ret, "ret%u", nouts ? nouts - 1 : 0);
            if (!near.best && !strncmp(n, "ret", 3)) cli_near_offer(&near, ret);
            fprintf(stderr, "tilec: error: --print '%s' names no result (ret0 .. ret%u) or parameter of graph '%s'%s\n",
                    n, nouts ? nouts - 1 : 0, g->name, cli_near_hint(&near, hint, sizeof hint));
            return EXIT_INPUT;
        }
        print_tensor(out, t);
    }
    return 0;
}

/* Whether two tensors hold the same elements (NaN equal to NaN). */
static bool same_tensor(const IrGTensor *x, const IrGTensor *y)
{
    if (x->elem != y->elem || x->n != y->n) return false;
    for (int64_t e = 0; e < x->n; e++) {
        if (x->i && x->i[e] != y->i[e]) return false;
        if (x->f && x->f[e] != y->f[e] && !(isnan(x->f[e]) && isnan(y->f[e]))) return false;
    }
    return true;
}

static void move_tensors(IrGTensor *to, IrGTensor *from, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++) to[k] = from[k], memset(&from[k], 0, sizeof from[k]);
}

static void free_tensors(IrGTensor *t, uint32_t n)
{
    for (uint32_t k = 0; t && k < n; k++) ir_gtensor_free(&t[k]);
    free(t);
}

/* The checks of --compare-fused: the plan interpreter gives the op-by-op bits, and the
 * lowered kernels give them within rounding. */
static bool compare_ways(const IrGTensor *ref, const IrGTensor *plan, const IrGTensor *low, uint32_t nouts, bool gpu,
                         char *err, size_t errlen)
{
    for (uint32_t k = 0; k < nouts; k++) {
        int64_t at;
        if (!same_tensor(&ref[k], &plan[k])) {
            snprintf(err, errlen, "ret%u differs between the op-by-op and the fused run", k);
            return false;
        }
        if (!tilec_graph_close(&ref[k], &low[k], &at)) {
            snprintf(err, errlen, "ret%u differs between the op-by-op run and the lowered kernels (%s) at element %lld", k,
                     gpu ? "on the GPU" : "in the interpreter", (long long)at);
            return false;
        }
    }
    return true;
}

/* Op by op; through the plan's lowered kernels (--fused, and always on the GPU); or
 * all ways, compared (--compare-fused: op by op, the plan interpreter, the kernels). */
/* The runtime's options for --recompute, --memory-budget and the run's sizes. */
static TrtGraphOptions graph_options(const Options *o, const IrGraph *g, const int64_t *sizes, char *buf, size_t n)
{
    size_t w = 0;
    buf[0] = 0;
    for (uint32_t k = 0; k < g->nsizes && w < n; k++)
        w += (size_t)snprintf(buf + w, n - w, "%s%s=%lld", k ? "," : "", g->sizes[k], (long long)(sizes[k] ? sizes[k] : 1));
    return (TrtGraphOptions){o->recompute, o->memory_budget, buf};
}

/* g is the graph as built (save-all's), r the graph the recomputation pass rewrote (the
 * same with --recompute save-all and no budget): op by op runs r, or g with
 * --compare-fused, so that the comparison checks the policy's plan and kernels
 * against save-all's values. */
static bool run_graph_ways(const Options *o, const IrGraph *g, const IrGraph *r, const IrGTensor *params,
                           const int64_t *sizes, IrGTensor *outs, uint32_t nouts, char *err, size_t errlen)
{
    char sz[512];
    TrtGraphOptions gopts = graph_options(o, g, sizes, sz, sizeof sz);
    if (o->split) return tilec_graph_run_split(o->src, r, params, sizes, !strcmp(o->device, "gpu"), &gopts, outs, err,
                                               errlen);
    bool gpu = !strcmp(o->device, "gpu"), lowered = o->fused || gpu;
    IrGTensor *ref = calloc(nouts + 1, sizeof *ref), *plan = calloc(nouts + 1, sizeof *plan),
              *low = calloc(nouts + 1, sizeof *low);
    Arena *a = arena_create();
    if (!ref || !plan || !low || !a) tl_oom();
    bool ok = true;
    if (!lowered || o->compare_fused) ok = ir_graph_interp(o->compare_fused ? g : r, params, sizes, ref, err, errlen);
    if (ok && o->compare_fused) ok = ir_graph_interp_plan(r, pass_graph_fuse(r, a), params, sizes, plan, err, errlen);
    bool have_low = false;
    if (o->max_ops) {   /* the lowered kernels run in libtileRT's interpreter: the same bound */
        char mo[32];
        snprintf(mo, sizeof mo, "%lld", (long long)o->max_ops);
        setenv("TILE_INTERP_MAX_OPS", mo, 1);
    }
    if (ok && (lowered || o->compare_fused)) {
        have_low = tilec_graph_run_lowered(o->src, r, params, sizes, gpu, &gopts, low, err, errlen);
        /* on the CPU, a plan with a kernel kind not lowered yet still runs (and is
         * checked) in the plan interpreter, and says so */
        if (!have_low && !gpu && strstr(err, "cannot be lowered to Tile yet")) {
            fprintf(stderr, "tilec: note: graph '%s': %s; it runs in the plan interpreter\n", g->name, err);
            err[0] = 0;
            if (!o->compare_fused) ok = ir_graph_interp_plan(r, pass_graph_fuse(r, a), params, sizes, plan, err, errlen);
        } else {
            ok = have_low;
        }
    }
    if (ok && o->compare_fused) ok = have_low ? compare_ways(ref, plan, low, nouts, gpu, err, errlen)
                                              : compare_ways(ref, plan, plan, nouts, gpu, err, errlen);
    if (ok) move_tensors(outs, !lowered ? ref : have_low ? low : plan, nouts);
    free_tensors(ref, nouts);
    free_tensors(plan, nouts);
    free_tensors(low, nouts);
    arena_destroy(a);
    return ok;
}

/* --feed retK=PARAM: into fed[PARAM], K + 1 (0: not fed); the types must be equal. */
static bool graph_feeds(const Options *o, const IrGraph *g, uint32_t *fed)
{
    const IrGOp *ret = &g->ops.data[g->ops.len - 1];
    for (uint32_t i = 0; i < o->nfeeds; i++) {
        const char *v = o->feeds[i], *eq = strchr(v, '=');
        char *end = NULL;
        long k = !strncmp(v, "ret", 3) && v[3] >= '0' && v[3] <= '9' ? strtol(v + 3, &end, 10) : -1;
        size_t p = 0;
        while (eq && p < g->params.len && strcmp(g->values.data[g->params.data[p]].name, eq + 1)) p++;
        if (k < 0 || end != eq || k >= (long)ret->nin || p == g->params.len) {
            fprintf(stderr, "tilec: error: --feed takes retK=PARAM (a result of graph '%s', ret0 .. ret%u, and a "
                    "parameter), got '%s'\n", g->name, ret->nin ? ret->nin - 1 : 0, v);
            return false;
        }
        const IrTensorType *rt = &g->values.data[ret->in[k]].type, *pt = &g->values.data[g->params.data[p]].type;
        if (!ir_ttype_eq(rt, pt)) {
            fprintf(stderr, "tilec: error: --feed %s: ret%ld is %s but '%s' is %s\n", v, k, ir_ttype_str(g->arena, rt),
                    eq + 1, ir_ttype_str(g->arena, pt));
            return false;
        }
        fed[p] = (uint32_t)k + 1;
    }
    return true;
}

static void copy_tensor(IrGTensor *to, const IrGTensor *from)
{
    ir_gtensor_free(to);
    if (!ir_gtensor_alloc(to, from->elem, from->rank, from->dims)) tl_oom();
    if (from->f) memcpy(to->f, from->f, (size_t)from->n * sizeof *to->f);
    if (from->i) memcpy(to->i, from->i, (size_t)from->n * sizeof *to->i);
}

/* One step: the parameters not fed (all at step 0) from their --arg, the run, the prints,
 * and the fed results moved into their parameters for the next step. */
static int graph_step(const Options *o, const IrGraph *g, const IrGraph *r, const int64_t *sizes, IrGTensor *params,
                      const uint32_t *fed, int64_t step, FILE *out)
{
    uint32_t nouts = g->ops.data[g->ops.len - 1].nin;
    IrGTensor *outs = calloc(nouts + 1, sizeof *outs);
    char err[4096] = "";
    if (!outs) tl_oom();
    int rc = 0;
    for (size_t p = 0; !rc && p < g->params.len; p++)
        if (!step || !fed[p]) {
            ir_gtensor_free(&params[p]);
            if (!graph_param(o, g, sizes, p, &params[p], step, o->steps)) rc = EXIT_INPUT;
        }
    if (!rc && !run_graph_ways(o, g, r, params, sizes, outs, nouts, err, sizeof err)) {
        fprintf(stderr, "tilec: error: graph '%s'%s: %s\n", g->name, o->steps ? arena_printf(g->arena, " (step %lld)",
                (long long)step + 1) : "", err);
        rc = EXIT_INPUT;
    }
    if (!rc) rc = print_graph_values(o, g, params, outs, nouts, out);
    for (size_t p = 0; !rc && p < g->params.len; p++)
        if (fed[p]) copy_tensor(&params[p], &outs[fed[p] - 1]);
    free_tensors(outs, nouts);
    return rc;
}

/* With a split seed (pass_graph_seed_input), its parameter's value 1 into *t; false out of memory. */
static bool seed_one(const IrGraph *r, IrGTensor *t)
{
    if (r->dloss == IR_GNONE) return true;
    const IrTensorType *ty = &r->values.data[r->dloss].type;
    if (!ir_gtensor_alloc(t, ty->elem, 0, NULL)) return false;
    t->f[0] = 1.0;
    return true;
}

static int interp_graph(const Options *o, const IrGraph *g, FILE *out)
{
    size_t np = g->params.len;
    int64_t *sizes = calloc(g->nsizes + 1, sizeof *sizes);
    IrGTensor *params = calloc(np + 1, sizeof *params);
    uint32_t *fed = calloc(np + 1, sizeof *fed);
    if (!sizes || !params || !fed) tl_oom();
    int rc = graph_args_known(o, g) && graph_sizes(o, g, sizes) && graph_feeds(o, g, fed) ? 0 : EXIT_INPUT;
    Arena *a = arena_create();
    IrGraphModule *m = a ? ir_gmodule_create(a) : NULL;
    if (!m) tl_oom();
    IrGraph *r = ir_graph_clone(m, g);   /* the graph the recomputation pass rewrites */
    if (!rc) remat(o, r, sizes, NULL, false, a);
    if (!rc && o->split && !r->nfwd) {
        fprintf(stderr, "tilec: error: --split: graph '%s' has no grad, so no forward and backward to split\n", g->name);
        rc = EXIT_INPUT;
    }
    if (!rc && !seed_one(r, &params[np])) tl_oom();   /* r's last parameter: dloss = 1, the joint run's seed */
    for (int64_t s = 0; !rc && s < (o->steps ? o->steps : 1); s++) rc = graph_step(o, g, r, sizes, params, fed, s, out);
    ir_gmodule_destroy(m);
    arena_destroy(a);
    for (size_t p = 0; p <= np; p++) ir_gtensor_free(&params[p]);
    free(sizes);
    free(params);
    free(fed);
    return rc;
}

static int run_graph(const Options *o, IrCtx *ctx, const AstProgram *prog, DiagList *diags, FILE *out)
{
    const AstItem *it = NULL;
    CliNear near;
    char hint[160];
    cli_near_init(&near, o->graph, strlen(o->graph));
    for (uint32_t i = 0; i < prog->nitems && !it; i++) {
        if (prog->items[i].kind != AST_GRAPH || !prog->items[i].name) continue;
        if (!strcmp(prog->items[i].name, o->graph)) it = &prog->items[i];
        cli_near_offer(&near, prog->items[i].name);
    }
    if (!it) {
        fprintf(stderr, "tilec: error: no graph named '%s' in '%s'%s\n", o->graph, o->src->name,
                cli_near_hint(&near, hint, sizeof hint));
        return EXIT_INPUT;
    }
    IrGraphModule *m = ir_gmodule_create(ir_ctx_arena(ctx));
    FeGraphNoIr why;
    IrGraph *g = fe_build_graph(ir_ctx_arena(ctx), prog, it, m, diags, &why);
    int rc = g ? 0 : EXIT_INPUT;
    if (!g && why.what)
        diag_error(diags, why.loc, "graph '%s' cannot be run yet: %s (the graph IR has no control flow)", it->name,
                   why.what);
    if (g && !ir_graph_verify(g, ir_ctx_arena(ctx), diags)) rc = EXIT_INPUT;
    if (!rc) rc = interp_graph(o, g, out);
    ir_gmodule_destroy(m);
    return rc;
}

static bool emit_is(const Options *o, const char *const *kinds)
{
    for (; *kinds; kinds++)
        if (!strcmp(o->emit, *kinds)) return true;
    return false;
}

/* An emit of what graphs compile to on a file without a graph, or of GPU code on one
 * without a kernel, is an error that says what the file has (it once printed nothing,
 * or an empty PTX module, and succeeded). */
static int check_emit_subject(const Options *o, const AstProgram *prog)
{
    static const char *const graph_emits[] = {"graph-ir", "fusion", "graph-kernels", NULL};
    static const char *const code_emits[] = {"ir-gpu", "llvm", "ptx", "cubin", NULL};
    uint32_t nkernels = 0, ngraphs = 0;
    for (uint32_t i = 0; i < prog->nitems; i++) {
        nkernels += is_kernel(&prog->items[i]);
        ngraphs += prog->items[i].kind == AST_GRAPH;
    }
    if (o->run) return 0;
    if (emit_is(o, graph_emits) && !ngraphs) {
        fprintf(stderr, "tilec: error: '%s' has no graph: --emit=%s shows what graphs compile to%s\n", o->src->name,
                o->emit, nkernels ? " (its kernels compile with --emit=ir, ir-gpu, llvm, ptx or cubin)" : "");
        return EXIT_INPUT;
    }
    if (emit_is(o, code_emits) && !nkernels) {
        fprintf(stderr, "tilec: error: '%s' has no kernel: --emit=%s compiles kernels%s\n", o->src->name, o->emit,
                ngraphs ? "; the kernels of its graphs are --emit=graph-kernels (pipe them on: tilec FILE "
                          "--emit=graph-kernels | tilec - --emit=ptx)" : "");
        return EXIT_INPUT;
    }
    return 0;
}

static int compile(Options *o, const Source *src, FILE *out)
{
    IrCtx *ctx = ir_ctx_create();
    if (!ctx) tl_oom();
    DiagList *diags = ir_ctx_diags(ctx);
    int rc = 0;
    if (!strcmp(o->emit, "tokens")) {
        rc = fe_dump_tokens(src, out, diags) ? 0 : EXIT_INPUT;
        goto done;
    }
    AstProgram *prog = fe_parse(ir_ctx_arena(ctx), src, diags);
    if (diags->nerrors || !prog) {
        rc = EXIT_INPUT;
        goto done;
    }
    if (!strcmp(o->emit, "ast") && !o->run) {
        ast_print(prog, out);
        goto done;
    }
    if ((rc = check_emit_subject(o, prog))) goto done;
    if (!o->graph && (rc = select_kernel(o, prog))) goto done;
    FeOptions fo = {o->defines, o->ndefines, o->kernel};
    IrModule *m = fe_lower(ctx, prog, &fo, diags);
    if (m) m->target = tile_target(o->arch), m->knobs = o->knobs;
    apply_werror(o, diags);
    if (!m || diags->nerrors) {
        rc = EXIT_INPUT;
        goto done;
    }
    pass_verify_stage(m, "lowering", stderr);
    PassOptions po = o->passes;
    po.dump = stderr;
    bool gpu = !strcmp(o->emit, "llvm") || !strcmp(o->emit, "ptx") || !strcmp(o->emit, "cubin");
    bool gpu_ir = !strcmp(o->emit, "ir-gpu");
    bool optimize = o->run || !strcmp(o->emit, "ir-opt") || gpu || gpu_ir;
    if ((gpu || gpu_ir) && o->spec != SPEC_NONE) specialize_ints(m, o->spec);
    if (!strcmp(o->emit, "graph-ir") || !strcmp(o->emit, "fusion") || !strcmp(o->emit, "graph-kernels") || o->graph) {
        rc = o->graph ? run_graph(o, ctx, prog, diags, out)
                      : emit_graph_ir(o, ctx, prog, diags, out);
        goto done;
    }
    if (optimize) pass_run_default(m, o->opt_level, &po);
    if (o->run) rc = run_kernel(o, m, diags, out);
    else if (!strcmp(o->emit, "ir") || !strcmp(o->emit, "ir-opt")) ir_print_module(m, out);
    else if (gpu_ir && (assume_aligned(m), pass_run_gpu(m, &po))) ir_print_module(m, out);
    else if (gpu) rc = emit_gpu(o, m, diags, out);
done:
    print_diags(o, diags);
    if (!rc && diags->nerrors) rc = EXIT_INPUT;
    ir_ctx_destroy(ctx);
    return rc;
}

/* The program: a file, or standard input for "-" (named "<stdin>" in diagnostics). */
static Source *read_program(const char *file)
{
    bool in = !strcmp(file, "-");
    Source *src = source_read(in ? "/dev/stdin" : file);
    if (!src) {
        fprintf(stderr, "tilec: error: cannot read '%s': %s\n", in ? "<stdin>" : file, strerror(errno));
        return NULL;
    }
    if (in) {
        tl_free((void *)src->name);
        if (!(src->name = tl_strdup("<stdin>"))) tl_oom();
    }
    return src;
}

int main(int argc, char **argv)
{
    Options o = {.emit = "check", .arch = "sm_90a", .device = "cpu", .opt_level = 2};
    if (argc > 1 && !strcmp(argv[1], "cache")) /* tilec cache ls|stats|verify|prune|clear */
        return trt_cache_cli(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "tune")) /* tilec tune MANIFEST (tilec_tune.c) */
        return tilec_tune_main(argc - 1, argv + 1);
    parse_color(&o, "auto");
    char why[256];
    o.knobs = tile_knobs_default();
    if (!tile_knobs_from_env(&o.knobs, why, sizeof why)) usage_error("%s", why);
    parse_args(argc, argv, &o);
    check_options(&o);
    Source *src = read_program(o.file);
    if (!src) return EXIT_INPUT;
    o.src = src;
    /* A check writes nothing, so -o names no file to create. */
    bool writes = o.run || strcmp(o.emit, "check");
    CliOutput out;
    int rc = cli_output_open(&out, "tilec", writes ? o.out : NULL, "w") ? compile(&o, src, out.f) : EXIT_INPUT;
    if (out.f && !cli_output_commit(&out, rc == 0) && !rc) rc = EXIT_INPUT;
    source_free(src);
    for (uint32_t i = 0; i < o.ndefines; i++) free((void *)o.defines[i].name);
    return rc;
}
