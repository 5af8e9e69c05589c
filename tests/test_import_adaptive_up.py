"""An adaptive average pool to a larger map (torchvision's VGG at 96x96: 3x3 up to 7x7, issue 34):
imported as a nearest upsample and an average pool that does not count its padding, when the
pair gives torch's bins exactly; refused saying "upward adaptive pool" when none does."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import ttmodels
from ttmodels.tools import importer
from ttmodels.tools.importer.adaptive import adaptive_matrix, as_up_pool


def _up_pool(x, uh, uw):
    y = F.interpolate(x, scale_factor=(uh.scale, uw.scale), mode="nearest")
    return F.avg_pool2d(y, (uh.kernel, uw.kernel), (uh.stride, uw.stride),
                        (uh.padding, uw.padding), count_include_pad=False)


@pytest.mark.parametrize("n,m", [(3, 7), (2, 7), (4, 7), (6, 7), (1, 7), (2, 3), (3, 5), (7, 7),
                                 (4, 2)])
def test_the_found_pair_is_torchs_adaptive_pool(n, m):
    u = as_up_pool(n, m)
    assert u is not None
    x = torch.randn(2, 5, n, n, dtype=torch.float64)
    assert torch.allclose(_up_pool(x, u, u), F.adaptive_avg_pool2d(x, m), atol=1e-12, rtol=0)


def test_an_axis_with_uneven_bins_has_no_pair():
    # 5 -> 7: bins of one and two inputs in no periodic pattern
    assert as_up_pool(5, 7) is None
    assert sum(1 for r in adaptive_matrix(5, 7) if sum(v != 0 for v in r) == 2) == 4


def _vgg_head():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(7),
                         nn.Flatten(), nn.Linear(16 * 49, 10)).eval()


def test_vggs_head_at_a_3x3_map_imports_checks_itself_and_verifies():
    m = _vgg_head()
    text = ttmodels.import_module(m, torch.randn(1, 3, 3, 3), name="vgg_head")
    assert text.pcc >= importer.PCC_MIN, text.report
    assert "op: upsample, scale: 2" in text and "count_include_pad: false" in text
    from ttmodels.tools.verify import verify
    rep = verify(text, batch_size=1, input_size=(3, 3), diagnostics=False)
    bad = [s for s in rep.steps if not s.accepted or not s.memory_match]
    assert rep.ok and rep.real and not bad, str(rep)


def test_an_upward_pool_it_cannot_express_says_why():
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.AdaptiveAvgPool2d(7)).eval()
    with pytest.raises(importer.UnsupportedError, match="upward adaptive pool"):
        ttmodels.import_module(m, torch.randn(1, 3, 5, 5))
