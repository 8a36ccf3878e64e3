/* libtileCG_other.so: a code generator of another build, for the cache-key tests
 * (tests/unit/test_cache_keys.c). It is the real library (TILE_OTHER_CODEGEN names
 * it) with one difference in what it emits, a comment line after the PTX, and so
 * another identity (cg_compiler_id), as a build with a changed codegen/ would have.
 * The runtime must never serve this library's entries to the real one, nor the
 * real one's to it. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"

#define OTHER_MARK "// emitted by the other build\n"

static void *real(const char *sym)
{
    static void *h;
    if (!h && !(h = dlopen(getenv("TILE_OTHER_CODEGEN"), RTLD_NOW | RTLD_LOCAL))) {
        fprintf(stderr, "libtileCG_other: cannot load TILE_OTHER_CODEGEN: %s\n", dlerror());
        abort();
    }
    void *f = dlsym(h, sym);
    if (!f) abort();
    return f;
}

char *cg_emit_ptx(const IrModule *m, const CgOptions *o, DiagList *d)
{
    char *(*emit)(const IrModule *, const CgOptions *, DiagList *) =
        (char *(*)(const IrModule *, const CgOptions *, DiagList *))real("cg_emit_ptx");
    char *ptx = emit(m, o, d);
    if (!ptx) return NULL;
    size_t n = strlen(ptx);
    char *more = realloc(ptx, n + sizeof OTHER_MARK);   /* the runtime frees it with free */
    if (!more) abort();
    memcpy(more + n, OTHER_MARK, sizeof OTHER_MARK);
    return more;
}

const char *cg_compiler_id(void)
{
    static char id[256];
    snprintf(id, sizeof id, "other+%s", ((const char *(*)(void))real("cg_compiler_id"))());
    return id;
}
