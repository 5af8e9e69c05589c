"""Conv weights kept in oneDNN's own blocked layout, so that torch does not reorder them per call.

``F.conv2d`` on channels_last float32 tensors runs a oneDNN convolution (torch's mkldnn backend)
and, in eval mode, first reorders the dense weight into the blocked layout the chosen primitive
wants (e.g. ``Acdb48a``) on every call: for a 1x1 stride-2 conv of ResNet50's layer4 the reorder
costs twice the convolution itself. ``pack`` does that reorder once (torch's
``mkldnn_reorder_conv2d_weight``, what ``torch.utils.mkldnn`` and inductor's weight prepacking
use) and ``conv`` runs ``mkldnn::_convolution_pointwise`` on the packed weight.

Only for the convs ``F.conv2d`` itself would run on oneDNN (``used_by_torch``). Same values, bit
for bit: the primitive is chosen from the problem (shapes, strides, formats of
source and destination, the weight format left to oneDNN) exactly as ``F.conv2d`` chooses it; a
packed weight only skips the per-call reorder (ideep reorders it again if the primitive wanted
another blocking). ``tests/test_sim_bits.py`` pins this, and ``tests/test_sim.py`` compares the
two paths directly.

Private torch APIs: when they are missing (a torch without oneDNN, or a later torch that renamed
them) ``available()`` is False and the sim calls ``F.conv2d`` on the dense weight instead.
"""
from __future__ import annotations

import logging

import torch

_log = logging.getLogger(__name__)
_state: dict[str, bool] = {}


def available() -> bool:
    ok = _state.get("ok")
    if ok is None:
        ok = _state["ok"] = bool(
            torch.backends.mkldnn.is_available()
            and hasattr(torch._C._nn, "mkldnn_reorder_conv2d_weight")
            and hasattr(torch.ops.mkldnn, "_convolution_pointwise")
            and hasattr(torch._C, "_select_conv_backend"))
    return ok


_BACKEND: dict[tuple, bool] = {}


def used_by_torch(input_shape, weight_shape, stride, padding, dilation, groups: int) -> bool:
    """Whether ``F.conv2d`` would run this conv (channels_last float32 operands, torch's current
    thread count) on oneDNN: torch sends small problems elsewhere (e.g. a batch-1 3x3 conv on
    fewer than 20480 input values, or a 1x1 stride-1 conv on one thread, runs as Slow2d,
    ``torch._C._select_conv_backend``), and a packed weight would change their bits. Remembered
    per problem and thread count."""
    if not available():
        return False
    key = (tuple(input_shape), tuple(weight_shape), tuple(stride), tuple(padding), tuple(dilation),
           int(groups), torch.get_num_threads())
    hit = _BACKEND.get(key)
    if hit is None:
        cl = torch.channels_last
        try:
            backend = torch._C._select_conv_backend(
                torch.empty(key[0]).contiguous(memory_format=cl), torch.empty(key[1]).contiguous(memory_format=cl),
                None, list(stride), list(padding), list(dilation), False, [0] * len(stride), int(groups))
            hit = backend == torch._C._ConvBackend.Mkldnn
        except (RuntimeError, AttributeError, TypeError) as e:
            _disable(e)
            hit = False
        if len(_BACKEND) > 4096:
            _BACKEND.clear()
        _BACKEND[key] = hit
    return hit


def _disable(e: Exception) -> None:
    _log.debug("oneDNN weight packing disabled (%s: %s); using F.conv2d", type(e).__name__, e)
    _state["ok"] = False


def pack(weight, stride, padding, dilation, groups: int, input_shape):
    """``(packed, None)``: ``weight`` (dense OIHW float32, or a callable returning it) in the
    blocked layout oneDNN's primitive for this conv reads (an opaque ``torch._mkldnn`` tensor);
    ``(None, dense)`` when packing is unavailable or fails (the dense weight handed back). Given a
    callable whose result nobody else holds, the dense tensor is freed as soon as its plain oneDNN
    copy exists (one copy fewer alive while the weight is reordered)."""
    dense = weight() if callable(weight) else weight
    del weight
    if not available():
        return None, dense
    try:
        plain = dense.to_mkldnn()
    except (RuntimeError, AttributeError, TypeError) as e:
        _disable(e)
        return None, dense
    del dense
    try:
        return torch._C._nn.mkldnn_reorder_conv2d_weight(
            plain, list(padding), list(stride), list(dilation), int(groups),
            [int(v) for v in input_shape]), None
    except (RuntimeError, AttributeError, TypeError) as e:
        _disable(e)
        return None, plain.to_dense().contiguous(memory_format=torch.channels_last)


def unpack(packed: torch.Tensor) -> torch.Tensor:
    """The dense OIHW float32 values of a packed weight (channels_last strides, as the sim's
    dense conv weights have)."""
    return packed.to_dense().contiguous(memory_format=torch.channels_last)


def conv(x: torch.Tensor, packed: torch.Tensor, bias, stride, padding, dilation, groups: int) -> torch.Tensor:
    """``F.conv2d(x, unpack(packed), bias, ...)`` without the per-call weight reorder; ``x`` NCHW
    with channels_last strides; the result has channels_last strides too."""
    return torch.ops.mkldnn._convolution_pointwise(x, packed, bias, list(padding), list(stride),
                                                   list(dilation), int(groups), "none", [], "")


def nbytes(packed: torch.Tensor) -> int:
    """Bytes of a packed weight's values (blocked layouts may pad a little beyond this)."""
    return packed.numel() * packed.element_size()
