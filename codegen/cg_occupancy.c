/* Occupancy: the plan's request (passes/plan.c decides which kernels ask for
 * `.minnctapersm N`, and up to how many registers a thread), measured here on the
 * optimized LLVM IR: the most 32-bit registers live at once (each value live from its
 * definition to its last use with the blocks in reverse post-order, a topological order
 * of an acyclic function, so the intervals over-approximate liveness; layout order,
 * where LLVM puts a join before the arms that reach it, made values used in both arms
 * look live across the join; i1 values live in predicate registers and do not count).
 * The request is written when the count is at most the plan's max_regs (calibrated with
 * ptxas -v, docs/CODEGEN.md section 6). The count needs the optimized IR, but LLVM 19
 * caches a kernel's !nvvm.annotations when its pipeline first asks for them, so a
 * "minctasm" annotation added after the pipeline is never read: the directive is
 * written into the PTX text instead, after the entry's `.maxntid`. -O0 skips all this. */
#include <stdio.h>
#include <string.h>

#include "codegen/cg_internal.h"

/* 32-bit registers for one value (0 for i1: predicates). */
static int value_regs(LLVMTypeRef t)
{
    LLVMTypeKind k = LLVMGetTypeKind(t);
    if (k == LLVMVoidTypeKind || (k == LLVMIntegerTypeKind && LLVMGetIntTypeWidth(t) == 1)) return 0;
    if (k == LLVMVectorTypeKind) {
        LLVMTypeRef e = LLVMGetElementType(t);
        unsigned n = LLVMGetVectorSize(t);
        unsigned bits = LLVMGetTypeKind(e) == LLVMIntegerTypeKind ? LLVMGetIntTypeWidth(e)
                      : LLVMGetTypeKind(e) == LLVMDoubleTypeKind || LLVMGetTypeKind(e) == LLVMPointerTypeKind ? 64
                      : LLVMGetTypeKind(e) == LLVMFloatTypeKind ? 32 : 16;
        return (int)((n * bits + 31) / 32);
    }
    if (k == LLVMDoubleTypeKind || k == LLVMPointerTypeKind) return 2;
    if (k == LLVMIntegerTypeKind && LLVMGetIntTypeWidth(t) > 32) return 2;
    return 1;
}

static uint32_t count_insts(LLVMValueRef fn)
{
    uint32_t n = 0;
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
        for (LLVMValueRef i = LLVMGetFirstInstruction(bb); i; i = LLVMGetNextInstruction(i)) n++;
    return n;
}

/* The blocks of fn in reverse post-order (successors visited before a block is
 * finished); blocks not reached from the entry follow in layout order. */
typedef struct BlockOrder {
    LLVMBasicBlockRef *bb;
    uint32_t n;
} BlockOrder;

static uint32_t count_blocks(LLVMValueRef fn)
{
    uint32_t n = 0;
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb)) n++;
    return n;
}

static bool seen(LLVMBasicBlockRef *list, uint32_t n, LLVMBasicBlockRef bb)
{
    for (uint32_t i = 0; i < n; i++)
        if (list[i] == bb) return true;
    return false;
}

static void post_order(LLVMBasicBlockRef bb, LLVMBasicBlockRef *visited, uint32_t *nv, BlockOrder *o)
{
    visited[(*nv)++] = bb;
    LLVMValueRef term = LLVMGetBasicBlockTerminator(bb);
    unsigned ns = term ? LLVMGetNumSuccessors(term) : 0;
    for (unsigned i = 0; i < ns; i++) {
        LLVMBasicBlockRef s = LLVMGetSuccessor(term, i);
        if (!seen(visited, *nv, s)) post_order(s, visited, nv, o);
    }
    o->bb[o->n++] = bb;
}

static BlockOrder block_order(LLVMValueRef fn)
{
    uint32_t total = count_blocks(fn), nv = 0;
    BlockOrder o = {tl_calloc(total ? total : 1, sizeof *o.bb), 0};
    LLVMBasicBlockRef *visited = tl_calloc(total ? total : 1, sizeof *visited);
    if (!o.bb || !visited) tl_oom();
    if (total) post_order(LLVMGetEntryBasicBlock(fn), visited, &nv, &o);
    for (uint32_t i = 0; i < o.n / 2; i++) {
        LLVMBasicBlockRef t = o.bb[i];
        o.bb[i] = o.bb[o.n - 1 - i];
        o.bb[o.n - 1 - i] = t;
    }
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
        if (!seen(visited, nv, bb)) o.bb[o.n++] = bb;
    tl_free(visited);
    return o;
}

/* Instruction -> position in block order: an open-addressing table (power-of-two
 * size, at least twice the instructions). */
typedef struct PosMap {
    LLVMValueRef *key;
    uint32_t *pos, mask;
} PosMap;

static uint32_t slot_of(const PosMap *m, LLVMValueRef v)
{
    uint32_t h = (uint32_t)(((uintptr_t)v >> 4) * 2654435761u) & m->mask;
    while (m->key[h] && m->key[h] != v) h = (h + 1) & m->mask;
    return h;
}

static PosMap pos_map(const BlockOrder *o, uint32_t n)
{
    PosMap m = {0};
    uint32_t size = 16, at = 0;
    while (size < 2 * n) size *= 2;
    m.key = tl_calloc(size, sizeof *m.key);
    m.pos = tl_calloc(size, sizeof *m.pos);
    if (!m.key || !m.pos) tl_oom();
    m.mask = size - 1;
    for (uint32_t b = 0; b < o->n; b++)
        for (LLVMValueRef i = LLVMGetFirstInstruction(o->bb[b]); i; i = LLVMGetNextInstruction(i)) {
            uint32_t h = slot_of(&m, i);
            m.key[h] = i;
            m.pos[h] = at++;
        }
    return m;
}

/* The most registers live at once (see the banner). */
int cg_register_estimate(LLVMValueRef fn)
{
    uint32_t n = count_insts(fn), at = 0;
    BlockOrder o = block_order(fn);
    PosMap m = pos_map(&o, n);
    int *diff = tl_calloc(n + 1, sizeof *diff);
    if (!diff) tl_oom();
    for (uint32_t b = 0; b < o.n; b++)
        for (LLVMValueRef i = LLVMGetFirstInstruction(o.bb[b]); i; i = LLVMGetNextInstruction(i), at++) {
            int r = value_regs(LLVMTypeOf(i));
            uint32_t last = at;
            for (LLVMUseRef u = r ? LLVMGetFirstUse(i) : NULL; u; u = LLVMGetNextUse(u)) {
                LLVMValueRef user = LLVMGetUser(u);
                uint32_t h = slot_of(&m, user);
                if (m.key[h] == user && m.pos[h] > last) last = m.pos[h];
            }
            diff[at] += r;
            diff[last] -= r;
        }
    int live = 0, most = 0;
    for (uint32_t k = 0; k < n; k++) {
        live += diff[k];
        if (live > most) most = live;
    }
    tl_free(diff);
    tl_free(m.key);
    tl_free(m.pos);
    tl_free(o.bb);
    return most;
}

void cg_occupancy(LLVMModuleRef mod, const IrModule *m, int *mincta)
{
    for (uint32_t i = 0; i < m->nfuncs; i++) {
        const IrFunc *k = m->funcs[i];
        if (k->kind != IR_FUNC_KERNEL || !k->plan || !k->plan->occupancy) continue;
        LLVMValueRef fn = LLVMGetNamedFunction(mod, k->name);
        if (fn && cg_register_estimate(fn) <= (int)k->plan->occupancy_max_regs) mincta[i] = (int)k->plan->occupancy;
    }
}

/* ptx with `line` (which begins with a newline) after the `.maxntid` line of entry
 * `name` (ptx itself, freed, when it has none). */
static char *after_maxntid(char *ptx, const char *name, const char *line)
{
    char head[256];
    snprintf(head, sizeof head, ".entry %s(", name);
    char *entry = strstr(ptx, head), *at = entry ? strstr(entry, "\n.maxntid") : NULL;
    if (!at || !(at = strchr(at + 1, '\n'))) return ptx;
    size_t pre = (size_t)(at - ptx), len = strlen(ptx), n = strlen(line);
    char *out = tl_malloc(len + n + 1);
    if (!out) tl_oom();
    memcpy(out, ptx, pre);
    memcpy(out + pre, line, n);
    memcpy(out + pre + n, at, len - pre + 1);
    tl_free(ptx);
    return out;
}

/* Writes `.minnctapersm N` after the `.maxntid` line of each chosen entry, and a
 * kernel of clusters' `.reqnctapercluster N, 1, 1` (passes/cluster.c: its CTAs along x;
 * LLVM 19 writes no such directive). */
char *cg_occupancy_directives(char *ptx, const IrModule *m, const int *mincta)
{
    for (uint32_t i = 0; i < m->nfuncs; i++) {
        char line[64];
        if (mincta[i]) {
            snprintf(line, sizeof line, "\n.minnctapersm %d", mincta[i]);
            ptx = after_maxntid(ptx, m->funcs[i]->name, line);
        }
        if (m->funcs[i]->kind == IR_FUNC_KERNEL && ir_cluster_size(m->funcs[i]) > 1) {
            snprintf(line, sizeof line, "\n.reqnctapercluster %d, 1, 1", ir_cluster_size(m->funcs[i]));
            ptx = after_maxntid(ptx, m->funcs[i]->name, line);
        }
    }
    return ptx;
}
