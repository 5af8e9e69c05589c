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


def randomize_calibrated(ref: BEVDetEncoderReference, calib, *, seed: int = 0,
                         pre_relu_shift: float = 1.0, end_scale=(0.1, 0.3),
                         shortcut_scale=(0.5, 1.0)) -> BEVDetEncoderReference:
    """Seeded random weights with BatchNorm statistics calibrated on ``calib`` (NCHW images).

    Convs keep torchvision's He init (the neck's: BEVDet's Xavier-uniform, small random biases).
    BN scales are U(0.5, 1.5), except on residual-branch ends (bn3: ``end_scale``) and projection
    shortcuts (downsample.1: ``shortcut_scale``), as in trained ResNets whose last-BN scales are
    small. Every BN that feeds a ReLU gets a bias of ``pre_relu_shift`` x its scale, so after
    calibration most pre-activations are positive.

    Why the shift: with zero-mean pre-activations (running_mean = the batch mean, bias ~ 0), a
    random ResNet-50 is chaotic -- rounding just the *input* to bfloat16 moves C5 to PCC ~0.97
    and a torch bfloat16 run gives ~0.88 -- so a PCC test would measure the weights' chaos, not the
    arithmetic. Trained networks are not that sensitive; the defaults put the random one in a
    stable regime (at 2x128x352: torch bfloat16 vs float32 >= 0.998 on C4/C5/neck) that still
    tests every layer (zeroing layer3.3.conv2 alone drops C5 to PCC ~0.85).

    Calibration: one train-mode pass over ``calib`` with ``momentum=None`` sets every BN's running
    statistics to the batch statistics its input has when all earlier BNs already normalise that
    same batch (the standard "BN recalibration"), then eval mode.
    """
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, m in ref.named_modules():
            if isinstance(m, nn.Conv2d):
                if name.startswith("img_neck"):
                    nn.init.xavier_uniform_(m.weight, generator=g)
                    m.bias.uniform_(-0.05, 0.05, generator=g)
                else:
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu",
                                            generator=g)
            elif isinstance(m, nn.BatchNorm2d):
                end = name.endswith(("bn3", "downsample.1"))
                lo, hi = (end_scale if name.endswith("bn3") else shortcut_scale if end
                          else (0.5, 1.5))
                m.weight.uniform_(lo, hi, generator=g)
                if end:
                    m.bias.normal_(0.0, 0.1, generator=g)
                else:
                    m.bias.copy_(pre_relu_shift * m.weight)
                m.reset_running_stats()
                m.momentum = None
        ref.train()
        ref(calib)
        for m in ref.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.momentum = 0.1
    return ref.eval()


def bevdet_keys(module: nn.Module | None = None) -> list[str]:
    """The BEVDet encoder's state-dict keys (with ``num_batches_tracked``), in module order."""
    return list((module or BEVDetEncoderReference()).state_dict().keys())


def load_into(ref: BEVDetEncoderReference, state_dict) -> BEVDetEncoderReference:
    """Load a BEVDet-keyed state dict; tolerate only missing ``num_batches_tracked`` entries
    (ttmodels' state dicts omit them), anything else missing/unexpected is an error."""
    result = ref.load_state_dict(dict(state_dict), strict=False)
    missing = [k for k in result.missing_keys if not k.endswith("num_batches_tracked")]
    if missing or result.unexpected_keys:
        raise KeyError(f"reference load: missing {missing[:10]} ({len(missing)}), "
                       f"unexpected {result.unexpected_keys[:10]} ({len(result.unexpected_keys)})")
    return ref.eval()


def pcc(a, b) -> float:
    """Pearson correlation of two tensors, flattened, in float64."""
    x = a.detach().reshape(-1).to(torch.float64)
    y = b.detach().reshape(-1).to(torch.float64)
    if x.numel() != y.numel():
        raise ValueError(f"pcc: {x.numel()} vs {y.numel()} elements")
    x = x - x.mean()
    y = y - y.mean()
    den = x.norm() * y.norm()
    if float(den) == 0.0:
        return 1.0 if torch.equal(x, y) else 0.0
    return float((x @ y) / den)
