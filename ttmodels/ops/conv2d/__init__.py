"""conv2d: dense, grouped and depthwise convolution, an optional folded BatchNorm (``bn:``) and a
fused activation; 1x1 convs may run as ``ttnn.linear`` (``lowering:``, docs/lowering.md)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...language.graph import Attrs, Node, TensorShape, op_attrs
from ...planning.layout import MemSpec
from ...planning.plan_config import PlanConfig, SliceConfig, optional
from ..base import (Field, OpDef, Parsed, activation, pads, prepare_weight_bias,
                   register, window_out)
from .rules import _c_conv, _out_conv

BN_EPS = 1e-5
BN_PARAMS = ("weight", "bias", "running_mean", "running_var")
LOWERINGS = ("conv2d", "linear", "auto")



@op_attrs
class Conv2dAttrs(Attrs):
    """conv2d's attrs (``parse``): channels, window, groups, bias, the fused activation, the
    lowering, and the eps of a BatchNorm folded into it (only with ``bn:``)."""
    in_channels: int
    out_channels: int
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int, int, int]          # top, bottom, left, right
    dilation: tuple[int, int]
    groups: int
    bias: bool
    activation: str | None
    lowering: str
    bn_eps: float | None


def fold_batchnorm(conv_w, conv_b, bn_w, bn_b, mean, var, eps: float = BN_EPS):
    """Fold eval-mode BatchNorm into the preceding conv: returns float32 (weight, bias) with
    ``conv(x, w, b) == bn(conv(x, conv_w, conv_b))``. Computed in float64 (inputs are not modified).
    ``conv_b`` may be None."""
    import torch
    d = torch.float64
    w = conv_w.detach().to(d)
    scale = bn_w.detach().to(d) / torch.sqrt(var.detach().to(d) + eps)
    b0 = conv_b.detach().to(d) if conv_b is not None else torch.zeros(w.shape[0], dtype=d)
    w_f = w * scale.view(-1, *([1] * (w.dim() - 1)))
    b_f = (b0 - mean.detach().to(d)) * scale + bn_b.detach().to(d)
    return w_f.to(torch.float32).contiguous(), b_f.to(torch.float32).contiguous()


def batchnorm_scale_shift(bn_w, bn_b, mean, var, eps: float = BN_EPS) -> dict:
    """Eval BatchNorm as ``x * scale + shift`` per channel (a standalone batch_norm layer),
    computed in float64 like ``fold_batchnorm``."""
    import torch
    d = torch.float64
    scale = bn_w.detach().to(d) / torch.sqrt(var.detach().to(d) + eps)
    shift = bn_b.detach().to(d) - mean.detach().to(d) * scale
    return {"scale": scale.to(torch.float32).contiguous(),
            "shift": shift.to(torch.float32).contiguous()}


def check_channels(f, s_in: TensorShape, out: int, groups: int, src: str) -> None:
    """A conv's channels (conv2d, conv_transpose2d): ``in_channels``, when given, is the
    input's; ``groups`` divides both sides."""
    if "in_channels" in f.src and f.int("in_channels") != s_in.c:
        raise f.fail(f"channel mismatch: in_channels is {f.int('in_channels')} but the "
                     f"input '{src}' has {s_in.c} channels", "in_channels")
    if s_in.c % groups or out % groups:
        raise f.fail(f"groups={groups} must divide in channels ({s_in.c}) and out ({out})",
                     "groups")


def parse(x) -> Parsed:
    f, s_in = x.f, x.shape(0)
    out = f.int("out")
    k = f.pair("kernel")
    s = f.pair("stride", 1)
    p = f.pad4("padding", 0)
    d = f.pair("dilation", 1)
    g = f.int("groups", 1)
    check_channels(f, s_in, out, g, x.ins[0])
    oh = window_out(s_in.h, k[0], s[0], p[0], p[1], d[0], False)
    ow = window_out(s_in.w, k[1], s[1], p[2], p[3], d[1], False)
    if oh < 1 or ow < 1:
        raise f.fail(f"kernel {list(k)} (dilation {list(d)}) does not fit the padded input "
                     f"{s_in.h}x{s_in.w} of '{x.ins[0]}'", "kernel")
    lowering = f.choice("lowering", LOWERINGS, "conv2d")
    if lowering == "linear" and (k != (1, 1) or s != (1, 1) or any(p) or g != 1
                                 or d != (1, 1)):
        raise f.fail("lowering: linear needs a 1x1 conv with stride 1, no padding, "
                     "groups 1 and dilation 1", "lowering")
    attrs = dict(in_channels=s_in.c, out_channels=out, kernel=k, stride=s, padding=p,
                 dilation=d, groups=g, bias=f.bool("bias", False),
                 activation=f.act(fused_in="conv"), lowering=lowering)
    bn, eps = x.bn("bn")
    if bn:
        attrs["bn_eps"] = eps
    return Parsed(attrs, TensorShape(s_in.n, oh, ow, out), weights=x.key("weights"), bn=bn)


def params(node: Node) -> dict[str, tuple[int, ...]]:
    a, p = node.attrs, need_prefix(node)
    kh, kw = a["kernel"]
    o = int(a["out_channels"])
    out = {f"{p}.weight": (o, int(a["in_channels"]) // int(a.get("groups", 1)), int(kh), int(kw))}
    if a.get("bias"):
        out[f"{p}.bias"] = (o,)
    if node.bn:
        for s in BN_PARAMS:
            out[f"{node.bn}.{s}"] = (o,)
    return out


def need_prefix(node: Node) -> str:
    if not node.weights:
        from ...errors import WeightsError
        raise WeightsError(f"layer '{node.name}' ({node.op}) has no weights key prefix in the "
                           "graph")
    return node.weights


def conv_raw(model, node: Node, x):
    """The convolution alone (bias included, BN and activation not)."""
    import torch.nn.functional as F
    a, p = node.attrs, node.weights
    w = model.params[f"{p}.weight"]
    b = model.params.get(f"{p}.bias") if a.get("bias") else None
    t, bo, l, r = pads(a.get("padding", (0, 0, 0, 0)))
    if t == bo and l == r:
        pad = (t, l)
    else:
        x, pad = F.pad(x, (l, r, t, bo)), (0, 0)
    return F.conv2d(x, w, b, stride=tuple(a.get("stride", (1, 1))), padding=pad,
                    dilation=tuple(a.get("dilation", (1, 1))), groups=int(a.get("groups", 1)))


def bn_eps(node: Node) -> float:
    """The eps of the BatchNorm a node reads: conv2d's ``bn: {eps:}`` (``attrs["bn_eps"]``), a
    standalone batch_norm's ``eps`` (``attrs["eps"]``); BN_EPS (torch's default) otherwise."""
    return float(node.attrs.get("bn_eps" if node.op == "conv2d" else "eps", BN_EPS))


def batch_norm(model, prefix: str, y, eps: float):
    """Eval-mode BatchNorm2d with the parameters under ``prefix`` (torch's own, not folded)."""
    import torch.nn.functional as F
    return F.batch_norm(y, model.params[f"{prefix}.running_mean"],
                        model.params[f"{prefix}.running_var"], model.params[f"{prefix}.weight"],
                        model.params[f"{prefix}.bias"], training=False, eps=eps)


def reference(model, node: Node, env):
    y = conv_raw(model, node, model.operand(node.inputs[0], env))
    if node.bn:
        y = batch_norm(model, node.bn, y, bn_eps(node))
    return activation(y, node.attrs.get("activation"), node)


def init_random(node: Node, r) -> dict:
    """He-normal weights (std sqrt(2 / fan_in)), small biases; a BN's weight ~ U(0.5, 1.0)
    (U(0.01, 0.1) on residual-branch ends), bias ~ N(0, 0.1) (+ the pre-activation shift),
    identity statistics until calibration (``weights.random_state_dict``)."""
    import math

    import torch
    p, a, g = node.weights, node.attrs, r.g
    sd = {}
    o, i_g, kh, kw = r.expected[f"{p}.weight"]
    sd[f"{p}.weight"] = torch.randn(o, i_g, kh, kw, generator=g) * math.sqrt(2.0 / (i_g * kh * kw))
    if a.get("bias"):
        sd[f"{p}.bias"] = (torch.rand(o, generator=g) - 0.5) * 0.02
    if node.bn:
        # Trained ResNets end each residual branch with a small BN scale (zero-init
        # residual, weight decay); random nets without that are chaotic: any rounding
        # is amplified exponentially with depth, unlike real weights on real hardware.
        lo, hi = (0.01, 0.1) if node.name in r.residual_ends else (0.5, 1.0)
        sd[f"{node.bn}.weight"] = lo + (hi - lo) * torch.rand(o, generator=g)
        sd[f"{node.bn}.bias"] = 0.1 * torch.randn(o, generator=g) + r.bn_shift(node)
        sd[f"{node.bn}.running_mean"] = torch.zeros(o)
        sd[f"{node.bn}.running_var"] = torch.ones(o)
    return sd


def calibrate(model, node: Node, env):
    """On the calibration batch: a BN takes the conv's output statistics (its output then has
    per-channel mean = bias, std = weight); a conv without BN is rescaled to unit output RMS."""
    x = model.operand(node.inputs[0], env)
    y = conv_raw(model, node, x)
    if node.bn:
        model.params[f"{node.bn}.running_mean"] = y.mean(dim=(0, 2, 3))
        model.params[f"{node.bn}.running_var"] = y.var(dim=(0, 2, 3), unbiased=False)
        y = batch_norm(model, node.bn, y, bn_eps(node))
    else:
        y = _rescale_to_unit_rms(model, node, y)
    return activation(y, node.attrs.get("activation"), node)


def _rescale_to_unit_rms(model, node: Node, y):
    p = node.weights
    b = model.params.get(f"{p}.bias") if node.attrs.get("bias") else None
    y0 = y - b.view(1, -1, 1, 1) if b is not None else y
    rms = float(y0.pow(2).mean().sqrt())
    if rms <= 0:
        return y
    model.params[f"{p}.weight"] = model.params[f"{p}.weight"] / rms
    return y0 / rms + (b.view(1, -1, 1, 1) if b is not None else 0)


def prepare(node: Node, take, f32, state_dict) -> dict:
    """weight [O, I/groups, kh, kw] and bias [O], any BatchNorm folded in (bias present iff the
    conv has a bias or a BN)."""
    if not node.bn:
        return prepare_weight_bias(node, take, f32)
    p, bn = node.weights, node.bn
    w = take(f"{p}.weight")
    b = take(f"{p}.bias") if node.attrs.get("bias") else None
    w2, b2 = fold_batchnorm(w, b, take(f"{bn}.weight"), take(f"{bn}.bias"),
                            take(f"{bn}.running_mean"), take(f"{bn}.running_var"),
                            bn_eps(node))
    del w
    return {"weight": w2, "bias": b2}


def prepared_shapes(node: Node, expected: dict) -> dict:
    d = {"weight": expected[f"{node.weights}.weight"]}
    if node.attrs.get("bias") or node.bn:
        d["bias"] = (d["weight"][0],)
    return d


@dataclass(frozen=True)
class Conv2dPlan(PlanConfig):
    """A planned conv2d: the ``Conv2dConfig`` decisions (shard layout, act_block_h, no reshard),
    its output format, the parallel config (cores, grid) and the input shards it reads; a
    DRAM-sliced conv's slices; a conv lowered to ``ttnn.linear`` its matmul program config."""
    # lowering: linear (matmul_solver.MatmulConfig.to_dict())
    lowering: str | None = optional()
    matmul: dict[str, Any] | None = optional()
    shard_layout: str | None = None
    act_block_h_override: int = 0
    reshard_if_not_optimal: bool = False
    override_sharding_config: bool = False
    output_layout: str | None = None
    dtype: str | None = None
    is_mm_conv: bool = False
    num_cores: int | None = None
    core_grid: tuple[int, int] | None = None
    input_memory: MemSpec | None = None
    memory_config: MemSpec | None = None
    weights_dtype: str | None = None
    # DRAM slicing (conv2d_DRAM)
    slice: SliceConfig | None = optional()
    output_hw: tuple[int, int] | None = optional()
    slice_input_memory: MemSpec | None = optional()
    slice_output_memory: MemSpec | None = optional()
    # further Conv2dConfig options, passed when set
    enable_act_double_buffer: bool | None = optional()
    enable_weights_double_buffer: bool | None = optional()
    full_inner_dim: bool | None = optional()
    act_block_w_div: int | None = optional()
    reallocate_halo_output: bool | None = optional()
    transpose_shards: bool | None = optional()
    # the conv frees its input once it has read it (TT's ResNet50); only where it is the
    # input's last reader (plan_alloc.fit)
    deallocate_activation: bool | None = optional()

    CONV2D_CONFIG_OPTIONS = ("enable_act_double_buffer", "enable_weights_double_buffer",
                             "full_inner_dim", "act_block_w_div", "reallocate_halo_output",
                             "transpose_shards")


register(OpDef(
    "conv2d", "conv",
    fields=(Field("out", "int"), Field("kernel", "pair"), Field("stride", "pair"),
            Field("padding", "pad4"), Field("dilation", "pair"), Field("groups", "int"),
            Field("bias", "bool"), Field("act", "act"), Field("bn", "bn"),
            Field("lowering", "choice"), Field("weights", "name"), Field("in_channels", "int")),
    attrs=Conv2dAttrs, arity=1, parse=parse, reference=reference, rules=_c_conv, output=_out_conv,
    sim_ops=("conv2d", "prepare_conv_weights", "prepare_conv_bias", "linear"),
    params=params, prepare=prepare, prepared_shapes=prepared_shapes, init_random=init_random,
    calibrate=calibrate,
    batch_norms=lambda n: (n.bn,) if n.bn else (), config=Conv2dPlan,
    follows_input="conv2d derives its output cores from its input's and its output channels "
                  "(conv2d_utils.cpp determine_output_parallel_config)",
    doc="convolution (dense, grouped, depthwise), BN folded, activation fused",
    attrs_doc="in_channels, out_channels, kernel (kh, kw), stride (sh, sw), padding (top, bottom, "
              "left, right), dilation (dh, dw), groups, bias (bool), activation (None | canonical "
              "act of ttmodels.ops.activations), lowering ('conv2d' | 'linear' | 'auto'), bn_eps (float, "
              "only with a bn)",
))
