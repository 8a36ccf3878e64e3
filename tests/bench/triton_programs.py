"""The tile programs of bench/triton_programs.py (bench/triton_programs/*.tile and
bench/matmul_pointers.tile) in the reference interpreter, through the tile package on
numpy arrays, at small odd shapes (every masked edge and every loop's tail runs),
against numpy in float64 on the inputs as the kernels see them (rounded to f16, bf16
or f8e4m3 first). Then the benchmark's --dry-run: every config of its lists compiled
to PTX by tilec (and assembled by ptxas where there is one).

    TILE_LIB=build/runtime/libtileRT.so TILEC=build/tools/tilec python3 tests/bench/triton_programs.py -v
"""
import os
import subprocess
import sys
import unittest
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "python"))
import tile  # noqa: E402

PROGRAMS = ROOT / "bench" / "triton_programs"


def cdiv(a, b):
    return (a + b - 1) // b


def to_bf16_bits(x):
    """float -> bf16 bits (uint16), rounded to nearest even."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16_bits(b):
    return (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def e4m3_values():
    """The value of each of the 256 f8e4m3 (e4m3fn) bit patterns; NaN for 0x7f, 0xff."""
    v = np.empty(256)
    for bits in range(256):
        s, e, m = bits >> 7, (bits >> 3) & 15, bits & 7
        mag = m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
        v[bits] = np.nan if (bits & 0x7F) == 0x7F else (-mag if s else mag)
    return v


def rel_err(x, ref):
    return float(np.linalg.norm(x - ref) / np.linalg.norm(ref))


class Programs(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(7)

    def bf16(self, *shape):
        """Random bf16 bits and the values they hold."""
        bits = to_bf16_bits(self.rng.standard_normal(shape))
        return bits, from_bf16_bits(bits)

    def check_gemm_bf16(self, path, M, N, K, **consts):
        """matmul_bf16 of `path` in the interpreter against numpy (bf16 in and out)."""
        k = tile.load(path).matmul_bf16
        a, av = self.bf16(M, K)
        b, bv = self.bf16(K, N)
        c = np.full((M, N), 0x7FC0, np.uint16)   # NaN: every element must be written
        k(tile.bits(c, "bf16"), tile.bits(a, "bf16"), tile.bits(b, "bf16"), M, N, K, K, N, N, **consts)
        self.assertLess(rel_err(from_bf16_bits(c), av @ bv), 5e-3)

    def test_gemm_bf16_pointers(self):
        self.check_gemm_bf16(ROOT / "bench" / "matmul_pointers.tile", 37, 45, 70, BM=16, BN=16, BK=32, GROUP=2)

    def test_gemm_bf16_tutorial(self):
        """Tutorial 03 as written: the rows and columns past M and N wrap (`% M`), at sizes
        where the last tiles wrap and K ends in a partial step."""
        self.check_gemm_bf16(PROGRAMS / "matmul_tutorial.tile", 70, 50, 40, BM=32, BN=32, BK=32, GROUP=2)

    def test_softmax(self):
        k = tile.load(PROGRAMS / "softmax.tile").softmax
        rows, cols = 37, 100
        x = self.rng.standard_normal((rows, cols + 3)).astype(np.float32) * 3  # a row stride past n_cols
        out = np.full((rows, cols + 5), np.nan, np.float32)
        for programs in (5, rows):   # several rows a program, and one
            out[:, :cols] = np.nan
            k[(programs,)](out, x, x.shape[1], out.shape[1], rows, cols, BLOCK=128)
            xd = x[:, :cols].astype(np.float64)
            e = np.exp(xd - xd.max(axis=1, keepdims=True))
            np.testing.assert_allclose(out[:, :cols], e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
            self.assertTrue(np.isnan(out[:, cols:]).all())

    def layernorm_inputs(self, M, N):
        x = (self.rng.standard_normal((M, N)) * 2 + 0.5).astype(np.float16)
        w = self.rng.random(N).astype(np.float16)
        b = self.rng.random(N).astype(np.float16)
        return x, w, b

    def test_layernorm_forward(self):
        k = tile.load(PROGRAMS / "layernorm.tile").layer_norm_fwd
        M, N, eps = 37, 100, 1e-5
        x, w, b = self.layernorm_inputs(M, N)
        xd = x.astype(np.float64)
        mu = xd.mean(axis=1)
        rs = 1 / np.sqrt(xd.var(axis=1) + eps)
        ref = (xd - mu[:, None]) * rs[:, None] * w.astype(np.float64) + b.astype(np.float64)
        for block in (128, 32):   # one chunk a row, and four with a tail
            y = np.full((M, N), np.nan, np.float16)
            mean = np.full(M, np.nan, np.float32)
            rstd = np.full(M, np.nan, np.float32)
            k[(M,)](x, y, w, b, mean, rstd, N, N, eps, BLOCK=block)
            np.testing.assert_allclose(mean, mu, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(rstd, rs, rtol=1e-5)
            np.testing.assert_allclose(y.astype(np.float64), ref, rtol=0, atol=1e-2)

    def test_layernorm_backward(self):
        m = tile.load(PROGRAMS / "layernorm.tile")
        M, N, eps, G = 37, 100, 1e-5, 8
        x, w, b = self.layernorm_inputs(M, N)
        dy = self.rng.standard_normal((M, N)).astype(np.float16)
        xd, wd, dyd = x.astype(np.float64), w.astype(np.float64), dy.astype(np.float64)
        mu = xd.mean(axis=1)
        rs = 1 / np.sqrt(xd.var(axis=1) + eps)
        xhat = (xd - mu[:, None]) * rs[:, None]
        wdy = wd * dyd
        c1 = (xhat * wdy).mean(axis=1, keepdims=True)
        c2 = wdy.mean(axis=1, keepdims=True)
        ref_dx = (wdy - (xhat * c1 + c2)) * rs[:, None]
        dx = np.full((M, N), np.nan, np.float16)
        pdw = np.full((G, N), np.nan, np.float16)   # the first row of a group must overwrite
        pdb = np.full((G, N), np.nan, np.float16)
        locks = np.zeros(2 * G, np.int32)
        m.layer_norm_bwd_dx[(M,)](dx, dy, pdw, pdb, x, w, mu.astype(np.float32), rs.astype(np.float32),
                                  locks, N, N, GROUP_SIZE_M=G, BLOCK_N=128)
        np.testing.assert_allclose(dx.astype(np.float64), ref_dx, rtol=0, atol=1e-2)
        np.testing.assert_array_equal(locks, [0] * G + [1] * G)
        dw = np.full(N, np.nan, np.float16)
        db = np.full(N, np.nan, np.float16)
        m.layer_norm_bwd_dwdb(pdw, pdb, dw, db, G, N, BLOCK_M=4, BLOCK_N=32)
        # partial sums are f16, as the tutorial keeps them: about 5 rows each here
        np.testing.assert_allclose(dw.astype(np.float64), (dyd * xhat).sum(axis=0), rtol=1e-2, atol=2e-2)
        np.testing.assert_allclose(db.astype(np.float64), dyd.sum(axis=0), rtol=1e-2, atol=2e-2)

    def test_attention(self):
        k = tile.load(PROGRAMS / "attention.tile").attn_fwd
        Z, H, L, D = 1, 2, 50, 16
        scale = 0.3
        q, qv = self.bf16(Z, H, L, D)
        kk, kv = self.bf16(Z, H, L, D)
        v, vv = self.bf16(Z, H, L, D)
        s = np.einsum("zhld,zhmd->zhlm", qv, kv) * scale
        for causal in (0, 1):
            for BM, BN in ((32, 16), (16, 16)):
                o = np.full((Z, H, L, D), 0x7FC0, np.uint16)
                lse = np.full((Z * H, L), np.nan, np.float32)
                k(tile.bits(q, "bf16"), tile.bits(kk, "bf16"), tile.bits(v, "bf16"), scale, lse,
                  tile.bits(o, "bf16"), L * D, D, Z, H, L, BM=BM, BN=BN, D=D, CAUSAL=causal)
                sc = np.where(np.tril(np.ones((L, L), bool)), s, -np.inf) if causal else s
                mx = sc.max(axis=-1, keepdims=True)
                p = np.exp(sc - mx)
                ref = np.einsum("zhlm,zhmd->zhld", p / p.sum(axis=-1, keepdims=True), vv)
                ref_lse = (mx[..., 0] + np.log(p.sum(axis=-1))) / np.log(2)
                what = "causal %d, BM %d, BN %d" % (causal, BM, BN)
                self.assertLess(rel_err(from_bf16_bits(o), ref), 5e-3, what)   # P and O rounded to bf16
                np.testing.assert_allclose(lse.reshape(Z, H, L), ref_lse, rtol=0, atol=1e-3, err_msg=what)

    def test_matmul_fp8(self):
        k = tile.load(PROGRAMS / "matmul_fp8.tile").matmul_fp8
        table = e4m3_values()
        finite = np.flatnonzero(np.isfinite(table) & (np.abs(table) <= 16)).astype(np.uint8)
        M, N, K = 37, 45, 70
        a = self.rng.choice(finite, (M, K))
        b = self.rng.choice(finite, (N, K))
        sa = np.array([0.5], np.float32)
        sb = np.array([0.0625], np.float32)
        c = np.full((M, N), 0x7FC0, np.uint16)
        k(tile.bits(c, "bf16"), tile.bits(a, "f8e4m3"), tile.bits(b, "f8e4m3"), sa, sb, M, N, K, K, K, N,
          BM=16, BN=16, BK=32, GROUP=2)
        ref = (table[a] @ table[b].T) * 0.5 * 0.0625
        self.assertLess(rel_err(from_bf16_bits(c), ref), 5e-3)


class DryRun(unittest.TestCase):
    def test_dry_run_compiles_every_config(self):
        tilec = os.environ.get("TILEC")
        if not tilec:
            self.skipTest("TILEC not set")
        # tilec carries its own sanitizer runtime: the one this process may preload for
        # the sanitized libtileRT (LD_PRELOAD) must not reach it
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        r = subprocess.run([sys.executable, str(ROOT / "bench" / "triton_programs.py"), "--dry-run",
                            "--tilec", tilec], capture_output=True, text=True, timeout=900, env=env)
        sys.stderr.write(r.stdout[-3000:] + r.stderr[-3000:])
        self.assertEqual(r.returncode, 0)
        self.assertIn("compiled", r.stdout)


if __name__ == "__main__":
    unittest.main()
