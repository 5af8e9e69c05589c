"""`ttmodels import` of the data-movement ops the spec language has (issue 34 class 2):
``torch.split`` with a list of sizes or a size, channel slices ``x[:, a:b]``, ``torch.chunk``,
``F.pad``, and a stack of maps summed at once (smp FPN's merge) as adds."""
import torch
import torch.nn.functional as F
from torch import nn

from ttmodels.tools import importer


class Res2Like(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(8, 24, 1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.c3 = nn.Conv2d(12, 12, 3)
        self.c4 = nn.Conv2d(12, 12, 1)

    def forward(self, x):
        a, b = torch.split(self.c1(x), [8, 16], dim=1)      # a list of sizes
        b1, b2 = b.split(8, 1)                             # one size
        y = torch.cat([self.c2(a), b1, b2[:, 2:6], b2[:, :4]], 1)   # channel slices
        p, q = y.chunk(2, dim=1)
        p = self.c3(F.pad(p, (1, 1, 1, 1)))                # F.pad, then a valid conv
        return torch.stack([p, q, self.c4(q)]).sum(dim=0)


def test_split_slice_chunk_pad_and_a_stacked_sum():
    torch.manual_seed(0)
    text = importer.import_module(Res2Like().eval(), torch.randn(1, 8, 12, 12))
    body = text.split("layers:")[1]
    assert "op: split, channels: {c0: 8, c1: 16}" in body
    assert "op: split, in: split.c1, channels: {c0: 8, c1: 8}" in body
    assert "op: split, channels: {c0: 12, c1: 12}" in body        # the chunk
    assert "op: slice" in body and "channels: [2, 6]" in body and "channels: [0, 4]" in body
    assert "op: pad, in: chunk.c0, padding: 1" in body
    assert body.count("op: add") == 2
    assert text.pcc >= importer.PCC_MIN


class SEExpand(nn.Module):
    """Squeeze-and-excitation written with expand_as (timm's older SE modules)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Conv2d(8, 8, 1)

    def forward(self, x):
        y = torch.sigmoid(self.fc(x.mean((2, 3), keepdim=True)))
        return x * y.expand_as(x)


def test_expand_as_of_a_per_image_vector():
    torch.manual_seed(0)
    text = importer.import_module(SEExpand().eval(), torch.randn(1, 8, 6, 6))
    assert "op: multiply, in: [input, fc]" in text
    assert text.pcc >= importer.PCC_MIN


class SumFromZero(nn.Module):
    """A sum started at the Python number 0 (timm's MobileOne), a multiply by 1."""

    def __init__(self):
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv2d(8, 8, 1) for _ in range(2))

    def forward(self, x):
        out = 0
        for c in self.convs:
            out = out + c(x)
        return 1 * out - 0


def test_a_sum_started_at_zero():
    torch.manual_seed(0)
    text = importer.import_module(SumFromZero().eval(), torch.randn(1, 8, 6, 6))
    body = text.split("layers:")[1]
    assert body.count("op: add") == 1 and "multiply" not in body and "subtract" not in body
    assert text.pcc >= importer.PCC_MIN
