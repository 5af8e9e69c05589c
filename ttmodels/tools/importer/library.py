"""The library's blocks the importer uses where a module class matches one (``LIBRARY_BLOCKS``)."""
from __future__ import annotations

from .intermediate import Layer, _MissingT


_REQUIRED = _MissingT()


def _eps(lay: Layer) -> float:
    return lay.fields["bn"]["eps"]


def _lib_basic(L):
    c1, c2 = L["conv1"], L["conv2"]
    if set(L) - {"conv1", "conv2", "downsample.0", "relu"}:
        return None
    return {"planes": c1.fields["out"], "stride": c1.fields["stride"],
            "downsample": "downsample.0" in L, "bn_eps": _eps(c1)}


def _lib_bottleneck(L):
    c1, c2, c3 = L["conv1"], L["conv2"], L["conv3"]
    if set(L) - {"conv1", "conv2", "conv3", "downsample.0", "relu"}:
        return None
    planes, groups = c3.fields["out"] // 4, c2.fields["groups"]
    return {"planes": planes, "stride": c2.fields["stride"], "downsample": "downsample.0" in L,
            "groups": groups, "width_per_group": c1.fields["out"] // groups * 64 // planes,
            "bn_eps": _eps(c1)}


def _lib_inverted_residual(L):
    first = L["conv.0.0"]
    expand = "conv.1.0" in L
    dw = L["conv.1.0"] if expand else first
    proj = L["conv.2"] if expand else L["conv.1"]
    inp = first.in_channels
    return {"inp": inp, "out": proj.fields["out"], "stride": dw.fields["stride"],
            "expand": dw.fields["out"] // inp if expand else 1, "bn_eps": _eps(first)}


#: module class -> (library block, its parameters' defaults, reader of an instance's params from
#: its layers by relative name). Used only when the blocked spec then still expands to exactly
#: the traced layers (checked); otherwise the importer's own block stands.
LIBRARY_BLOCKS: dict[str, tuple] = {
    "torchvision.models.resnet.BasicBlock": (
        "ttmodels/resnet/basic_block",
        {"planes": _REQUIRED, "stride": 1, "downsample": False, "bn_eps": 1e-5}, _lib_basic),
    "torchvision.models.resnet.Bottleneck": (
        "ttmodels/resnet/bottleneck",
        {"planes": _REQUIRED, "stride": 1, "downsample": False, "groups": 1,
         "width_per_group": 64, "bn_eps": 1e-5}, _lib_bottleneck),
    "torchvision.models.mobilenetv2.InvertedResidual": (
        "ttmodels/mobilenet/inverted_residual",
        {"inp": _REQUIRED, "out": _REQUIRED, "stride": 1, "expand": 6, "bn_eps": 1e-5},
        _lib_inverted_residual),
}
