/* Command-line helpers shared by tilec and tile-opt (cli.h). */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *cli_flag_value(const char *tool, int argc, char **argv, int *i, const char *flag)
{
    size_t n = strlen(flag);
    if (strncmp(argv[*i], flag, n)) return NULL;
    if (argv[*i][n] == '=') return argv[*i] + n + 1;
    if (argv[*i][n]) return NULL;
    if (*i + 1 >= argc) {
        fprintf(stderr, "%s: error: %s needs a value\n(run '%s --help' for usage)\n", tool, flag, tool);
        exit(2);
    }
    return argv[++*i];
}

bool cli_parse_option(const char *tool, const CliOption *table, int argc, char **argv, int *i, void *opts)
{
    for (const CliOption *r = table; r->name; r++) {
        if (!r->takes_value && !strcmp(argv[*i], r->name)) {
            r->set(opts, NULL);
            return true;
        }
        const char *v = r->takes_value ? cli_flag_value(tool, argc, argv, i, r->name) : NULL;
        if (v) {
            r->set(opts, v);
            return true;
        }
    }
    return false;
}

/* DIR/.NAME.XXXXXX, with the mode a plain fopen would give (0666 less the umask),
 * not mkstemp's 0600. */
static FILE *open_temp(CliOutput *out, const char *mode)
{
    const char *slash = strrchr(out->path, '/');
    size_t n = strlen(out->path) + 16;
    if (!(out->tmp = malloc(n))) return NULL;
    snprintf(out->tmp, n, "%.*s.%s.XXXXXX", slash ? (int)(slash - out->path + 1) : 0, out->path,
             slash ? slash + 1 : out->path);
    int fd = mkstemp(out->tmp);
    mode_t mask = umask(0);
    umask(mask);
    FILE *f = fd >= 0 && fchmod(fd, 0666 & ~mask) == 0 ? fdopen(fd, mode) : NULL;
    if (!f && fd >= 0) {
        int err = errno;
        close(fd);
        unlink(out->tmp);
        errno = err;
    }
    return f;
}

bool cli_output_open(CliOutput *out, const char *tool, const char *path, const char *mode)
{
    struct stat st;
    *out = (CliOutput){stdout, tool, path, NULL};
    if (!path || !strcmp(path, "-")) return true;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) out->f = fopen(path, mode);
    else out->f = open_temp(out, mode);
    if (!out->f) {
        fprintf(stderr, "%s: error: cannot write '%s': %s\n", tool, path, strerror(errno));
        free(out->tmp);
        out->tmp = NULL;
    }
    return out->f != NULL;
}

bool cli_output_commit(CliOutput *out, bool ok)
{
    bool wrote = true;
    if (out->f == stdout) wrote = fflush(stdout) == 0;
    else if (out->f) wrote = fclose(out->f) == 0;
    if (out->tmp && ok && wrote && rename(out->tmp, out->path) != 0) wrote = false;
    if (out->f && ok && !wrote)
        fprintf(stderr, "%s: error: cannot write '%s': %s\n", out->tool, out->path ? out->path : "<stdout>",
                strerror(errno));
    if (out->tmp && !(ok && wrote)) unlink(out->tmp);
    free(out->tmp);
    *out = (CliOutput){0};
    return wrote;
}

/* ---- did you mean ------------------------------------------------------------------- */
void cli_near_init(CliNear *n, const char *typed, size_t len)
{
    *n = (CliNear){typed, len, NULL, len <= 3 ? 2 : 3};   /* dist: one past the limit */
}

void cli_near_offer(CliNear *n, const char *name)
{
    if (!name || (strlen(name) == n->len && !strncmp(name, n->typed, n->len))) return;
    int d = diag_edit_distance(n->typed, n->len, name, 63);
    if (d < n->dist) n->dist = d, n->best = name;
}

const char *cli_near_hint(const CliNear *n, char *buf, size_t size)
{
    if (!n->best) return "";
    snprintf(buf, size, "; did you mean '%s'?", n->best);
    return buf;
}

/* ---- diagnostics ------------------------------------------------------------------------ */
void cli_print_diag(const char *tool, const Diag *g, FILE *out, bool color)
{
    if (g->loc.src) {
        diag_print_one_color(g, out, color);
        return;
    }
    static const char *const levels[] = {"error", "warning", "note"};
    static const char *const colors[] = {"\033[1;31m", "\033[1;35m", "\033[1;36m"};
    fprintf(out, "%s%s: %s%s:%s %s%s%s\n", color ? "\033[1m" : "", tool, color ? colors[g->level] : "",
            levels[g->level], color ? "\033[0m" : "", color ? "\033[1m" : "", g->msg, color ? "\033[0m" : "");
}
