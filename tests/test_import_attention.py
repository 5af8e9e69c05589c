"""`ttmodels import` of ResNeSt's split attention (issue 34 class 6, timm's SplitAttn +
RadixSoftmax at radix 2, cardinality 1): the map viewed [N, r, C/r, H, W] summed over the radix
is a split and adds; the softmax across a radix of 2 is sigmoid(z0 - z1), sigmoid(z1 - z0)
(subtracts with a fused sigmoid), across a radix of 3 or more a reshape, the spec's channel
softmax and a reshape back; the map times the attention, summed, is multiplies and adds."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ttmodels.tools import importer


class RadixAttention(nn.Module):
    """timm's SplitAttn forward, in small (conv, radix sum, pool, fc, radix softmax, weighted
    sum), with the radix as a parameter."""

    def __init__(self, radix=2):
        super().__init__()
        self.radix = radix
        self.conv = nn.Conv2d(3, 4 * radix, 1)
        self.fc = nn.Conv2d(4, 4 * radix, 1)

    def forward(self, x):
        x = self.conv(x)
        b, rc, h, w = x.shape
        x5 = x.reshape((b, self.radix, rc // self.radix, h, w))
        a = self.fc(x5.sum(dim=1).mean((2, 3), keepdim=True))
        a = F.softmax(a.view(b, 1, self.radix, -1).transpose(1, 2), dim=1).reshape(b, -1)
        a = a.view(b, -1, 1, 1).reshape((b, self.radix, rc // self.radix, 1, 1))
        return (x5 * a).sum(dim=1).contiguous()


def test_split_attention_at_radix_2():
    torch.manual_seed(0)
    text = importer.import_module(RadixAttention().eval(), torch.randn(1, 3, 8, 8))
    body = text.split("layers:")[1]
    assert body.count("op: split, channels: {c0: 4, c1: 4}") == 2     # the map, the logits
    assert "op: subtract, in: [softmax.c0, softmax.c1], act: sigmoid" in body
    assert "op: subtract, in: [softmax.c1, softmax.c0], act: sigmoid" in body
    assert "op: multiply, in: [sum.c0, softmax_1]" in body
    assert "op: multiply, in: [sum.c1, softmax_2]" in body
    assert text.pcc >= importer.PCC_MIN


@pytest.mark.parametrize("radix", [3, 4])
def test_split_attention_at_a_radix_of_3_or_more(radix):
    """The softmax across the radix: the logits reshaped [N, r, C/r, 1], the spec's softmax over
    the channels of each pixel, reshaped back, split into the r group vectors."""
    torch.manual_seed(0)
    text = importer.import_module(RadixAttention(radix).eval(), torch.randn(1, 3, 8, 8))
    body = text.split("layers:")[1]
    assert f"op: reshape, shape: [{radix}, 4, 1]" in body and "op: softmax}" in body
    assert f"op: reshape, shape: [{4 * radix}, 1, 1]" in body
    assert all(f"in: [sum.c{i}, softmax_1.c{i}]" in body for i in range(radix))
    assert text.pcc >= importer.PCC_MIN


def test_split_attention_with_a_cardinality_imports_and_verifies():
    """timm's SplitAttn at radix 4, cardinality 2 (resnest50d_4s2x40d's): the 256 logits in
    (group, radix, channel) order reshaped [N, 2, 4, 32] and permuted radix-first before the softmax,
    reshaped back in torch's (radix, group, channel) order; then run on the mock device."""
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1),
                      timm.layers.SplitAttn(32, 64, groups=2, radix=4)).eval()
    with torch.no_grad():                   # BN statistics that are not the identity
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_var.uniform_(0.5, 2)
                mod.running_mean.normal_()
    text = importer.import_module(m, torch.randn(1, 3, 12, 12))
    body = text.split("layers:")[1]
    assert "op: reshape, shape: [2, 4, 32]" in body and "op: permute, dims: [0, 2, 1, 3]" in body
    assert "op: reshape, shape: [256, 1, 1]" in body
    assert text.pcc >= importer.PCC_MIN, text.report
    from ttmodels.tools.verify import verify
    rep = verify(text, batch_size=1, input_size=(12, 12), diagnostics=False)
    bad = [s for s in rep.steps if not s.accepted or not s.memory_match]
    assert rep.ok and rep.real and not bad, str(rep)


class SelectiveKernel(nn.Module):
    """timm's SelectiveKernel in small: two paths stacked on dim 1, SelectiveKernelAttn (sum
    over the paths, pool, fc, logits viewed [N, 2, C, 1, 1], softmax over dim 1), weighted sum."""

    def __init__(self):
        super().__init__()
        self.paths = nn.ModuleList([nn.Conv2d(3, 4, 3, padding=1),
                                    nn.Conv2d(3, 4, 3, padding=2, dilation=2)])
        self.fc = nn.Conv2d(4, 8, 1)

    def forward(self, x):
        x = torch.stack([p(x) for p in self.paths], dim=1)
        a = self.fc(x.sum(1).mean((2, 3), keepdim=True))
        b, c, h, w = a.shape
        a = torch.softmax(a.view(b, 2, c // 2, h, w), dim=1)
        return torch.sum(x * a, dim=1)


def test_selective_kernel_attention():
    torch.manual_seed(0)
    text = importer.import_module(SelectiveKernel().eval(), torch.randn(1, 3, 8, 8))
    body = text.split("layers:")[1]
    assert "op: add, in: [paths.0, paths.1]" in body                  # the sum over the paths
    assert "op: subtract, in: [softmax.c0, softmax.c1], act: sigmoid" in body
    assert "op: multiply, in: [paths.0, softmax_1]" in body
    assert "op: multiply, in: [paths.1, softmax_2]" in body
    assert text.pcc >= importer.PCC_MIN
