"""A float32 torch reference for BEVDet-R50's image encoder (img_backbone + img_neck).

Independent of ttmodels: the trunk is torchvision's resnet50 (conv1 .. layer4, no avgpool/fc),
which has the same module names and the same stride placement (stride on the 3x3 conv,
mmdet's ``style='pytorch'``) as mmdet's ResNet that BEVDet uses, and the neck is BEVDet's
CustomFPN (``mmdet3d/models/necks/fpn.py``) written out for the R50 config:

    in_channels=[1024, 2048], out_channels=512, num_outs=1, start_level=0, out_ids=[0],
    no norm, no activation:
      laterals[i] = lateral_convs[i](inputs[i])                 1x1 conv with bias
      laterals[0] += interpolate(laterals[1], size=laterals[0].shape[2:], mode="nearest")
      out = fpn_convs[0](laterals[0])                           3x3 conv with bias, padding 1

``state_dict()`` keys are a BEVDet checkpoint's: ``img_backbone.conv1.weight``,
``img_backbone.layer4.2.bn3.running_var``, ``img_neck.lateral_convs.0.conv.weight``,
``img_neck.fpn_convs.0.conv.bias``, ... (mmcv's ConvModule keeps its conv under ``.conv``).
``forward(x)`` returns ``(c4, c5, neck_out)``: layer3 (1024 ch, 1/16), layer4 (2048 ch, 1/32) and
the neck output (512 ch, 1/16).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ttmodels.weights.reference import pcc  # noqa: F401  (re-exported for the tests)

BACKBONE = "img_backbone."
NECK = "img_neck."


class _ConvModule(nn.Module):
    """mmcv ConvModule without norm/activation: only a conv under ``.conv`` (for key names)."""

    def __init__(self, cin: int, cout: int, k: int, padding: int = 0):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, padding=padding, bias=True)

    def forward(self, x):
        return self.conv(x)


class CustomFPN(nn.Module):
    """BEVDet's CustomFPN restricted to what the R50 config uses (no extra levels, no norm)."""

    def __init__(self, in_channels=(1024, 2048), out_channels: int = 512, out_ids=(0,)):
        super().__init__()
        self.out_ids = list(out_ids)
        self.lateral_convs = nn.ModuleList(_ConvModule(c, out_channels, 1) for c in in_channels)
        self.fpn_convs = nn.ModuleList(_ConvModule(out_channels, out_channels, 3, padding=1)
                                       for i in range(len(in_channels)) if i in self.out_ids)

    def forward(self, inputs):
        laterals = [conv(x) for conv, x in zip(self.lateral_convs, inputs)]
        for i in range(len(laterals) - 1, 0, -1):
            # Not in place: BEVDet's `+=` would alias the lateral in autograd; values are the same.
            laterals[i - 1] = laterals[i - 1] + F.interpolate(
                laterals[i], size=laterals[i - 1].shape[2:], mode="nearest")
        return self.fpn_convs[0](laterals[self.out_ids[0]])


def _resnet50_trunk() -> nn.Module:
    from torchvision.models import resnet50

    trunk = resnet50(weights=None)
    del trunk.avgpool, trunk.fc  # BEVDet's img_backbone has no classifier keys
    return trunk


class BEVDetEncoderReference(nn.Module):
    """img_backbone (ResNet50, out_indices (2, 3)) + img_neck (CustomFPN); eval mode, float32."""

    def __init__(self):
        super().__init__()
        self.img_backbone = _resnet50_trunk()
        self.img_neck = CustomFPN()
        self.eval()

    def forward(self, x):
        b = self.img_backbone
        x = b.maxpool(b.relu(b.bn1(b.conv1(x))))
        c4 = b.layer3(b.layer2(b.layer1(x)))
        c5 = b.layer4(c4)
        return c4, c5, self.img_neck([c4, c5])


def bevdet_keys(module: nn.Module | None = None) -> list[str]:
    """The BEVDet encoder's state-dict keys (with ``num_batches_tracked``), in module order."""
    return list((module or BEVDetEncoderReference()).state_dict().keys())


def load_into(ref: "nn.Module", state_dict) -> "nn.Module":
    """Load a BEVDet-keyed state dict; tolerate only missing ``num_batches_tracked`` entries
    (ttmodels' state dicts omit them), anything else missing/unexpected is an error."""
    result = ref.load_state_dict(dict(state_dict), strict=False)
    missing = [k for k in result.missing_keys if not k.endswith("num_batches_tracked")]
    if missing or result.unexpected_keys:
        raise KeyError(f"reference load: missing {missing[:10]} ({len(missing)}), "
                       f"unexpected {result.unexpected_keys[:10]} ({len(result.unexpected_keys)})")
    return ref.eval()
