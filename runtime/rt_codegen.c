/* The code generator, loaded on demand.
 *
 * LLVM's NVPTX backend lives in libtileCG.so, not in libtileRT: loading it (40 MB of
 * relocations and LLVM's static initializers) costs about 10 ms, and a warm start,
 * whose cubins come from the disk cache, never compiles. So the runtime dlopens it on
 * the first cache miss that needs PTX, once per process, and resolves the entry points
 * it calls into a table. Where it looks: $TILE_CODEGEN_LIBRARY when set (and only
 * there: an explicit choice must not silently fall back to another build's code
 * generator), else next to the library holding this code (libtileRT.so, or the program
 * a static runtime is linked into), else the default search path. If none loads, every
 * compile fails with TRT_ERROR_NO_CODEGEN and a message naming each place tried; cached
 * kernels keep loading.
 *
 * Cache keys name the compiler's identity (tile_compiler_id: a hash of its sources and
 * LLVM's version, taken at build time). A warm start must not load LLVM to learn it, so
 * the keys name the runtime's own, which the code generator built beside it shares; one
 * found by the default search with another identity is refused (its code would be
 * stored under this build's keys). An explicit $TILE_CODEGEN_LIBRARY may be another
 * build: it is loaded when the first key is made, and the keys name its identity. */
#define _GNU_SOURCE   /* dladdr */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "rt_internal.h"

#define RT_CODEGEN_NAME "libtileCG.so"

/* Each entry point's signature is checked against codegen.h at compile time (without
 * referencing the symbol: _Generic does not evaluate its operand). */
#define X(field, sym, ret, params)                                                       \
    _Static_assert(_Generic(&sym, ret (*) params: 1, default: 0), #sym " changed its signature");
RT_CODEGEN_FNS(X)
#undef X

static RtCodegen codegen;
static bool codegen_ok;
static char codegen_why[1024];
static pthread_once_t codegen_once = PTHREAD_ONCE_INIT;

/* Appends one failure to codegen_why, after "; " if it is not the first. */
static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
    size_t n = strlen(codegen_why);
    if (n) n += (size_t)snprintf(codegen_why + n, sizeof codegen_why - n, "; ");
    if (n >= sizeof codegen_why) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(codegen_why + n, sizeof codegen_why - n, fmt, ap);
    va_end(ap);
}

static bool resolve(void *h, const char *path)
{
#define X(field, sym, ret, params)                                                       \
    if (!(codegen.field = (ret (*) params)dlsym(h, #sym))) {                            \
        note("%s has no %s", path, #sym);                                               \
        return false;                                                                   \
    }
    RT_CODEGEN_FNS(X)
#undef X
    return true;
}

/* A library of another build, found where this build's should be: its code would be
 * stored under this build's keys. */
static bool foreign(const char *path)
{
    const char *id = codegen.compiler_id();
    if (id && !strcmp(id, tile_compiler_id())) return false;
    note("%s was built from other sources (compiler %s) than this runtime (compiler %s); "
         "rebuild both, or name it in TILE_CODEGEN_LIBRARY", path, id ? id : "(none)", tile_compiler_id());
    return true;
}

static bool try_open(const char *path, bool explicit)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();   /* names the path */
        note("%s", e ? e : path);
        return false;
    }
    if (resolve(h, path) && (explicit || !foreign(path))) return true;
    dlclose(h);
    return false;
}

/* dir/libtileCG.so for the directory of the object that holds this code, or "" when
 * that has no directory (a program found on $PATH). */
static void beside_runtime(char *buf, size_t n)
{
    Dl_info info;
    buf[0] = '\0';
    if (!dladdr((void *)&beside_runtime, &info) || !info.dli_fname) return;
    const char *slash = strrchr(info.dli_fname, '/');
    if (slash)
        snprintf(buf, n, "%.*s/%s", (int)(slash - info.dli_fname), info.dli_fname,
                 RT_CODEGEN_NAME);
}

static void open_codegen(void)
{
    const char *env = getenv("TILE_CODEGEN_LIBRARY");
    if (env && *env) {
        codegen_ok = try_open(env, true);
        return;
    }
    char beside[4096];
    beside_runtime(beside, sizeof beside);
    codegen_ok = (beside[0] && try_open(beside, false)) || try_open(RT_CODEGEN_NAME, false);
}

const char *rt_compiler_identity(void)
{
    const char *env = getenv("TILE_CODEGEN_LIBRARY");
    if (!env || !*env) return tile_compiler_id();
    pthread_once(&codegen_once, open_codegen);
    const char *id = codegen_ok ? codegen.compiler_id() : NULL;
    return id ? id : tile_compiler_id();   /* none loads: nothing is compiled, hits still serve */
}

const RtCodegen *rt_codegen(const char *kernel)
{
    pthread_once(&codegen_once, open_codegen);
    if (codegen_ok) return &codegen;
    rt_fail(TRT_ERROR_NO_CODEGEN,
            "no GPU code generator: kernel '%s' is not in the disk cache and cannot be "
            "compiled to PTX: the code generator library could not be loaded (tried: %s); "
            "set TILE_CODEGEN_LIBRARY to the path of " RT_CODEGEN_NAME,
            kernel, codegen_why);
    return NULL;
}
