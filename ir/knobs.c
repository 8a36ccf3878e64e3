/* The compiler's knobs (ir/knobs.def) and identity. */
#include "ir/knobs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tile_build_id.h"   /* generated at build time: cmake/SourceHash.cmake */

typedef struct KnobRow {
    const char *name, *env;
    int def, min, max;
    const char *words;           /* "w0,w1,...": names of the values 0, 1, ...; or NULL */
    size_t offset;
} KnobRow;

static const KnobRow rows[] = {
#define TILE_KNOB(name, env, def, min, max, words, doc) \
    {#name, env, def, min, max, words, offsetof(TileKnobs, name)},
#include "ir/knobs.def"
#undef TILE_KNOB
};
enum { NKNOBS = sizeof rows / sizeof *rows };

static int *field(TileKnobs *k, const KnobRow *r) { return (int *)((char *)k + r->offset); }

TileKnobs tile_knobs_default(void)
{
    TileKnobs k;
    for (int i = 0; i < NKNOBS; i++) *field(&k, &rows[i]) = rows[i].def;
    return k;
}

/* The value of word `v` in r's word list, or -1. */
static int word_value(const KnobRow *r, const char *v)
{
    int i = 0;
    size_t n = strlen(v);
    for (const char *p = r->words; p && *p; i++) {
        size_t len = strcspn(p, ",");
        if (len == n && !strncmp(p, v, n)) return i;
        p += len + (p[len] == ',');
    }
    return -1;
}

static bool set_row(TileKnobs *k, const KnobRow *r, const char *value, const char *who, char *why, size_t n)
{
    char *end;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (!*value || *end || errno) v = word_value(r, value) >= 0 ? word_value(r, value) : (long)r->min - 1;
    if (v < r->min || v > r->max) {
        snprintf(why, n, "%s is '%s'; it takes an integer from %d to %d%s%s", who, value, r->min, r->max,
                 r->words ? " or one of " : "", r->words ? r->words : "");
        return false;
    }
    *field(k, r) = (int)v;
    return true;
}

bool tile_knobs_set(TileKnobs *k, const char *name, const char *value, char *why, size_t n)
{
    for (int i = 0; i < NKNOBS; i++) {
        if (strcmp(rows[i].name, name)) continue;
        char who[64];
        snprintf(who, sizeof who, "knob %s", name);
        return set_row(k, &rows[i], value, who, why, n);
    }
    snprintf(why, n, "no knob is named '%s' (knobs: %s)", name, tile_knobs_names());
    return false;
}

bool tile_knobs_from_env(TileKnobs *k, char *why, size_t n)
{
    for (int i = 0; i < NKNOBS; i++) {
        const char *v = getenv(rows[i].env);
        if (v && *v && !set_row(k, &rows[i], v, rows[i].env, why, n)) return false;
    }
    return true;
}

int tile_knobs_text(const TileKnobs *k, char *buf, size_t n)
{
    int len = 0;
    for (int i = 0; i < NKNOBS; i++) {
        size_t at = (size_t)len < n ? (size_t)len : n;
        len += snprintf(buf + at, n - at, "%s%s=%d", i ? " " : "", rows[i].name,
                        *field((TileKnobs *)k, &rows[i]));
    }
    return len;
}

const char *tile_knobs_names(void)
{
    static const char names[] = ""
#define TILE_KNOB(name, env, def, min, max, words, doc) ", " #name
#include "ir/knobs.def"
#undef TILE_KNOB
        ;
    return names + 2;   /* past the first ", " */
}

const char *tile_compiler_id(void) { return TILE_COMPILER_ID; }
