"""ECA attention (timm's EcaModule, issue 34: ecaresnet26t was refused for "method Tensor.view,
module Conv1d"): global pool -> view [N, 1, C] -> Conv1d(1, 1, k, padding k // 2) -> sigmoid ->
view [N, C, 1, 1] -> multiply. The Conv1d is a product by a banded [C, C] matrix: a ``linear``
with ``band: k`` whose key is the Conv1d's own [1, 1, k] weight."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import ttmodels
from ttmodels.ops.linear import band_matrix
from ttmodels.tools import importer


@pytest.mark.parametrize("k,c", [(3, 40), (5, 64), (7, 8), (3, 2)])
def test_the_band_matrix_is_the_conv1d(k, c):
    w = torch.randn(1, 1, k, dtype=torch.float64)
    y = torch.randn(4, c, dtype=torch.float64)
    want = F.conv1d(y.unsqueeze(1), w, padding=k // 2).squeeze(1)
    assert torch.allclose(y @ band_matrix(w, c).T, want, atol=1e-12, rtol=0)


def _eca_net(c=40):
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, c, 3, padding=1), nn.ReLU(), timm.layers.EcaModule(c)).eval()
    with torch.no_grad():                # a kernel that is not near zero: the band matters
        m[2].conv.weight.copy_(torch.tensor([[[0.7, -1.1, 0.9]]]))
    return m


def test_eca_imports_with_the_conv1ds_key_checks_itself_and_verifies():
    m = _eca_net()
    text = ttmodels.import_module(m, torch.randn(1, 3, 16, 16), name="eca")
    assert text.pcc >= importer.PCC_MIN, text.report
    assert '{name: "2.conv", op: linear, out: 40, bias: false, act: sigmoid, band: 3}' in text
    from ttmodels.language.spec import load_graph
    from ttmodels.weights import load_state_dict
    sd = load_state_dict(m, load_graph(text))
    assert tuple(sd["2.conv.weight"].shape) == (1, 1, 3)          # the module's key, as it is
    assert set(sd) == set(m.state_dict())
    from ttmodels.tools.verify import verify
    rep = verify(text, batch_size=1, input_size=(16, 16), diagnostics=False)
    bad = [s for s in rep.steps if not s.accepted or not s.memory_match]
    assert rep.ok and rep.real and not bad, str(rep)


def test_a_band_needs_an_odd_kernel_and_square_weights():
    from ttmodels.errors import Error
    from ttmodels.language.spec import load_graph
    spec = """name: t
inputs:
  input: {channels: 8, size: [4, 4]}
layers:
  - {name: p, op: global_avg_pool}
  - {name: l, op: linear, out: %d, bias: false, band: %d}
outputs: l
"""
    assert load_graph(spec % (8, 3)).nodes[-1].attrs["band"] == 3
    for out, band in ((8, 4), (16, 3)):
        with pytest.raises(Error, match="band"):
            load_graph(spec % (out, band))


def test_another_conv1d_is_refused_by_what_it_is():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c = nn.Conv2d(3, 8, 3)
            self.d = nn.Conv1d(1, 1, 3, padding=1, bias=True)

        def forward(self, x):
            y = self.c(x).mean((2, 3)).view(x.shape[0], 1, -1)
            return x * self.d(y).view(x.shape[0], -1, 1, 1)[:, :3]
    with pytest.raises(importer.UnsupportedError, match="Conv1d .*a bias.* only ECA"):
        ttmodels.import_module(Net().eval(), torch.randn(1, 3, 8, 8))
