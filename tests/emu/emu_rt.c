/* The emulated GPU of tests/emu: what a kernel's host build (llvm_to_host.py --emu) calls
 * in place of the PTX it would run, with values. Linked into each module's shared
 * object by the mock driver when MOCKCUDA_EMULATE=1 (tests/mock/mockcuda.c), which runs
 * a launch through emu_launch: one pthread per GPU thread, the CTAs of the grid one
 * after another, all threads of a CTA at once (so barriers, mbarrier waits, warp
 * shuffles and warpgroup wgmmas meet as on the GPU).
 *
 * What is modelled, and how (the facts of ../shared/TENSOR-CORES.md):
 * - shared memory: one buffer of the launch's dynamic size, zeroed per CTA; every
 *   access checked to lie inside it and be aligned;
 * - wgmma m64nNk16 (f16, bf16) and m64nNk32 (e4m3, e5m2) into f32: the 128 threads of a
 *   warpgroup meet, thread 0 of it reads A (its descriptor, or the threads' registers in
 *   the mma A pattern) and B through their descriptors (K-major or, 16-bit, MN-major;
 *   128/64/32-byte swizzles as address bits 4-6/4-5/4 XOR 7-9/7-8/7), multiplies in
 *   f32 and hands each thread its accumulators (row 16w + g + 8((i>>1)&1), column
 *   8(i>>2) + 2t + (i&1)); the copy is done at the instruction, so a missing wait in
 *   the kernel is not caught here, but every layout and index is;
 * - TMA (the mock's tensor maps): a 2-D box (of a 2-D map, or a 3-D one at an outer
 *   coordinate, box 1 along it) into the swizzled stage, zeros outside the
 *   tensor, complete_tx of the box's bytes on the mbarrier at its issue, the bytes
 *   landing when a wait on that barrier sees the phase complete (a read without that
 *   wait sees the stage's old contents); stores from a swizzled staging buffer, clipped
 *   at the tensor's edges;
 * - mbarriers: arrivals, expected transaction bytes and the phase's parity (try_wait
 *   of parity P passes once the phase of that parity has completed; at once on a
 *   fresh barrier for P = 1), waits blocking;
 * - cp.async (copied at issue, zero-filled past its source size), predicated global
 *   loads and stores, cvt.rn.bf16x2, ex2.approx (exp2f, flushing subnormals where
 *   ftz), rcp.approx.ftz (1 / x), cvt.rn.f16x2, mma.sync (bf16, f16, tf32, s8, u8) and
 *   ldmatrix (x4, .trans), vprintf and __assertfail, fences (no-ops), warp shuffles (idx, bfly, up, down over whole warps), barrier 0 over the
 *   CTA's living threads and named barriers by count.
 * Anything else fails the translation, never silently. A CTA whose threads have not
 * finished after EMU_TIMEOUT seconds (default 120) ends the process with a message: on
 * the GPU a hang. */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NT_MAX 1024
#define SMEM_MAX (228 * 1024)
#define MAXC 8                 /* CTAs of a cluster */
#define GT_MAX (NT_MAX * MAXC) /* threads of a cluster */

typedef struct Rdv {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n, count;
    unsigned gen;
} Rdv;

/* The kernel's @__tile_smem: the base of the shared addresses it computes (the same in
 * every CTA, as on the GPU); what a thread reads and writes there is its CTA's own
 * memory, cta_mem[rank] (emu_sh, sh). */
unsigned char __tile_smem[SMEM_MAX] __attribute__((aligned(1024)));
static unsigned char cta_mem[MAXC][SMEM_MAX] __attribute__((aligned(1024)));
#define smem (cta_mem[rank_])
static unsigned smem_bytes;
static __thread int tid_ = -1, rank_, gtid_;   /* thread in its CTA, CTA in the cluster, thread in the cluster */
static unsigned cta_[3], grid_[3], nthreads, ncl = 1;
static int errors, asserted;
static pthread_mutex_t mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;   /* fail() may run under it */
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;   /* mbarriers, barrier 0, named barriers */
static Rdv warp_rdv[GT_MAX / 32], wg_rdv[GT_MAX / 128];
static uint32_t shfl_slot[GT_MAX];
static int living[MAXC];                               /* threads of each CTA not yet returned */

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    va_list ap;
    pthread_mutex_lock(&mu);
    if (errors++ < 20) {
        fprintf(stderr, "emu: cta (%u, %u, %u) thread %d: ", cta_[0] * ncl + (unsigned)rank_, cta_[1], cta_[2], tid_);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
    }
    pthread_mutex_unlock(&mu);
}

static void rdv_init(Rdv *r, int n)
{
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->n = n, r->count = 0, r->gen = 0;
}

static void rdv_wait(Rdv *r)
{
    pthread_mutex_lock(&r->mu);
    unsigned g = r->gen;
    if (++r->count == r->n) {
        r->count = 0;
        r->gen++;
        pthread_cond_broadcast(&r->cv);
    } else {
        while (r->gen == g) pthread_cond_wait(&r->cv, &r->mu);
    }
    pthread_mutex_unlock(&r->mu);
}

/* ---- special registers -------------------------------------------------------------- */
int emu_tid(void) { return tid_; }
int emu_ctaid_x(void) { return (int)(cta_[0] * ncl) + rank_; }
int emu_ctaid_y(void) { return (int)cta_[1]; }
int emu_ctaid_z(void) { return (int)cta_[2]; }
int emu_nctaid_x(void) { return (int)(grid_[0] * ncl); }
int emu_rank(void) { return rank_; }
int emu_clusterid(void) { return (int)cta_[0]; }
int emu_nclusterid(void) { return (int)grid_[0]; }
int emu_nctaid_y(void) { return (int)grid_[1]; }
int emu_nctaid_z(void) { return (int)grid_[2]; }

/* ---- shared memory -------------------------------------------------------------------- */
static uint32_t off_of(uint32_t a) { return a - (uint32_t)(uintptr_t)__tile_smem; }
static unsigned char *sh(uint32_t a, uint32_t n, const char *what)
{
    uint32_t o = off_of(a);
    if (o + (uint64_t)n > smem_bytes) {
        fail("%s at shared offset %u (+%u) past the %u bytes launched", what, o, n, smem_bytes);
        return NULL;
    }
    return smem + o;
}
void *emu_shared_ptr_i32(uint32_t a) { return __tile_smem + off_of(a); }
void *emu_shared_ptr_i64(uint64_t a) { return __tile_smem + off_of((uint32_t)a); }
/* A shared pointer the kernel dereferences (sz bytes, aligned to al as the instruction
 * says): the calling thread's CTA's memory at its offset, checked. */
void *emu_sh(void *p, uint32_t sz, uint32_t al)
{
    uintptr_t o = (uintptr_t)p - (uintptr_t)__tile_smem;
    if (al && o % al) fail("shared access misaligned (offset %lu, %u bytes aligned to %u)", (unsigned long)o, sz, al);
    if (o + sz > smem_bytes) {
        fail("shared access at offset %lu past the %u bytes launched", (unsigned long)o, smem_bytes);
        return smem;
    }
    return smem + o;
}
void chk_gl(void *p, uint32_t sz)
{
    if ((uintptr_t)p % sz) fail("global load misaligned (%p, %u bytes)", p, sz);
}
void chk_gs(void *p, uint32_t sz)
{
    if ((uintptr_t)p % sz) fail("global store misaligned (%p, %u bytes)", p, sz);
}

/* ---- barriers ----------------------------------------------------------------------- */
static struct { int count, n; unsigned phase; } named_[MAXC][16];
#define named (named_[rank_])
static unsigned bar0_count_[MAXC], bar0_phase_[MAXC];
#define bar0_count (bar0_count_[rank_])
#define bar0_phase (bar0_phase_[rank_])

static void bar0_check_locked(void)
{
    if (bar0_count && bar0_count >= (unsigned)living[rank_]) {
        bar0_count = 0;
        bar0_phase++;
        pthread_cond_broadcast(&cv);
    }
}

/* barrier.cluster (arrive, and wait unless a leaving thread's): every thread of the
 * cluster; a thread that returns counts as arrived from the next phase on (one that
 * arrived in this phase and returned counts once). */
static unsigned cl_count, cl_phase, cl_gone, cl_gone_next;
static __thread unsigned my_cl_phase = ~0u;
static void cl_check_locked(void)
{
    if (cl_count && cl_count + cl_gone >= nthreads * ncl) {
        cl_count = 0;
        cl_phase++;
        cl_gone += cl_gone_next;
        cl_gone_next = 0;
        pthread_cond_broadcast(&cv);
    }
}
void emu_cluster_sync(uint32_t wait)
{
    pthread_mutex_lock(&mu);
    unsigned mine = cl_phase;
    my_cl_phase = mine;
    cl_count++;
    cl_check_locked();
    while (wait && cl_phase == mine) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}

/* barrier 0 (bar.sync 0 / __syncthreads): every thread of the CTA still running */
void emu_barrier(void)
{
    pthread_mutex_lock(&mu);
    unsigned mine = bar0_phase;
    bar0_count++;
    bar0_check_locked();
    while (bar0_phase == mine) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}

static void named_bar(int id, int n, int wait)
{
    if (id < 0 || id >= 16) {
        fail("named barrier %d outside 0..15", id);
        return;
    }
    if (id == 0 && n == (int)nthreads) {
        if (wait) emu_barrier();
        else fail("bar.arrive 0 of the whole CTA");
        return;
    }
    pthread_mutex_lock(&mu);
    if (named[id].n && named[id].n != n) fail("named barrier %d used with %d and %d threads", id, named[id].n, n);
    named[id].n = n;
    unsigned mine = named[id].phase;
    if (++named[id].count == n) {
        named[id].count = 0;
        named[id].phase++;
        pthread_cond_broadcast(&cv);
    } else if (wait) {
        while (named[id].phase == mine) pthread_cond_wait(&cv, &mu);
    }
    pthread_mutex_unlock(&mu);
}
void emu_barrier_cnt(int id, int n) { named_bar(id, n, 1); }
void emu_bar_sync(int id, int n) { named_bar(id, n, 1); }
void emu_bar_arrive(int id, int n) { named_bar(id, n, 0); }

/* ---- warp shuffles (whole warps, width 32) ---------------------------------------------- */
static uint32_t shfl(int mode, uint32_t v, uint32_t b)
{
    int lane = tid_ % 32, base = gtid_ - lane, src = lane;
    Rdv *r = &warp_rdv[gtid_ / 32];
    shfl_slot[gtid_] = v;
    rdv_wait(r);
    switch (mode) {
    case 0: src = (int)(b & 31); break;                           /* idx */
    case 1: src = lane ^ (int)(b & 31); break;                    /* bfly */
    case 2: src = lane - (int)b >= 0 ? lane - (int)b : lane; break;   /* up */
    case 3: src = lane + (int)b <= 31 ? lane + (int)b : lane; break;  /* down */
    }
    uint32_t out = shfl_slot[base + src];
    rdv_wait(r);
    return out;
}
uint32_t emu_shfl_idx(uint32_t m, uint32_t v, uint32_t b, uint32_t c) { (void)m, (void)c; return shfl(0, v, b); }
uint32_t emu_shfl_bfly(uint32_t m, uint32_t v, uint32_t b, uint32_t c) { (void)m, (void)c; return shfl(1, v, b); }
uint32_t emu_shfl_up(uint32_t m, uint32_t v, uint32_t b, uint32_t c) { (void)m, (void)c; return shfl(2, v, b); }
uint32_t emu_shfl_down(uint32_t m, uint32_t v, uint32_t b, uint32_t c) { (void)m, (void)c; return shfl(3, v, b); }

/* ---- numbers ------------------------------------------------------------------------ */
static float bits_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t f_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static uint16_t f_to_bf16(float f)
{
    uint32_t u = f_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}
static float bf16_f(uint16_t h) { return bits_f((uint32_t)h << 16); }
static float f16_f(uint16_t h)
{
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023;
    if (e == 31) return bits_f(s | 0x7f800000u | (m << 13));
    if (e == 0) return (s ? -1.0f : 1.0f) * ldexpf((float)m, -24);
    return bits_f(s | ((e + 112) << 23) | (m << 13));
}
static float e4m3_f(uint8_t b)
{
    int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
    if (e == 15 && m == 7) return NAN;
    float v = e ? ldexpf(1.0f + (float)m / 8.0f, e - 7) : ldexpf((float)m / 8.0f, -6);
    return s ? -v : v;
}
static float e5m2_f(uint8_t b)
{
    int s = b >> 7, e = (b >> 2) & 31, m = b & 3;
    float v;
    if (e == 31) v = m ? NAN : INFINITY;
    else v = e ? ldexpf(1.0f + (float)m / 4.0f, e - 15) : ldexpf((float)m / 4.0f, -14);
    return s ? -v : v;
}
uint16_t emu_f2bf(float f) { return f_to_bf16(f); }
/* double to bf16, rounded once: through a float rounded to odd (24 bits keep the bf16
 * rounding exact), then to nearest even */
uint16_t emu_d2bf(double d)
{
    float f = (float)d;
    if (d == d && !isinf(f) && (double)f != d) {
        if (fabs((double)f) > fabs(d)) f = nextafterf(f, 0.0f);
        f = bits_f(f_bits(f) | 1);
    }
    return f_to_bf16(f);
}
static uint16_t f_to_f16(float f)
{
    uint32_t u = f_bits(f), s = (u >> 16) & 0x8000;
    float a = fabsf(f);
    if (a != a) return (uint16_t)(s | 0x7e00);
    if (a >= 65520.0f) return (uint16_t)(s | 0x7c00);
    if (a < ldexpf(1.0f, -14)) return (uint16_t)(s | (uint32_t)lrintf(a * ldexpf(1.0f, 24)));   /* subnormal, RNE */
    int e;
    float m = frexpf(a, &e);   /* a = m 2^e, m in [0.5, 1) */
    uint32_t q = (uint32_t)lrintf(m * 2048.0f);   /* 11 bits, RNE */
    if (q == 2048) q = 1024, e++;
    if (e + 14 >= 31) return (uint16_t)(s | 0x7c00);
    return (uint16_t)(s | (uint32_t)(e + 14) << 10 | (q - 1024));
}
/* cvt.rn.f16x2.f32 d, a, b: a in the upper half */
uint32_t emu_cvt_f16x2(float a, float b) { return ((uint32_t)f_to_f16(a) << 16) | f_to_f16(b); }
/* cvt.rn.bf16x2.f32 d, a, b: a in the upper half, b in the lower */
uint32_t emu_cvt_bf16x2(float a, float b) { return ((uint32_t)f_to_bf16(a) << 16) | f_to_bf16(b); }
/* cvt.rn.satfinite.e4m3x2.f32 d, a, b: a in the upper byte; to nearest even (the
 * nearest of the 127 finite codes, an even code on a tie), 448 past it, NaN 0x7f */
static uint8_t f_to_e4m3_sat(float f)
{
    uint8_t s = signbit(f) ? 0x80 : 0;
    float a = fabsf(f);
    if (a != a) return 0x7f;
    uint8_t best = 0;
    for (uint8_t code = 1; code < 0x7f; code++) {
        float d = fabsf(e4m3_f(code) - a), db = fabsf(e4m3_f(best) - a);
        if (d < db || (d == db && code % 2 == 0)) best = code;
    }
    return (uint8_t)(s | best);
}
uint16_t emu_cvt_e4m3x2(float a, float b) { return (uint16_t)(f_to_e4m3_sat(a) << 8 | f_to_e4m3_sat(b)); }
static float ftz(float x) { return fpclassify(x) == FP_SUBNORMAL ? copysignf(0.0f, x) : x; }
float emu_ex2_ftz(float x) { return ftz(exp2f(ftz(x))); }
/* prmt.b32 d, a, b, c: byte i of d is byte (c >> 4i) & 7 of {b, a} (a bytes 0-3), or
 * that byte's sign replicated when (c >> 4i) & 8 */
uint32_t emu_prmt(uint32_t a, uint32_t b, uint32_t c)
{
    uint64_t ab = (uint64_t)b << 32 | a;
    uint32_t d = 0;
    for (int i = 0; i < 4; i++) {
        uint32_t n = (c >> (4 * i)) & 15, byte = (uint32_t)(ab >> (8 * (n & 7))) & 0xFF;
        if (n & 8) byte = byte & 0x80 ? 0xFF : 0;
        d |= byte << (8 * i);
    }
    return d;
}
float emu_ex2(float x) { return exp2f(x); }
float emu_rcp_ftz(float x) { return ftz(1.0f / ftz(x)); }

/* ---- global memory through asm ---------------------------------------------------------- */
void emu_st_global(uint32_t pred, uint64_t addr, const uint32_t *v, uint32_t n)
{
    if (!pred) return;
    if (addr % (4u * n)) fail("st.global.v%u misaligned (0x%llx)", n, (unsigned long long)addr);
    memcpy((void *)(uintptr_t)addr, v, 4u * n);
}
/* red.global.add(.v2, .v4).f32: each element one atomic add (a compare-and-swap loop). */
void emu_red_add_f32(uint32_t pred, uint64_t addr, const float *v, uint32_t n)
{
    if (!pred) return;
    if (addr % (4u * n)) fail("red.global.add.v%u.f32 misaligned (0x%llx)", n, (unsigned long long)addr);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t *w = (uint32_t *)(uintptr_t)addr + i, old = __atomic_load_n(w, __ATOMIC_RELAXED), want;
        do {
            float f;
            memcpy(&f, &old, 4);
            f += v[i];
            memcpy(&want, &f, 4);
        } while (!__atomic_compare_exchange_n(w, &old, want, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    }
}
void emu_ld_global(uint32_t pred, uint64_t addr, uint32_t *v, uint32_t n)
{
    if (!pred) return;   /* the registers keep what they held (tied) */
    if (addr % (4u * n)) fail("ld.global.v%u misaligned (0x%llx)", n, (unsigned long long)addr);
    memcpy(v, (const void *)(uintptr_t)addr, 4u * n);
}

/* ---- cp.async -------------------------------------------------------------------------- */
void emu_cp_async(uint32_t dst, uint64_t src, uint32_t size, uint32_t src_size)
{
    unsigned char *d = sh(dst, size, "cp.async destination");
    if (!d) return;
    if (dst % size) fail("cp.async destination misaligned (%u)", off_of(dst));
    if (src_size > size) src_size = size;
    if (src_size && src % size) fail("cp.async source misaligned (0x%llx)", (unsigned long long)src);
    memset(d, 0, size);
    if (src_size) memcpy(d, (const void *)(uintptr_t)src, src_size);
}

/* st.shared(.v2, .v4).b32 (codegen/cg_shared.c local_store: the f8 transpose's 16-byte
 * chunks): n words at shared address dst, aligned to their size */
void emu_st_shared(uint32_t dst, const uint32_t *v, uint32_t n)
{
    unsigned char *d = sh(dst, 4 * n, "st.shared destination");
    if (!d) return;
    if (dst % (4 * n)) fail("st.shared.v%u.b32 destination misaligned (%u)", n, off_of(dst));
    memcpy(d, v, 4 * n);
}

/* ---- mbarriers --------------------------------------------------------------------------- */
#define NBAR 256
static struct Bar { uint32_t off; int used, count, pending; int64_t tx; unsigned phase; } bars_[MAXC][NBAR];
static int nbars_[MAXC];

/* the mbarrier at shared address a of CTA `rank` */
static struct Bar *bar_in(int rank, uint32_t a, int create)
{
    struct Bar *bars = bars_[rank];
    int *pn = &nbars_[rank], nbars = *pn;
    uint32_t o = off_of(a);
    if (o % 8 || o + 8 > smem_bytes) {
        fail("mbarrier at shared offset %u misaligned or past the shared memory", o);
        return NULL;
    }
    for (int i = 0; i < nbars; i++)
        if (bars[i].off == o) return &bars[i];
    if (!create) {
        fail("mbarrier at shared offset %u used before mbarrier.init", o);
        return NULL;
    }
    if (nbars == NBAR) {
        fail("more than %d mbarriers", NBAR);
        return NULL;
    }
    bars[nbars].off = o;
    ++*pn;
    return &bars[nbars];
}
static struct Bar *bar_of(uint32_t a, int create) { return bar_in(rank_, a, create); }
static void bar_complete_locked(struct Bar *b)
{
    if (b->pending == 0 && b->tx == 0) {
        b->phase++;
        b->pending = b->count;
        pthread_cond_broadcast(&cv);
    }
}
void emu_mbar_init(uint32_t a, uint32_t count)
{
    pthread_mutex_lock(&mu);
    struct Bar *b = bar_of(a, 1);
    if (b) b->used = 1, b->count = b->pending = (int)count, b->tx = 0, b->phase = 0;
    pthread_mutex_unlock(&mu);
}
static void bar_arrive(uint32_t a, int64_t tx)
{
    pthread_mutex_lock(&mu);
    struct Bar *b = bar_of(a, 0);
    if (b) {
        b->tx += tx;
        if (--b->pending < 0) fail("mbarrier at %u: more arrivals than its count %d", b->off, b->count);
        bar_complete_locked(b);
    }
    pthread_mutex_unlock(&mu);
}
void emu_mbar_arrive(uint32_t a) { bar_arrive(a, 0); }
void emu_mbar_arrive_tx(uint32_t a, uint32_t tx) { bar_arrive(a, tx); }
/* an arrival on CTA rank's barrier at a's offset (mapa + mbarrier.arrive.shared::cluster) */
void emu_mbar_arrive_remote(uint32_t a, uint32_t rank)
{
    if (rank >= ncl) {
        fail("a remote arrival on CTA %u of a cluster of %u", rank, ncl);
        return;
    }
    pthread_mutex_lock(&mu);
    struct Bar *b = bar_in((int)rank, a, 0);
    if (b) {
        if (--b->pending < 0) fail("mbarrier at %u of CTA %u: more arrivals than its count %d", b->off, rank, b->count);
        bar_complete_locked(b);
    }
    pthread_mutex_unlock(&mu);
}
static void bar_complete_tx(int rank, uint32_t a, uint32_t bytes)
{
    pthread_mutex_lock(&mu);
    struct Bar *b = bar_in(rank, a, 0);
    if (b) {
        b->tx -= bytes;
        bar_complete_locked(b);
    }
    pthread_mutex_unlock(&mu);
}
static void tma_land_locked(int rank, const struct Bar *b);
void emu_mbar_wait(uint32_t a, uint32_t parity)
{
    pthread_mutex_lock(&mu);
    struct Bar *b = bar_of(a, 0);
    while (b && (b->phase & 1) == (parity & 1)) pthread_cond_wait(&cv, &mu);
    if (b) tma_land_locked(rank_, b);
    pthread_mutex_unlock(&mu);
}

/* ---- swizzled shared memory ------------------------------------------------------------ */
/* The byte offset o (from the 1024-byte aligned buffer) where a swizzle of sw bytes
 * puts the 16-byte chunk: bits 4.. XORed with bits 7.. */
static uint32_t swz(uint32_t o, uint32_t sw)
{
    uint32_t bits = sw == 128 ? 3 : sw == 64 ? 2 : sw == 32 ? 1 : 0;
    return o ^ (((o >> 7) & ((1u << bits) - 1)) << 4);
}

/* ---- TMA ---------------------------------------------------------------------------------- */
typedef struct Map {   /* tests/mock/mockcuda.h MockTensorMap */
    char magic[8];
    uint64_t address;
    uint32_t dtype, rank, interleave, swizzle, l2_promotion, oob_fill;
    uint64_t dims[3], strides[2];
    uint32_t box[3], elem_strides[3];
    uint8_t unused[24];
} Map;
static const int dtype_bytes[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};

static const Map *map_of(uint64_t p)
{
    const Map *m = (const Map *)(uintptr_t)p;
    if (!m || memcmp(m->magic, "mocktma", 8) || (m->rank != 2 && m->rank != 3) || (m->rank == 3 && m->box[2] != 1)) {
        fail("a TMA copy through something that is not a 2-D tensor map of the mock driver (or a 3-D one of box 1 "
             "along the third dimension)");
        return NULL;
    }
    return m;
}
/* The box at (c0, c1) of a 2-D map, or at (c0, c1, c2) of a 3-D one (c2: the slice of
 * the outer dimension, box 1: passes/ptrblock.c's head offsets). */
static void box_copy(const Map *m, uint32_t s, int32_t c0, int32_t c1, int32_t c2, int store, int rank)
{
    uint32_t es = (uint32_t)dtype_bytes[m->dtype], sw = m->swizzle ? 16u << m->swizzle : 0;
    uint32_t row = m->box[0] * es, bytes = row * m->box[1];
    unsigned char *base = sh(s, bytes, store ? "TMA store source" : "TMA copy destination");
    if (!base) return;
    base = cta_mem[rank] + (base - smem);
    uint32_t o0 = off_of(s);
    if (sw && o0 % (8 * sw) && m->box[1] >= 8) fail("TMA box at shared offset %u not on a swizzle repeat", o0);
    for (uint32_t r = 0; r < m->box[1]; r++)
        for (uint32_t e = 0; e < m->box[0]; e++) {
            int64_t x = (int64_t)c0 + e, y = (int64_t)c1 + r;
            uint32_t o = r * row + e * es, at = sw ? swz(o0 + o, sw) - o0 : o;
            unsigned char *sp = base + at;
            int64_t z = m->rank == 3 ? c2 : 0;
            int inside = x >= 0 && y >= 0 && z >= 0 && (uint64_t)x < m->dims[0] && (uint64_t)y < m->dims[1] &&
                         (m->rank < 3 || (uint64_t)z < m->dims[2]);
            unsigned char *gp = (unsigned char *)(uintptr_t)(m->address + (uint64_t)y * m->strides[0] +
                                                             (uint64_t)z * (m->rank == 3 ? m->strides[1] : 0) +
                                                             (uint64_t)x * es);
            if (store) {
                if (inside) memcpy(gp, sp, es);
            } else if (inside) {
                memcpy(sp, gp, es);
            } else {
                memset(sp, 0, es);
            }
        }
}
/* A TMA copy lands when a thread waits for it: its box goes into the stage only once a
 * wait on its barrier sees the phase it completes (emu_mbar_wait), so a thread that reads
 * a stage without that wait (a wrong stage, barrier or parity) reads what was there
 * before, as it may on the GPU, and the result shows it. */
#define NPEND 4096
/* the map copied: the issuing thread's parameter may be gone (a producer that returned) */
static struct Pending { Map m; uint32_t dst, bar; int32_t c0, c1, c2; int rank; unsigned phase; } pend[NPEND];
static int npend;

static void tma_issue(const Map *m, uint32_t dst, int32_t c0, int32_t c1, int32_t c2, uint32_t bar, int rank)
{
    pthread_mutex_lock(&mu);
    struct Bar *b = bar_in(rank, bar, 0);
    if (b && npend < NPEND) pend[npend++] = (struct Pending){*m, dst, off_of(bar), c0, c1, c2, rank, b->phase};
    else if (b) fail("more than %d TMA copies in flight", NPEND);
    pthread_mutex_unlock(&mu);
    bar_complete_tx(rank, bar, m->box[0] * m->box[1] * (uint32_t)dtype_bytes[m->dtype]);
}

/* under mu: the copies into CTA rank's barrier b whose phase has completed land */
static void tma_land_locked(int rank, const struct Bar *b)
{
    for (int i = 0; i < npend;) {
        struct Pending *q = &pend[i];
        if (q->rank == rank && q->bar == b->off && q->phase < b->phase) {
            struct Pending c = *q;
            pend[i] = pend[--npend];
            box_copy(&c.m, c.dst, c.c0, c.c1, c.c2, 0, c.rank);
        } else {
            i++;
        }
    }
}

/* a copy through a 2-D map (c2 0) or a 3-D one */
void emu_tma_load3(uint32_t dst, uint64_t map, int32_t c0, int32_t c1, uint32_t bar, int32_t c2)
{
    const Map *m = map_of(map);
    if (m) tma_issue(m, dst, c0, c1, c2, bar, rank_);
}
void emu_tma_load(uint32_t dst, uint64_t map, int32_t c0, int32_t c1, uint32_t bar)
{
    emu_tma_load3(dst, map, c0, c1, bar, 0);
}
/* a multicast copy: the box into the same offset of every CTA of mask, each CTA's
 * barrier at bar's offset completing its bytes */
void emu_tma_load_mc3(uint32_t dst, uint64_t map, int32_t c0, int32_t c1, uint32_t bar, uint32_t mask, int32_t c2)
{
    const Map *m = map_of(map);
    if (!m) return;
    if (mask >> ncl) fail("a multicast copy to CTAs outside the cluster of %u (mask 0x%x)", ncl, mask);
    for (int r = 0; r < (int)ncl; r++)
        if (mask >> r & 1) tma_issue(m, dst, c0, c1, c2, bar, r);
}
void emu_tma_load_mc(uint32_t dst, uint64_t map, int32_t c0, int32_t c1, uint32_t bar, uint32_t mask)
{
    emu_tma_load_mc3(dst, map, c0, c1, bar, mask, 0);
}
void emu_tma_store3(uint64_t map, int32_t c0, int32_t c1, int32_t c2, uint32_t src)
{
    const Map *m = map_of(map);
    if (m) box_copy(m, src, c0, c1, c2, 1, rank_);
}
void emu_tma_store(uint64_t map, int32_t c0, int32_t c1, uint32_t src)
{
    emu_tma_store3(map, c0, c1, 0, src);
}

/* ---- wgmma ---------------------------------------------------------------------------- */
typedef struct WgSlot {
    float *acc;
    const uint32_t *areg;
    uint64_t da, db;
    uint32_t pred;
} WgSlot;
static WgSlot wg_slot[GT_MAX];

/* element (r, k) of a wgmma operand of `rows` rows (M or N) through descriptor d: its
 * address, the bytes of an element being es; mn_major: r along the contiguous axis */
static const unsigned char *desc_elem(uint64_t d, uint32_t r, uint32_t k, uint32_t es, int mn_major)
{
    uint32_t start = (uint32_t)(d & 0x3FFF) << 4, lbo = (uint32_t)((d >> 16) & 0x3FFF) << 4;
    uint32_t sbo = (uint32_t)((d >> 32) & 0x3FFF) << 4, mode = (uint32_t)(d >> 62);
    uint32_t sw = mode == 1 ? 128 : mode == 2 ? 64 : mode == 3 ? 32 : 0;
    uint32_t o = (start - ((uint32_t)(uintptr_t)__tile_smem & 0x3FFFF)) & 0x3FFFF;
    if (!sw) {
        fail("wgmma descriptor without a swizzle (the emulator models the swizzled layouts only)");
        return smem;
    }
    uint32_t at;
    if (!mn_major) {
        at = o + r / 8 * sbo + r % 8 * sw + k * es;
    } else {
        uint32_t per = sw / es;   /* elements of r in one row of the atom */
        at = o + r / per * lbo + k / 8 * sbo + k % 8 * sw + r % per * es;
    }
    at = swz(at, sw);
    if (at + es > smem_bytes) {
        fail("wgmma operand at shared offset %u past the shared memory", at);
        return smem;
    }
    return smem + at;
}
static float elem_f(const unsigned char *p, int type)
{
    uint16_t h;
    switch (type) {
    case 0: memcpy(&h, p, 2); return bf16_f(h);
    case 1: memcpy(&h, p, 2); return f16_f(h);
    case 2: return e4m3_f(*p);
    default: return e5m2_f(*p);
    }
}

/* One wgmma of the calling thread's warpgroup: acc (n / 2 floats) in and out; areg: the
 * A registers (4 x 32 bits) or NULL (A through da); type 0 bf16, 1 f16, 2 e4m3, 3 e5m2;
 * ta, tb: A, B MN-major (transposed). */
void emu_wgmma(float *acc, const uint32_t *areg, uint64_t da, uint64_t db, uint32_t pred, uint32_t n, uint32_t type,
               uint32_t ta, uint32_t tb)
{
    int wg = gtid_ / 128, first = wg * 128;
    wg_slot[gtid_] = (WgSlot){acc, areg, da, db, pred};
    rdv_wait(&wg_rdv[wg]);
    if (gtid_ == first) {
        uint32_t es = type >= 2 ? 1 : 2, K = 32 / es;   /* 16 (16-bit) or 32 (8-bit) */
        float A[64][32], B[256][32];   /* per warpgroup: two may compute at once */
        for (uint32_t r = 0; r < 64; r++)
            for (uint32_t k = 0; k < K; k++) {
                if (!areg) {
                    A[r][k] = elem_f(desc_elem(da, r, k, es, (int)ta), (int)type);
                    continue;
                }
                /* the mma A pattern: warp r / 16, lane g = r % 8, t = k % 8 / 2 (16-bit:
                 * m16n8k16's, two elements a register) or k % 16 / 4 (8-bit: m16n8k32's,
                 * four bytes a register, register hi + 2 * (k / 16)) */
                uint32_t w = r / 16, g = r % 8, hi = (r % 16) / 8;
                uint32_t W = 4 / es, kh = k / (4 * W), t = (k % (4 * W)) / W;
                const WgSlot *s = &wg_slot[first + (int)(w * 32 + g * 4 + t)];
                uint32_t word = s->areg[hi + 2 * kh];
                if (es == 1) {
                    unsigned char byte = (unsigned char)(word >> (8 * (k % 4)));
                    A[r][k] = elem_f(&byte, (int)type);
                    continue;
                }
                uint16_t h = (uint16_t)(k % 2 ? word >> 16 : word);
                A[r][k] = type == 0 ? bf16_f(h) : f16_f(h);
            }
        for (uint32_t c = 0; c < n; c++)
            for (uint32_t k = 0; k < K; k++) B[c][k] = elem_f(desc_elem(db, c, k, es, (int)tb), (int)type);
        for (int t = 0; t < 128; t++) {
            const WgSlot *s = &wg_slot[first + t];
            uint32_t w = (uint32_t)t / 32, g = ((uint32_t)t % 32) / 4, tt = (uint32_t)t % 4;
            for (uint32_t i = 0; i < n / 2; i++) {
                uint32_t r = 16 * w + g + 8 * ((i >> 1) & 1), c = 8 * (i >> 2) + 2 * tt + (i & 1);
                float sum = s->pred ? s->acc[i] : 0.0f;
                for (uint32_t k = 0; k < K; k++) sum = fmaf(A[r][k], B[c][k], sum);
                s->acc[i] = sum;
            }
        }
    }
    rdv_wait(&wg_rdv[wg]);
}

/* ---- mma.sync and ldmatrix (a warp's) ---------------------------------------------------- */
static uint32_t warp_addr[GT_MAX];
static uint32_t warp_regs[GT_MAX][6];

/* ldmatrix.sync.aligned.m8n8.xN[.trans].shared.b16 (N = nmat: 1, 2 or 4 matrices):
 * lanes 8j..8j+7 give the rows of matrix j (lanes past the N-th matrix's give nothing),
 * which lands in register j: lane l holds row l / 4, elements 2(l % 4) and
 * the next (transposed: column l / 4 of rows 2(l % 4) and the next). */
void emu_ldmatrix(uint32_t addr, uint32_t trans, uint32_t *out, uint32_t nmat)
{
    int lane = tid_ % 32, base = gtid_ - lane;
    Rdv *r = &warp_rdv[gtid_ / 32];
    if (off_of(addr) % 16) fail("ldmatrix row address misaligned (shared offset %u)", off_of(addr));
    warp_addr[gtid_] = addr;
    rdv_wait(r);
    for (int j = 0; j < (int)nmat; j++) {
        uint16_t h[2];
        for (int e = 0; e < 2; e++) {
            int row = trans ? 2 * (lane % 4) + e : lane / 4, col = trans ? lane / 4 : 2 * (lane % 4) + e;
            const unsigned char *p = sh(warp_addr[base + 8 * j + row] + 2u * (uint32_t)col, 2, "ldmatrix row");
            h[e] = 0;
            if (p) memcpy(&h[e], p, 2);
        }
        out[j] = (uint32_t)h[0] | (uint32_t)h[1] << 16;
    }
    rdv_wait(r);
}

/* mma.sync.aligned.m16n8kK.row.col: a (4 registers), b (2) and the accumulators c (4, in
 * and out) of each lane, in the fragments of ../shared/TENSOR-CORES.md, for elements of
 * 32 / e bits (e = 1 tf32, K 8; e = 2 f16/bf16, K 16; e = 4 s8/u8, K 32): with
 * g = lane / 4, t = lane % 4, a_i holds row g + 8 (i & 1), k 4e (i >> 1) + e t + j for
 * its j-th element; b_i holds k 4e i + e t + j, column g; c_i is row g + 8 (i >> 1),
 * column 2t + (i & 1). type: 0 bf16, 1 f16, 2 tf32, 3 s8, 4 u8 (s32 accumulators). */
static double mma_elem(uint32_t w, int j, uint32_t type)
{
    switch (type) {
    case 0: return bf16_f((uint16_t)(w >> (16 * j)));
    case 1: return f16_f((uint16_t)(w >> (16 * j)));
    case 2: return bits_f(w & 0xFFFFE000u);   /* tf32: the top 19 bits */
    case 3: return (int8_t)(w >> (8 * j));
    default: return (uint8_t)(w >> (8 * j));
    }
}
void emu_mma(const uint32_t *a, const uint32_t *b, void *c, uint32_t type)
{
    int lane = tid_ % 32, base = gtid_ - lane;
    int e = type == 2 ? 1 : type <= 1 ? 2 : 4, K = 8 * e;
    Rdv *r = &warp_rdv[gtid_ / 32];
    memcpy(warp_regs[gtid_], a, 16);
    memcpy(warp_regs[gtid_] + 4, b, 8);
    rdv_wait(r);
    uint32_t out[4];
    for (int i = 0; i < 4; i++) {
        int row = lane / 4 + 8 * (i >> 1), col = 2 * (lane % 4) + (i & 1);
        float fsum;
        int32_t isum;
        memcpy(&fsum, (char *)c + 4 * i, 4);
        memcpy(&isum, (char *)c + 4 * i, 4);
        for (int k = 0; k < K; k++) {
            int q = k % (4 * e), j = q % e;
            uint32_t aw = warp_regs[base + 4 * (row % 8) + q / e][(row / 8) + 2 * (k / (4 * e))];
            uint32_t bw = warp_regs[base + 4 * col + q / e][4 + k / (4 * e)];
            double x = mma_elem(aw, j, type), y = mma_elem(bw, j, type);
            if (type >= 3) isum += (int32_t)x * (int32_t)y;
            else fsum = fmaf((float)x, (float)y, fsum);
        }
        if (type >= 3) memcpy(&out[i], &isum, 4);
        else memcpy(&out[i], &fsum, 4);
    }
    rdv_wait(r);
    memcpy(c, out, sizeof out);
}

/* ---- device printf and assert ------------------------------------------------------------ */
/* vprintf(format, args): the GPU's, whose arguments are packed in a buffer, each aligned
 * to its size (ints 4 bytes unless l/ll, doubles and pointers 8). */
int emu_vprintf(const char *fmt, const char *args)
{
    char out[4096];
    size_t n = 0, off = 0;
    for (const char *p = fmt; *p && n < sizeof out - 64; p++) {
        if (*p != '%') {
            out[n++] = *p;
            continue;
        }
        if (p[1] == '%') {
            out[n++] = '%', p++;
            continue;
        }
        char spec[32];
        size_t k = 0;
        spec[k++] = *p++;
        int longs = 0;
        while (*p && !strchr("diouxXcfeEgGsp", *p) && k < sizeof spec - 2) {
            if (*p == 'l') longs++;
            spec[k++] = *p++;
        }
        if (!*p) break;
        spec[k++] = *p;
        spec[k] = 0;
        size_t sz = strchr("fFeEgGsp", *p) || longs ? 8 : 4;
        off = (off + sz - 1) / sz * sz;
        int w;
        if (strchr("fFeEgG", *p)) {
            double d;
            memcpy(&d, args + off, 8);
            w = snprintf(out + n, sizeof out - n, spec, d);
        } else if (*p == 's' || *p == 'p') {
            void *v;
            memcpy(&v, args + off, 8);
            w = snprintf(out + n, sizeof out - n, spec, v);
        } else if (sz == 8) {
            long long v;
            memcpy(&v, args + off, 8);
            w = snprintf(out + n, sizeof out - n, spec, v);
        } else {
            int v;
            memcpy(&v, args + off, 4);
            w = snprintf(out + n, sizeof out - n, spec, v);
        }
        off += sz;
        if (w > 0) n += (size_t)w < sizeof out - n ? (size_t)w : sizeof out - n - 1;
    }
    out[n] = 0;
    pthread_mutex_lock(&mu);
    fputs(out, stdout);
    fflush(stdout);
    pthread_mutex_unlock(&mu);
    return (int)n;
}

/* __assertfail: the message, as the GPU prints it, and the launch fails (the GPU's trap). */
void __assertfail(const char *msg, const char *file, unsigned line, const char *func, size_t size)
{
    (void)size;
    fail("%s:%u: %s: block: [%u,%u,%u], thread: [%d,0,0] Assertion `%s` failed.", file, line, func, cta_[0],
         cta_[1], cta_[2], tid_, msg);
    asserted = 1;
}

/* ---- the launch ------------------------------------------------------------------------ */
typedef void (*Entry)(void **params);
static Entry entry_;
static void **params_;

static void *run_thread(void *p)
{
    gtid_ = (int)(intptr_t)p;
    tid_ = gtid_ % (int)nthreads;
    rank_ = gtid_ / (int)nthreads;
    entry_(params_);
    pthread_mutex_lock(&mu);
    living[rank_]--;
    bar0_check_locked();   /* a barrier 0 the others wait at no longer waits for this thread */
    if (my_cl_phase == cl_phase) cl_gone_next++;   /* arrived in this phase: gone from the next */
    else cl_gone++;
    cl_check_locked();
    pthread_mutex_unlock(&mu);
    return NULL;
}

static void *watchdog(void *p)
{
    (void)p;
    const char *t = getenv("EMU_TIMEOUT");
    int secs = t && atoi(t) > 0 ? atoi(t) : 120;
    sleep((unsigned)secs);
    fprintf(stderr, "emu: cta (%u, %u, %u) did not finish in %d s: a barrier, mbarrier wait or turn that never "
                    "completes (on the GPU, a hang)\n", cta_[0], cta_[1], cta_[2], secs);
    _exit(3);
}

/* Runs entry over the grid (in clusters of `cluster` CTAs along x: grid[0] counts
 * clusters; the clusters in order, the CTAs of one at once) with `threads` threads a CTA
 * and `shared` bytes of shared memory. Returns 0, or the CUDA error the GPU would give: 710 (an
 * assert failed) or 719 (any other error the emulator found, printed). */
int emu_launch(Entry entry, const unsigned grid[3], unsigned threads, unsigned shared, void **params, unsigned cluster)
{
    if (threads < 1 || threads > NT_MAX || threads % 32 || shared > SMEM_MAX || cluster < 1 || cluster > MAXC) {
        fprintf(stderr, "emu: a launch of %u threads, %u bytes of shared memory, clusters of %u\n", threads, shared,
                cluster);
        return 719;
    }
    ncl = cluster;
    unsigned total = threads * cluster;
    errors = asserted = 0;
    entry_ = entry, params_ = params, nthreads = threads;
    smem_bytes = shared ? shared : 16;
    memcpy(grid_, grid, sizeof grid_);
    for (unsigned i = 0; i < total / 32; i++) rdv_init(&warp_rdv[i], 32);
    for (unsigned i = 0; i < (total + 127) / 128; i++) rdv_init(&wg_rdv[i], 128);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 8u << 20);
    for (cta_[2] = 0; cta_[2] < grid[2]; cta_[2]++)
        for (cta_[1] = 0; cta_[1] < grid[1]; cta_[1]++)
            for (cta_[0] = 0; cta_[0] < grid[0]; cta_[0]++) {
                for (unsigned r = 0; r < cluster; r++) {
                    memset(cta_mem[r], 0, smem_bytes);
                    living[r] = (int)threads;
                    bar0_count_[r] = 0;
                    nbars_[r] = 0;
                }
                memset(named_, 0, sizeof named_);
                cl_count = cl_gone = cl_gone_next = 0;
                npend = 0;
                pthread_t dog;
                static pthread_t th[GT_MAX];
                pthread_create(&dog, NULL, watchdog, NULL);
                for (unsigned t = 0; t < total; t++)
                    if (pthread_create(&th[t], &attr, run_thread, (void *)(intptr_t)t)) {
                        fprintf(stderr, "emu: pthread_create failed\n");
                        return 719;
                    }
                for (unsigned t = 0; t < total; t++) pthread_join(th[t], NULL);
                pthread_cancel(dog);
                pthread_join(dog, NULL);
                for (int r = 0; r < (int)cluster; r++)
                    for (int i = 0; i < 16; i++)
                        if (named_[r][i].count)
                            fail("named barrier %d of CTA %d left with %d arrivals at the CTA's end", i, r,
                                 named_[r][i].count);
            }
    pthread_attr_destroy(&attr);
    return asserted ? 710 : errors ? 719 : 0;
}
