"""Random weights with calibrated BatchNorm (``random_state_dict``) and the synthetic images they
are calibrated on.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from .. import ops
from ..language.graph import Graph
from .reference import ReferenceModel, expected_parameters

if TYPE_CHECKING:  # pragma: no cover
    import torch


IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
# Bump when random_state_dict's procedure changes: it is part of the prepared-weight cache key.
RANDOM_INIT_VERSION = 4


# ---------------------------------------------------------------------------------------------
# random weights with calibrated BatchNorm
# ---------------------------------------------------------------------------------------------

def synthetic_images(n: int, c: int, h: int, w: int, *, seed: int = 0) -> "torch.Tensor":
    """Smooth random images (noise at a few scales, values in [0, 1]) normalised like ImageNet."""
    import torch
    import torch.nn.functional as F
    g = torch.Generator().manual_seed(seed)
    x = torch.zeros(n, c, h, w)
    for cells, amp in ((2, 1.0), (6, 0.7), (24, 0.4), (max(h, w), 0.15)):
        ch, cw = max(1, min(cells, h)), max(1, min(cells, w))
        noise = torch.randn(n, c, ch, cw, generator=g)
        x += amp * F.interpolate(noise, size=(h, w), mode="bilinear", align_corners=False)
    x = (x - x.mean(dim=(1, 2, 3), keepdim=True)) / x.std(dim=(1, 2, 3), keepdim=True).clamp_min(1e-6)
    x = (0.45 + 0.25 * x + 0.1 * torch.randn(n, c, 1, 1, generator=g)).clamp(0.0, 1.0)
    if c == 3:
        mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
        std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    else:
        mean, std = torch.tensor(0.45), torch.tensor(0.226)
    return (x - mean) / std


def _residual_branch_ends(graph: Graph) -> set[str]:
    """Convs with BN (and no activation) feeding an activation + activation add: residual branch
    ends and projection shortcuts. They get small BN scales so sums stay O(1) along the trunk,
    as in trained ResNets (whose last-BN gammas are small)."""
    acts = set(graph.inputs) | {n.name for n in graph.nodes}
    ends = set()
    for n in graph.nodes:
        if n.op == "add" and all(i in acts for i in n.inputs):
            for i in n.inputs:
                if i in graph.inputs:
                    continue
                src = graph.node(i)
                if (src.op == "conv2d" and src.bn and not src.attrs.get("activation")
                        and not _is_projection(graph, src)):
                    ends.add(src.name)
    return ends


def _is_projection(graph: Graph, conv) -> bool:
    """A shortcut conv (reads the block's input directly, like torchvision's downsample.0) as
    opposed to the last conv of a residual branch: its input is not produced by a conv chain of the
    same block. Recognised by its input also feeding another conv (the branch's first conv)."""
    src = conv.inputs[0]
    return any(n.op == "conv2d" and n.name != conv.name for n in graph.consumers(src))


# A BatchNorm net at init is chaotic (its input-output sensitivity grows exponentially with
# depth; Yang et al. 2019, "A mean field theory of batch normalization"); trained nets are not.
# Deep chains without identity paths (MobileNet's expand -> depthwise -> project, EfficientNet's
# MBConv) amplify any rounding then, so their BNs before a ReLU6 / SiLU / ... get beta ~ 1: most
# units sit in the activation's near-linear part and the random net stays tame. ReLU ResNets keep
# beta ~ 0 (their small residual-branch gammas suffice; their published PCCs use that init).
_PRE_ACT_BN_SHIFT = 1.0


def _bn_shift(node, graph: Graph | None = None) -> float:
    act = node.attrs.get("activation")
    if act is None and graph is not None:
        # the activation as a layer of its own right after (e.g. hardswish, which fuses nowhere)
        users = graph.consumers(node.name)
        if len(users) == 1 and users[0].op in activation_names():
            act = users[0].op
    if act == "relu" and graph is not None and _in_depthwise_chain(node, graph):
        # MobileNet-style chains with ReLU (MNASNet): as tame as the ReLU6 ones only when
        # shifted too; ResNets (no depthwise convs) keep beta ~ 0
        return _PRE_ACT_BN_SHIFT
    return _PRE_ACT_BN_SHIFT if act is not None and act != "relu" else 0.0


def _is_depthwise(node) -> bool:
    a = node.attrs
    return node.op == "conv2d" and a.get("groups", 1) > 1 and \
        a.get("groups") == a.get("out_channels") == a.get("in_channels")


def _in_depthwise_chain(node, graph: Graph) -> bool:
    """A depthwise conv, or a conv feeding one (an inverted residual's expansion)."""
    return _is_depthwise(node) or any(_is_depthwise(c) for c in graph.consumers(node.name))


def activation_names() -> tuple[str, ...]:
    from ..ops.activations import NAMES
    return NAMES


def calibration_batch_size(graph: Graph) -> int:
    """Enough synthetic images that deep BN statistics generalise to held-out images (8 at
    224x224; 4..32, scaled inversely with the input's pixel count to bound the cost)."""
    pixels = max((s.h * s.w for s in graph.inputs.values()), default=224 * 224)
    return max(4, min(32, -(-8 * 224 * 224 // max(1, pixels))))


def random_state_dict(graph: Graph, *, seed: int = 0, calibrate: bool = True,
                      calibration_batch: int | None = None,
                      bn_shift: Mapping[str, float] | None = None) -> dict[str, "torch.Tensor"]:
    """Seeded random parameters with realistic activation scales.

    1. Convs: He-normal (std sqrt(2 / fan_in)), small biases. BatchNorm: weight ~ U(0.5, 1.0)
       (U(0.01, 0.1) on residual-branch ends, see ``_residual_branch_ends``), bias ~ N(0, 0.1).
       Linear: N(0, 1/in). Weight-loaded constants: U(0.5, 1.5) if multiplied, else N(0, 0.1).
    2. Calibration (``calibrate``): ``calibration_batch`` (default ``calibration_batch_size``)
       synthetic images (``synthetic_images``, seeded with ``seed``)
       run through the ReferenceModel in topological order. Before each conv+BN, its raw output on
       the batch sets the BN's running_mean / running_var (biased) to the batch statistics, so the
       BN output has per-channel mean = bias and std = weight. Convs without BN and linears are
       rescaled so their output RMS is 1 (logits O(1)). Later layers see the calibrated earlier ones.

    ``bn_shift`` ``{node-name prefix: shift}`` replaces ``_bn_shift`` for the BNs of nodes under
    a prefix (the longest wins): e.g. ``{"decoder.": 1.0}`` for a plain conv-BN-ReLU chain, which
    at beta ~ 0 is as chaotic as any deep random BN net (a UNet decoder), unlike trained ones.
    """
    import torch
    g = torch.Generator().manual_seed(seed)
    expected = expected_parameters(graph)
    sd: dict[str, torch.Tensor] = {}
    ends = _residual_branch_ends(graph)
    prefixes = sorted(bn_shift or (), key=len, reverse=True)

    def shift(node):        # bn_shift's prefixes first, else the default rule
        p = next((p for p in prefixes if node.name.startswith(p)), None)
        return _bn_shift(node, graph) if p is None else float(bn_shift[p])
    init = RandomInit(g, expected, ends, shift)
    for node in graph.nodes:
        fn = ops.get(node.op).init_random        # the op's module: its parameters' distribution
        if fn is not None:
            sd.update(fn(node, init))
    for c in graph.constants.values():
        if c.weights and c.weights not in sd:
            shape = tuple(int(s) for s in c.shape)
            if any(n.op == "multiply" for n in graph.consumers(c.name)):
                sd[c.weights] = 0.5 + torch.rand(shape, generator=g)
            else:
                sd[c.weights] = 0.1 * torch.randn(shape, generator=g)
    if calibrate and graph.nodes:
        _calibrate(graph, sd, seed=seed, batch=calibration_batch or calibration_batch_size(graph))
    return sd


@dataclass(frozen=True)
class RandomInit:
    """What an op's ``init_random`` (``ttmodels/ops/<op>/``) draws with: the seeded generator
    (ops draw in graph order), the expected key shapes, the convs that end a residual branch
    (``_residual_branch_ends``: a small BN scale) and the BN bias shift before a non-relu
    activation (``_bn_shift``)."""
    g: Any
    expected: Mapping[str, tuple[int, ...]]
    residual_ends: set
    bn_shift: Any


def _calibrate(graph: Graph, sd: dict, *, seed: int, batch: int) -> None:
    import torch
    model = ReferenceModel(graph, sd)
    inputs = {name: synthetic_images(batch, shape.c, shape.h, shape.w, seed=seed + i)
              for i, (name, shape) in enumerate(graph.inputs.items())}
    last_use: dict[str, int] = {}
    for idx, n in enumerate(graph.nodes):
        for i in n.inputs:
            last_use[i] = idx
    keep = set(graph.outputs)

    env: dict[str, torch.Tensor] = dict(inputs)
    with torch.no_grad():
        for idx, node in enumerate(graph.nodes):
            # the op's module sets its BN statistics / rescales its weights on this batch
            fn = ops.get(node.op).calibrate or type(model).eval_node
            model.bind(node, fn(model, node, env), env)
            for i in node.inputs:
                if last_use.get(i) == idx and i not in keep and i in env:
                    del env[i]
    for k in sd:
        sd[k] = model.params[k].clone()
