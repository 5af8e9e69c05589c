"""Issue 23, blocks: ``repeat`` takes a start index and a name pattern (densenet's denselayer1..,
regnet's block2-0..); the shipped squeeze_excitation takes its two activations as parameters."""
from __future__ import annotations

import pytest

import ttmodels
from ttmodels.errors import SpecError


def _graph(layer: dict, imports=("ttmodels/resnet",)):
    return ttmodels.load_graph({"name": "r", "imports": list(imports),
                                "inputs": {"image": {"channels": 64, "size": [16, 16]}},
                                "layers": [layer]})


def test_repeat_start_and_name_give_densenet_and_regnet_keys():
    g = _graph({"name": "features.denseblock1", "block": "basic_block", "planes": 64,
                "repeat": 2, "repeat_start": 1, "repeat_name": "{name}.denselayer{i}"})
    assert [n.weights for n in g.nodes if n.op == "conv2d"] == [
        "features.denseblock1.denselayer1.conv1", "features.denseblock1.denselayer1.conv2",
        "features.denseblock1.denselayer2.conv1", "features.denseblock1.denselayer2.conv2"]
    assert g.node("features.denseblock1.denselayer2.conv1").bn == \
        "features.denseblock1.denselayer2.bn1"
    g = _graph({"name": "trunk_output.block2", "op": "conv2d", "out": 64, "kernel": 1,
                "repeat": 3, "repeat_name": "{name}.block2-{i}"})
    assert [n.name for n in g.nodes] == [f"trunk_output.block2.block2-{i}" for i in range(3)]
    # the default is unchanged: name.0, name.1
    g = _graph({"name": "layer1", "block": "basic_block", "planes": 64, "repeat": 2})
    assert g.nodes[0].weights == "layer1.0.conv1" and g.nodes[-1].name == "layer1.1.relu"


@pytest.mark.parametrize("extra, match", [
    ({"repeat_name": "{name}.layer"}, r"'repeat_name' must be a name pattern with '\{i\}'"),
    ({"repeat_name": "{name}.{j}"}, r"'repeat_name' must be a name pattern"),
    ({"repeat_start": -1}, r"'repeat_start' must be an integer >= 0"),
])
def test_bad_repeat_naming_names_the_field(extra, match):
    with pytest.raises(SpecError, match=match):
        _graph({"name": "c", "op": "conv2d", "out": 8, "kernel": 1, "repeat": 2, **extra})


def test_repeat_naming_needs_repeat():
    with pytest.raises(SpecError, match=r"'repeat_start' needs 'repeat'"):
        _graph({"name": "c", "op": "conv2d", "out": 8, "kernel": 1, "repeat_start": 1})


def test_squeeze_excitation_takes_its_activations():
    layer = {"name": "se", "block": "squeeze_excitation", "squeeze": 16, "channels": 64}
    g = _graph(layer, imports=("ttmodels/efficientnet",))
    assert (g.node("se.fc1").attrs["activation"], g.node("se.fc2").attrs["activation"]) == \
        ("silu", "sigmoid")
    g = _graph({**layer, "activation": "relu", "scale_activation": "hardsigmoid"},
               imports=("ttmodels/efficientnet",))
    assert (g.node("se.fc1").attrs["activation"], g.node("se.fc2").attrs["activation"]) == \
        ("relu", "hardsigmoid")
