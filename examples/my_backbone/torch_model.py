"""The user's own torch model that examples/my_backbone/backbone.yaml describes: a
torchvision-style ResNet-18 body returning C4 and C5 (keys ``body.*``) and a two-level FPN named
like torchvision's FeaturePyramidNetwork (``fpn.inner_blocks.*`` / ``fpn.layer_blocks.*``).
Used by demos/custom_backbone.py and tests/test_custom_backbone.py; KEY_MAP is the ``key_map``
that maps its key names onto the spec's."""
from __future__ import annotations

# user key prefix -> spec key prefix (see "key_map" in docs/custom_backbones.md)
KEY_MAP = {
    "body.": "",                        # body.layer1.0.conv1.weight -> layer1.0.conv1.weight
    "fpn.inner_blocks.0.": "neck.lateral_convs.0.conv.",
    "fpn.inner_blocks.1.": "neck.lateral_convs.1.conv.",
    "fpn.layer_blocks.0.": "neck.fpn_convs.0.conv.",
    "fpn.layer_blocks.1.": "neck.fpn_convs.1.conv.",
}


def my_backbone(fpn_channels: int = 128):
    """The user's torch model: torchvision-style ResNet-18 body returning C4, C5, and an FPN."""
    import torch.nn.functional as F
    from torch import nn

    class BasicBlock(nn.Module):
        def __init__(self, cin, planes, stride=1):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU()
            self.downsample = None
            if stride != 1 or cin != planes:
                self.downsample = nn.Sequential(nn.Conv2d(cin, planes, 1, stride, bias=False),
                                                nn.BatchNorm2d(planes))

        def forward(self, x):
            y = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
            return self.relu(y + (x if self.downsample is None else self.downsample(x)))

    class Body(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU()
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            cin = 64
            for i, planes in enumerate((64, 128, 256, 512), 1):
                setattr(self, f"layer{i}", nn.Sequential(
                    BasicBlock(cin, planes, 1 if i == 1 else 2), BasicBlock(planes, planes)))
                cin = planes

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            c4 = self.layer3(self.layer2(self.layer1(x)))
            return c4, self.layer4(c4)

    class FPN(nn.Module):
        def __init__(self, out):
            super().__init__()
            self.inner_blocks = nn.ModuleList([nn.Conv2d(256, out, 1), nn.Conv2d(512, out, 1)])
            self.layer_blocks = nn.ModuleList([nn.Conv2d(out, out, 3, padding=1),
                                               nn.Conv2d(out, out, 3, padding=1)])

        def forward(self, c4, c5):
            top = self.inner_blocks[1](c5)
            merged = self.inner_blocks[0](c4) + F.interpolate(top, size=c4.shape[-2:],
                                                              mode="nearest")
            return self.layer_blocks[0](merged), self.layer_blocks[1](top)

    class MyBackbone(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = Body()
            self.fpn = FPN(fpn_channels)

        def forward(self, x):
            p4, p5 = self.fpn(*self.body(x))
            return {"p4": p4, "p5": p5}

    return MyBackbone().eval()


def user_key(spec_key: str) -> str:
    """The inverse of KEY_MAP: the user module's name of a spec key."""
    for up, sp in sorted(KEY_MAP.items(), key=lambda kv: -len(kv[1])):
        if spec_key.startswith(sp):
            return up + spec_key[len(sp):]
    raise KeyError(spec_key)
