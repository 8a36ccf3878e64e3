/* libtileCG_emu.so: the code generator as the emulating driver wants it. Point
 * TILE_CODEGEN_LIBRARY at it and TILE_EMU_CODEGEN at the real libtileCG.so: the runtime
 * then gets, where it asks for a kernel's PTX (cg_emit_ptx), the kernel's LLVM IR as
 * the NVPTX backend would have compiled it (cg_emit_llvm: the same module after the
 * same pipeline), which the mock driver runs with MOCKCUDA_EMULATE=1 (tests/emu/
 * emu_rt.c), followed by a line "; tile-emu-cluster NAME N" for each kernel of clusters
 * of N CTAs (what the PTX says in .reqnctapercluster, which the IR does not hold). Everything else the runtime asks of the code generator is the real
 * library's answer. Tests only; its identity (cg_compiler_id) differs from the real
 * library's, so its texts (not PTX) never share a cache entry with real PTX. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"

static void *real(const char *sym)
{
    static void *h;
    if (!h) {
        const char *path = getenv("TILE_EMU_CODEGEN");
        if (!path || !(h = dlopen(path, RTLD_NOW | RTLD_LOCAL))) {
            fprintf(stderr, "libtileCG_emu: cannot load the real code generator (TILE_EMU_CODEGEN=%s): %s\n",
                    path ? path : "(unset)", dlerror());
            abort();
        }
    }
    void *f = dlsym(h, sym);
    if (!f) {
        fprintf(stderr, "libtileCG_emu: %s has no %s\n", getenv("TILE_EMU_CODEGEN"), sym);
        abort();
    }
    return f;
}

char *cg_emit_ptx(const IrModule *m, const CgOptions *o, DiagList *d)
{
    char *(*emit_llvm)(const IrModule *, const CgOptions *, DiagList *) =
        (char *(*)(const IrModule *, const CgOptions *, DiagList *))real("cg_emit_llvm");
    char *ir = emit_llvm(m, o, d);
    for (uint32_t i = 0; ir && i < m->nfuncs; i++) {
        const IrPlan *plan = m->funcs[i]->plan;
        if (m->funcs[i]->kind != IR_FUNC_KERNEL || !plan || plan->cluster <= 1) continue;
        size_t n = strlen(ir), add = strlen(m->funcs[i]->name) + 48;
        char *more = realloc(ir, n + add);   /* the runtime frees it with tl_free: free */
        if (!more) abort();
        ir = more;
        snprintf(ir + n, add, "\n; tile-emu-cluster %s %u\n", m->funcs[i]->name, plan->cluster);
    }
    return ir;
}

/* Its texts are LLVM IR, not PTX: they must never share a cache entry with the real
 * code generator's, so its identity is the real one's, marked. */
const char *cg_compiler_id(void)
{
    static char id[256];
    const char *(*real_id)(void) = (const char *(*)(void))real("cg_compiler_id");
    snprintf(id, sizeof id, "emu+%s", real_id());
    return id;
}
