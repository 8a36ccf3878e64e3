/* tile-opt: runs named passes on textual Tile IR, for tests and debugging.
 *
 *   tile-opt [FILE.tir | -] [--passes=canonicalize,fold,cse,dce] [-O0..3]
 *            [--print-after-all] [--verify-each] [--time-passes] [-o OUT|-]
 *   tile-opt FILE.gir | --graph-ir [-] [--passes=graph-fuse]
 *                          graph IR (ir/graph.h): parse, verify, print it or its fusion plan
 *
 * Reads the IR (stdin without a file or with "-"), verifies it, runs the passes and
 * prints the result. Without passes it round-trips the text. Options take their value
 * as tilec's do (--passes a,b or --passes=a,b); -o writes as tilec does (tools/cli.h:
 * only on success, through a temporary file). Exit status: 0 success, 1 bad input
 * (diagnostics on stderr), 2 bad usage. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/graph.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "tools/cli.h"

typedef struct Options {
    const char *input, *output, *passes;
    int opt_level;
    bool verify_only, graph_ir;
    PassOptions pass;
} Options;

static void usage(FILE *out)
{
    fputs("usage: tile-opt [FILE.tir | -] [options]\n"
          "  --passes=a,b,...   run these passes in order\n"
          "  -O0 .. -O3         run the default pipeline of that level\n"
          "  --verify-only      parse and verify, print the IR unchanged\n"
          "  --graph-ir         the input is graph IR (the default for FILE.gir);\n"
          "                     --passes=graph-fuse prints its fusion plan\n"
          "  --print-after-all  print the IR after every pass (stderr)\n"
          "  --verify-each      verify the IR after every pass\n"
          "  --time-passes      print the time of every pass (stderr)\n"
          "  -o OUT             write the IR to OUT instead of stdout ('-': stdout)\n"
          "  -h, --help         this help\n"
          "  --version          the version\n"
          "passes:\n", out);
    for (unsigned i = 0; i < pass_count; i++) fprintf(out, "  %-14s %s\n", pass_table[i].name, pass_table[i].summary);
    for (unsigned i = 0; i < pass_gpu_count; i++)
        fprintf(out, "  %-14s %s\n", pass_gpu_table[i].name, pass_gpu_table[i].summary);
    const PassInfo *b = pass_find("bounds");
    fprintf(out, "  %-14s %s\n", b->name, b->summary);
}

static int bad_usage(const char *fmt, const char *arg)
{
    fputs("tile-opt: error: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\n(run 'tile-opt --help' for usage)\n", stderr);
    return 2;
}

/* "unknown pass 'X'", with the nearest pass name. */
static int unknown_pass(const char *name)
{
    CliNear near;
    char hint[160], msg[300];
    cli_near_init(&near, name, strlen(name));
    for (unsigned i = 0; i < pass_count; i++) cli_near_offer(&near, pass_table[i].name);
    for (unsigned i = 0; i < pass_gpu_count; i++) cli_near_offer(&near, pass_gpu_table[i].name);
    cli_near_offer(&near, "bounds");
    cli_near_offer(&near, "graph-fuse");
    snprintf(msg, sizeof msg, "unknown pass '%s'%s", name, cli_near_hint(&near, hint, sizeof hint));
    return bad_usage("%s", msg);
}

/* Every name of a --passes list is a known pass. */
static int check_pass_list(const char *list)
{
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(n < 63 ? n : 63), p);
        if (!pass_find(name) && strcmp(name, "graph-fuse")) return unknown_pass(name);
        p += n + (p[n] == ',');
    }
    return 0;
}

/* The options, one setter each, parsed as tilec parses its own (tools/cli.h). */
static void set_passes(void *o, const char *v) { ((Options *)o)->passes = v; }
static void set_output(void *o, const char *v) { ((Options *)o)->output = v; }
static void set_verify_only(void *o, const char *v) { ((Options *)o)->verify_only = true; }
static void set_graph_ir(void *o, const char *v) { ((Options *)o)->graph_ir = true; }
static void set_print_after_all(void *o, const char *v) { ((Options *)o)->pass.print_after_all = true; }
static void set_verify_each(void *o, const char *v) { ((Options *)o)->pass.verify_each = true; }
static void set_time_passes(void *o, const char *v) { ((Options *)o)->pass.time_passes = true; }

static const CliOption options[] = {
    /* name                takes a value  set */
    {"--passes", true, set_passes},
    {"-o", true, set_output},
    {"--verify-only", false, set_verify_only},
    {"--graph-ir", false, set_graph_ir},
    {"--print-after-all", false, set_print_after_all},
    {"--verify-each", false, set_verify_each},
    {"--time-passes", false, set_time_passes},
    {NULL, false, NULL},
};

/* Returns -1 to go on, or the exit status. */
static int parse_args(int argc, char **argv, Options *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout), 0;
        else if (!strcmp(a, "--version")) return puts("tile-opt 0.1.0"), 0;
        else if (cli_parse_option("tile-opt", options, argc, argv, &i, o)) continue;
        else if (a[0] == '-' && a[1] == 'O' && a[2] >= '0' && a[2] <= '3' && !a[3]) o->opt_level = a[2] - '0';
        else if (a[0] == '-' && a[1]) return bad_usage("unknown option '%s'", a);
        else if (o->input) return bad_usage("more than one input file ('%s')", a);
        else o->input = a;
    }
    if (o->passes && o->opt_level) return bad_usage("%s", "give either --passes or -O, not both");
    return o->passes ? (check_pass_list(o->passes) ? 2 : -1) : -1;
}

static bool run_passes(IrModule *m, const Options *o)
{
    if (o->verify_only) return true;
    if (o->passes) return pass_run_list(m, o->passes, &o->pass);
    return pass_run_default(m, o->opt_level, &o->pass);
}

/* The diagnostics, a place-less one with this tool's prefix (cli_print_diag). */
static void print_diags(const DiagList *d)
{
    for (size_t i = 0; i < d->len; i++) cli_print_diag("tile-opt", &d->items[i], stderr, false);
    size_t max = d->max_errors ? d->max_errors : 50;
    if (d->nerrors > max) fprintf(stderr, "tile-opt: error: too many errors (%zu), stopped after %zu\n", d->nerrors, max);
}

static int write_output(const IrModule *m, const char *path)
{
    CliOutput out;
    if (!cli_output_open(&out, "tile-opt", path, "w")) return 1;
    ir_print_module(m, out.f);
    return cli_output_commit(&out, true) ? 0 : 1;
}

static int run(IrCtx *c, const Source *src, const Options *o)
{
    IrModule *m = ir_parse(c, src);
    bool ok = m && ir_verify_module(m) && run_passes(m, o);
    if (!ok) {
        print_diags(ir_ctx_diags(c));
        return 1;
    }
    return write_output(m, o->output);
}

/* Graph IR: parse, verify, print; --passes=graph-fuse prints the fusion plans. */
static int run_graph(IrCtx *c, const Source *src, const Options *o)
{
    DiagList *d = ir_ctx_diags(c);
    IrGraphModule *m = ir_gmodule_create(ir_ctx_arena(c));
    bool fuse = o->passes && !strcmp(o->passes, "graph-fuse");
    if (o->passes && !fuse) {
        ir_gmodule_destroy(m);
        return bad_usage("graph IR takes --passes=graph-fuse only, not '%s'", o->passes);
    }
    bool ok = ir_gmodule_parse(m, src, d) && ir_gmodule_verify(m, d);
    CliOutput out;
    if (!ok) print_diags(d);
    else if ((ok = cli_output_open(&out, "tile-opt", o->output, "w"))) {
        for (size_t i = 0; i < m->graphs.len && fuse; i++)
            ir_gplan_print(m->graphs.data[i], pass_graph_fuse(m->graphs.data[i], ir_ctx_arena(c)), out.f);
        if (!fuse) ir_gmodule_print(m, out.f);
        ok = cli_output_commit(&out, true);
    }
    ir_gmodule_destroy(m);
    return ok ? 0 : 1;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

int main(int argc, char **argv)
{
    Options o = {0};
    int st = parse_args(argc, argv, &o);
    if (st >= 0) return st;
    bool in = !o.input || !strcmp(o.input, "-");   /* standard input, "<stdin>" in messages, as tilec names it */
    Source *src = source_read(in ? "/dev/stdin" : o.input);
    if (!src) {
        fprintf(stderr, "tile-opt: error: cannot read '%s': %s\n", in ? "<stdin>" : o.input, strerror(errno));
        return 1;
    }
    if (in) {
        tl_free((void *)src->name);
        if (!(src->name = tl_strdup("<stdin>"))) tl_oom();
    }
    IrCtx *c = ir_ctx_create();
    if (!c) tl_oom();
    bool graph = o.graph_ir || (o.input && ends_with(o.input, ".gir"));
    st = graph ? run_graph(c, src, &o) : run(c, src, &o);
    ir_ctx_destroy(c);
    source_free(src);
    return st;
}
