#!/usr/bin/env python3
"""examples/graphs/train_step.tile trained for several steps in the graph interpreter
(`tilec run --graph --steps N --feed ...`, op by op, through the fusion plan and through
the lowered Tile kernels: --compare-fused) against a float64 numpy model of what PyTorch
computes for the same step:

    loss = mse(gelu(x @ w1) @ w2, y)
    scaler.scale(loss).backward()          # fp16 only: GradScaler(init_scale=2**16,
    scaler.unscale_(opt)                   #   growth_interval=3 here, not 2000)
    clip_grad_norm_([w1, w2], max_norm)
    scaler.step(opt); scaler.update()      # opt = AdamW(lr, betas, eps, weight_decay)

The f32 graph must match within float32 rounding; the fp16 graph (its forward rounds to
f16 at every op, the reference does not) within the loss's f16 error. Its backward
products run on f16 operands as autocast's do, and the reference rounds them so too
(loss_and_grads): this MLP's scaled dW2 overflows f16 at steps 1 and 4, as PyTorch's
would, and both skip those steps. The fp16 run feeds
a batch holding an inf at step INF_STEP: that step must change no weight, moment or step
count, halve the scale and reset the growth tracker, as the reference's bookkeeping does
(compared exactly), and the scale must double after every INTERVAL clean steps.

usage: train_step.py TILEC EXAMPLE"""
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

T, STEPS, INTERVAL, INF_STEP = 6, 8, 3, 5
LR, MAX_NORM, WD, B1, B2, EPS = 0.01, 0.5, 0.01, 0.9, 0.999, 1e-8
INIT_SCALE = 65536.0
erf = np.vectorize(math.erf)


def gelu(a):
    return 0.5 * a * (1 + erf(a / math.sqrt(2)))


def dgelu(a):
    return 0.5 * (1 + erf(a / math.sqrt(2))) + a * np.exp(-a * a / 2) / math.sqrt(2 * math.pi)


def f16(a):
    """Rounded to float16 as PyTorch stores an f16 tensor: past 65504 it is inf."""
    with np.errstate(over="ignore", invalid="ignore"):
        return a.astype(np.float16).astype(np.float64)


def loss_and_grads(x, y, w1, w2, scale=None):
    """The loss and the gradients of w1, w2; with scale (fp16 with GradScaler) the
    gradients of scale * loss as autocast's backward computes them: each product's
    incoming gradient rounded to f16 and the product rounded to f16 (f32 accumulation),
    so a product past f16's range is inf, as PyTorch's (found_inf then skips the step)."""
    a = x @ w1
    h = gelu(a)
    e = h @ w2 - y
    de = 2 * e / e.size
    if scale is None:
        return np.mean(e * e), [x.T @ ((de @ w2.T) * dgelu(a)), h.T @ de]
    de = f16(scale * de)
    da = f16(f16(de @ w2.T) * dgelu(a))
    return np.mean(e * e), [f16(x.T @ da), f16(h.T @ de)]


def clip_grad_norm(grads):
    """torch.nn.utils.clip_grad_norm_(grads, MAX_NORM): the grads scaled in place."""
    total = math.sqrt(sum(float(np.sum(g * g)) for g in grads))
    coef = min(1.0, MAX_NORM / (total + 1e-6))
    return [g * coef for g in grads]


class AdamW:
    """torch.optim.AdamW (amsgrad=False), its single-tensor form."""

    def __init__(self, params):
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]
        self.t = 0

    def step(self, params, grads):
        self.t += 1
        bc1, bc2 = 1 - B1 ** self.t, 1 - B2 ** self.t
        for i, (p, g) in enumerate(zip(params, grads)):
            p *= 1 - LR * WD
            self.m[i] += (1 - B1) * (g - self.m[i])
            self.v[i] = self.v[i] * B2 + (1 - B2) * g * g
            p -= LR / bc1 * self.m[i] / (np.sqrt(self.v[i]) / math.sqrt(bc2) + EPS)


class GradScaler:
    """torch.amp.GradScaler's unscale_ and update (growth 2, backoff 0.5)."""

    def __init__(self):
        self.scale, self.tracker = INIT_SCALE, 0

    def unscale(self, grads):
        found = any(not np.all(np.isfinite(g)) for g in grads)
        return [g * (1.0 / self.scale) for g in grads], found

    def update(self, found):
        if found:
            self.scale, self.tracker = self.scale * 0.5, 0
        elif self.tracker + 1 == INTERVAL:
            self.scale, self.tracker = self.scale * 2.0, 0
        else:
            self.tracker += 1


def reference(xs, ys, w1, w2, amp):
    params = [w1.astype(np.float64), w2.astype(np.float64)]
    opt, scaler, out = AdamW(params), GradScaler(), []
    for x, y in zip(xs, ys):
        with np.errstate(invalid="ignore", over="ignore"):
            loss, grads = loss_and_grads(x.astype(np.float64), y.astype(np.float64), *params,
                                         scale=scaler.scale if amp else None)
            found = False
            if amp:
                grads, found = scaler.unscale(grads)
            if not found:
                opt.step(params, clip_grad_norm(grads))
            if amp:
                scaler.update(found)
        out.append((loss, opt.t, scaler.scale, scaler.tracker))
    return out


def run(tilec, example, graph, files, amp, mode):
    state = ["w1", "w2", "m1", "m2", "v1", "v2", "step"] + (["scale", "growth"] if amp else [])
    cmd = [tilec, "run", example] + mode + ["--graph", graph, "--steps", str(STEPS), "--arg", "T=%d" % T]
    cmd += sum((["--feed", "ret%d=%s" % (i + 1, n)] for i, n in enumerate(state)), [])
    cmd += ["--arg", "x=@" + files["x"], "--arg", "y=@" + files["y"], "--arg", "w1=@" + files["w1"],
            "--arg", "w2=@" + files["w2"], "--arg", "m1=zeros:96", "--arg", "m2=zeros:36", "--arg", "v1=zeros:96",
            "--arg", "v2=zeros:36", "--arg", "step=0", "--arg", "lr=%r" % LR, "--arg", "max_norm=%r" % MAX_NORM]
    if amp:
        cmd += ["--arg", "scale=%r" % INIT_SCALE, "--arg", "growth=0", "--arg", "growth_interval=%d" % INTERVAL]
    prints = ["ret0", "ret7"] + (["ret8", "ret9"] if amp else []) + ["ret1", "ret2"]
    cmd += sum((["--print", p] for p in prints), [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode or "differs" in r.stderr:
        sys.exit("FAIL: %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
    vals = [float(v) for v in r.stdout.split()]
    per = len(prints) - 2 + 96 + 36
    assert len(vals) == per * STEPS, (len(vals), per * STEPS)
    steps = []
    for s in range(STEPS):
        v = vals[s * per:(s + 1) * per]
        k = len(prints) - 2
        steps.append({"loss": v[0], "t": v[1], "scale": v[2] if amp else None, "tracker": v[3] if amp else None,
                      "weights": np.array(v[k:])})
    return steps


def check(name, got, ref, amp, rtol):
    fails = []
    for s, (g, (loss, t, scale, tracker)) in enumerate(zip(got, ref)):
        ok_loss = (not math.isfinite(loss) and not math.isfinite(g["loss"])) or \
                  abs(g["loss"] - loss) <= rtol * abs(loss)
        print("%s step %d: loss %.7g (reference %.7g)%s" % (name, s + 1, g["loss"], loss,
              "  scale %g tracker %d step %d" % (g["scale"], g["tracker"], g["t"]) if amp else ""))
        if not ok_loss:
            fails.append("%s step %d: loss %r, reference %r" % (name, s + 1, g["loss"], loss))
        if g["t"] != t or (amp and (g["scale"] != scale or g["tracker"] != tracker)):
            fails.append("%s step %d: step/scale/tracker %r %r %r, reference %r %r %r" %
                         (name, s + 1, g["t"], g["scale"], g["tracker"], t, scale, tracker))
    return fails


def main():
    tilec, example = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(42)
    xs = rng.standard_normal((STEPS, T, 8))
    ys = rng.standard_normal((STEPS, T, 3))
    w1 = (0.5 * rng.standard_normal((8, 12))).astype(np.float32)
    w2 = (0.5 * rng.standard_normal((12, 3))).astype(np.float32)
    fails = []
    with tempfile.TemporaryDirectory() as d:
        def save(name, a):
            path = os.path.join(d, name)
            a.tofile(path)
            return path
        base = {"w1": save("w1", w1), "w2": save("w2", w2)}
        x32, y32 = xs.astype(np.float32), ys.astype(np.float32)
        f32 = dict(base, x=save("x32", x32), y=save("y32", y32))
        got = run(tilec, example, "train_step", f32, False, ["--compare-fused"])
        fails += check("f32", got, reference(x32, y32, w1, w2, False), False, 1e-4)
        x16, y16 = xs.astype(np.float16), ys.astype(np.float16)
        x16[INF_STEP - 1, 0, 0] = np.inf
        f16 = dict(base, x=save("x16", x16), y=save("y16", y16))
        ref = reference(x16, y16, w1, w2, True)
        # op by op, and through the lowered kernels (whose f16 chains may round apart from
        # the op-by-op run by more than --compare-fused's f32 bound on the f32 loss)
        for name, mode in (("op by op", []), ("fused", ["--fused"])):
            got = run(tilec, example, "train_step_fp16", f16, True, mode)
            fails += check("fp16 " + name, got, ref, True, 5e-3)
            i = INF_STEP - 1
            if not np.array_equal(got[i]["weights"], got[i - 1]["weights"]):
                fails.append("fp16 step %d (an inf in its batch) changed the weights" % INF_STEP)
            if np.array_equal(got[i + 1]["weights"], got[i]["weights"]):
                fails.append("fp16 step %d (after the skipped one) did not change the weights" % (INF_STEP + 1))
    for f in fails:
        print("FAIL: " + f)
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
