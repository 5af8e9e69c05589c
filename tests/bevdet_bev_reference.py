"""A float32 torch reference for BEVDet-R50's BEV encoder (img_bev_encoder_backbone +
img_bev_encoder_neck), independent of ttmodels, written from BEVDet's definitions
(HuangJunJie2017/BEVDet):

* ``mmdet3d/models/backbones/resnet.py``: ``CustomResNet`` (``ResNetForBEVDet`` at the version
  read), ``block_type='Basic'``: for each stage i, ``BasicBlock(cin, num_channels[i],
  stride=stride[i], downsample=nn.Conv2d(cin, num_channels[i], 3, stride[i], 1))`` followed by
  ``num_layer[i] - 1`` plain BasicBlocks, in ``self.layers``; ``forward`` returns the stage
  outputs listed in ``backbone_output_ids`` (default: all). numC_input=64, num_layer [2, 2, 2],
  num_channels [128, 256, 512], stride [2, 2, 2].
* mmdet's ``BasicBlock`` (``mmdet/models/backbones/resnet.py``): conv1 3x3/stride (no bias),
  bn1, relu, conv2 3x3 (no bias), bn2, ``+= downsample(x)`` (or x), relu.
* ``mmdet3d/models/necks/lss_fpn.py``: ``FPN_LSS(in_channels=640, out_channels=256,
  scale_factor=4, input_feature_index=(0, 2), extra_upsample=2)``: x2 = feats[0], x1 = feats[2];
  ``up`` = nn.Upsample(scale_factor=4, mode='bilinear', align_corners=True); cat([x2, up(x1)]);
  ``conv`` = Sequential(Conv3x3(640, 512, no bias), BN, ReLU, Conv3x3(512, 512), BN, ReLU);
  ``up2`` = Sequential(Upsample x2 bilinear align_corners=True, Conv3x3(512, 256, no bias), BN,
  ReLU, Conv1x1(256, 256, bias)).

``state_dict()`` keys are a BEVDet checkpoint's (``img_bev_encoder_backbone.layers.0.0.conv1.weight``,
``img_bev_encoder_backbone.layers.0.0.downsample.bias``, ``img_bev_encoder_neck.conv.1.running_var``,
``img_bev_encoder_neck.up2.4.weight``, ...). ``forward(x)`` returns ``(stage0, stage1, stage2,
neck)``.
"""
from __future__ import annotations

import torch
from torch import nn

from bevdet_reference import load_into  # noqa: F401  (one loader for both halves' references)
from ttmodels.weights.reference import pcc  # noqa: F401  (re-exported for the tests)


class BasicBlock(nn.Module):
    """mmdet's BasicBlock (expansion 1, no dilation/plugins), eval-mode semantics."""

    def __init__(self, cin: int, planes: int, stride: int = 1, downsample: nn.Module | None = None):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class CustomResNet(nn.Module):
    def __init__(self, numC_input=64, num_layer=(2, 2, 2), num_channels=None, stride=(2, 2, 2),
                 backbone_output_ids=None):
        super().__init__()
        assert len(num_layer) == len(stride)
        num_channels = [numC_input * 2 ** (i + 1) for i in range(len(num_layer))] \
            if num_channels is None else list(num_channels)
        self.backbone_output_ids = range(len(num_layer)) if backbone_output_ids is None \
            else backbone_output_ids
        layers, cur = [], numC_input
        for i in range(len(num_layer)):
            stage = [BasicBlock(cur, num_channels[i], stride=stride[i],
                                downsample=nn.Conv2d(cur, num_channels[i], 3, stride[i], 1))]
            cur = num_channels[i]
            stage += [BasicBlock(cur, cur) for _ in range(num_layer[i] - 1)]
            layers.append(nn.Sequential(*stage))
        self.layers = nn.Sequential(*layers)

    def forward(self, x):
        feats = []
        for lid, layer in enumerate(self.layers):
            x = layer(x)
            if lid in self.backbone_output_ids:
                feats.append(x)
        return feats


class FPN_LSS(nn.Module):  # noqa: N801  (BEVDet's class name)
    def __init__(self, in_channels=640, out_channels=256, scale_factor=4, input_feature_index=(0, 2),
                 extra_upsample=2):
        super().__init__()
        self.input_feature_index = input_feature_index
        self.up = nn.Upsample(scale_factor=scale_factor, mode="bilinear", align_corners=True)
        f = 2
        self.conv = nn.Sequential(
            nn.Conv2d(in_channels, out_channels * f, 3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels * f), nn.ReLU(inplace=True),
            nn.Conv2d(out_channels * f, out_channels * f, 3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels * f), nn.ReLU(inplace=True))
        self.up2 = nn.Sequential(
            nn.Upsample(scale_factor=extra_upsample, mode="bilinear", align_corners=True),
            nn.Conv2d(out_channels * f, out_channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels), nn.ReLU(inplace=True),
            nn.Conv2d(out_channels, out_channels, 1, padding=0))

    def forward(self, feats):
        x2, x1 = feats[self.input_feature_index[0]], feats[self.input_feature_index[1]]
        x = self.conv(torch.cat([x2, self.up(x1)], dim=1))
        return self.up2(x)


class BEVEncoderReference(nn.Module):
    """img_bev_encoder_backbone (CustomResNet) + img_bev_encoder_neck (FPN_LSS); eval, float32."""

    def __init__(self):
        super().__init__()
        self.img_bev_encoder_backbone = CustomResNet(numC_input=64)
        self.img_bev_encoder_neck = FPN_LSS(in_channels=64 * 8 + 64 * 2, out_channels=256)
        self.eval()

    def forward(self, x):
        feats = self.img_bev_encoder_backbone(x)
        return (*feats, self.img_bev_encoder_neck(feats))
