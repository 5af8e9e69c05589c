"""The sim keeps one prepared copy of each weight, prepared in build: no host float32 params left
in the layers (unless asked for), no raw float32 weight tensors, no second matrix per weight."""
import pytest
import torch

import sim_pins
import ttmodels
from ttmodels.ops.conv2d import sim as sim_ops
from ttmodels.ops.conv2d.layer import Conv2d
from ttmodels.ops.linear.layer import Linear

SPEC, SIZE = "resnet18", (64, 64)


def _storages(t: torch.Tensor) -> tuple[int, int]:
    if t.layout == torch._mkldnn:          # a oneDNN-packed conv weight (opaque, its own buffer)
        return id(t), t.numel() * t.element_size()
    s = t.untyped_storage()
    return s.data_ptr(), s.nbytes()


def _held_bytes(model) -> tuple[int, int]:
    """(bytes of the distinct storages the conv/linear layers' backend tensors hold, float32
    bytes of the conv weights themselves)."""
    seen = {}
    conv_bytes = 0
    for layer in model.executor.layers.values():
        if not isinstance(layer, (Conv2d, Linear)):
            continue
        if isinstance(layer, Conv2d):
            conv_bytes += 4 * layer.out_channels * layer.in_channels // layer.groups \
                * layer.kernel[0] * layer.kernel[1]
        for t in (layer.weight, layer.bias):
            if t is None:
                continue
            for v in [t._store, *(t._cache or {}).values()]:
                if isinstance(v, torch.Tensor):
                    ptr, n = _storages(v)
                    seen[ptr] = n
    return sum(seen.values()), conv_bytes


@pytest.fixture(scope="module")
def sd():
    return sim_pins.state_dict(ttmodels.load_graph(SPEC, input_size=SIZE))


def test_build_prepares_weights_and_keeps_one_copy(sd):
    before = sim_ops.prepare_count
    with ttmodels.build(SPEC, weights=sd, backend="sim", input_size=SIZE, cache=False) as m:
        convs = [la for la in m.executor.layers.values() if isinstance(la, Conv2d)]
        assert sim_ops.prepare_count - before == sum(la.lowering == "conv2d" for la in convs) > 0
        assert all(la.params == {} for la in m.executor.layers.values())
        held, conv_bytes = _held_bytes(m)
        # conv weights only (+ biases, fc and tile padding of Cout): about one float32 copy
        assert conv_bytes > 0 and held < 1.1 * conv_bytes + 8e6
        n = sim_ops.prepare_count
        m(torch.randn(1, 3, *SIZE))
        assert sim_ops.prepare_count == n          # the first call prepares nothing
        assert _held_bytes(m)[0] == held           # nor makes another form of a weight
        for la in convs:
            if la.lowering == "conv2d":
                assert la.weight._store is None    # the matrix is rebuilt on demand only


@pytest.fixture(scope="module")
def kept(sd):
    with ttmodels.build(SPEC, weights=sd, backend="sim", input_size=SIZE, cache=False,
                        keep_params=True) as m:
        yield m


def test_keep_params_keeps_host_copies(sd, kept):
    conv = kept.executor.layers["conv1"]
    assert conv.params["weight"].shape == (64, 3, 7, 7)
    assert sd["conv1.weight"].data_ptr() != conv.params["weight"].data_ptr()   # a copy


def test_prepared_matrix_rebuilt_from_compute_form_is_the_quantised_matrix(kept):
    from ttmodels import formats
    for name in ("conv1", "layer1.0.conv1"):
        la = kept.executor.layers[name]
        w = la.params["weight"]
        o, i, kh, kw = w.shape
        cin_pad, cout_pad = la.weight.shape[-2] // (kh * kw), la.weight.shape[-1]
        mat = torch.zeros(kh, kw, cin_pad, cout_pad)
        mat[:, :, :i, :o] = w.permute(2, 3, 1, 0)
        want = formats.quantize(mat.reshape(1, 1, -1, cout_pad), "bfloat8_b")
        assert torch.equal(la.weight._data.view(torch.int32), want.view(torch.int32))
