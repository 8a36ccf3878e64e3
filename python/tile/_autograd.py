"""A training graph in a PyTorch training loop: tile.GraphFunction, a torch.autograd.Function.

A graph with `grad` (docs/LANGUAGE-REFERENCE.md section 7.3) returns a scalar loss and
the loss's gradients with respect to some of its parameters; its compiled plan divides
into a forward part and a backward part (docs/GRAPHS.md "The forward/backward split").
The Function runs the forward part in its forward (the loss and the graph's other
forward results; the values the backward needs are saved in new tensors kept by
autograd, ctx.save_for_backward), and the backward part in its backward, with the
incoming gradient of the loss as the backward's seed, so the gradients are
dloss * d(loss)/dw as the chain rule says (a loss scaled or summed before .backward()
gets its gradients scaled, computed by the graph). No backward work runs without
.backward(), and each call keeps its own saved tensors: several forwards before their
backwards (gradient accumulation, activation checkpointing in the user's loop) each get
their own gradients, which autograd sums into .grad. A fused LM head
(@linear_cross_entropy) computes the loss in the forward part too, with its dx and dw
for a seed of 1, which the backward scales (Liger's order, docs/GRAPHS.md "The LM head").

    fn = module.graphs["mlp"].autograd(grads={"w1": 1, "w2": 2})   # result 0 is the loss
    loss = fn(x, w1, w2, y)            # w1, w2: tensors that require grad
    loss.backward()                    # w1.grad, w2.grad: the graph's results 1 and 2

Limits: the loss is a scalar result of the graph; a tensor argument that requires grad
must have its gradient among the graph's results (else the call is refused, rather than
giving it no gradient silently); results other than the loss and the gradients come
back as non-differentiable tensors after the loss, and must be computed by the forward
part; the arguments must not change between a forward and its backward (the backward
reads the parameters again; autograd's version check refuses an in-place change);
double backward is not supported.
"""
import sys

from ._lib import TileError


class GraphFunction:
    """A graph's loss as a differentiable function of its tensor arguments.

    graph: a tile.TensorGraph whose result `loss` (an index or "retN"; 0 by default) is a
    scalar and whose results listed in `grads` ({parameter name: result index or
    "retN"}) are that loss's gradients with respect to those parameters (of their
    types). Calling it takes the graph's arguments (positionally or by name, sizes by
    name as the graph does) and returns the loss, a tensor whose backward gives each
    listed argument its gradient, followed by the graph's other results, if any."""

    def __init__(self, graph, grads, loss=0):
        self.graph = graph
        params, outputs, _ = graph._describe()
        self._loss = self._result_index(outputs, loss, "loss")
        if outputs[self._loss].dims:
            graph._fail(ValueError, "the loss (result %d, %s) must be a scalar", self._loss, outputs[self._loss].type)
        names = [p.name for p in params]
        self._grads = {}
        for name, r in dict(grads).items():
            if name not in names:
                graph._fail(ValueError, "grads names '%s', which is no parameter (it has %s)", name, ", ".join(names))
            p = params[names.index(name)]
            i = self._result_index(outputs, r, "the gradient of '%s'" % name)
            if not p.is_tensor or outputs[i].dims != p.dims or outputs[i].elem != p.elem:
                graph._fail(ValueError, "result %d (%s) cannot be the gradient of '%s' (%s): the types differ", i,
                            outputs[i].type, name, p.type)
            if i == self._loss:
                graph._fail(ValueError, "result %d is the loss and the gradient of '%s'", i, name)
            self._grads[names.index(name)] = i
        self._extra = [i for i in range(len(outputs)) if i != self._loss and i not in self._grads.values()]
        _, parts, _ = graph._split_meta()
        if parts[self._loss] != 1:
            graph._fail(ValueError, "the loss (result %d) is not computed by the graph's forward part (has the graph "
                        "a grad of it?)", self._loss)
        for i in self._extra:
            if parts[i] != 1:
                graph._fail(ValueError, "result %d (%s) is computed by the backward part: a GraphFunction returns the "
                            "forward's results after the loss (list it in grads, or call the graph itself)", i,
                            outputs[i].type)
        self._fn = None

    def _result_index(self, outputs, r, what):
        i = int(r[3:]) if isinstance(r, str) and r.startswith("ret") and r[3:].isdigit() else r
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(outputs):
            self.graph._fail(ValueError, "%s is result %r, but the graph has %d results (ret0 to ret%d)", what, r,
                             len(outputs), len(outputs) - 1)
        return i

    def _function(self):
        if self._fn is None:
            self._fn = _make_function(sys.modules["torch"])
        return self._fn

    def __call__(self, *args, **kwargs):
        if "torch" not in sys.modules:
            raise TileError("TRT_ERROR_INVALID_ARGUMENT", "graph '%s': a GraphFunction takes torch tensors "
                            "(import torch)" % self.graph.name)
        vals, given = self.graph._bind(args, kwargs)
        torch = sys.modules["torch"]
        params = self.graph.params
        for i, (p, v) in enumerate(zip(params, vals)):
            if isinstance(v, torch.Tensor) and v.requires_grad and i not in self._grads:
                self.graph._fail(ValueError, "argument '%s' requires grad, but the graph returns no gradient for it "
                                 "(grads: %s)", p.name, ", ".join(params[j].name for j in self._grads) or "none")
        out = self._function().apply(self, given, *vals)
        return out[0] if len(out) == 1 else out


def _make_function(torch):
    class _GraphFn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, gf, given, *vals):
            with torch.no_grad():
                step = gf.graph.forward(*[v.detach() if isinstance(v, torch.Tensor) else v for v in vals], **given)
            # autograd keeps the saved values, the forward's results (the backward binds
            # them again) and the tensor arguments (its version check refuses one changed
            # in place before the backward); the step keeps none of them, so no output
            # refers back to its own node (a reference cycle)
            ctx.gf, ctx.step = gf, step
            ctx.nsaved = len(step.saved)
            ctx.results = [i for i, r in enumerate(step.results) if r is not None]
            inputs = [v for v in vals if isinstance(v, torch.Tensor)]
            ctx.save_for_backward(*step.saved, *[step.results[i] for i in ctx.results], *inputs)
            out = [step.results[gf._loss]] + [step.results[i] for i in gf._extra]
            ctx.mark_non_differentiable(*out[1:])
            step.saved, step.results = None, [None] * len(step.results)
            return tuple(out)

        @staticmethod
        def backward(ctx, dloss, *dextra):
            gf, step = ctx.gf, ctx.step
            tensors = ctx.saved_tensors
            step.saved = list(tensors[:ctx.nsaved])
            for k, i in enumerate(ctx.results):
                step.results[i] = tensors[ctx.nsaved + k]
            with torch.no_grad():
                res = gf.graph.backward(step, seed=float(dloss))
            step.saved, step.results = None, [None] * len(step.results)
            res = res if isinstance(res, tuple) else (res,)
            grads = [None] * len(ctx.needs_input_grad)
            for i, r in gf._grads.items():
                if ctx.needs_input_grad[2 + i]:
                    grads[2 + i] = res[r]
            return tuple(grads)

    return _GraphFn
