"""Float32 torch execution of a Graph with raw (unfolded) parameters.

This is the ground truth the TTNN layers are compared against: a plain functional runner over NCHW
tensors, no nn.Module, BatchNorm applied in eval mode exactly as torch does (not folded), so a
mistake in the folding or in the layer code shows up as a difference instead of being reproduced.

Tensors are NCHW throughout; vectors (after global pooling / linear) are ``[N, C, 1, 1]`` like the
graph's ``TensorShape`` (h = w = 1). ``.flatten(1)`` gives torchvision-style logits.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable, Mapping

from .. import ops
from ..errors import Error, WeightsError
from ..language.graph import Constant, Graph, Node
from ..ops import conv2d as conv2d_op
from ..ops import conv_transpose2d as convt_op
from ..ops.conv2d import BN_EPS, BN_PARAMS  # noqa: F401  (re-exported: weights.py, tests)

if TYPE_CHECKING:  # pragma: no cover
    import torch

# Present in every torch BatchNorm state dict; accepted and ignored (eval mode never reads it).
BN_IGNORED = ("num_batches_tracked",)


# ---------------------------------------------------------------------------------------------
# parameter keys
# ---------------------------------------------------------------------------------------------

def node_parameters(node: Node) -> dict[str, tuple[int, ...]]:
    """State-dict keys and shapes a node reads (empty for parameter-free ops): its op's
    parameter schema (``ttmodels/ops/<op>/``)."""
    return ops.get(node.op).params(node)


def expected_parameters(graph: Graph) -> dict[str, tuple[int, ...]]:
    """Every state-dict key the graph needs -> its shape, in graph order (constants last).

    ``{bn}.num_batches_tracked`` is not listed: it is accepted and ignored (see ``optional_keys``).
    """
    out: dict[str, tuple[int, ...]] = {}
    for node in graph.nodes:
        for k, shape in node_parameters(node).items():
            if k in out and out[k] != shape:
                raise WeightsError(f"layer '{node.name}': key '{k}' is shared with another layer "
                                   f"with shape {list(out[k])}, here {list(shape)}")
            out[k] = shape
    for c in graph.constants.values():
        if c.weights:
            out[c.weights] = tuple(int(s) for s in c.shape)
    return out


def optional_keys(graph: Graph) -> set[str]:
    """Keys that may be present in a state dict without being used (BN's num_batches_tracked)."""
    return {f"{b}.{s}" for n in graph.nodes for b in ops.get(n.op).batch_norms(n)
            for s in BN_IGNORED}


# ---------------------------------------------------------------------------------------------
# the runner
# ---------------------------------------------------------------------------------------------

def constant_tensor(const: Constant, state_dict: Mapping[str, "torch.Tensor"] | None = None):
    """A constant's value as a float32 tensor of ``const.shape``."""
    import torch
    if const.weights:
        if state_dict is None or const.weights not in state_dict:
            raise WeightsError(f"constant '{const.name}': weight key '{const.weights}' is missing",
                               missing=[const.weights])
        t = torch.as_tensor(state_dict[const.weights]).detach().to(torch.float32).clone()
    elif const.value is None:
        raise Error(f"constant '{const.name}' has neither a value nor a weights key")
    elif isinstance(const.value, (int, float)):
        t = torch.full(tuple(const.shape), float(const.value), dtype=torch.float32)
    else:
        t = torch.as_tensor(const.value, dtype=torch.float32).clone()
    if tuple(t.shape) != tuple(const.shape):
        if t.numel() == math.prod(const.shape):
            t = t.reshape(tuple(const.shape))
        else:
            raise WeightsError(f"constant '{const.name}': expected shape {list(const.shape)}, "
                               f"got {list(t.shape)}")
    return t


def _broadcast_const(t: "torch.Tensor", like: "torch.Tensor", name: str) -> "torch.Tensor":
    """Constants broadcast per channel: [C] -> [1, C, 1, 1]; a single value is a scalar;
    3-D/4-D constants are in the graph's NHWC / HWC order and are moved to NCHW."""
    if t.numel() == 1:
        return t.reshape(())
    if t.dim() == 1:
        if t.shape[0] != like.shape[1]:
            raise Error(f"constant '{name}' has {t.shape[0]} values, the tensor has "
                        f"{like.shape[1]} channels")
        return t.view(1, -1, 1, 1)
    if t.dim() == 3:
        return t.permute(2, 0, 1).unsqueeze(0)
    if t.dim() == 4:
        return t.permute(0, 3, 1, 2)
    raise Error(f"constant '{name}' of shape {list(t.shape)} cannot be broadcast to an NCHW tensor")


class ReferenceModel:
    """Functional float32 execution of ``graph`` with ``state_dict`` (spec key names, raw BN).

    ``state_dict`` is read, never modified; tensors are converted to float32 copies once here.
    ``on_node(node, env)``, when given to ``run``, is called before each node is evaluated; the
    random-weight calibration uses it to set BatchNorm statistics layer by layer.
    """

    def __init__(self, graph: Graph, state_dict: Mapping[str, "torch.Tensor"]):
        import torch
        self.graph = graph
        expected = expected_parameters(graph)
        missing = [k for k in expected if k not in state_dict]
        if missing:
            raise WeightsError(f"reference model of '{graph.name}': {len(missing)} parameter keys "
                               f"missing: {', '.join(missing[:20])}"
                               + (f" ... and {len(missing) - 20} more" if len(missing) > 20 else ""),
                               missing=missing)
        self.params: dict[str, torch.Tensor] = {
            k: torch.as_tensor(state_dict[k]).detach().to(torch.float32).clone() for k in expected}
        self.constants = {name: constant_tensor(c, self.params) for name, c in graph.constants.items()}

    # -- public -------------------------------------------------------------------------------
    def __call__(self, inputs, **kw):
        return self.run(inputs, **kw)

    def run(self, inputs: "Mapping[str, torch.Tensor] | torch.Tensor", *, return_all: bool = False,
            on_node: Callable[[Node, dict], None] | None = None) -> dict[str, "torch.Tensor"]:
        """Run the graph on NCHW inputs. Returns the graph outputs (every node's output, inputs
        included, when ``return_all``). Any batch size works; C, H, W must match the graph."""
        import torch
        if isinstance(inputs, torch.Tensor):
            if len(self.graph.inputs) != 1:
                raise Error(f"graph '{self.graph.name}' has inputs {list(self.graph.inputs)}: "
                            "pass a dict name -> tensor")
            inputs = {next(iter(self.graph.inputs)): inputs}
        env: dict[str, torch.Tensor] = {}
        for name, shape in self.graph.inputs.items():
            if name not in inputs:
                raise Error(f"graph '{self.graph.name}': input '{name}' not given "
                            f"(got {sorted(inputs)})")
            x = torch.as_tensor(inputs[name])
            if x.dim() != 4 or tuple(x.shape[1:]) != shape.nchw[1:]:
                raise Error(f"graph '{self.graph.name}': input '{name}' must be NCHW "
                            f"[N, {shape.c}, {shape.h}, {shape.w}], got {list(x.shape)}")
            env[name] = x.detach().to(torch.float32)
        with torch.no_grad():
            for node in self.graph.nodes:
                if on_node is not None:
                    on_node(node, env)
                self.bind(node, self.eval_node(node, env), env)
        if return_all:
            return env
        return {o: env[o] for o in self.graph.outputs}

    def bind(self, node: Node, y, env: dict) -> None:
        """Store ``node``'s reference output: one tensor under its name, or (named outputs, a
        split) one per ``Node.outputs`` entry, each checked against the graph's shape."""
        pairs = zip(node.outputs.items(), y) if node.outputs else [((node.name, node.shape), y)]
        for (t, shape), v in pairs:
            want = shape.nchw[1:]
            if tuple(v.shape[1:]) != want:
                raise Error(f"layer '{node.name}' ({node.op}): reference output "
                            f"{list(v.shape[1:])} (CHW) != graph shape {list(want)}")
            env[t] = v

    def operand(self, name: str, env: dict, like=None) -> "torch.Tensor":
        if name in env:
            return env[name]
        if name in self.constants:
            t = self.constants[name]
            return _broadcast_const(t, like, name) if like is not None else t
        raise Error(f"unknown tensor '{name}'")

    def conv_raw(self, node: Node, x: "torch.Tensor") -> "torch.Tensor":
        """The convolution alone (bias included, BN and activation not)."""
        fn = convt_op.conv_raw if node.op == "conv_transpose2d" else conv2d_op.conv_raw
        return fn(self, node, x)

    def batch_norm(self, node: Node, y: "torch.Tensor") -> "torch.Tensor":
        """The BatchNorm folded into conv ``node`` (``bn:``), in eval mode."""
        return conv2d_op.batch_norm(self, node.bn, y, conv2d_op.bn_eps(node))

    def eval_node(self, node: Node, env: dict) -> "torch.Tensor":
        """``node``'s output: its op's float32 torch reference (``ttmodels/ops/<op>/``)."""
        try:
            d = ops.get(node.op)
        except KeyError:
            raise Error(f"layer '{node.name}': op '{node.op}' has no reference implementation") \
                from None
        return d.reference(self, node, env)


# ---------------------------------------------------------------------------------------------
# comparison helpers
# ---------------------------------------------------------------------------------------------

def pcc(a: "torch.Tensor", b: "torch.Tensor") -> float:
    """Pearson correlation of two tensors (1.0 for two identical constant tensors)."""
    import torch
    x = a.detach().double().flatten()
    y = b.detach().double().flatten()
    if x.shape != y.shape:
        raise Error(f"pcc of tensors with {x.numel()} and {y.numel()} elements")
    if torch.equal(x, y):
        return 1.0
    x, y = x - x.mean(), y - y.mean()
    den = float(x.norm() * y.norm())
    return float((x * y).sum()) / den if den > 0 else 0.0


def compare(reference: Mapping[str, "torch.Tensor"], other: Mapping[str, "torch.Tensor"]
            ) -> dict[str, tuple[float, float]]:
    """Per tensor present in both: (pcc, max abs diff), in ``reference`` order."""
    out = {}
    for k, r in reference.items():
        if k in other:
            o = other[k].detach().to(r.dtype)
            if o.shape != r.shape:
                raise Error(f"compare '{k}': shapes {list(r.shape)} and {list(o.shape)} differ")
            out[k] = (pcc(r, o), float((r - o).abs().max()) if r.numel() else 0.0)
    return out
