"""A float32 torch reference for YOLOv8 (Ultralytics' DetectionModel, eval mode) up to the Detect
head's raw branches, independent of ttmodels and of Ultralytics' code (AGPL-3.0: not a dependency,
nothing copied). Written from the published architecture (yolov8.yaml: backbone and head as
listed in ttmodels/blocks/yolo.yaml's ``yolov8`` block):

* ``Conv``: Conv2d(k, stride, padding k // 2, no bias) -> BatchNorm2d(eps=1e-3) -> SiLU.
* ``Bottleneck(c, shortcut)``: two 3x3 Convs, ``x + ...`` when shortcut.
* ``C2f(c1, c2, n, shortcut)``: ``cv1`` 1x1 to 2c (c = c2 // 2), chunk in two, n Bottlenecks
  chained on the second half, concat of both halves and every Bottleneck output, ``cv2`` 1x1.
* ``SPPF(c1, c2, 5)``: ``cv1`` 1x1 to c1 // 2, three chained MaxPool2d(5, 1, 2), concat, ``cv2``.
* ``Detect(nc, ch)``: per level, ``cv2[i]`` = Conv3x3, Conv3x3, Conv2d 1x1 (64 = 4 x reg_max DFL
  logits) and ``cv3[i]`` the same to nc class logits; ``dfl`` a fixed 1x1 conv holding
  arange(reg_max) (a buffer in the checkpoint, not used by the raw outputs).

``state_dict()`` keys are an Ultralytics DetectionModel's (``model.0.conv.weight``,
``model.2.m.0.cv1.bn.running_var``, ``model.22.cv3.2.2.bias``, ``model.22.dfl.conv.weight``).
``forward(x)`` returns ``{"box_p3": ..., "cls_p3": ..., ..., "cls_p5": ...}`` (NCHW).
"""
from __future__ import annotations

import torch
from torch import nn

SCALES = {   # widths (64, 128, 256, 512, 1024 x width multiple), depths (3, 6 x depth multiple)
    "yolov8n": ((16, 32, 64, 128, 256), (1, 2)),
    "yolov8s": ((32, 64, 128, 256, 512), (1, 2)),
}


class Conv(nn.Module):
    def __init__(self, cin, cout, k=1, s=1):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=1e-3, momentum=0.03)

    def forward(self, x):
        return nn.functional.silu(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, c, shortcut):
        super().__init__()
        self.cv1, self.cv2, self.shortcut = Conv(c, c, 3), Conv(c, c, 3), shortcut

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.shortcut else y


class C2f(nn.Module):
    def __init__(self, cin, cout, n, shortcut=False):
        super().__init__()
        self.c = cout // 2
        self.cv1 = Conv(cin, 2 * self.c)
        self.cv2 = Conv((2 + n) * self.c, cout)
        self.m = nn.ModuleList(Bottleneck(self.c, shortcut) for _ in range(n))

    def forward(self, x):
        parts = list(self.cv1(x).split(self.c, dim=1))
        for b in self.m:
            parts.append(b(parts[-1]))
        return self.cv2(torch.cat(parts, 1))


class SPPF(nn.Module):
    def __init__(self, cin, cout, k=5):
        super().__init__()
        self.cv1 = Conv(cin, cin // 2)
        self.cv2 = Conv(cin // 2 * 4, cout)
        self.m = nn.MaxPool2d(k, 1, k // 2)

    def forward(self, x):
        ys = [self.cv1(x)]
        for _ in range(3):
            ys.append(self.m(ys[-1]))
        return self.cv2(torch.cat(ys, 1))


class DFL(nn.Module):
    """The fixed distribution-to-distance conv (arange weights); only its buffer matters here."""

    def __init__(self, reg_max=16):
        super().__init__()
        self.conv = nn.Conv2d(reg_max, 1, 1, bias=False).requires_grad_(False)
        self.conv.weight.data[:] = torch.arange(reg_max, dtype=torch.float).view(1, reg_max, 1, 1)


class Detect(nn.Module):
    def __init__(self, nc, ch, reg_max=16):
        super().__init__()
        c2 = max(16, ch[0] // 4, reg_max * 4)
        c3 = max(ch[0], min(nc, 100))
        self.cv2 = nn.ModuleList(nn.Sequential(Conv(c, c2, 3), Conv(c2, c2, 3),
                                               nn.Conv2d(c2, 4 * reg_max, 1)) for c in ch)
        self.cv3 = nn.ModuleList(nn.Sequential(Conv(c, c3, 3), Conv(c3, c3, 3),
                                               nn.Conv2d(c3, nc, 1)) for c in ch)
        self.dfl = DFL(reg_max)

    def forward(self, feats):
        out = {}
        for i, (f, lvl) in enumerate(zip(feats, ("p3", "p4", "p5"))):
            out[f"box_{lvl}"] = self.cv2[i](f)
            out[f"cls_{lvl}"] = self.cv3[i](f)
        return out


class YOLOv8(nn.Module):
    def __init__(self, scale="yolov8n", nc=80):
        super().__init__()
        (c1, c2, c3, c4, c5), (n3, n6) = SCALES[scale]
        up = nn.Upsample(scale_factor=2, mode="nearest")
        self.model = nn.ModuleList([
            Conv(3, c1, 3, 2), Conv(c1, c2, 3, 2), C2f(c2, c2, n3, True),            # 0-2
            Conv(c2, c3, 3, 2), C2f(c3, c3, n6, True),                               # 3-4 P3
            Conv(c3, c4, 3, 2), C2f(c4, c4, n6, True),                               # 5-6 P4
            Conv(c4, c5, 3, 2), C2f(c5, c5, n3, True), SPPF(c5, c5),                 # 7-9 P5
            up, nn.Identity(), C2f(c5 + c4, c4, n3),                                 # 10-12
            up, nn.Identity(), C2f(c4 + c3, c3, n3),                                 # 13-15
            Conv(c3, c3, 3, 2), nn.Identity(), C2f(c3 + c4, c4, n3),                 # 16-18
            Conv(c4, c4, 3, 2), nn.Identity(), C2f(c4 + c5, c5, n3),                 # 19-21
            Detect(nc, (c3, c4, c5)),                                                # 22
        ])

    def forward(self, x):
        m = self.model
        y = {}
        for i in range(10):
            x = y[i] = m[i](x)
        x = y[12] = m[12](torch.cat([m[10](x), y[6]], 1))
        x = y[15] = m[15](torch.cat([m[13](x), y[4]], 1))
        x = y[18] = m[18](torch.cat([m[16](x), y[12]], 1))
        x = y[21] = m[21](torch.cat([m[19](x), y[9]], 1))
        return m[22]([y[15], y[18], y[21]])
