"""`ttmodels import` of ResNeSt's split attention (issue 34 class 6, timm's SplitAttn +
RadixSoftmax at radix 2, cardinality 1): the map viewed [N, r, C/r, H, W] summed over the radix
is a split and adds; the softmax across a radix of 2 is sigmoid(z0 - z1), sigmoid(z1 - z0)
(subtracts with a fused sigmoid); the map times the attention, summed, is multiplies and an add.
Other radices are refused by what they are."""
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


def test_a_radix_of_3_is_refused_by_what_it_is():
    with pytest.raises(importer.UnsupportedError) as e:
        importer.import_module(RadixAttention(3).eval(), torch.randn(1, 3, 8, 8))
    assert "softmax over dim 1 of a [1, 3, 1, 4] tensor (only a split attention's softmax " \
        "across a radix of 2" in str(e.value)


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
