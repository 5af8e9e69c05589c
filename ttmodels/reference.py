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

from . import activations
from .errors import Error, WeightsError
from .graph import Constant, Graph, Node
from .ops import BINARY, OPS, UNARY, unary_activation

if TYPE_CHECKING:  # pragma: no cover
    import torch

BN_EPS = 1e-5
BN_PARAMS = ("weight", "bias", "running_mean", "running_var")
# Present in every torch BatchNorm state dict; accepted and ignored (eval mode never reads it).
BN_IGNORED = ("num_batches_tracked",)


# ---------------------------------------------------------------------------------------------
# parameter keys
# ---------------------------------------------------------------------------------------------

def _need_prefix(node: Node) -> str:
    if not node.weights:
        raise WeightsError(f"layer '{node.name}' ({node.op}) has no weights key prefix in the graph")
    return node.weights


def node_parameters(node: Node) -> dict[str, tuple[int, ...]]:
    """State-dict keys and shapes a node reads (empty for parameter-free ops)."""
    a = node.attrs
    out: dict[str, tuple[int, ...]] = {}
    if node.op == "conv2d":
        p = _need_prefix(node)
        kh, kw = a["kernel"]
        o = int(a["out_channels"])
        out[f"{p}.weight"] = (o, int(a["in_channels"]) // int(a.get("groups", 1)), int(kh), int(kw))
        if a.get("bias"):
            out[f"{p}.bias"] = (o,)
        if node.bn:
            for s in BN_PARAMS:
                out[f"{node.bn}.{s}"] = (o,)
    elif node.op == "conv_transpose2d":
        # torch.nn.ConvTranspose2d: weight [in, out / groups, kh, kw]
        p = _need_prefix(node)
        kh, kw = a["kernel"]
        o = int(a["out_channels"])
        out[f"{p}.weight"] = (int(a["in_channels"]), o // int(a.get("groups", 1)), int(kh), int(kw))
        if a.get("bias"):
            out[f"{p}.bias"] = (o,)
    elif node.op == "linear":
        p = _need_prefix(node)
        out[f"{p}.weight"] = (int(a["out_features"]), int(a["in_features"]))
        if a.get("bias"):
            out[f"{p}.bias"] = (int(a["out_features"]),)
    elif node.op == "batch_norm":
        p = _need_prefix(node)
        for s in BN_PARAMS:
            out[f"{p}.{s}"] = (int(node.shape.c),)
    return out


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
    bns = [n.bn for n in graph.nodes if n.op == "conv2d" and n.bn]
    bns += [n.weights for n in graph.nodes if n.op == "batch_norm" and n.weights]
    return {f"{b}.{s}" for b in bns for s in BN_IGNORED}


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


def _pads(padding) -> tuple[int, int, int, int]:
    t, b, l, r = (int(v) for v in padding)
    return t, b, l, r


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
                y = self.eval_node(node, env)
                if node.outputs:           # split: one tensor per named output
                    for t, (_, lo, hi) in zip(node.outputs, node.attrs["sections"]):
                        env[t] = y[:, lo:hi]
                    continue
                want = node.shape.nchw[1:]
                if tuple(y.shape[1:]) != want:
                    raise Error(f"layer '{node.name}' ({node.op}): reference output "
                                f"{list(y.shape[1:])} (CHW) != graph shape {list(want)}")
                env[node.name] = y
        if return_all:
            return env
        return {o: env[o] for o in self.graph.outputs}

    def operand(self, name: str, env: dict, like=None) -> "torch.Tensor":
        if name in env:
            return env[name]
        if name in self.constants:
            t = self.constants[name]
            return _broadcast_const(t, like, name) if like is not None else t
        raise Error(f"unknown tensor '{name}'")

    def conv_raw(self, node: Node, x: "torch.Tensor") -> "torch.Tensor":
        """The convolution alone (bias included, BN and activation not)."""
        import torch.nn.functional as F
        a, p = node.attrs, node.weights
        w = self.params[f"{p}.weight"]
        b = self.params.get(f"{p}.bias") if a.get("bias") else None
        if node.op == "conv_transpose2d":
            t, _, l, _ = a["padding"]
            return F.conv_transpose2d(x, w, b, stride=tuple(a["stride"]), padding=(t, l),
                                      output_padding=tuple(a["output_padding"]),
                                      groups=int(a["groups"]), dilation=tuple(a["dilation"]))
        t, bo, l, r = _pads(a.get("padding", (0, 0, 0, 0)))
        if t == bo and l == r:
            pad = (t, l)
        else:
            x, pad = F.pad(x, (l, r, t, bo)), (0, 0)
        return F.conv2d(x, w, b, stride=tuple(a.get("stride", (1, 1))), padding=pad,
                        dilation=tuple(a.get("dilation", (1, 1))), groups=int(a.get("groups", 1)))

    def batch_norm(self, node: Node, y: "torch.Tensor") -> "torch.Tensor":
        import torch.nn.functional as F
        bn = node.bn
        return F.batch_norm(y, self.params[f"{bn}.running_mean"], self.params[f"{bn}.running_var"],
                            self.params[f"{bn}.weight"], self.params[f"{bn}.bias"],
                            training=False, eps=BN_EPS)

    def eval_node(self, node: Node, env: dict) -> "torch.Tensor":
        import torch
        import torch.nn.functional as F
        op, a = node.op, node.attrs
        if op not in _KNOWN_OPS:
            raise Error(f"layer '{node.name}': op '{op}' has no reference implementation")
        if op in BINARY:
            if len(node.inputs) != 2:
                raise Error(f"layer '{node.name}': {op} takes 2 inputs, got {len(node.inputs)}")
            n0, n1 = node.inputs
            act = n0 if n0 in env else n1
            if act not in env:
                raise Error(f"layer '{node.name}': both operands are constants")
            x0 = self.operand(n0, env, like=env[act])
            x1 = self.operand(n1, env, like=env[act])
            y = x0 + x1 if op == "add" else (x0 * x1 if op == "multiply" else x0 - x1)
            return _activation(y, a.get("activation"), node)
        if op == "concat":
            return torch.cat([self.operand(n, env) for n in node.inputs], dim=1)
        x = self.operand(node.inputs[0], env)
        if op == "conv_transpose2d":
            return _activation(self.conv_raw(node, x), a.get("activation"), node)
        if op == "split":
            return x              # run() hands out the named sections
        if op == "conv2d":
            y = self.conv_raw(node, x)
            if node.bn:
                y = self.batch_norm(node, y)
            return _activation(y, a.get("activation"), node)
        if op in UNARY:
            return _activation(x, unary_activation(op, a), node)
        if op == "batch_norm":
            bn = node.weights
            y = F.batch_norm(x, self.params[f"{bn}.running_mean"], self.params[f"{bn}.running_var"],
                             self.params[f"{bn}.weight"], self.params[f"{bn}.bias"],
                             training=False, eps=BN_EPS)
            return _activation(y, a.get("activation"), node)
        if op == "slice":
            return x[:, a["start"]:a["stop"]]
        if op == "adaptive_avg_pool2d":
            return F.adaptive_avg_pool2d(x, tuple(a["size"]))
        if op in ("max_pool2d", "avg_pool2d"):
            y = _max_pool(x, a) if op == "max_pool2d" else _avg_pool(x, a)
            # With explicit padding, ceil_mode may add a window that starts in the right/bottom
            # padding, which torch (and the graph's shape inference) drops: crop it.
            return y[:, :, :node.shape.h, :node.shape.w]
        if op == "global_avg_pool":
            return x.mean(dim=(2, 3), keepdim=True)
        if op == "linear":
            p = node.weights
            w = self.params[f"{p}.weight"]
            b = self.params.get(f"{p}.bias") if a.get("bias") else None
            y = F.linear(x.flatten(1), w, b)
            return _activation(y, a.get("activation"), node)[:, :, None, None]
        if op == "upsample":
            mode = a.get("mode", "nearest")
            size = (node.shape.h, node.shape.w)
            if mode == "nearest":
                return F.interpolate(x, size=size, mode="nearest")
            if mode == "bilinear":
                return F.interpolate(x, size=size, mode="bilinear",
                                     align_corners=bool(a.get("align_corners", False)))
            raise Error(f"layer '{node.name}': upsample mode '{mode}' is not supported")
        if op == "pad":
            t, b, l, r = _pads(a["padding"])
            return F.pad(x, (l, r, t, b), value=float(a.get("value", 0.0)))
        raise AssertionError(op)  # pragma: no cover


_KNOWN_OPS = frozenset(OPS)


def _activation(y, act, node: Node):
    try:
        return activations.torch_apply(act, y)
    except ValueError as e:
        raise Error(f"layer '{node.name}': {e}") from None


def _max_pool(x, a):
    import torch.nn.functional as F
    t, b, l, r = _pads(a.get("padding", (0, 0, 0, 0)))
    kw = dict(kernel_size=tuple(a["kernel"]), stride=tuple(a.get("stride") or a["kernel"]),
              dilation=tuple(a.get("dilation", (1, 1))), ceil_mode=bool(a.get("ceil_mode", False)))
    kh, kw_ = ((k - 1) * d + 1 for k, d in zip(kw["kernel_size"], kw["dilation"]))
    if t == b and l == r and t <= kh // 2 and l <= kw_ // 2:
        return F.max_pool2d(x, padding=(t, l), **kw)
    # Asymmetric: pad with -inf so padded cells never win, then pool without padding.
    return F.max_pool2d(F.pad(x, (l, r, t, b), value=float("-inf")), padding=0, **kw)


def _avg_pool(x, a):
    import torch
    import torch.nn.functional as F
    t, b, l, r = _pads(a.get("padding", (0, 0, 0, 0)))
    include = bool(a.get("count_include_pad", True))
    kw = dict(kernel_size=tuple(a["kernel"]), stride=tuple(a.get("stride") or a["kernel"]),
              ceil_mode=bool(a.get("ceil_mode", False)))
    kh, kw_ = kw["kernel_size"]
    if t == b and l == r and t <= kh // 2 and l <= kw_ // 2:
        return F.avg_pool2d(x, padding=(t, l), count_include_pad=include, **kw)
    xp = F.pad(x, (l, r, t, b))
    y = F.avg_pool2d(xp, padding=0, count_include_pad=True, **kw)
    if include:
        return y
    # Divide by the number of real (unpadded) cells: both pools share torch's divisor, so the
    # ratio is sum(valid) / count(valid).
    ones = F.pad(torch.ones_like(x[:1, :1]), (l, r, t, b))
    return y / F.avg_pool2d(ones, padding=0, count_include_pad=True, **kw)


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
