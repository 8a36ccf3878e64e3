"""A training graph in a PyTorch training loop: tile.GraphFunction, a torch.autograd.Function.

A graph with `grad` (docs/LANGUAGE-REFERENCE.md section 7.3) is one joint program: it
returns a scalar loss and the loss's gradients with respect to some of its parameters,
and its compiled plan runs the forward, then the backward, with the forward values the
recomputation policy chose saved or recomputed in between (docs/GRAPHS.md
"Recomputation"). The graph layer does not split that plan into a forward executable and
a backward executable yet, so the Function runs the whole plan in its forward and keeps
the gradients it returned (not the activations: the plan's buffers are the graph's own,
reused by the next call); its backward multiplies them by the incoming gradient of the
loss (the chain rule for a scalar loss: d(total)/dw = d(total)/d(loss) * d(loss)/dw).

    fn = module.graphs["mlp"].autograd(grads={"w1": 1, "w2": 2})   # result 0 is the loss
    loss = fn(x, w1, w2, y)            # w1, w2: tensors that require grad
    loss.backward()                    # w1.grad, w2.grad: the graph's results 1 and 2

Limits: the backward runs even when no .backward() follows (an evaluation loop pays for
it: call the graph itself there); the loss is a scalar result of the graph; a tensor
argument that requires grad must have its gradient among the graph's results (else the
call is refused, rather than giving it no gradient silently); results other than the
loss and the gradients come back as non-differentiable tensors after the loss; double
backward is not supported.
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
                res = gf.graph(*[v.detach() if isinstance(v, torch.Tensor) else v for v in vals], **given)
            res = res if isinstance(res, tuple) else (res,)
            order = sorted(gf._grads)
            ctx.grad_of = order
            ctx.save_for_backward(*[res[gf._grads[i]] for i in order])
            extra = [res[i] for i in gf._extra]
            ctx.mark_non_differentiable(*extra)
            return (res[gf._loss],) + tuple(extra)

        @staticmethod
        def backward(ctx, dloss, *dextra):
            grads = [None] * (len(ctx.needs_input_grad))
            ones = bool(torch.all(dloss == 1))
            for i, g in zip(ctx.grad_of, ctx.saved_tensors):
                if ctx.needs_input_grad[2 + i]:
                    grads[2 + i] = g if ones else (g.double() * dloss.double()).to(g.dtype)
            return tuple(grads)

    return _GraphFn
