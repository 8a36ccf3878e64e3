"""The GPU code of tile's kernels run on the host, with values, against the interpreter.

Each case runs `tilec run --device gpu` with the mock driver emulating (tests/mock/
mockcuda.c, MOCKCUDA_EMULATE=1: the kernel's LLVM IR, as the NVPTX backend would get it,
made host code with tests/emu/emu_rt.c's model of wgmma, TMA, mbarriers, cp.async and
warp shuffles) through the real libtileRT (its specialization, tensor maps, persistent
grids, launch), and `tilec run --device cpu` (the interpreter), and compares every
output element. So CI checks, without a GPU, the values the sm_90a code computes: the
register layouts, swizzles, descriptors, ring stages and phases, producer warpgroups,
persistent walks, ping-pong turns and epilogues the GPU suite otherwise checks on the
H200 only, clusters (their CTAs run at once, each with its own shared memory; multicast
copies, remote arrivals and cluster barriers) and sm_80's mma.sync and ldmatrix. What
the model cannot see: timing (a missing wgmma wait or fence is not caught: cp.async
copies land when issued, wgmmas complete at once; a TMA copy lands when a wait on its
barrier sees the phase, so a stage read without that wait fails).

    python3 emulate.py TILEC MOCKCUDA_SO TILECG_EMU_SO TILECG_SO [--only SUBSTR] [--list] [--bench] [--lit]
                       [--shard I/N]

--bench runs, instead of the cases below, every config bench/attention.py and
bench/gemm.py time (forward and backward, causal or not; bf16, GELU, fp8), at small sizes.
--lit runs tests/gpu/lit_on_gpu.py on the emulated GPU instead: every `tilec run` of
tests/lit/run and tests/lit/cli with --device gpu against --device cpu (about 480 runs).

--shard I/N runs every Nth case from the Ith (ctest runs the long suites as shards, side
by side); TILE_TEST_SAMPLE=N with TILE_TEST_SEED runs a sample of about 1 in N of the
cases, chosen by the seed (tests/sample.py; scripts/test.sh sets them, --full does not).

Exit status 0 when every case matches; 77 without llc or a C compiler.
"""
import os
import shutil
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
sys.path.insert(0, os.path.dirname(here))
from sample import Sample  # noqa: E402  (tests/sample.py: TILE_TEST_SAMPLE, TILE_TEST_SEED, --shard)
EX = os.path.join(root, "examples")


def gemm(M, N, K, seed=1):
    return ["c=zeros:%d" % (M * N), "a=rand:%d:%d" % (M * K, seed), "b=rand:%d:%d" % (K * N, seed + 1),
            "M=%d" % M, "N=%d" % N, "K=%d" % K, "stride_am=%d" % K, "stride_bk=%d" % N, "stride_cm=%d" % N]


def swiglu_dx(M, N, K):
    return ["dg=zeros:%d" % (M * N), "du=zeros:%d" % (M * N), "a=rand:%d:1" % (M * K), "w=rand:%d:2" % (K * N),
            "g=rand:%d:3" % (M * N), "u=rand:%d:4" % (M * N), "M=%d" % M, "N=%d" % N, "K=%d" % K]


def gelu(M, N, K):
    return gemm(M, N, K)[:3] + ["bias=rand:%d:9" % N] + gemm(M, N, K)[3:]


def fp8(M, N, K):
    return ["c=zeros:%d" % (M * N), "a=rand:%d:1" % (M * K), "w=rand:%d:2" % (N * K), "scale_a=rand:%d:3" % M,
            "scale_b=rand:%d:4" % N, "M=%d" % M, "N=%d" % N, "K=%d" % K, "stride_am=%d" % K, "stride_wn=%d" % K,
            "stride_cm=%d" % N]


def attn_fwd(BH, L, D=128):
    n = BH * L * D
    return ["o=zeros:%d" % n, "lse=zeros:%d" % (BH * L), "q=rand:%d:1" % n, "k=rand:%d:2" % n, "v=rand:%d:3" % n,
            "BH=%d" % BH, "L=%d" % L, "scale=0.125", "stride_l=%d" % D, "rows=%d" % (BH * L)]


def attn_bwd(out, BH, L, D=128):
    n = BH * L * D
    ins = ["q=rand:%d:1" % n, "k=rand:%d:2" % n, "v=rand:%d:3" % n, "do=rand:%d:4" % n,
           "lse=rand:%d:5" % (BH * L), "delta=rand:%d:6" % (BH * L), "BH=%d" % BH, "L=%d" % L, "scale=0.125",
           "stride_l=%d" % D, "rows=%d" % (BH * L)]
    return ["%s=zeros:%d" % (o, n) for o in out] + ins


def attn_bwd_fused(BH, L, D=128):
    """attn_bwd_fused's arguments (pointer form): dq_accum and sem zeroed."""
    return ptr_form(attn_bwd(["dk", "dv"], BH, L, D) + ["dq_accum=zeros:%d" % (BH * L * D), "sem=zeros:%d" % (BH * L)],
                    L, D)


def attn_fwd_fp8(BH, L, D=128, tma=False):
    """attn_fwd_fp8(_tma)'s arguments (examples/flash_attn_fwd_fp8.tile): e4m3 q, k and
    V^T, per-tensor descales."""
    n = BH * L * D
    args = ["o=zeros:%d" % n, "lse=zeros:%d" % (BH * L), "q=rand:%d:1" % n, "k=rand:%d:2" % n, "vt=rand:%d:3" % n,
            "BH=%d" % BH, "L=%d" % L, "scale=0.125", "q_descale=0.5", "k_descale=2.0", "v_descale=1.5"]
    return args + (["rows=%d" % (BH * L), "vrows=%d" % (BH * D)] if tma else ["stride_bh=%d" % (L * D), "stride_l=%d" % D, "stride_vbh=%d" % (L * D),
                                   "stride_vt=%d" % L])


def ptr_form(args, L, D=128):
    """The pointer kernels' arguments: a head's stride instead of the rows."""
    return [a for a in args if not a.startswith("rows=")] + ["stride_bh=%d" % (L * D)]


# files a case's --arg @NAME reads (raw little-endian i32)
FILES = {"perm24": [(7 * i + 3) % 24 for i in range(24)], "lens3": [1, 77, 128]}
FA = os.path.join(EX, "flash_attn_fwd.tile")
FB = os.path.join(EX, "flash_attn_bwd.tile")
F8 = os.path.join(EX, "flash_attn_fwd_fp8.tile")
MM = os.path.join(EX, "matmul_bf16.tile")
MP = os.path.join(root, "bench", "matmul_pointers.tile")
PB = os.path.join(root, "tests", "lit", "passes", "ptrblock_kernels.tile")
PO = os.path.join(root, "tests", "lit", "passes", "ptrblock_outer.tile")
MT = os.path.join(root, "bench", "triton_programs", "matmul_tutorial.tile")
TA = os.path.join(root, "bench", "triton_programs", "attention.tile")
NM = os.path.join(root, "tests", "lit", "passes", "wgmma_fp8_nmajor.tile")
HG = os.path.join(root, "tests", "lit", "passes", "schedule_horizontal.tile")
EC = os.path.join(root, "tests", "lit", "passes", "epichunk.tile")
# (name, file, kernel, -D settings, --arg list, outputs, relative tolerance): a case's
# outputs must agree within tol * the output's largest magnitude (0: bit for bit)
CASES = [
    ("gemm default", MM, "matmul_bf16", [], gemm(256, 256, 128), ["c"], 0),
    ("gemm default, odd sizes", MM, "matmul_bf16", [], gemm(200, 136, 72), ["c"], 0),
    ("gemm no producer", MM, "matmul_bf16", ["ws=0", "persistent=0"], gemm(256, 256, 128), ["c"], 0),
    # ragged sizes, multiples of 8 and not 16 (class div8: bf16 rows 16 bytes apart, so
    # TMA for A, B and C as with div16; 16-byte cp.async in the pointer form and sm_80)
    ("gemm div8 sizes", MM, "matmul_bf16", [], gemm(40, 56, 72), ["c"], 0),
    ("gemm div8 sizes, no producer", MM, "matmul_bf16", ["BM=64", "BN=64", "BK=32", "warps=4", "stages=3", "ws=0",
                                                         "persistent=0"], gemm(136, 200, 88), ["c"], 0),
    ("gemm pointers div8 sizes", os.path.join(root, "bench", "matmul_pointers.tile"), "matmul_bf16",
     ["BM=64", "BN=64", "BK=32"], gemm(40, 56, 72), ["c"], 0),
    ("gemm ping-pong", MM, "matmul_bf16", ["BN=128", "warps=4", "pingpong=1"], gemm(384, 256, 128), ["c"], 0),
    # TMA stores in both branches of an `if` through one staging area (passes/tmastore.c),
    # the branch alternating from tile to tile of the persistent walk
    ("tma stores in both branches of an if", os.path.join(root, "tests", "lit", "passes", "tma_store.tile"), "branches",
     ["ws=1", "persistent=1"], ["c=zeros:98304", "c32=zeros:98304", "a=rand:49152:1", "b=rand:49152:2", "M=384",
                                "N=256", "K=128"], ["c", "c32"], 0),
    # a subtiled epilogue (passes/epichunk.c): SwiGLU's dX GEMM at 128 x 256 with the
    # epilogue in 8 chunks of 32 columns, its loads of two tiles and its two outputs
    # chunk by chunk (TMA stores in sequence through one area, seq k, over the tiles of
    # the persistent walk; pointer loads and masked stores at odd sizes)
    ("subtiled epilogue, div16 sizes", EC, "swiglu_dx", [], swiglu_dx(272, 464, 128), ["dg", "du"], 0),
    ("subtiled epilogue, odd sizes", EC, "swiglu_dx", [], swiglu_dx(130, 200, 72), ["dg", "du"], 0),
    ("subtiled epilogue with a column sum (extract of a [BN] value)", EC, "colsum", [], swiglu_dx(144, 208, 64),
     ["dg", "du"], 0),
    ("gemm 64 x 64, BK 16", MM, "matmul_bf16", ["BM=64", "BN=64", "BK=16", "warps=4", "stages=2", "ws=0",
                                                 "persistent=0"], gemm(128, 192, 80), ["c"], 0),
    ("gemm + bias + gelu default", os.path.join(EX, "gemm_bias_gelu.tile"), "gemm_bias_gelu", [],
     gelu(256, 256, 128), ["c"], 1e-2),
    ("gemm + bias + gelu ping-pong", os.path.join(EX, "gemm_bias_gelu.tile"), "gemm_bias_gelu",
     ["BN=128", "warps=4", "pingpong=1", "ws=1", "persistent=1"], gelu(256, 256, 128), ["c"], 1e-2),
    ("fp8 default", os.path.join(EX, "matmul_fp8.tile"), "matmul_fp8", [], fp8(256, 256, 256), ["c"], 1e-2),
    # f8 operands that are not K-major reach wgmma through a transpose in shared memory
    # (passes/shared.c): B [K, N] by TMA and by cp.async, A [K, M] read as trans
    ("fp8 B [K, N] transposed, tma", os.path.join(root, "tests", "gpu", "matmul_fp8_nn.tile"), "matmul_fp8_nn", [],
     gemm(200, 136, 192), ["c"], 1e-2),
    ("fp8 B [K, N] transposed, tma, 8 warps BK 128", os.path.join(root, "tests", "gpu", "matmul_fp8_nn.tile"),
     "matmul_fp8_nn", ["BK=128", "warps=8", "stages=4"], gemm(256, 256, 384), ["c"], 1e-2),
    ("fp8 B [K, N] transposed, cp.async (div8 strides), BK 32", os.path.join(root, "tests", "gpu", "matmul_fp8_nn.tile"),
     "matmul_fp8_nn", ["BN=64", "BK=32", "stages=3"], gemm(200, 136, 200), ["c"], 1e-2),
    ("fp8 B [K, N] transposed, pointers", NM, "ptr_nn", [], gemm(200, 136, 384), ["c"], 1e-2),
    ("fp8 A [K, M] transposed, tma", NM, "tn", [],
     ["c=zeros:8192", "at=rand:8192:3", "w=rand:16384:4", "K=128"], ["c"], 1e-2),
    # horizontal GEMMs (passes/schedule.c: ws and persistent for a loop of independent
    # dots): one ring of A and each B, a producer, the persistent walk; edges off the tiles
    ("horizontal gemm pair (SwiGLU), odd sizes", HG, "pair", [],
     ["h=zeros:27200", "g=zeros:27200", "a=rand:17600:1", "wg=rand:11968:2", "wu=rand:11968:3", "M=200", "N=136",
      "K=88"], ["h", "g"], 1e-2),
    ("horizontal gemm triple, odd sizes", HG, "triple", [],
     ["q=zeros:27200", "k=zeros:27200", "v=zeros:27200", "a=rand:17600:1", "wq=rand:11968:2", "wk=rand:11968:3",
      "wv=rand:11968:4", "M=200", "N=136", "K=88"], ["q", "k", "v"], 0),
    ("horizontal gemm pair, 4 warps", HG, "pair", ["warps=4", "BM=64"],
     ["h=zeros:27200", "g=zeros:27200", "a=rand:17600:1", "wg=rand:11968:2", "wu=rand:11968:3", "M=200", "N=136",
      "K=88"], ["h", "g"], 1e-2),
    # pointer-form kernels that passes/ptrblock.c turns into TMA copies (and a TMA store)
    ("gemm pointers, odd sizes", MP, "matmul_bf16", ["BM=128", "BN=256", "BK=64", "warps=8", "stages=4"],
     gemm(77, 48, 80), ["c"], 0),
    # Triton's tutorial as written: rows and columns past M and N wrapped (`% M`), read
    # by TMA as zeros past M and N (passes/ptrblock.c, "Wrapped rows"); the interpreter
    # reads the wrapped rows, which only C's masked-off rows see: bit for bit
    ("gemm tutorial wrapped rows, odd sizes", MT, "matmul_bf16", ["warps=8", "stages=3"], gemm(77, 48, 80), ["c"], 0),
    ("gemm tutorial wrapped rows, div8 sizes", MT, "matmul_bf16", ["BM=64", "BN=64", "BK=32", "GROUP=2"],
     gemm(72, 40, 56), ["c"], 0),
    ("fp8 pointers, odd sizes", PB, "fp8", [],
     ["c=zeros:%d" % (77 * 45), "a=rand:%d:1" % (77 * 80), "b=rand:%d:2" % (45 * 80), "M=77", "N=45", "K=70",
      "stride_am=80", "stride_bn=80", "stride_cm=45"], ["c"], 1e-2),
    ("attention forward pointers", PB, "attn", [],
     ["o=zeros:12800", "q=rand:12800:1", "k=rand:12800:2", "v=rand:12800:3", "BH=2", "L=100", "scale=0.125",
      "stride_l=64", "rows=200"], ["o"], 2e-2),
    # a batch's and a head's offset x * s as the third coordinate of rank-3 tensor maps,
    # unmasked axes (passes/ptrblock.c): a batched GEMM bit for bit, Triton's attention
    ("batched gemm pointers, rank-3 maps", PO, "bmm", [],
     ["c=zeros:14784", "a=rand:23040:1", "b=rand:18432:2", "M=77", "K=96", "B=3", "stride_ab=7680", "stride_am=96",
      "stride_bb=6144", "stride_bk=64", "stride_cb=4928"], ["c"], 0),
    ("attention forward triton pointers, rank-3 maps", TA, "attn_fwd", ["D=64"],
     ["q=rand:12800:1", "k=rand:12800:2", "v=rand:12800:3", "sm_scale=0.125", "lse=zeros:200", "o=zeros:12800",
      "stride_h=6400", "stride_l=64", "Z=1", "H=2", "L=100"], ["o", "lse"], 2e-2),
    ("attention forward triton pointers causal, rank-3 maps", TA, "attn_fwd", ["CAUSAL=1"],
     ["q=rand:51200:1", "k=rand:51200:2", "v=rand:51200:3", "sm_scale=0.125", "lse=zeros:400", "o=zeros:51200",
      "stride_h=25600", "stride_l=128", "Z=2", "H=1", "L=200"], ["o", "lse"], 2e-2),
    ("attention forward tma", FA, "attn_fwd_tma", [], attn_fwd(2, 256), ["o", "lse"], 2e-2),
    ("attention forward tma causal", FA, "attn_fwd_tma", ["CAUSAL=1"], attn_fwd(2, 256), ["o", "lse"], 2e-2),
    ("attention forward tma BN 128, no producer", FA, "attn_fwd_tma", ["BN=128", "ws=0"], attn_fwd(1, 256),
     ["o", "lse"], 2e-2),
    ("attention forward tma overlap", FA, "attn_fwd_tma", ["overlap=1"], attn_fwd(1, 256), ["o", "lse"], 2e-2),
    # persistent causal walks: each of 2 programs walks 3 tiles whose key loops differ in
    # length (1 to 3 blocks), the ring's count carried from tile to tile
    ("attention forward tma persistent causal", FA, "attn_fwd_tma", ["CAUSAL=1", "persistent=1"],
     attn_fwd(2, 368), ["o", "lse"], 2e-2, {"MOCKCUDA_SMS": "2"}),
    ("attention forward tma persistent causal LPT, BN 64", FA, "attn_fwd_tma",
     ["CAUSAL=1", "persistent=1", "LPT=1", "BN=64", "stages=3"], attn_fwd(2, 368), ["o", "lse"], 2e-2,
     {"MOCKCUDA_SMS": "2"}),
    ("attention forward tma persistent, 1 program", FA, "attn_fwd_tma", ["persistent=1"], attn_fwd(2, 256),
     ["o", "lse"], 2e-2, {"MOCKCUDA_SMS": "1"}),
    ("attention forward cp.async", FA, "attn_fwd", [], ptr_form(attn_fwd(1, 192), 192), ["o", "lse"], 2e-2),
    # fp8: S = Q K^T and O = P V on e4m3 wgmma, P converted to the 8-bit A fragment in
    # registers, V^T K-major (examples/flash_attn_fwd_fp8.tile)
    ("attention forward fp8 cp.async", F8, "attn_fwd_fp8", [], attn_fwd_fp8(1, 256), ["o", "lse"], 2e-2),
    ("attention forward fp8 cp.async causal, 4 warps, BN 64", F8, "attn_fwd_fp8",
     ["CAUSAL=1", "BM=64", "BN=64", "warps=4"], attn_fwd_fp8(2, 192), ["o", "lse"], 2e-2),
    ("attention forward fp8 tma (producer, overlap)", F8, "attn_fwd_fp8_tma", [], attn_fwd_fp8(2, 256, tma=True),
     ["o", "lse"], 2e-2),
    ("attention forward fp8 tma causal, no producer", F8, "attn_fwd_fp8_tma", ["CAUSAL=1", "ws=0", "overlap=0"],
     attn_fwd_fp8(2, 256, tma=True), ["o", "lse"], 2e-2),
    ("attention forward fp8 tma causal d256 BN 64", F8, "attn_fwd_fp8_tma", ["CAUSAL=1", "D=256", "BN=64"],
     attn_fwd_fp8(1, 256, 256, tma=True), ["o", "lse"], 2e-2),
    ("attention forward cp.async causal, 4 warps", FA, "attn_fwd", ["CAUSAL=1", "BM=64", "warps=4"],
     ptr_form(attn_fwd(2, 128), 128), ["o", "lse"], 2e-2),
    ("attention backward dk/dv cp.async", FB, "attn_bwd_dkdv", [], ptr_form(attn_bwd(["dk", "dv"], 1, 128), 128),
     ["dk", "dv"], 2e-2),
    ("attention backward dq cp.async causal", FB, "attn_bwd_dq", ["CAUSAL=1"],
     ptr_form(attn_bwd(["dq"], 1, 128), 128), ["dq"], 2e-2),
    ("attention backward preprocess", FB, "attn_bwd_preprocess", [],
     ["delta=zeros:256", "o=rand:32768:1", "do=rand:32768:2", "BH=2", "L=128", "stride_bh=16384", "stride_l=128"],
     ["delta"], 1e-5),
    ("paged attention decode", os.path.join(EX, "paged_attn_decode.tile"), "paged_attn_decode", ["H=4"],
     ["o=zeros:%d" % (3 * 4 * 128), "q=rand:%d:1" % (3 * 4 * 128), "k_cache=rand:%d:2" % (24 * 16 * 4 * 128),
      "v_cache=rand:%d:3" % (24 * 16 * 4 * 128), "block_table=@perm24", "seq_lens=@lens3", "num_seqs=3",
      "max_pages=8", "scale=0.088"], ["o"], 2e-2),
    ("qkv projection", os.path.join(EX, "qkv_proj.tile"), "qkv_proj", [],
     ["q=zeros:32768", "k=zeros:32768", "v=zeros:32768", "x=rand:32768:1", "w=rand:%d:2" % (128 * 384),
      "T=256", "hidden=128", "stride_x=128", "stride_w=384", "stride_o=128"], ["q", "k", "v"], 0),
    ("softmax", os.path.join(EX, "softmax.tile"), "softmax", [],
     ["out=zeros:%d" % (8 * 1000), "inp=rand:%d:1" % (8 * 1000), "stride=1000", "n_rows=8", "n_cols=1000"],
     ["out"], 1e-2),
    ("rms norm", os.path.join(EX, "rmsnorm.tile"), "rms_norm", [],
     ["y=zeros:%d" % (4 * 3000), "x=rand:%d:1" % (4 * 3000), "w=rand:3000:2", "n_rows=4", "n_cols=3000",
      "eps=0.00001"], ["y"], 1e-2),
    # clusters of two CTAs (their rows split, B multicast by TMA, stages released on both)
    ("gemm cluster 2", MM, "matmul_bf16", ["BM=256", "cluster=2"], gemm(512, 256, 128), ["c"], 0),
    ("gemm cluster 2, no producer", MM, "matmul_bf16", ["BM=256", "cluster=2", "ws=0", "persistent=0"],
     gemm(512, 256, 128), ["c"], 0),
    ("gemm cluster 2, ping-pong", MM, "matmul_bf16", ["BM=256", "BN=128", "warps=4", "cluster=2", "pingpong=1"],
     gemm(512, 256, 128), ["c"], 0),
    ("gemm cluster 2, BN 64, odd sizes", MM, "matmul_bf16", ["BM=128", "BN=64", "warps=4", "cluster=2", "ws=0",
                                                               "persistent=0", "stages=3"], gemm(328, 200, 88), ["c"], 0),
    ("attention forward tma cluster 2", FA, "attn_fwd_tma", ["BM=256", "cluster=2"], attn_fwd(1, 512), ["o", "lse"],
     2e-2),
    # sm_80 code (cp.async, ldmatrix, mma.sync): the mock driver says compute capability 8.0
    ("subtiled epilogue sm_80 (mma.sync: chunks in the accumulator's layout)", EC, "swiglu_dx", [],
     swiglu_dx(130, 200, 72), ["dg", "du"], 0, {"MOCKCUDA_CC": "80"}),
    ("gemm sm_80", MM, "matmul_bf16", ["BN=128", "warps=4", "stages=3"], gemm(256, 256, 128), ["c"], 0, {"MOCKCUDA_CC": "80"}),
    ("gemm sm_80 odd sizes", MM, "matmul_bf16", ["BN=128", "BM=64", "warps=4", "stages=2"], gemm(200, 136, 72), ["c"],
     0, {"MOCKCUDA_CC": "80"}),
    ("gemm sm_80 div8 sizes", MM, "matmul_bf16", ["BN=64", "BM=64", "warps=4", "stages=2"], gemm(40, 56, 72), ["c"],
     0, {"MOCKCUDA_CC": "80"}),
    ("attention forward sm_80", FA, "attn_fwd", ["CAUSAL=1"], ptr_form(attn_fwd(1, 192), 192), ["o", "lse"], 2e-2,
     {"MOCKCUDA_CC": "80"}),
    ("attention backward dk/dv tma", FB, "attn_bwd_dkdv_tma", [], attn_bwd(["dk", "dv"], 1, 256), ["dk", "dv"], 2e-2),
    ("attention backward dk/dv tma causal", FB, "attn_bwd_dkdv_tma", ["CAUSAL=1"], attn_bwd(["dk", "dv"], 1, 256),
     ["dk", "dv"], 2e-2),
    ("attention backward dq tma", FB, "attn_bwd_dq_tma", [], attn_bwd(["dq"], 1, 256), ["dq"], 2e-2),
    ("attention backward dq tma causal", FB, "attn_bwd_dq_tma", ["CAUSAL=1"], attn_bwd(["dq"], 1, 256), ["dq"], 2e-2),
    # head dim 256 (tile.ops' blocks, _tma_bwd_cfg): dK and dV in launches of their own
    # (attn_bwd_dkv_split_tma, PART 0 and 1: one [128, 256] f32 accumulator on two
    # warpgroups, K and V resident in shared memory), dQ on 128 x 32 blocks
    ("attention backward d256 dk split tma causal", FB, "attn_bwd_dkv_split_tma",
     ["D=256", "BM=32", "BN=128", "warps=8", "stages=3", "CAUSAL=1", "PART=0"], attn_bwd(["out"], 1, 256, 256),
     ["out"], 2e-2),
    ("attention backward d256 dv split tma", FB, "attn_bwd_dkv_split_tma",
     ["D=256", "BM=64", "BN=128", "warps=8", "stages=2", "PART=1"], attn_bwd(["out"], 1, 256, 256), ["out"], 2e-2),
    ("attention backward d256 dq tma causal", FB, "attn_bwd_dq_tma",
     ["D=256", "BM=128", "BN=32", "warps=8", "stages=3", "CAUSAL=1"], attn_bwd(["dq"], 1, 256, 256), ["dq"], 2e-2),
    # the fused backward: dQ's partials by f32 atomic adds (red.global.add.v4.f32) from
    # concurrent programs; every dot on wgmma with 4 warps (dS^T from registers, K a
    # resident B), dQ on mma.sync beside wgmma with 8; the deterministic turns
    ("attention backward fused", FB, "attn_bwd_fused", ["BN=64", "BM=64", "warps=4"], attn_bwd_fused(1, 200),
     ["dk", "dv", "dq_accum"], 2e-2),
    ("attention backward fused causal gqa 8 warps", FB, "attn_bwd_fused", ["BN=128", "BM=64", "CAUSAL=1", "GROUP=2"],
     attn_bwd_fused(2, 256), ["dk", "dv", "dq_accum"], 2e-2),
    ("attention backward fused tma causal gqa", FB, "attn_bwd_fused_tma", ["CAUSAL=1", "GROUP=2"],
     ["dk=zeros:32768", "dv=zeros:32768", "dq_accum=zeros:65536", "sem=zeros:512", "q=rand:65536:1",
      "k=rand:32768:2", "v=rand:32768:3", "do=rand:65536:4", "lse=rand:512:5", "delta=rand:512:6", "BH=2", "L=256",
      "scale=0.125", "stride_l=128", "rows=256"], ["dk", "dv", "dq_accum"], 2e-2),
    ("attention backward fused tma deterministic", FB, "attn_bwd_fused_tma", ["DETERMINISTIC=1"],
     attn_bwd(["dk", "dv"], 2, 192) + ["dq_accum=zeros:%d" % (2 * 192 * 128), "sem=zeros:384"], ["dk", "dv", "dq_accum"],
     2e-2),
    ("attention backward fused deterministic causal", FB, "attn_bwd_fused",
     ["BN=64", "BM=64", "warps=4", "CAUSAL=1", "DETERMINISTIC=1"], attn_bwd_fused(1, 256), ["dk", "dv", "dq_accum"],
     2e-2),
    # persistent causal backward on one SM: one program walks every key (dK/dV) or query
    # (dQ) block of two heads, their loops of different lengths
    ("attention backward dk/dv tma persistent causal", FB, "attn_bwd_dkdv_tma", ["CAUSAL=1", "persistent=1"],
     attn_bwd(["dk", "dv"], 2, 384), ["dk", "dv"], 2e-2, {"MOCKCUDA_SMS": "1"}),
    ("attention backward dq tma persistent causal", FB, "attn_bwd_dq_tma", ["CAUSAL=1", "persistent=1"],
     attn_bwd(["dq"], 2, 384), ["dq"], 2e-2, {"MOCKCUDA_SMS": "1"}),
]


LOWER = os.path.join(root, "tests", "lit", "graph", "lower.tile")


def heads(T, dropout=False):
    a = ["T=%d" % T, "qs=rand:%d:7" % (T * 64), "ks=rand:%d:8" % (T * 64), "vs=rand:%d:9" % (T * 64)]
    return a + (["mask=rand:%d:4" % (T * T), "pdrop=0.2", "seed=3"] if dropout else [])


# Graphs: `tilec run --compare-fused --device gpu` runs each op by op in the interpreter
# and through its fusion plan's kernels on the (emulated) GPU, and fails if they differ.
GRAPHS = [
    ("graph attention, heads as rows (TMA K and V, a producer)", LOWER, "fheads16", heads(256)),
    ("graph attention with mask and dropout", LOWER, "fheads16d", heads(256, True)),
    ("graph attention, odd T", LOWER, "fheads16", heads(200)),
    # the forward's Q, K, V block loads (attention-fwd-tma.tile): K and V of their own
    # [H, T, D] read as [H T, D] rows (TMA rings, a producer and overlap), GQA 4/2,
    # causal, T off the blocks (the last key block reads the next head's rows); V
    # through Llama's transposed view at d 128
    ("graph attention forward, GQA causal (TMA, ws, overlap)", os.path.join(root, "tests", "lit", "graph",
     "attention-fwd-tma.tile"), "gqa_causal", ["T=200", "q=rand:51200:1", "k=rand:25600:2", "v=rand:25600:3"]),
    ("graph attention forward, Llama's V view at d 128", os.path.join(root, "tests", "lit", "graph",
     "attention-fwd-tma.tile"), "llama_fwd", ["T=133", "q=rand:68096:7", "k=rand:34048:8", "vp=rand:34048:9"]),
    # the bf16 attention_bwd kernel's steps over its scratch (passes/graph_lower.c): _pre,
    # then _dkdv and _dq on TMA rings with a producer warpgroup (ws): wgmma dots at d 128,
    # V through a transposed view, causal GQA 4/2 (the heads folded into the dK/dV loop),
    # T off the blocks (flattened blocks reading the next head's rows, masked off)
    ("graph attention backward bf16 (scratch steps, wgmma)", os.path.join(root, "tests", "lit", "graph",
     "attention-bwd-bf16.tile"), "llama_attn",
     ["T=150", "q=rand:76800:17", "k=rand:38400:18", "vp=rand:38400:19", "t=rand:76800:20"]),
    # the dK/dV step's split regime (issue 42: few KV rows, IrGKernel.bwd_split): a program
    # per query head and key block in key-block-major order, wgmma and TMA as above, f32
    # partials in the scratch summed in head order by the fourth step (_sum); 3 key
    # blocks, the last one partial
    ("graph attention backward bf16, dK/dV split over the query heads", os.path.join(root, "tests", "lit", "graph",
     "attention-bwd-bf16.tile"), "llama_attn",
     ["T=300", "q=rand:153600:21", "k=rand:76800:22", "vp=rand:76800:23", "t=rand:153600:24"]),
    # the same kernels outside the regime (@attention_bwd_split(rows = 40), 300 KV rows):
    # a program per KV head and key block over its 2 query heads, _sum's grid empty
    ("graph attention backward bf16, dK/dV unsplit past the graph's rows", os.path.join(root, "tests", "lit", "graph",
     "attention-bwd-bf16.tile"), "gqa_rows40",
     ["T=150", "q=rand:9600:25", "k=rand:4800:26", "v=rand:4800:27", "t=rand:9600:28"]),
    # multi-query with a window and padded head lanes (d 8 in tiles of 16); Lq < Lk causal
    ("graph attention backward bf16, mqa window", os.path.join(root, "tests", "lit", "graph",
     "attention-bwd-bf16.tile"), "mqa_window",
     ["T=45", "q=rand:1440:5", "k=rand:360:6", "v=rand:360:7", "t=rand:1440:8"]),
    ("graph attention backward bf16, Lq < Lk causal", os.path.join(root, "tests", "lit", "graph",
     "attention-bwd-bf16.tile"), "cross_causal",
     ["S=19", "T=41", "q=rand:304:9", "k=rand:656:10", "v=rand:984:11", "t=rand:456:12"]),
    # attention's output written into the [T, H, D] rows of the trans after it (a store
    # view) and read there again by the bf16 attention_bwd's first step through its
    # strides (issue 42: no copy kernel for the permutation)
    ("graph attention output through a store view, bf16 backward", os.path.join(root, "tests", "lit", "graph",
     "permute.tile"), "attn_out16",
     ["T=37", "q=rand:4736:1", "k=rand:4736:2", "v=rand:4736:3", "w=rand:8192:4", "t=rand:2368:5"]),
    # the backward's rope, trans, reshape and cast one kernel (rule 9), and rope reading
    # the heads through a trans view
    ("graph rope written through a permutation", os.path.join(root, "tests", "lit", "graph", "permute.tile"),
     "rope_out", ["T=7", "d=rand:84", "c=rand:14:2", "s=rand:14:3"]),
    ("graph rope read through a trans view", os.path.join(root, "tests", "lit", "graph", "permute.tile"),
     "rope_in", ["T=7", "x=rand:84", "c=rand:14:2", "s=rand:14:3"]),
    # a bf16 LM head's chunk steps (passes/graph_lower.c lower_lce): bf16 dx and dw, dw's f32
    # sums between chunks in a buffer of their own (T 150, over 16 + 2*64 rows: chunks of 16,
    # the last of 6), none for one chunk of every row (T 40: more rows than a chunk)
    ("graph LM head bf16, 10 chunks (dw's f32 sums)", os.path.join(root, "tests", "lit", "graph",
     "linear-cross-entropy-bf16.tile"), "emu", ["T=150", "V=200", "x=rand:9600:1", "w=rand:12800:2", "lab=iota:150"]),
    ("graph LM head bf16, one chunk of 40 rows (no sums)", os.path.join(root, "tests", "lit", "graph",
     "linear-cross-entropy-bf16.tile"), "emu", ["T=40", "V=200", "x=rand:2560:1", "w=rand:12800:2", "lab=iota:40"]),
    # an RMSNorm's backward (issue 42): rstd alone, the bf16 dx row kernel, the weight
    # gradient's column sum in two steps over row blocks (32 partial sums in the scratch,
    # then their sum in order: T 300 fills 5 of the row blocks), recomputing dy * xhat from
    # the bf16 GEMM outputs and the bf16 input (tests/lit/graph/columns.tile)
    ("graph RMSNorm backward, column sums in two steps", os.path.join(root, "tests", "lit", "graph", "columns.tile"),
     "normbwd", ["T=300", "x=rand:9600", "w0=rand:1024:2", "g=rand:32:3", "w1=rand:1024:4", "w2=rand:1024:5"]),
    ("graph mean over a middle axis in two steps", os.path.join(root, "tests", "lit", "graph", "columns.tile"),
     "mid", ["T=700", "x=rand:14700"]),
    ("graph block (examples/graphs/block.tile)", os.path.join(EX, "graphs", "block.tile"), "block_op",
     ["T=64", "x=rand:4096:1", "g1=rand:64:2", "wq=rand:4096:3", "wk=rand:4096:4", "wv=rand:4096:5",
      "wo=rand:4096:6", "g2=rand:64:7", "wg=rand:8192:8", "wu=rand:8192:9", "wd=rand:8192:10"]),
]


def llama(T, dropout=False):
    """bench/graph_block.py's Llama block at model size 256, 2 heads of 128, MLP 512."""
    a = ["T=%d" % T, "x=rand:%d:1" % (T * 256), "g1=rand:256:2", "wq=rand:65536:3", "wk=rand:65536:4",
         "wv=rand:65536:5", "wo=rand:65536:6", "g2=rand:256:7", "wg=rand:131072:8", "wu=rand:131072:9",
         "wd=rand:131072:10"]
    return a + (["mask=rand:%d:11" % (T * T), "pdrop=0.1", "seed=5"] if dropout else [])


GRAPHS += [
    # the SwiGLU backward's dX GEMM as the lowering picks it (128 x 256, its epilogue of
    # three loaded tiles in chunks, passes/epichunk.c; TMA stores in sequence)
    ("graph subtiled epilogue (SwiGLU dX)", os.path.join(root, "tests", "lit", "graph", "lower_epichunk.tile"), "dx",
     ["T=272", "dy=rand:17408:1", "wd=rand:32768:2", "g=rand:139264:3", "u=rand:139264:4"]),
    ("graph Llama block, heads of 128", "@llama", "block_op", llama(128)),
    ("graph Llama block with mask and dropout", "@llama", "block", llama(128, True)),
]


def literal(path, name, func=None):
    """The list literal assigned to `name` in bench/ file `path` (at the top level, or in
    function `func`: the list of an `x if QUICK else [...]`), without importing it (the
    benchmarks import torch)."""
    import ast
    tree = ast.parse(open(path).read())
    body = tree.body
    if func:
        body = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == func).body
    for n in body:
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets):
            v = n.value.orelse if isinstance(n.value, ast.IfExp) else n.value
            return ast.literal_eval(v)
    sys.exit("emulate.py: no %s in %s" % (name, path))


def function(path, name):
    """Function `name` of file `path`, alone (its module imports torch)."""
    import ast
    tree = ast.parse(open(path).read())
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    scope = {}
    exec(compile(ast.Module(body=[node], type_ignores=[]), path, "exec"), scope)
    return scope[name]


def bench_cases():
    """Every config bench/attention.py and bench/gemm.py time, at small sizes: the
    configs the next GPU session measures must compute the interpreter's values first."""
    att, gem = os.path.join(root, "bench", "attention.py"), os.path.join(root, "bench", "gemm.py")
    cases = []
    for cfg in literal(att, "FWD_CONFIGS"):
        flags = [x for x in cfg if isinstance(x, str)]
        BM, BN, warps = [x for x in cfg if not isinstance(x, str)][:3]
        rest = [x for x in cfg if not isinstance(x, str)][3:]
        defs = ["BM=%d" % BM, "BN=%d" % BN, "warps=%d" % warps] + (["stages=%d" % rest[0]] if rest else [])
        defs += (["ws=1"] if "ws" in flags else []) + (["overlap=1"] if "rot" in flags else []) + \
                (["cluster=2"] if "cl" in flags else []) + \
                (["LPT=1"] if "lpt" in flags else [])
        for causal in (0, 1):
            d = defs + ["CAUSAL=%d" % causal] + (["persistent=1"] if "pers" in flags else [])
            L = 2 * BM
            args = attn_fwd(1, L) if "tma" in flags else ptr_form(attn_fwd(1, L), L)
            cases.append(("bench forward %s%s causal %d" % ("+".join(flags) + ":" if flags else "", cfg, causal), FA,
                          "attn_fwd_tma" if "tma" in flags else "attn_fwd", d, args, ["o", "lse"], 2e-2))
    for D, (_, (BM, BN, warps, stages)) in literal(att, "FP8_CONFIGS").items():   # attn_fwd_fp8_tma (--fp8)
        for causal in (0, 1):
            cases.append(("bench forward fp8 d%d %s causal %d" % (D, (BM, BN, warps, stages), causal), F8,
                          "attn_fwd_fp8_tma", ["BM=%d" % BM, "BN=%d" % BN, "warps=%d" % warps, "stages=%d" % stages,
                                               "ws=1", "overlap=1", "D=%d" % D, "CAUSAL=%d" % causal],
                          attn_fwd_fp8(1, 2 * BM, D, tma=True), ["o", "lse"], 2e-2))
    for cfg in literal(att, "BWD_CONFIGS"):
        flags = [x for x in cfg if isinstance(x, str)]
        if "fused" in flags:   # attn_bwd_fused: dK, dV and dQ's f32 partials in one kernel
            ((bm, bn, w),) = [x for x in cfg if not isinstance(x, str)]
            for causal in (0, 1):
                tma = "tma" in flags
                args = attn_bwd(["dk", "dv"], 1, 256) + ["dq_accum=zeros:32768", "sem=zeros:256"] if tma else \
                    attn_bwd_fused(1, 256)
                cases.append(("bench backward %s:%s attn_bwd_fused causal %d" % ("+".join(flags), (bm, bn, w), causal),
                              FB, "attn_bwd_fused" + ("_tma" if tma else ""),
                              ["BM=%d" % bm, "BN=%d" % bn, "warps=%d" % w, "CAUSAL=%d" % causal,
                               "DETERMINISTIC=%d" % ("det" in flags)], args, ["dk", "dv", "dq_accum"], 2e-2))
            continue
        (kbm, kbn, kw), (qbm, qbn, qw) = [x for x in cfg if not isinstance(x, str)]
        ov = (["overlap=1"] if "ov" in flags else []) + (["persistent=1"] if "pers" in flags else [])
        lpt = ["LPT=1"] if "lpt" in flags else []
        tma = "tma" in flags
        for causal in (0, 1):
            L = 256
            for kern, (bm, bn, w), out in (("attn_bwd_dkdv", (kbm, kbn, kw), ["dk", "dv"]),
                                           ("attn_bwd_dq", (qbm, qbn, qw), ["dq"])):
                args = attn_bwd(out, 1, L) if tma else ptr_form(attn_bwd(out, 1, L), L)
                cases.append(("bench backward %s%s %s causal %d" % ("+".join(flags) + ":" if flags else "",
                                                                   (bm, bn, w), kern, causal), FB,
                              kern + ("_tma" if tma else ""),
                              ["BM=%d" % bm, "BN=%d" % bn, "warps=%d" % w, "CAUSAL=%d" % causal] + (ov if tma else []) +
                              (lpt if tma and kern == "attn_bwd_dq" else []),
                              args, out, 2e-2))
    gemm_consts = function(os.path.join(root, "bench", "tilert.py"), "gemm_consts")   # the benchmarks' reading

    def consts(cfg):
        return ["%s=%d" % kv for kv in gemm_consts(cfg).items()]
    for cfg in literal(gem, "BF16_CONFIGS"):
        cases.append(("bench bf16 %s" % (cfg,), MM, "matmul_bf16", consts(cfg), gemm(512, 512, 192), ["c"], 0))
    for cfg in literal(gem, "configs", "section_gelu"):
        cases.append(("bench gelu %s" % (cfg,), os.path.join(EX, "gemm_bias_gelu.tile"), "gemm_bias_gelu", consts(cfg),
                      gelu(512, 512, 192), ["c"], 1e-2))
    for cfg in literal(gem, "FP8_CONFIGS"):
        cases.append(("bench fp8 %s" % (cfg,), os.path.join(EX, "matmul_fp8.tile"), "matmul_fp8", consts(cfg),
                      fp8(512, 512, 256), ["c"], 1e-2))
    return cases


def read_values(path):
    with open(path) as f:
        return [float(x) for x in f.read().split()]


def main():
    argv = sys.argv[1:]
    if len(argv) < 4:
        sys.exit(__doc__)
    tilec, mock, cg_emu, cg = (os.path.abspath(a) for a in argv[:4])
    only = argv[argv.index("--only") + 1] if "--only" in argv else None
    if "--bench" in argv:
        CASES[:] = bench_cases()
        GRAPHS[:] = []
    if "--list" in argv:
        for c in CASES:
            print(c[0])
        return 0
    llc = shutil.which("llc-19") or ("/usr/lib/llvm-19/bin/llc" if os.path.exists("/usr/lib/llvm-19/bin/llc") else None)
    if not llc or not shutil.which("cc"):
        print("emulate.py: needs LLVM 19's llc and a C compiler; skipped")
        return 77
    failed = 0
    with tempfile.TemporaryDirectory() as t:
        env = dict(os.environ, TILE_CUDA_LIBRARY=mock, MOCKCUDA_EMULATE="1", MOCKCUDA_EMU_DIR=here, MOCKCUDA_LLC=llc,
                   TILE_CODEGEN_LIBRARY=cg_emu, TILE_EMU_CODEGEN=cg, TILE_CACHE_DIR=os.path.join(t, "cache"))
        # a GPU of 3 SMs: persistent kernels launch a few programs, each walking several
        # of the small grids' tiles (with 132 most would walk one)
        env.setdefault("MOCKCUDA_SMS", "3")
        env.setdefault("LIT_ON_GPU_TIMEOUT", "400")   # host threads spinning on a lock are slow (lit_on_gpu.py)
        if "--lit" in argv:
            shard = argv[argv.index("--shard"):argv.index("--shard") + 2] if "--shard" in argv else []
            shard += ["--only", only] if only else []
            return subprocess.run([sys.executable, os.path.join(root, "tests", "gpu", "lit_on_gpu.py"), tilec] + shard,
                                  env=env, cwd=root).returncode
        picked = set(Sample(argv, "cases").select(c[0] for c in CASES + GRAPHS if not only or only in c[0]))
        CASES[:] = [c for c in CASES if c[0] in picked]
        GRAPHS[:] = [g for g in GRAPHS if g[0] in picked]
        for case in CASES:
            name, path, kernel, defs, args, outs, tol = case[:7]
            case_env = dict(env, **(case[7] if len(case) > 7 else {}))
            if only and only not in name:
                continue
            for f, vals in FILES.items():
                with open(os.path.join(t, f), "wb") as out:
                    out.write(b"".join(v.to_bytes(4, "little", signed=True) for v in vals))
            args = [a.replace("=@", "=@" + t + "/") for a in args]
            common = [path, "--kernel", kernel] + [x for d in defs for x in ("-D", d)] + \
                     [x for a in args for x in ("--arg", a)]
            res = {}
            ok = True
            for dev in ("gpu", "cpu"):
                d = os.path.join(t, dev)
                os.makedirs(d, exist_ok=True)
                r = subprocess.run([tilec, "run"] + common + ["--device", dev, "--print-to", d],
                                   env=case_env if dev == "gpu" else None, capture_output=True, text=True)
                if r.returncode:
                    print("FAIL %s: tilec run --device %s (%s):\n%s" % (name, dev, "emulated" if dev == "gpu" else
                                                                          "interpreter", (r.stdout + r.stderr)[-3000:]))
                    ok = False
                    break
                res[dev] = {o: read_bin(os.path.join(d, o + ".bin"), path, kernel, o) for o in outs}
            worst = 0.0
            if ok:
                for o in outs:
                    g, c = res["gpu"][o], res["cpu"][o]
                    scale = max((abs(x) for x in c), default=0.0) or 1.0
                    bad = [i for i, (x, y) in enumerate(zip(g, c)) if not (abs(x - y) <= tol * scale)]
                    worst = max([worst] + [abs(x - y) / scale for x, y in zip(g, c)])
                    if len(g) != len(c) or bad:
                        i = bad[0] if bad else 0
                        print("FAIL %s: %s differs in %d of %d elements (first at %d: emulated %r, interpreter %r; "
                              "tolerance %g of %g)" % (name, o, len(bad), len(c), i, g[i], c[i], tol, scale))
                        ok = False
            print("%s %s (largest difference %.2g of the output's largest magnitude)" % ("ok  " if ok else "FAIL", name,
                                                                                   worst), flush=True)
            failed += not ok
        sys.path.insert(0, os.path.join(root, "bench"))
        from graph_block import block_source
        with open(os.path.join(t, "llama.tile"), "w") as f:
            f.write(block_source(256, 2, 128, 512))
        for name, path, graph, args in GRAPHS:
            if only and only not in name:
                continue
            path = os.path.join(t, "llama.tile") if path == "@llama" else path
            r = subprocess.run([tilec, "run", path, "--compare-fused", "--device", "gpu", "--graph", graph,
                                "--max-ops", "4000000000"] + [x for a in args for x in ("--arg", a)],
                               env=env, capture_output=True, text=True)
            ok = r.returncode == 0
            if not ok:
                print("FAIL %s:\n%s" % (name, (r.stdout + r.stderr)[-3000:]))
            print("%s %s" % ("ok  " if ok else "FAIL", name), flush=True)
            failed += not ok
    total = len(CASES) + len(GRAPHS)
    print("%d of %d cases failed" % (failed, total))
    return 1 if failed else 0


def read_bin(path, src, kernel, name):
    """The buffer as floats: its element type from the kernel's parameter list."""
    import struct
    text = open(src).read()
    sig = text[text.index("kernel %s(" % kernel):]
    sig = sig[:sig.index(")")]
    ty = sig.split(name + ":")[1].split(",")[0].strip().lstrip("*")
    data = open(path, "rb").read()
    if ty == "f32":
        return list(struct.unpack("<%df" % (len(data) // 4), data))
    if ty == "bf16":
        return [struct.unpack("<f", struct.pack("<I", h << 16))[0]
                for h in struct.unpack("<%dH" % (len(data) // 2), data)]
    if ty == "f16":
        return list(struct.unpack("<%de" % (len(data) // 2), data))
    sys.exit("emulate.py: no reader for %s buffers" % ty)


if __name__ == "__main__":
    sys.exit(main())
