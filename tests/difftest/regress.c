/* Regression files (run.h): a reduced kernel's source after a header that carries
 * everything needed to run it again:
 *     // difftest: seed 123: mismatch -O0/-O2: out3[17] ...
 *     // difftest-data: 123
 *     // difftest-args: out3=poison:512 in_f32=rand:4096 L=37 M=5 fs=0.5
 *     // difftest-tol: out3=0.00125
 * Buffers are rand:N (the data seed's random values), poison:N (0xFF bytes) or
 * zeros:N; scalars are numbers; a buffer without a tolerance is compared bit for bit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

static const char *const kinds[3] = {"rand", "poison", "zeros"};

static void write_args(FILE *f, const DtCase *c)
{
    fprintf(f, "// difftest-data: %llu\n// difftest-args:", (unsigned long long)c->data_seed);
    for (int i = 0; i < c->nargs; i++) {
        const DtArg *a = &c->args[i];
        if (a->kind == DT_ARG_SCALAR) fprintf(f, " %s=%.17g", a->name, a->value);
        else fprintf(f, " %s=%s:%lld", a->name, kinds[a->kind], (long long)a->count);
    }
    fprintf(f, "\n// difftest-tol:");
    for (int i = 0; i < c->nargs; i++)
        if (c->args[i].tol > 0) fprintf(f, " %s=%.17g", c->args[i].name, c->args[i].tol);
    fprintf(f, "\n");
}

void dt_case_fprint(const DtCase *c, FILE *f, const char *comment)
{
    fprintf(f, "// difftest: ");
    for (const char *p = comment; *p; p++) {
        if (*p == '\n') fputs("\n// ", f);
        else fputc(*p, f);
    }
    fprintf(f, "\n");
    write_args(f, c);
    fputs(c->text, f);
}

bool dt_case_write(const DtCase *c, const char *path, const char *comment)
{
    FILE *f = fopen(path, "w");
    if (!f) return false;
    dt_case_fprint(c, f, comment);
    return fclose(f) == 0;
}

/* One NAME=VALUE word of an args line. */
static bool parse_arg(const char *w, DtArg *a)
{
    const char *eq = strchr(w, '=');
    if (!eq || eq == w || (size_t)(eq - w) >= sizeof a->name) return false;
    memset(a, 0, sizeof *a);
    memcpy(a->name, w, (size_t)(eq - w));
    for (int k = 0; k < 3; k++) {
        size_t n = strlen(kinds[k]);
        if (!strncmp(eq + 1, kinds[k], n) && eq[1 + n] == ':') {
            a->kind = (DtArgKind)k;
            a->count = strtoll(eq + 2 + n, NULL, 10);
            return a->count >= 0;
        }
    }
    char *end;
    a->kind = DT_ARG_SCALAR;
    a->value = strtod(eq + 1, &end);
    return end != eq + 1;
}

static bool parse_words(char *line, DtCase *c, bool tol)
{
    for (char *save = NULL, *w = strtok_r(line, " \t\r\n", &save); w; w = strtok_r(NULL, " \t\r\n", &save)) {
        DtArg a;
        if (!parse_arg(w, &a)) return false;
        if (tol) {
            for (int i = 0; i < c->nargs; i++)
                if (!strcmp(c->args[i].name, a.name)) c->args[i].tol = a.value;
        } else if (c->nargs < DT_MAX_ARGS) {
            c->args[c->nargs++] = a;
        }
    }
    return true;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

bool dt_case_read(const char *path, DtCase *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    if (!(c->text = slurp(path))) return snprintf(err, errlen, "cannot read %s", path), false;
    bool have_args = false, ok = true;
    for (char *line = c->text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        char buf[4096];
        size_t n = strcspn(line, "\n");
        snprintf(buf, sizeof buf, "%.*s", (int)(n < sizeof buf ? n : sizeof buf - 1), line);
        if (!strncmp(buf, "// difftest-data:", 17)) c->data_seed = strtoull(buf + 17, NULL, 10);
        else if (!strncmp(buf, "// difftest-args:", 17)) ok &= parse_words(buf + 17, c, false), have_args = true;
        else if (!strncmp(buf, "// difftest-tol:", 16)) ok &= parse_words(buf + 16, c, true);
    }
    if (!have_args || !ok) {
        snprintf(err, errlen, "%s: needs a well-formed '// difftest-args:' line", path);
        dt_case_free(c);
        return false;
    }
    return true;
}
