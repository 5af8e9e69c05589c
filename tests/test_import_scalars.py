"""`ttmodels import` of learned scalars (issue 34 class 2: hgnetv2's LearnableAffineBlock,
``scale * x + bias`` with one-value ``nn.Parameter``s): each is a spec constant loaded from the
parameter's own key, so the spec reads whatever weights are loaded later."""
import torch
from torch import nn

from ttmodels.tools import importer


class Affine(nn.Module):
    def __init__(self, scale, bias):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor([scale]))
        self.bias = nn.Parameter(torch.tensor([bias]))

    def forward(self, x):
        return self.scale * x + self.bias


class TwoAffines(nn.Module):
    """Two instances of one class holding different scalars (each its own constant, not a block
    parameter), a ReLU after each so that a wrong scale or bias changes the result's shape."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.lab = Affine(1.75, -0.25)
        self.conv2 = nn.Conv2d(8, 8, 1)
        self.lab2 = Affine(-0.5, 0.125)
        self.shift = nn.Parameter(torch.tensor([0.375]))

    def forward(self, x):
        y = torch.relu(self.lab(self.conv(x)))
        return torch.relu(self.lab2(self.conv2(y))) - self.shift


def test_learned_scalars_are_constants_from_their_keys():
    torch.manual_seed(0)
    m = TwoAffines().eval()
    text = importer.import_module(m, torch.randn(1, 3, 16, 16))
    consts = text.split("constants:")[1].split("layers:")[0]
    for k in ("lab.scale", "lab.bias", "lab2.scale", "lab2.bias", "shift"):
        assert f"  {k}: {{shape: [1], weights: {k}, dtype: float32}}" in consts
    body = text.split("layers:")[1]
    assert "op: multiply, in: [conv, lab.scale]" in body
    assert "op: add, in: [lab.mul, lab.bias], act: relu" in body
    assert "op: subtract, in: [lab2.add, shift]" in body
    assert not text.ignored_prefixes                  # the scalars' modules are read
    assert text.pcc >= importer.PCC_MIN


def test_the_constants_follow_the_weights_loaded():
    import ttmodels
    torch.manual_seed(0)
    m = TwoAffines().eval()
    x = torch.randn(1, 3, 16, 16)
    text = importer.import_module(m, x, check=False)
    with torch.no_grad():
        m.lab.bias.fill_(0.5)
        m.lab2.scale.fill_(2.0)
        ref = m(x)
    with ttmodels.build(text, weights=m, backend="sim", profile="float32") as built:
        out = built(x)
    assert torch.allclose(out.reshape(ref.shape), ref, atol=0.05, rtol=0.02)


def test_a_scalar_minus_a_map_is_refused():
    class RSub(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 1)
            self.s = nn.Parameter(torch.tensor([1.0]))

        def forward(self, x):
            return self.s - self.conv(x)

    try:
        importer.import_module(RSub().eval(), torch.randn(1, 3, 8, 8))
    except importer.UnsupportedError as e:
        assert "function sub" in str(e)
    else:
        raise AssertionError("a scalar minus a map imported")
