"""The layers' host parameters: BatchNorm folded, torch layouts (``prepare_parameters``)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from .. import ops
from ..language.graph import Graph
from .reference import constant_tensor, expected_parameters, node_parameters
from .keys import check_state_dict

if TYPE_CHECKING:  # pragma: no cover
    import torch


# ---------------------------------------------------------------------------------------------
# BatchNorm folding, prepared parameters
# ---------------------------------------------------------------------------------------------

def prepared_shapes(graph: Graph) -> dict[str, dict[str, tuple[int, ...]]]:
    """The shapes ``prepare_parameters`` produces: node/constant name -> {param: shape}."""
    out: dict[str, dict[str, tuple[int, ...]]] = {}
    exp = expected_parameters(graph)
    for node in graph.nodes:
        shapes = ops.get(node.op).prepared_shapes
        if shapes is not None:
            out[node.name] = shapes(node, exp)
    for c in graph.constants.values():
        out[c.name] = {"value": tuple(int(s) for s in c.shape)}
    return out


def prepare_parameters(graph: Graph, state_dict: Mapping[str, "torch.Tensor"], *,
                       consume: bool = False) -> dict[str, dict[str, "torch.Tensor"]]:
    """What the layer builder consumes: node name -> float32 tensors, torch layouts.

    conv2d: ``weight`` [O, I/groups, kh, kw] and ``bias`` [O] with any BatchNorm folded in
    (``bias`` present iff the conv has a bias or a BN); linear: ``weight`` [out, in], ``bias``
    [out] if it has one; every constant: ``value`` of its shape. ``state_dict`` uses spec keys
    (``load_state_dict``'s result) and is not modified -- unless ``consume``: a state dict the
    caller owns (``load_state_dict``'s) is emptied of the conv/linear/BN entries as they are
    folded, so that the weights are never held three times over (source, copy, folded); its
    tensors are used without copying when they are fresh copies (``owned``, the default), and
    copied otherwise (``load_state_dict(..., copy=False)`` hands the source's own tensors over).
    """
    import torch
    check_state_dict(graph, state_dict, strict=False)
    if consume:
        uses: dict[str, int] = {}
        for node in graph.nodes:
            for k in node_parameters(node):
                uses[k] = uses.get(k, 0) + 1

        def take(k):                                # the last reader of a (shared) key pops it
            uses[k] -= 1
            return state_dict.pop(k) if uses[k] == 0 else state_dict[k]  # type: ignore[attr-defined]
        owned = getattr(state_dict, "owned", True)
        f32 = lambda t: t.detach().to(dtype=torch.float32, copy=not owned).contiguous()  # noqa: E731
    else:
        take = state_dict.__getitem__
        f32 = lambda t: t.detach().to(dtype=torch.float32, copy=True).contiguous()  # noqa: E731
    out: dict[str, dict[str, torch.Tensor]] = {}
    for node in graph.nodes:
        prepare = ops.get(node.op).prepare       # the op's module: BN folded, torch layouts
        if prepare is not None:
            out[node.name] = prepare(node, take, f32, state_dict)
    for name, c in graph.constants.items():
        out[name] = {"value": constant_tensor(c, state_dict)}
    return out
