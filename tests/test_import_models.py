"""`ttmodels import` on torchvision classifiers (issue 24), a CI subset of
scripts/import_coverage.py: resnet18 (repeats with `first:`), mobilenet_v3_small (blocks with
`when:`, squeeze-and-excitation nested, hardswish) and shufflenet_v2_x0_5 (chunk as a split, the
view / transpose / view channel shuffle as one layer) at 64x64.

For each: the import checks itself (float32 profile against the module, PCC >= 0.9999); the spec
has blocks and loads the module's state dict as it is; ttnn accepts every step of its plan on
the mock n150 as planned; the default profile reproduces the module at PCC >= 0.99 with
BatchNorm-calibrated random weights loaded into the torchvision module itself."""
import pytest
import torch

import ttmodels
from ttmodels.tools import importer
from ttmodels.weights.reference import pcc
from ttmodels.language.spec import load_graph
from ttmodels.weights import random_state_dict, synthetic_images

SIZE = 64
MODELS = {"resnet18": 1, "mobilenet_v3_small": 3,      # model -> blocks it must have at least
          "shufflenet_v2_x0_5": 2}


@pytest.fixture(scope="module")
def torchvision():
    return pytest.importorskip("torchvision")


@pytest.fixture(scope="module")
def imported(torchvision):
    cache = {}

    def get(name):
        if name not in cache:
            torch.manual_seed(0)
            m = getattr(torchvision.models, name)().eval()
            x = synthetic_images(1, 3, SIZE, SIZE, seed=1)
            cache[name] = (m, x, ttmodels.import_module(m, x, name=name))
        return cache[name]
    return get


@pytest.mark.parametrize("name", list(MODELS))
def test_import_checks_itself_and_has_blocks(imported, name):
    m, x, text = imported(name)
    assert text.pcc >= importer.PCC_MIN
    assert len(text.blocks) >= MODELS[name], text
    if name == "resnet18":                    # the library's own block, as the shipped config
        assert text.blocks == ("ttmodels/resnet/basic_block",)
    g = load_graph(text)
    assert len(g.nodes) == text.layers
    if name == "shufflenet_v2_x0_5":          # one channel_shuffle per unit, groups 2
        sh = [n for n in g.nodes if n.op == "channel_shuffle"]
        assert len(sh) == 16 and {n.attrs["groups"] for n in sh} == {2}
        # stageN.0 is a block of its own, stageN.1 .. one line after it
        assert "{name: stage3, block: inverted_residual_2, repeat: 7, repeat_start: 1}" in text
    keys = {k for k in m.state_dict() if not k.endswith("num_batches_tracked")}
    from ttmodels.weights import load_state_dict
    assert set(load_state_dict(m, g)) == keys


@pytest.mark.parametrize("name", list(MODELS))
def test_imported_spec_verifies_on_the_mock_device(imported, name):
    from ttmodels.tools.verify import verify
    _, _, text = imported(name)
    rep = verify(text, batch_size=1, input_size=(SIZE, SIZE), diagnostics=False)
    bad = [s for s in rep.steps if not s.accepted or not s.memory_match]
    assert rep.ok and rep.real and not bad, str(rep)


@pytest.mark.parametrize("name", list(MODELS))
def test_default_profile_reproduces_the_module(imported, name):
    m, x, text = imported(name)
    g = load_graph(text, input_size=(SIZE, SIZE))
    sd = random_state_dict(g, seed=0, calibration_batch=4)
    missing, unexpected = m.load_state_dict(sd, strict=False)
    assert not unexpected and all(k.endswith("num_batches_tracked") for k in missing)
    m.eval()
    with torch.no_grad():
        ref = m(x)
    with ttmodels.build(text, weights=m, backend="sim", input_size=(SIZE, SIZE)) as model:
        out = model(x)
    p = pcc(ref.reshape(out.shape), out)
    print(f"{name} {SIZE}x{SIZE} default profile logits PCC vs torchvision: {p:.5f}")
    assert p >= 0.99
    # and the default formats really apply (not a float32 run in disguise)
    assert (ref.reshape(out.shape) - out).abs().max() > 1e-4
