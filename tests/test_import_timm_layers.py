"""`ttmodels import` on timm's building blocks (issue 34, class 1): modules are recognised by what
they compute, not by their class name. timm's BatchNormAct2d (a BatchNorm2d subclass with its own
forward: F.batch_norm on its buffers, then ``drop`` and ``act``), its ``create_act`` activations,
ConvNormAct, SqueezeExcite and EffectiveSEModule; a foreign class that happens to be called GELU
is traced into, not taken for torch's. Small modules, random init, no download."""
import pytest
import torch
from torch import nn

timm = pytest.importorskip("timm")

from ttmodels.tools import importer  # noqa: E402


def _import(m, size=16, cin=8):
    torch.manual_seed(0)
    m = m.eval()
    with torch.no_grad():                    # non-trivial BN statistics
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 2.0)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
    return importer.import_module(m, torch.randn(1, cin, size, size))


def test_batchnormact2d_after_a_conv_is_folded_with_its_activation():
    from timm.layers import BatchNormAct2d
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), BatchNormAct2d(8))
    text = _import(m, cin=3)
    assert '{name: "0", op: conv2d, out: 8, kernel: 3, padding: 1, bn: "1", act: relu}' in text
    assert text.pcc >= importer.PCC_MIN


def test_batchnormact2d_with_drop_and_create_act_activations():
    from timm.layers import BatchNormAct2d, DropBlock2d
    m = nn.Sequential(
        nn.Conv2d(8, 8, 1),
        BatchNormAct2d(8, act_layer="silu", drop_layer=lambda: DropBlock2d(0.1, 3)),
        BatchNormAct2d(8, act_layer="hard_swish", eps=1e-3),    # standalone: a batch_norm layer
        BatchNormAct2d(8, act_layer="gelu"))                     # timm's own GELU class
    text = _import(m)
    assert "bn: \"1\", act: silu}" in text
    assert "{name: \"2\", op: batch_norm, eps: 0.001, act: hardswish}" in text
    assert "{name: \"3\", op: batch_norm, act: gelu}" in text
    assert text.pcc >= importer.PCC_MIN


def test_conv_norm_act_squeeze_excite_and_effective_se():
    from timm.layers import ConvNormAct, EffectiveSEModule
    from timm.models._efficientnet_blocks import SqueezeExcite

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.cna = ConvNormAct(8, 16, 3, act_layer="relu6")
            self.se = SqueezeExcite(16, rd_ratio=0.25, act_layer=nn.SiLU)
            self.ese = EffectiveSEModule(16)

        def forward(self, x):
            return self.ese(self.se(self.cna(x)))
    text = _import(Block())
    assert "{name: cna.conv, op: conv2d, out: 16, kernel: 3, padding: 1, bn: cna.bn, act: relu6}" \
        in text
    assert "op: global_avg_pool" in text and "op: multiply" in text
    assert text.pcc >= importer.PCC_MIN


def test_a_foreign_class_named_like_a_torch_one_is_traced_into():
    class GELU(nn.Module):                   # no `approximate`: not torch's GELU
        def forward(self, x):
            return nn.functional.gelu(x) * 1.0 if False else nn.functional.gelu(x)

    class BatchNorm2d(nn.Module):            # called BatchNorm2d, computes a ReLU
        def forward(self, x):
            return torch.relu(x)
    m = nn.Sequential(nn.Conv2d(8, 8, 1), GELU(), nn.Conv2d(8, 8, 1), BatchNorm2d())
    text = _import(m)
    assert "act: gelu" in text and "act: relu" in text and "batch_norm" not in text
    assert text.pcc >= importer.PCC_MIN


def test_timm_conv2d_same_is_a_pad_and_a_conv():
    from timm.layers import create_conv2d
    m = nn.Sequential(create_conv2d(8, 16, 3, stride=2, padding="same"), nn.BatchNorm2d(16))
    text = _import(m, size=15)
    body = text.split("layers:")[1]
    assert "op: pad" in body and '{name: "0", op: conv2d, out: 16, kernel: 3, stride: 2' in body
    assert text.pcc >= importer.PCC_MIN


def test_timm_convnext_gamma_reshaped_is_a_layer_scale():
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(8, 8, 1)
            self.gamma = nn.Parameter(torch.rand(8) + 0.5)

        def forward(self, x):
            return self.conv(x).mul(self.gamma.reshape(1, -1, 1, 1)) + x
    text = _import(Scaled())
    assert "{name: gamma, op: layer_scale}" in text
    assert text.pcc >= importer.PCC_MIN
