"""A float32 torch reference for segmentation_models_pytorch's ``Unet("resnet34", classes=1)``
(eval mode), independent of ttmodels and of smp's code, written from smp's architecture:

* encoder: torchvision's resnet34 without ``avgpool`` / ``fc``; features = [input, relu(bn1(conv1))
  (1/2), layer1 (1/4), layer2 (1/8), layer3 (1/16), layer4 (1/32)];
* ``UnetDecoder(encoder_channels=(3, 64, 64, 128, 256, 512), decoder_channels=(256, 128, 64, 32,
  16))``, no center block, no attention: block i upsamples its input 2x (nearest), concatenates
  the skip (layer3, layer2, layer1, the stem's ReLU, none for the last block) and applies two
  ``Conv2dReLU`` (Sequential(Conv2d 3x3 no bias, BatchNorm2d, ReLU));
* ``SegmentationHead``: Conv2d(16, classes, 3, padding=1) with bias, no upsampling, no activation.

``state_dict()`` keys are smp's (``encoder.layer1.0.conv1.weight``, ``decoder.blocks.0.conv1.0.weight``,
``decoder.blocks.0.conv1.1.running_var``, ``segmentation_head.0.bias``).
"""
from __future__ import annotations

import torch
from torch import nn


class Conv2dReLU(nn.Sequential):
    def __init__(self, cin, cout):
        super().__init__(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU())


class DecoderBlock(nn.Module):
    def __init__(self, cin, skip, cout):
        super().__init__()
        self.conv1 = Conv2dReLU(cin + skip, cout)
        self.conv2 = Conv2dReLU(cout, cout)

    def forward(self, x, skip=None):
        x = nn.functional.interpolate(x, scale_factor=2, mode="nearest")
        if skip is not None:
            x = torch.cat([x, skip], 1)
        return self.conv2(self.conv1(x))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        ins, skips, outs = (512, 256, 128, 64, 32), (256, 128, 64, 64, 0), (256, 128, 64, 32, 16)
        self.blocks = nn.ModuleList(DecoderBlock(i, s, o) for i, s, o in zip(ins, skips, outs))


class UnetResNet34(nn.Module):
    def __init__(self, classes: int = 1):
        super().__init__()
        import torchvision
        self.encoder = torchvision.models.resnet34()
        del self.encoder.fc, self.encoder.avgpool
        self.decoder = Decoder()
        self.segmentation_head = nn.Sequential(nn.Conv2d(16, classes, 3, padding=1))

    def forward(self, x):
        e = self.encoder
        f1 = e.relu(e.bn1(e.conv1(x)))
        f2 = e.layer1(e.maxpool(f1))
        f3 = e.layer2(f2)
        f4 = e.layer3(f3)
        x = e.layer4(f4)
        for block, skip in zip(self.decoder.blocks, (f4, f3, f2, f1, None)):
            x = block(x, skip)
        return self.segmentation_head(x)
