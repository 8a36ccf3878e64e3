"""The LM head's loss step (rows' logsumexp and the gradient over the [1024, 32000] bf16 logits): configs."""
import sys, torch, triton
sys.path.insert(0, "python")
import tile
T, V = 1024, 32000
m = tile.load("bench/probes/loss.tile")
rows = torch.empty(T, device="cuda", dtype=torch.float32)
lab = torch.randint(0, V, (T,), device="cuda", dtype=torch.int64)
dy = torch.full((T,), 1.0 / T, device="cuda", dtype=torch.float32)
x0 = torch.randn(T, V, device="cuda", dtype=torch.bfloat16)
ps = x0.clone()
nbytes = 3 * T * V * 2
ref = None
for c in [{}, dict(BM=1, BV=2048, warps=4), dict(BM=2, BV=2048, warps=4), dict(BM=1, BV=4096, warps=8), dict(BM=2, BV=1024, warps=4),
          dict(BM=1, BV=1024, warps=4), dict(BM=4, BV=2048, warps=8), dict(BM=8, BV=1024, warps=8),
          dict(BM=1, BV=8192, warps=8), dict(BM=2, BV=4096, warps=8), dict(BM=1, BV=2048, warps=2), dict(BM=1, BV=4096, warps=4)]:
    def f():
        ps.copy_(x0)
        m.loss(rows, lab, dy, ps, 0, T, T, T, V, **c)
    try:
        f(); torch.cuda.synchronize()
    except Exception as e:
        print(c, "failed", str(e).splitlines()[0][:120]); continue
    if ref is None: ref = (rows.clone(), ps.clone())
    same = torch.equal(ref[0], rows) and torch.equal(ref[1], ps)
    ms_copy = triton.testing.do_bench(lambda: ps.copy_(x0), warmup=25, rep=100)
    ms = triton.testing.do_bench(f, warmup=25, rep=200) - ms_copy
    print("%-40s %.4f ms  %.0f GB/s  same %s" % (c, ms, nbytes / ms / 1e6, same), flush=True)
