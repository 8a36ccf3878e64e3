/* `tilec cache`: list, summarize, check, prune and clear the persistent cache.
 *
 *   tilec cache ls      [--dir DIR]                 one line per entry, most recent first,
 *                                                   with the kernel (and config) it is of
 *   tilec cache stats   [--dir DIR]                 counts and bytes per kind, the bound
 *   tilec cache verify  [--dir DIR] [--fix]         checks every header and checksum
 *   tilec cache prune   [--dir DIR] [--max-bytes N] evicts to the bound (LRU)
 *   tilec cache clear   [--dir DIR]                 removes every entry
 *   tilec cache export  KERNEL... | --all -o FILE   the entries of those kernels, as a pack
 *   tilec cache import  FILE                        checks every entry of a pack, stores them
 *
 * The directory defaults to the runtime's ($TILE_CACHE_DIR, $XDG_CACHE_HOME/tile,
 * ~/.cache/tile); the bound to $TILE_CACHE_MAX_BYTES or 1 GiB. Options take their
 * value as --dir DIR or --dir=DIR. ls and stats only look: they create no directory. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ir/arena.h"
#include "rt_cache_cli.h"
#include "rt_internal.h"

enum { EXIT_PROBLEM = 1, EXIT_USAGE = 2 };

typedef struct CliOptions {
    const char *verb, *dir, *out;
    uint64_t max_bytes;
    int fix, all;
    char **operands;             /* export's kernels, import's file */
    int noperands;
} CliOptions;

static const char usage_text[] =
    "usage: tilec cache ls|stats|verify|prune|clear [--dir DIR] [--max-bytes N] [--fix]\n"
    "       tilec cache export KERNEL...|--all -o FILE [--dir DIR]\n"
    "       tilec cache import FILE [--dir DIR]\n";
static const char help_text[] =
    "  ls                one line per entry, most recent first\n"
    "  stats             counts and bytes per kind, and the size bound\n"
    "  verify [--fix]    checks every header and checksum (--fix removes bad entries)\n"
    "  prune             evicts least recently used entries down to the bound\n"
    "  clear             removes every entry\n"
    "  export KERNEL...  writes every entry of the named kernels (PTX, cubin, tuning) to\n"
    "                    the pack -o FILE (--all: every entry), for a fleet to import\n"
    "  import FILE       checks every entry of a pack, then stores them all (or none)\n"
    "  --dir DIR         the cache (default $TILE_CACHE_DIR, $XDG_CACHE_HOME/tile, ~/.cache/tile)\n"
    "  --max-bytes N     the size bound (default $TILE_CACHE_MAX_BYTES, else 1 GiB)\n"
    "exit status: 0 success, 1 a bad entry or an error, 2 usage error\n";

static int usage(const char *why, const char *arg)
{
    fputs("tilec cache: error: ", stderr);
    fprintf(stderr, why, arg);
    fprintf(stderr, "\n%s", usage_text);
    return EXIT_USAGE;
}

/* The value of `--flag=value` or `--flag value`; NULL if argv[*i] is not that flag,
 * and *missing set when the value is missing. */
static const char *flag_value(int argc, char **argv, int *i, const char *flag, int *missing)
{
    size_t n = strlen(flag);
    if (strncmp(argv[*i], flag, n)) return NULL;
    if (argv[*i][n] == '=') return argv[*i] + n + 1;
    if (argv[*i][n]) return NULL;
    if (*i + 1 < argc) return argv[++*i];
    *missing = 1;
    return NULL;
}

static int parse_option(int argc, char **argv, int *i, CliOptions *o)
{
    const char *v;
    char *end;
    int missing = 0;
    if (!strcmp(argv[*i], "--fix")) o->fix = 1;
    else if (!strcmp(argv[*i], "--all")) o->all = 1;
    else if ((v = flag_value(argc, argv, i, "-o", &missing))) o->out = v;
    else if ((v = flag_value(argc, argv, i, "--dir", &missing))) o->dir = v;
    else if ((v = flag_value(argc, argv, i, "--max-bytes", &missing))) {
        o->max_bytes = strtoull(v, &end, 10);
        if (*end || !o->max_bytes || *v == '-') return usage("--max-bytes takes a positive integer, got '%s'", v);
    } else if (missing) return usage("%s needs a value", argv[*i]);
    else return usage("unknown option '%s'", argv[*i]);
    return 0;
}

static int parse(int argc, char **argv, CliOptions *o)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("%s%s", usage_text, help_text);
            return -1;
        }
        if (argv[i][0] != '-' && !o->verb) o->verb = argv[i];
        else if (argv[i][0] != '-') o->operands[o->noperands++] = argv[i];
        else if (parse_option(argc, argv, &i, o)) return EXIT_USAGE;
    }
    return o->verb ? 0 : usage("missing command (ls, stats, verify, prune, clear, export or import)%s", "");
}

/* ---- ls ------------------------------------------------------------------------------- */
typedef struct Row {
    RtCacheEntryInfo e;
    char name[48];
    char kernel[160];            /* whose entry it is, with its config where known */
} Row;

/* The payload of an entry file (after the 56-byte header), at most max bytes of it. */
static unsigned char *read_payload(const char *path, size_t max, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *buf = tl_malloc(max + 1);
    size_t got = buf && fseek(f, RT_CACHE_HEADER_BYTES, SEEK_SET) == 0 ? fread(buf, 1, max, f) : 0;
    fclose(f);
    if (!got) {
        tl_free(buf);
        return NULL;
    }
    buf[got] = 0;
    *n = got;
    return buf;
}

/* A PTX payload: its first .entry, and the config line the runtime writes above it. */
static void ptx_label(const char *ptx, char *out, size_t n)
{
    const char *e = strstr(ptx, ".entry ");
    if (!e) return;
    e += 7;
    size_t len = strcspn(e, "( \n");
    const char *cfg = strstr(ptx, "// tile-config:");
    size_t clen = cfg ? strcspn(cfg + 15, "\n") : 0;
    snprintf(out, n, "%.*s%.*s", (int)len, e, (int)clen, cfg ? cfg + 15 : "");
}

/* A cubin: the kernel of its `.text.NAME` section (ELF64 section headers). */
static void cubin_label(const unsigned char *p, size_t n, char *out, size_t cap)
{
    if (n < 64 || memcmp(p, "\x7f" "ELF", 4) || p[4] != 2) return;
    uint64_t shoff;
    uint16_t shentsize, shnum, shstrndx;
    memcpy(&shoff, p + 40, 8);
    memcpy(&shentsize, p + 58, 2);
    memcpy(&shnum, p + 60, 2);
    memcpy(&shstrndx, p + 62, 2);
    if (shentsize < 64 || shstrndx >= shnum || shoff > n || (uint64_t)shnum * shentsize > n - shoff) return;
    uint64_t stroff, strsize;
    memcpy(&stroff, p + shoff + (uint64_t)shstrndx * shentsize + 24, 8);
    memcpy(&strsize, p + shoff + (uint64_t)shstrndx * shentsize + 32, 8);
    if (stroff > n || strsize > n - stroff) return;
    for (uint16_t i = 0; i < shnum; i++) {
        uint32_t name;
        memcpy(&name, p + shoff + (uint64_t)i * shentsize, 4);
        if (name >= strsize) continue;
        const char *s = (const char *)p + stroff + name;
        size_t room = strsize - name;
        if (room > 6 && !strncmp(s, ".text.", 6) && memchr(s, 0, room)) {
            snprintf(out, cap, "%s", s + 6);
            return;
        }
    }
}

/* A tuning payload: "kernel NAME" and "key K=V ..." lines. */
static void tune_label(const char *t, char *out, size_t n)
{
    const char *k = strstr(t, "\nkernel "), *key = strstr(t, "\nkey ");
    if (!k) return;
    k += 8;
    snprintf(out, n, "%.*s%s%.*s", (int)strcspn(k, "\n"), k, key ? " " : "",
             key ? (int)strcspn(key + 5, "\n") : 0, key ? key + 5 : "");
}

static void label_of(const RtCacheEntryInfo *e, char *out, size_t n)
{
    snprintf(out, n, "-");
    size_t len = 0;
    unsigned char *p = read_payload(e->path, e->kind == RT_ENTRY_CUBIN ? (size_t)64 << 20 : (size_t)1 << 20, &len);
    if (!p) return;
    RtBlob b = {p, len};
    size_t head = rt_meta_size(&b);
    if (e->kind == RT_ENTRY_PTX && head) ptx_label((const char *)p + head, out, n);
    else if (e->kind == RT_ENTRY_CUBIN && head) cubin_label(p + head, len - head, out, n);
    else if (e->kind == RT_ENTRY_TUNE) tune_label((const char *)p, out, n);
    tl_free(p);
}

typedef struct Rows {
    Row *v;
    size_t len, cap;
} Rows;

static void add_row(const RtCacheEntryInfo *e, void *ud)
{
    Rows *r = ud;
    if (r->len == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 64;
        Row *nv = tl_realloc(r->v, cap * sizeof *nv);
        if (!nv) return;
        r->v = nv;
        r->cap = cap;
    }
    Row *row = &r->v[r->len++];
    row->e = *e;
    const char *base = strrchr(e->path, '/');
    snprintf(row->name, sizeof row->name, "%s", base ? base + 1 : e->path);
    label_of(e, row->kernel, sizeof row->kernel);
    row->e.path = NULL;
}

static int newest_first(const void *a, const void *b)
{
    const Row *x = a, *y = b;
    if (x->e.mtime != y->e.mtime) return x->e.mtime > y->e.mtime ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmd_ls(RtCache *c)
{
    Rows r = {0};
    rt_cache_foreach(c, add_row, &r);
    if (r.len) qsort(r.v, r.len, sizeof *r.v, newest_first);
    for (size_t i = 0; i < r.len; i++) {
        char when[32], hex[33];
        time_t t = (time_t)(r.v[i].e.mtime / 1000000000);
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime(&t));
        rt_key_hex(&r.v[i].e.key, hex);
        printf("%s  %-5s  %10" PRIu64 "  %s  %s\n", hex, rt_entry_kind_name(r.v[i].e.kind),
               r.v[i].e.size, when, r.v[i].kernel);
    }
    tl_free(r.v);
    return 0;
}

/* ---- stats ---------------------------------------------------------------------------- */
typedef struct Totals {
    long count[4];
    uint64_t bytes[4];
} Totals;

static void add_total(const RtCacheEntryInfo *e, void *ud)
{
    Totals *t = ud;
    t->count[e->kind]++;
    t->bytes[e->kind] += e->size;
    t->count[0]++;
    t->bytes[0] += e->size;
}

static int cmd_stats(RtCache *c)
{
    Totals t = {{0}, {0}};
    rt_cache_foreach(c, add_total, &t);
    uint64_t bound = rt_cache_max_bytes(c);
    printf("directory: %s\n", rt_cache_dir(c));
    for (int k = RT_ENTRY_PTX; k <= RT_ENTRY_TUNE; k++)
        printf("%-6s %6ld entries  %12" PRIu64 " bytes\n", rt_entry_kind_name((RtEntryKind)k),
               t.count[k], t.bytes[k]);
    printf("total  %6ld entries  %12" PRIu64 " bytes of %" PRIu64 " (%.1f%%)\n", t.count[0],
           t.bytes[0], bound, bound ? 100.0 * (double)t.bytes[0] / (double)bound : 0.0);
    return 0;
}

/* ---- verify --------------------------------------------------------------------------- */
typedef struct Verify {
    long bad;
    int fix;
} Verify;

static void verify_one(const RtCacheEntryInfo *e, void *ud)
{
    Verify *v = ud;
    char why[256];
    if (rt_cache_check_file(e->path, why, sizeof why)) return;
    v->bad++;
    printf("bad: %s: %s%s\n", e->path, why, v->fix ? " (removed)" : "");
    if (v->fix) rt_cache_remove_path(e->path);
}

static int cmd_verify(RtCache *c, int fix)
{
    Verify v = {0, fix};
    long n = rt_cache_foreach(c, verify_one, &v);
    printf("%ld entries checked, %ld bad\n", n, v.bad);
    return v.bad && !fix ? EXIT_PROBLEM : 0;
}

/* ---- export, import ------------------------------------------------------------------- */
typedef struct Export {
    const CliOptions *o;
    char **paths;
    size_t n, cap;
    bool *found;                 /* per operand: some entry is of that kernel */
    bool oom;
} Export;

/* Whether an entry's label ("vector_add BLOCK=1024 ...") is of kernel `name`. */
static bool label_is(const char *label, const char *name)
{
    size_t n = strlen(name);
    return !strncmp(label, name, n) && (label[n] == ' ' || label[n] == '\0');
}

static void pick(const RtCacheEntryInfo *e, void *ud)
{
    Export *x = ud;
    char label[160];
    bool take = x->o->all;
    label_of(e, label, sizeof label);
    for (int i = 0; i < x->o->noperands; i++)
        if (label_is(label, x->o->operands[i])) take = x->found[i] = true;
    if (!take || x->oom) return;
    if (x->n == x->cap) {
        size_t cap = x->cap ? 2 * x->cap : 64;
        char **np = tl_realloc(x->paths, cap * sizeof *np);
        if (!np) {
            x->oom = true;
            return;
        }
        x->paths = np, x->cap = cap;
    }
    if (!(x->paths[x->n++] = tl_strdup(e->path))) x->oom = true;
}

static int cmd_export(RtCache *c, const CliOptions *o)
{
    Export x = {o, NULL, 0, 0, tl_calloc((size_t)o->noperands + 1, sizeof(bool)), false};
    int rc = x.found ? 0 : EXIT_PROBLEM;
    if (!rc) rt_cache_foreach(c, pick, &x);
    for (int i = 0; i < o->noperands && !rc; i++)
        if (!x.found[i]) {
            fprintf(stderr, "tilec cache: error: no entry of kernel '%s' in %s (tilec cache ls lists them)\n",
                    o->operands[i], rt_cache_dir(c));
            rc = EXIT_PROBLEM;
        }
    if (!rc && x.oom) fputs("tilec cache: error: out of memory\n", stderr), rc = EXIT_PROBLEM;
    if (!rc && rt_pack_write((const char *const *)x.paths, x.n, o->out)) {
        fprintf(stderr, "tilec cache: error: %s\n", trt_last_error());
        rc = EXIT_PROBLEM;
    }
    if (!rc) printf("exported %zu entries to %s (compiler %s)\n", x.n, o->out, rt_compiler_identity());
    for (size_t i = 0; i < x.n; i++) tl_free(x.paths[i]);
    tl_free(x.paths);
    tl_free(x.found);
    return rc;
}

static int cmd_import(RtCache *c, const CliOptions *o)
{
    RtPackInfo r;
    if (rt_pack_read(c, o->operands[0], &r)) {
        fprintf(stderr, "tilec cache: error: %s; nothing was imported\n", trt_last_error());
        return EXIT_PROBLEM;
    }
    printf("imported %llu entries (%llu ptx, %llu cubin, %llu tune) into %s\n", (unsigned long long)r.entries,
           (unsigned long long)r.count[RT_ENTRY_PTX], (unsigned long long)r.count[RT_ENTRY_CUBIN],
           (unsigned long long)r.count[RT_ENTRY_TUNE], rt_cache_dir(c));
    if (strcmp(r.compiler, rt_compiler_identity()))
        fprintf(stderr, "tilec cache: warning: the pack was exported by compiler %s, and this is compiler %s: "
                        "its entries are served only to a runtime of that build\n", r.compiler, rt_compiler_identity());
    return 0;
}

/* ---- dispatch ------------------------------------------------------------------------- */
static int run_verb(RtCache *c, const CliOptions *o)
{
    if (!strcmp(o->verb, "ls")) return cmd_ls(c);
    if (!strcmp(o->verb, "stats")) return cmd_stats(c);
    if (!strcmp(o->verb, "verify")) return cmd_verify(c, o->fix);
    if (!strcmp(o->verb, "export")) return cmd_export(c, o);
    if (!strcmp(o->verb, "import")) return cmd_import(c, o);
    if (!strcmp(o->verb, "prune")) {
        long n = rt_cache_prune(c, rt_cache_max_bytes(c));
        printf("removed %ld entries; bound %" PRIu64 " bytes\n", n, rt_cache_max_bytes(c));
        return 0;
    }
    long n = rt_cache_clear(c);
    printf("removed %ld entries\n", n);
    return 0;
}

/* The verb known, and the operands and options it takes, and only those. */
static int check_verb(const CliOptions *o)
{
    static const char *const verbs[] = {"ls", "stats", "verify", "prune", "clear", "export", "import"};
    int known = 0;
    for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++) known |= !strcmp(o->verb, verbs[i]);
    if (!known) return usage("unknown command '%s' (ls, stats, verify, prune, clear, export or import)", o->verb);
    bool exp = !strcmp(o->verb, "export"), imp = !strcmp(o->verb, "import");
    if (o->fix && strcmp(o->verb, "verify")) return usage("--fix belongs to 'verify'%s", "");
    if ((o->all || o->out) && !exp) return usage("--all and -o belong to 'export'%s", "");
    if (o->noperands && !exp && !imp) return usage("unexpected argument '%s'", o->operands[0]);
    if (exp && !o->out) return usage("export needs -o FILE, the pack to write%s", "");
    if (exp && !o->noperands == !o->all)
        return usage("export takes the kernels to export, or --all%s", o->all ? ", not both" : "");
    if (imp && o->noperands != 1) return usage("import takes one FILE, the pack to import%s", "");
    return 0;
}

int trt_cache_cli(int argc, char **argv)
{
    char *operands[256];
    CliOptions o = {0};
    o.operands = operands;
    if (argc > 256) return usage("too many arguments%s", "");
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    if ((rc = check_verb(&o))) return rc;
    RtCache *c = NULL;
    bool looks = !strcmp(o.verb, "ls") || !strcmp(o.verb, "stats") || !strcmp(o.verb, "export") ||
                 (!strcmp(o.verb, "verify") && !o.fix);
    TrtStatus s = looks ? rt_cache_open_readonly(o.dir, o.max_bytes, &c) : rt_cache_open(o.dir, o.max_bytes, &c);
    if (s) {
        fprintf(stderr, "tilec cache: error: %s\n", trt_last_error());
        return EXIT_PROBLEM;
    }
    rc = run_verb(c, &o);
    rt_cache_close(c);
    return rc;
}
