"""resnet50_tt (configs/resnet50_tt.yaml, issue 32): TT's hand-tuned ResNet50 layouts as a spec.
It loads torchvision's resnet50 keys as they are and reaches TT's own PCC bar (0.98, TT's
ResNet50 test) on the sim; the real run on the mock device is ``ttmodels verify resnet50_tt
--batch 16`` (README's table)."""
import pytest
import torch

import ttmodels
from ttmodels.language.spec import load_graph
from ttmodels.weights import load_state_dict, synthetic_images
from ttmodels.weights.reference import expected_parameters, pcc


def test_keys_are_torchvisions_resnet50():
    import torchvision
    model = torchvision.models.resnet50(weights=None)
    want = {k: tuple(v.shape) for k, v in model.state_dict().items()
            if not k.endswith("num_batches_tracked")}
    assert expected_parameters(load_graph("resnet50_tt")) == want


@pytest.mark.parametrize("batch", [16])     # its grids are batch 16's (TT's)
def test_pcc_against_torchvision(batch):
    import torchvision
    graph = load_graph("resnet50_tt", batch_size=batch)
    sd = load_state_dict("random", graph, seed=0)
    tv = torchvision.models.resnet50()
    tv.load_state_dict(sd)
    tv.eval()
    x = synthetic_images(batch, 3, 224, 224, seed=123)
    with torch.no_grad():
        ref = tv(x)
    with ttmodels.build("resnet50_tt", weights=sd, backend="sim", batch_size=batch) as m:
        logits = m.run(x)["logits"]
    p = pcc(ref, logits)
    print(f"resnet50_tt logits PCC vs torchvision: {p:.5f}")
    assert p >= 0.98


def test_plans_at_its_declared_batch_by_default_and_at_others_its_layouts_allow():
    # `batch: 16` is the batch its explicit grids were written for and the default; other
    # batches plan with the same layouts (issue 33: at 4 and 8 they run for real, `ttmodels
    # verify resnet50_tt --batch 8`: 96/96 steps), and where a layout does not apply the
    # refusal names the layer and that batch (at 1 layer2.0.conv3 lands on 8x4 cores, not the
    # 8x7 the spec asks)
    from ttmodels.errors import SpecError
    from ttmodels.planning.planner import plan_graph
    g = load_graph("resnet50_tt")
    assert g.batch == 16 and g.inputs["image"].n == 16
    assert load_graph("resnet50").batch is None
    plan = plan_graph(load_graph("resnet50_tt", batch_size=8), oracle=False)
    m = plan.layer("layer1.0.conv1").output.memory
    assert (m.memory_layout, tuple(m.grid)) == ("height_sharded", (8, 7))
    with pytest.raises(SpecError) as e:
        plan_graph(load_graph("resnet50_tt", batch_size=1), oracle=False)
    assert e.value.layer == "layer2.0.conv3"
    assert "8x7" in str(e.value) and "written for batch 16" in str(e.value)
    assert "not batch 1" in str(e.value) and "--batch 16" in str(e.value)
