/* Runs the host build of a one-block tile kernel with three pointer parameters
 * (in, out, counts; llvm_to_host.py --values) with one pthread per GPU thread, and
 * prints the out and counts buffers one value per line, as `tilec run --print` does,
 * so that values.sh can diff them against the interpreter. Warp shuffles exchange
 * values through a per-block array between two barriers (every thread of the block
 * shuffles at the same points: the code generator shuffles in uniform control flow).
 *
 *     values_harness threads n_in n_out n_counts < input (n_in raw little-endian i32) */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#define NT_MAX 1024
unsigned char __tile_smem[256 * 1024] __attribute__((aligned(128)));
static __thread int tid_;
static pthread_barrier_t bar;
static int32_t xchg[NT_MAX];
int emu_tid(void) { return tid_; }
int emu_ctaid(void) { return 0; }
void emu_barrier(void) { pthread_barrier_wait(&bar); }
void *emu_shared_ptr_i32(uint32_t a) { return __tile_smem + (a - (uint32_t)(uintptr_t)__tile_smem); }
void *emu_shared_ptr_i64(uint64_t a) { return emu_shared_ptr_i32((uint32_t)a); }
void chk_sh(void *p, uint32_t sz) { (void)p, (void)sz; }
void chk_gl(void *p, uint32_t sz) { (void)p, (void)sz; }
void chk_gs(void *p, uint32_t sz) { (void)p, (void)sz; }
void chk_ldm(uint32_t a) { (void)a; }
void chk_cp(uint32_t d, uint64_t s, uint32_t p, uint32_t o, uint32_t sz) { (void)d, (void)s, (void)p, (void)o, (void)sz; }
void chk_st(uint32_t p, uint64_t a, uint32_t sz) { (void)p, (void)a, (void)sz; }

/* lane `src` of this thread's warp (its own value where src is outside the warp) */
static int32_t shfl(int32_t x, int src)
{
    int lane = tid_ & 31;
    xchg[tid_] = x;
    emu_barrier();
    int32_t r = src >= 0 && src < 32 ? xchg[tid_ - lane + src] : x;
    emu_barrier();
    return r;
}
int32_t emu_shfl_bfly(int32_t m, int32_t x, int32_t b, int32_t c) { (void)m, (void)c; return shfl(x, (tid_ & 31) ^ b); }
int32_t emu_shfl_up(int32_t m, int32_t x, int32_t d, int32_t c) { (void)m, (void)c; return shfl(x, (tid_ & 31) - d); }
int32_t emu_shfl_down(int32_t m, int32_t x, int32_t d, int32_t c) { (void)m, (void)c; return shfl(x, (tid_ & 31) + d); }
int32_t emu_shfl_idx(int32_t m, int32_t x, int32_t l, int32_t c) { (void)m, (void)c; return shfl(x, l & 31); }

void KERNEL(int32_t *in, int32_t *out, int32_t *counts);
static int32_t *in_, *out_, *counts_;
static void *thread(void *arg)
{
    tid_ = (int)(intptr_t)arg;
    KERNEL(in_, out_, counts_);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 5) return 2;
    int nt = atoi(argv[1]), ni = atoi(argv[2]), no = atoi(argv[3]), nc = atoi(argv[4]);
    if (nt < 1 || nt > NT_MAX) return 2;
    in_ = calloc((size_t)ni, 4), out_ = calloc((size_t)no, 4), counts_ = calloc((size_t)nc, 4);
    if (fread(in_, 4, (size_t)ni, stdin) != (size_t)ni) return 2;
    pthread_t th[NT_MAX];
    pthread_barrier_init(&bar, NULL, (unsigned)nt);
    for (int t = 0; t < nt; t++) pthread_create(&th[t], NULL, thread, (void *)(intptr_t)t);
    for (int t = 0; t < nt; t++) pthread_join(th[t], NULL);
    for (int i = 0; i < nc; i++) printf("%d\n", counts_[i]);
    for (int i = 0; i < no; i++) printf("%d\n", out_[i]);
    return 0;
}
