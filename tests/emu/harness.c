/* Runs the host build of a matmul-shaped tile kernel (c, a, b, M, N, K, stride_am,
 * stride_bk, stride_cm; llvm_to_host.py) with one pthread per GPU thread and one block
 * at a time, and counts the accesses outside their buffer or misaligned: cp.async
 * sources (issued ones) in A or B and 16-byte aligned, shared destinations and
 * ldmatrix rows aligned and inside the block's shared memory, stores inside C, shared
 * loads and stores inside the shared memory and aligned to their size.
 *
 *     harness M N K threads grid shared_bytes [BM BN BK]   (exit status 1 on any finding;
 *     BM BN BK: the tensor maps of a TMA build, -DTMA=1)
 *
 * A kernel with a producer warpgroup (ws) runs its threads too (the named barriers of
 * the consumers are pthread barriers of their count); a persistent one walks the tiles
 * from `grid` launched programs. CLUSTER=n (the environment): the kernel's programs run
 * on clusters of n CTAs, one CTA after another, twice: the first pass only marks what
 * each CTA's copies (multicast ones into every CTA) write, the second checks, so that
 * a CTA's wgmma reads of the rows its peers copy into it are checked too. */
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define NT_MAX 1024
unsigned char __tile_smem[256 * 1024] __attribute__((aligned(1024)));
static unsigned smem_bytes;
static __thread int tid_, ctaid_;
static pthread_barrier_t bar, cbar;
static int ncluster = 1, rank_, grid_, quiet;
static uintptr_t A, B, C;
static size_t szA, szB, szC;
static int errors;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
int emu_tid(void) { return tid_; }
int emu_ctaid(void) { return ctaid_ * ncluster + rank_; }
int emu_nctaid(void) { return grid_ * ncluster; }
int emu_rank(void) { return rank_; }
int emu_clusterid(void) { return ctaid_; }
int emu_nclusterid(void) { return grid_; }
void emu_barrier(void) { pthread_barrier_wait(&bar); }
/* barrier.cluster: every thread of the CTA (the others of the cluster run before or
 * after it here); a leaving producer thread's arrival counts as its wait */
void emu_cluster_barrier(void) { pthread_barrier_wait(&cbar); }
static void report(const char *what, uint64_t v);
/* Named barriers (bar.sync / barrier.sync id, n; bar.arrive id, n): a count per id; an
 * arrival counts and goes on, a sync counts and waits until n threads have counted in
 * this phase, as on the GPU. */
static struct {
    int count, n;
    unsigned phase;
} named[16];
static pthread_mutex_t nm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ncv = PTHREAD_COND_INITIALIZER;
static void named_bar(int id, int n, int wait)
{
    if (id < 0 || id >= 16) {
        report("a named barrier outside 0..15", (uint64_t)id);
        return;
    }
    pthread_mutex_lock(&nm);
    if (named[id].n && named[id].n != n) report("a named barrier used with two thread counts", (uint64_t)n);
    named[id].n = n;
    unsigned mine = named[id].phase;
    if (++named[id].count == n) {
        named[id].count = 0;
        named[id].phase++;
        pthread_cond_broadcast(&ncv);
    } else if (wait) {
        while (named[id].phase == mine) pthread_cond_wait(&ncv, &nm);
    }
    pthread_mutex_unlock(&nm);
}
void emu_barrier_cnt(int id, int n) { named_bar(id, n, 1); }
void emu_bar_sync(int id, int n) { named_bar(id, n, 1); }
void emu_bar_arrive(int id, int n) { named_bar(id, n, 0); }
static void reset_named(void)
{
    for (int i = 0; i < 16; i++) {
        if (named[i].count) report("a named barrier left with arrivals at the block's end", (uint64_t)i);
        named[i].count = named[i].n = 0;
    }
}
static void report(const char *what, uint64_t v) {
    if (quiet) return;
    pthread_mutex_lock(&mu);
    if (errors++ < 20) fprintf(stderr, "cta %d rank %d tid %d: %s (0x%llx)\n", ctaid_, rank_, tid_, what, (unsigned long long)v);
    pthread_mutex_unlock(&mu);
}
static uint32_t off_of(uint32_t a) { return a - (uint32_t)(uintptr_t)__tile_smem; }
/* The extent of shared memory the kernel touched: [lo, hi) of the copies and ldmatrix
 * (the buffer area), and hi of the scratch accesses. */
static uint32_t buf_lo = UINT32_MAX, buf_hi, scratch_hi;
static void extent(uint32_t *lo, uint32_t *hi, uint32_t o, uint32_t sz)
{
    pthread_mutex_lock(&mu);
    if (lo && o < *lo) *lo = o;
    if (o + sz > *hi) *hi = o + sz;
    pthread_mutex_unlock(&mu);
}
void chk_ldm(uint32_t a) {
    uint32_t o = off_of(a);
    extent(&buf_lo, &buf_hi, o, 16);
    if (o % 16) report("ldmatrix misaligned shared offset", o);
    if (o + 16 > smem_bytes) report("ldmatrix past the shared memory", o);
}
/* One wgmma operand's shared-memory descriptor (cg_wgmma.c): its 18-bit start inside
 * the shared memory, on the first row of a swizzle atom (8 rows of SW bytes: the
 * descriptor's base offset is 0), and every byte the instruction reads (o = 64 rows of
 * A or N of B, 16 K elements of 2 bytes) inside the shared memory. K-major: 8-row
 * groups SBO apart, each row SW bytes, 32 bytes from the start; MN-major: blocks of SW
 * bytes along o LBO apart, 16 K rows (two 8-row groups SBO apart). */
static unsigned char chunk_from[256 * 1024 / 16];   /* per 16 bytes: 1 copied from A, 2 from B */
static void chk_row(uint32_t row, int want, uint32_t sw)
{
    for (uint32_t c = 0; c < sw; c += 16) {
        uint32_t at = (row + c) / 16;
        if (at < sizeof chunk_from && chunk_from[at] && chunk_from[at] != want)
            report(want == 1 ? "wgmma A reads a row copied from B" : "wgmma B reads a row copied from A", row);
        /* a cluster's second pass: every row of a stage was written by some CTA's copy
         * in the first (the threads here do not wait for the copies: in a single pass a
         * read may come before the copy) */
        if (ncluster > 1 && at < sizeof chunk_from && !chunk_from[at]) report("wgmma reads a row no TMA copy wrote", row);
    }
}
static void chk_desc(uint64_t d, uint32_t o, int mn_major, int want)
{
    uint32_t start = (uint32_t)(d & 0x3FFF) << 4, lbo = (uint32_t)((d >> 16) & 0x3FFF) << 4;
    uint32_t sbo = (uint32_t)((d >> 32) & 0x3FFF) << 4, mode = (uint32_t)(d >> 62);
    uint32_t sw = mode == 1 ? 128 : mode == 2 ? 64 : mode == 3 ? 32 : 0;
    uint32_t off = (start - ((uint32_t)(uintptr_t)__tile_smem & 0x3FFFF)) & 0x3FFFF;
    if (!sw) { report("wgmma descriptor without a swizzle mode", d); return; }
    if (sbo != 8 * sw) report("wgmma descriptor SBO is not 8 rows of the swizzle", d);
    if (off % (8 * sw) >= sw) report("wgmma descriptor start not on an atom's first row", off);
    uint32_t atom = off - off % (8 * sw), hi;
    if (!mn_major) {
        hi = atom + (o / 8 - 1) * sbo + 8 * sw;
        if (off % 16) report("wgmma K-major start misaligned", off);
        for (uint32_t r = 0; r < o; r++) chk_row(atom + r / 8 * sbo + r % 8 * sw, want, sw);
    } else {
        uint32_t blocks = o * 2 / sw;
        hi = off + (blocks ? blocks - 1 : 0) * lbo + sbo + 8 * sw;
        if (blocks > 1 && lbo < 16 * sw) report("wgmma MN-major LBO overlaps its blocks", d);
        for (uint32_t bk = 0; bk < (blocks ? blocks : 1); bk++)
            for (uint32_t k = 0; k < 16; k++) chk_row(off + bk * lbo + k / 8 * sbo + k % 8 * sw, want, sw);
    }
    extent(&buf_lo, &buf_hi, atom, hi - atom);
    if (hi > smem_bytes) report("wgmma operand past the shared memory", hi);
}
void chk_wgmma(uint64_t da, uint64_t db, uint32_t n, uint32_t ta, uint32_t tb)
{
    if (da) chk_desc(da, 64, (int)ta, 1);
    chk_desc(db, n, (int)tb, 2);
}
static int in(uintptr_t p, uintptr_t base, size_t n, unsigned sz) { return p >= base && p + sz <= base + n; }
void chk_cp(uint32_t dst, uint64_t src, uint32_t pred, uint32_t own, uint32_t sz) {
    uint32_t o = off_of(dst);
    if (!own) return;
    extent(&buf_lo, &buf_hi, o, sz);
    if (o % sz) report("cp.async dst misaligned", o);
    if (o + sz > smem_bytes) report("cp.async dst past the shared memory", o);
    if (src % sz) report("cp.async src misaligned (masked off or not)", src);
    if (pred) {
        if (o / 16 < sizeof chunk_from) chunk_from[o / 16] = in(src, A, szA, sz) ? 1 : in(src, B, szB, sz) ? 2 : 0;
        if (src % sz) report("cp.async src misaligned", src);
        if (!in(src, A, szA, sz) && !in(src, B, szB, sz)) report("cp.async src outside A and B", src);
    }
}
void chk_st(uint32_t pred, uint64_t addr, uint32_t sz) {
    if (!pred) return;
    if (addr % sz) report("st.global misaligned", addr);
    if (!in(addr, C, szC, sz)) report("st.global outside C", addr);
}
/* TMA (harness built with -DTMA=1 for examples/matmul_bf16.tile's div16 variant): the
 * kernel takes three tensor maps after its arguments, A's, B's and C's (its store), which the harness
 * makes as the runtime would from the recipe (rt_tma.c): extents innermost first, the
 * row's bytes, the box (swizzle / 2 elements by the stage's rows). chk_tma checks a
 * copy: the map is one of the two, the destination inside the shared memory and on a
 * 1024-byte swizzle repeat when the box fills whole atoms, the box's inner coordinate a
 * multiple of its width, and it marks the box's bytes as copied from A or B, so the
 * wgmma descriptor check sees which operand each row holds. */
typedef struct Map {
    _Alignas(64) uint64_t base;
    uint64_t dims[2], stride;
    uint32_t box[2], which;
    unsigned char pad[128 - 44];
} Map;
_Static_assert(sizeof(Map) == 128, "a CUtensorMap is 128 bytes");
void chk_mbar(uint32_t a);
static Map map_a, map_b;
void chk_tma(uint32_t dst, uint64_t map, uint32_t c0, uint32_t c1, uint32_t bar)
{
    const Map *m = (const Map *)(uintptr_t)map;
    if (!m || (m->which != 1 && m->which != 2)) {
        report("TMA copy through an unknown tensor map", map);
        return;
    }
    uint32_t o = off_of(dst), bytes = m->box[0] * 2 * m->box[1];
    extent(&buf_lo, &buf_hi, o, bytes);
    if (o % 128) report("TMA destination not 128-byte aligned", o);
    if (m->box[1] % 8 == 0 && o % 1024) report("TMA destination of whole swizzle atoms not 1024-byte aligned", o);
    if (o + bytes > smem_bytes) report("TMA box past the shared memory", o);
    if ((int32_t)c0 % (int32_t)m->box[0]) report("TMA inner coordinate not a multiple of the box width", c0);
    if ((int64_t)(int32_t)c1 >= (int64_t)m->dims[1] + m->box[1]) report("TMA outer coordinate past the tensor", c1);
    for (uint32_t b = 0; b < bytes; b += 16) {
        uint32_t at = (o + b) / 16;
        if (at >= sizeof chunk_from) continue;
        if (chunk_from[at] && chunk_from[at] != m->which) report("TMA copies of A and of B land in one chunk", o + b);
        chunk_from[at] = (unsigned char)m->which;
    }
    /* the boxes of one tma_copy (one map and outer coordinate, inner coordinates
     * rising: one thread issues them in a row) go to disjoint blocks of the stage */
    static const Map *gm;
    static uint32_t g1, g0, gn, glo[16], ghi[16];
    if (m != gm || c1 != g1 || (int32_t)c0 <= (int32_t)g0 || gn == 16) gm = m, g1 = c1, gn = 0;
    for (uint32_t i = 0; i < gn; i++)
        if (o < ghi[i] && glo[i] < o + bytes) report("TMA boxes of one copy overlap in the stage", o);
    glo[gn] = o, ghi[gn++] = o + bytes, g0 = c0;
    chk_mbar(bar);
}
/* A multicast copy (a cluster's share of a block, cg_tma.c): a copy as above, landing at
 * the same offset of every CTA (one model of their shared memory: the CTAs' layouts are
 * the same), to every CTA of the cluster. */
void chk_tma_mc(uint32_t dst, uint64_t map, uint32_t c0, uint32_t c1, uint32_t bar, uint16_t mask)
{
    if (ncluster < 2) report("a multicast copy in a kernel without clusters", mask);
    if (mask != (1u << ncluster) - 1) report("a multicast copy not to every CTA of the cluster", mask);
    chk_tma(dst, map, c0, c1, bar);
}
/* A release of a stage on CTA `rank`'s barrier (mapa): a CTA of the cluster, the
 * barrier's offset one of this CTA's. */
void chk_remote_arrive(uint32_t a, uint32_t rank)
{
    if (rank >= (uint32_t)ncluster) report("a remote arrival on a CTA outside the cluster", rank);
    chk_mbar(a);
}

/* A TMA store (store_block, passes/tmastore.c): through C's map, from a staging half
 * inside the shared memory on a 1024-byte swizzle repeat, at a column that is a
 * multiple of the box's width and a row inside C, and every byte of the box written by
 * the threads (chk_sh) since the last store of that half read it. */
static Map map_c;
static unsigned char written[256 * 1024];
static unsigned char *c_stores;                     /* per element of C: TMA stores of it */
void chk_tma_st(uint64_t map, uint32_t c0, uint32_t c1, uint32_t src)
{
    const Map *m = (const Map *)(uintptr_t)map;
    if (!m || m->which != 3) {
        report("TMA store through a map that is not C's", map);
        return;
    }
    uint32_t o = off_of(src), bytes = m->box[0] * 2 * m->box[1];
    extent(&buf_lo, &buf_hi, o, bytes);
    if (o % 1024) report("TMA store source not 1024-byte aligned", o);
    if (o + bytes > smem_bytes) report("TMA store box past the shared memory", o);
    if ((int32_t)c0 % (int32_t)m->box[0] || c0 >= m->dims[0]) report("TMA store column not a box of C", c0);
    if (c1 >= m->dims[1]) report("TMA store row past C", c1);
    pthread_mutex_lock(&mu);
    uint32_t missing = 0;
    for (uint32_t b = 0; b < bytes && o + b < sizeof written; b++) missing += !written[o + b], written[o + b] = 0;
    pthread_mutex_unlock(&mu);
    if (missing) report("TMA store of staging bytes the threads did not write", missing);
    /* the box's elements inside C, counted: each must be stored exactly once */
    pthread_mutex_lock(&mu);
    for (uint32_t r = 0; r < m->box[1]; r++)
        for (uint32_t q = 0; q < m->box[0]; q++) {
            uint64_t row = (uint64_t)c1 + r, col = (uint64_t)c0 + q;
            if (row < m->dims[1] && col < m->dims[0]) c_stores[row * m->dims[0] + col]++;
        }
    pthread_mutex_unlock(&mu);
}

void chk_mbar(uint32_t a)
{
    uint32_t o = off_of(a);
    if (o % 8) report("mbarrier misaligned", o);
    if (o + 8 > smem_bytes) report("mbarrier past the shared memory", o);
}
#if TMA
extern void matmul_bf16(void *c, void *a, void *b, int M, int N, int K, int sam, int sbk, int scm, Map ma, Map mb, Map mc);
#else
extern void matmul_bf16(void *c, void *a, void *b, int M, int N, int K, int sam, int sbk, int scm);
#endif
static int M, N, K, cta;
static void *run(void *p) {
    tid_ = (int)(intptr_t)p;
    ctaid_ = cta;
#if TMA
    matmul_bf16((void *)C, (void *)A, (void *)B, M, N, K, K, N, N, map_a, map_b, map_c);
#else
    matmul_bf16((void *)C, (void *)A, (void *)B, M, N, K, K, N, N);
#endif
    return NULL;
}
static uint32_t swizzle_of(uint32_t row_bytes) { return row_bytes % 128 == 0 ? 128 : row_bytes % 64 == 0 ? 64 : 32; }
/* A block whose threads never finish (a barrier or turn that never completes: on the
 * GPU a hang) fails the run instead of holding it. */
static void hung(int sig)
{
    (void)sig;
    static const char msg[] = "the block did not finish in 120 s: a barrier or turn that never completes\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}
int main(int argc, char **argv) {
    signal(SIGALRM, hung);
    alarm(120);
    M = atoi(argv[1]); N = atoi(argv[2]); K = atoi(argv[3]);
    int nt = atoi(argv[4]), grid = atoi(argv[5]);
    smem_bytes = (unsigned)atoi(argv[6]);
    szA = (size_t)M * K * 2; szB = (size_t)K * N * 2; szC = (size_t)M * N * 2;
    A = (uintptr_t)aligned_alloc(256, szA); B = (uintptr_t)aligned_alloc(256, szB); C = (uintptr_t)aligned_alloc(256, szC);
    memset((void *)A, 0, szA); memset((void *)B, 0, szB);
#if TMA
    c_stores = calloc((size_t)M * N, 1);
#endif
    const char *cl = getenv("CLUSTER");
    ncluster = cl && atoi(cl) > 1 ? atoi(cl) : 1;
    grid_ = grid;
    if (argc > 9) {   /* BM BN BK: the maps (a CTA of a cluster copies and stores BM / n rows) */
        uint32_t BM = (uint32_t)atoi(argv[7]) / (uint32_t)ncluster, BN = (uint32_t)atoi(argv[8]),
                 BK = (uint32_t)atoi(argv[9]);
        map_a = (Map){.base = A, .dims = {(uint64_t)K, (uint64_t)M}, .stride = (uint64_t)K * 2,
                      .box = {swizzle_of(BK * 2) / 2, BM}, .which = 1};
        /* B multicast in a cluster: boxes shared out, or where they do not divide, each
         * CTA a box of BK / n rows (codegen/cg_tma.c multicast_rows) */
        uint32_t boxes = BN * 2 / swizzle_of(BN * 2), brows = ncluster > 1 && boxes % ncluster ? BK / ncluster : BK;
        map_b = (Map){.base = B, .dims = {(uint64_t)N, (uint64_t)K}, .stride = (uint64_t)N * 2,
                      .box = {swizzle_of(BN * 2) / 2, brows}, .which = 2};
        map_c = (Map){.base = C, .dims = {(uint64_t)N, (uint64_t)M}, .stride = (uint64_t)N * 2,
                      .box = {swizzle_of(BN * 2) / 2, BM > 128 && BM % 16 == 0 ? BM / 2 : BM}, .which = 3};   /* a staging chunk */
    }
    if (nt < 1 || nt > NT_MAX) {
        fprintf(stderr, "threads must be 1..%d\n", NT_MAX);
        return 2;
    }
    pthread_barrier_init(&bar, NULL, (unsigned)nt);
    pthread_barrier_init(&cbar, NULL, (unsigned)nt);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 4u << 20);
    for (int pass = ncluster > 1 ? 0 : 1; pass < 2; pass++) {
        quiet = pass == 0;   /* the first of a cluster's passes only marks what the copies write */
        for (cta = 0; cta < grid; cta++)
            for (rank_ = 0; rank_ < ncluster; rank_++) {
                pthread_t th[NT_MAX];
                reset_named();
                for (int t = 0; t < nt; t++)
                    if (pthread_create(&th[t], &attr, run, (void *)(intptr_t)t)) {
                        fprintf(stderr, "pthread_create failed\n");
                        return 2;
                    }
                for (int t = 0; t < nt; t++) pthread_join(th[t], NULL);
            }
#if TMA
        if (pass == 0) {   /* the stores and staging writes again in the second pass */
            memset(c_stores, 0, (size_t)M * N);
            memset(written, 0, sizeof written);
        }
#endif
    }
#if TMA
    for (size_t i = 0; i < (size_t)M * N; i++)
        if (c_stores[i] != 1) {
            report("an element of C not stored exactly once by the TMA stores", i);
            break;
        }
#endif
    printf("shared memory touched: buffers [%u, %u), scratch [0, %u)\n", buf_lo == UINT32_MAX ? 0 : buf_lo, buf_hi,
           scratch_hi);
    printf("%d errors\n", errors);
    return errors != 0;
}
void chk_sh(void *p, uint32_t sz) {
    uintptr_t o = (uintptr_t)p - (uintptr_t)__tile_smem;
    extent(NULL, &scratch_hi, (uint32_t)o, sz);
#if TMA
    if (o + sz <= sizeof written) memset(written + o, 1, sz);   /* loads mark too: only stores reach a staging half */
#endif
    if (o % sz) report("shared access misaligned", o);
    if (o + sz > smem_bytes) report("shared access past the shared memory", o);
}
/* The host's soft-float conversion, for kernels that round f32 to bf16 without the
 * cvt instruction: values do not matter here, only addresses. */
void __truncsfbf2(void) {}
/* The kernel's 32-bit shared address (the low half of the host address of
 * __tile_smem plus an offset) as a host pointer. */
void *emu_shared_ptr_i32(uint32_t a) { return __tile_smem + off_of(a); }
void *emu_shared_ptr_i64(uint64_t a) { return __tile_smem + off_of((uint32_t)a); }
/* Plain global loads (of A or B) and stores (to C), as the unspecialized variant makes. */
void chk_gl(void *p, uint32_t sz)
{
    uintptr_t a = (uintptr_t)p;
    if (a % sz) report("global load misaligned", a);
    if (!in(a, A, szA, sz) && !in(a, B, szB, sz)) report("global load outside A and B", a);
}
void chk_gs(void *p, uint32_t sz)
{
    uintptr_t a = (uintptr_t)p;
    if (a % sz) report("global store misaligned", a);
    if (!in(a, C, szC, sz)) report("global store outside C", a);
}
