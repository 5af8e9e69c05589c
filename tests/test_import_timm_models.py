"""`ttmodels import` on real timm and segmentation_models_pytorch models (issue 34), a CI subset
of scripts/import_coverage.py's timm and segmentation sections at 64x64, random init (no
download): timm's efficientnet_b0 (BatchNormAct2d, timm's SqueezeExcite, create_act's
silu) and smp's Unet on resnet18 (its Python input-size check: traced with the example's
values). Each imports with its float32 self-check (PCC >= 0.9999) and ttnn accepts every step of
its plan on the mock n150 as planned."""
import pytest
import torch

import ttmodels
from ttmodels.tools import importer
from ttmodels.weights import synthetic_images

SIZE = 64


def _build(name):
    torch.manual_seed(0)
    if name == "smp:Unet":
        smp = pytest.importorskip("segmentation_models_pytorch")
        return smp.Unet("resnet18", encoder_weights=None).eval()
    timm = pytest.importorskip("timm")
    return timm.create_model(name, pretrained=False).eval()


@pytest.mark.parametrize("name", ["efficientnet_b0", "smp:Unet"])
def test_imports_checks_itself_and_verifies(name):
    m = _build(name)
    x = synthetic_images(1, 3, SIZE, SIZE, seed=1)
    text = ttmodels.import_module(m, x, name=name.replace(":", "_"))
    assert text.pcc >= importer.PCC_MIN, text.report
    from ttmodels.weights import load_state_dict
    from ttmodels.language.spec import load_graph
    keys = {k for k in m.state_dict() if not k.endswith("num_batches_tracked")}
    assert set(load_state_dict(m, load_graph(text))) == keys
    from ttmodels.tools.verify import verify
    rep = verify(text, batch_size=1, input_size=(SIZE, SIZE), diagnostics=False)
    bad = [s for s in rep.steps if not s.accepted or not s.memory_match]
    assert rep.ok and rep.real and not bad, str(rep)
