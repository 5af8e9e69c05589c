"""The activation table takes any number of parameters and holds its own numerics (issue 22,
item 4): hardtanh (two parameters, by keyword) and mish (fuses nowhere) are one row each, and
every row's fusion facts hold against ttnn 0.81.1 on the mock device."""
from __future__ import annotations

import pytest
import torch

import ttmodels
from ttmodels.ops import activations as A
from ttmodels.errors import SpecError
from ttmodels.language.spec import load_graph


def test_parameters_in_every_spec_form():
    assert A.parse("hardtanh") == "hardtanh(-1.0, 1.0)"
    assert A.parse("hardtanh(-2, 3)") == "hardtanh(-2.0, 3.0)"
    assert A.parse({"hardtanh": [-2, 3]}) == "hardtanh(-2.0, 3.0)"
    assert A.parse({"hardtanh": {"max_val": 2}}) == "hardtanh(-1.0, 2.0)"
    assert A.parse({"name": "hardtanh", "min_val": 0, "max_val": 6}) == "hardtanh(0.0, 6.0)"
    # one parameter as before: the canonical form (and so plans and cache keys) unchanged
    assert A.parse({"leaky_relu": 0.2}) == A.parse("leaky_relu(0.2)") == "leaky_relu(0.2)"
    assert A.parse("leaky_relu") == "leaky_relu(0.01)"


@pytest.mark.parametrize("bad, msg", [
    ({"hardtanh": {"maximum": 2}}, r"takes 'min_val', 'max_val', got \['maximum'\]"),
    ("hardtanh(1, 2, 3)", "takes up to 2"),
    ({"hardtanh": [1, 2, 3]}, "takes 2 parameter"),
    ({"hardtanh": {"min_val": "a"}}, "'min_val' must be a number"),
    ("silu(1)", "takes no parameter"),
    ({"mish": 1}, "takes no parameter"),
])
def test_bad_parameters_name_the_ones_that_exist(bad, msg):
    with pytest.raises(ValueError, match=msg):
        A.parse(bad)


def test_spec_errors_name_the_file_line_and_parameter():
    spec = {"inputs": {"x": {"channels": 8, "size": 8}},
            "layers": [{"name": "c", "op": "conv2d", "out": 8, "kernel": 3, "padding": 1,
                        "act": {"hardtanh": {"maxval": 2}}}]}
    with pytest.raises(SpecError, match=r"layer 'c'.*'min_val', 'max_val'"):
        load_graph(spec)
    spec["layers"][0] = {"name": "h", "op": "hardtanh", "min_val": "low"}
    with pytest.raises(SpecError, match="min_val"):
        load_graph(spec)


def _pcc(a, b):
    a, b = a.flatten().double(), b.flatten().double()
    return float(torch.corrcoef(torch.stack([a, b]))[0, 1])


@pytest.mark.parametrize("act", ["hardtanh(-0.5, 0.75)", "mish"])
def test_fused_and_standalone_forms_match_torch_on_the_sim(act):
    d = A.get(act)
    name, p = A.split(act)
    fields = {q.name: v for q, v in zip(name.params, p)}
    spec = {"name": "t", "inputs": {"x": {"channels": 16, "size": 8}},
            "layers": [{"name": "c", "op": "conv2d", "out": 32, "kernel": 3, "padding": 1,
                        "act": act},
                       {"name": "s", "op": d.name, "in": "c", **fields},
                       {"name": "a", "op": "add", "in": ["s", "c"], "act": act}],
            "outputs": ["c", "s", "a"]}
    m = ttmodels.build(spec, weights="random", backend="sim", batch_size=2)
    x = torch.randn(2, 16, 8, 8, generator=torch.Generator().manual_seed(3))
    with m.executor.record() as calls:
        got = m.run(x)
    names = [c.name for c in calls]
    if d.fuses_conv:
        conv = next(c for c in calls if c.name == "conv2d")
        assert conv.kwargs["conv_config"].activation is not None
    else:                           # runs standalone right after the op, in the same layer
        assert names.count(d.ttnn_function) >= 3, names
    # the conv's own output through torch's activation (the sim's rounding aside)
    c = got["c"]
    assert _pcc(got["s"], A.torch_apply(act, c)) > 0.999
    assert _pcc(got["a"], A.torch_apply(act, got["s"] + c)) > 0.999


def test_mish_and_hardtanh_sim_kernels_differ_where_the_card_does():
    x = torch.linspace(-9, 9, 4001).to(torch.bfloat16).float()
    m = A.sim_apply("mish", x)
    d = (m - torch.nn.functional.mish(x)).abs()
    assert d.max() < 0.05 and not torch.equal(m, torch.nn.functional.mish(x).to(torch.bfloat16).float())
    assert torch.equal(m[x >= 8], x[x >= 8])                  # the kernel's saturation: x itself
    h = A.sim_apply("hardtanh(-2.0, 3.0)", x)
    assert torch.equal(h, x.clamp(-2, 3))


@pytest.fixture(scope="module")
def device():
    from ttmodels.backends import mock_device
    tt, dev = mock_device.open_device("n150", l1_small_size=24576)
    yield tt, dev
    tt.close_device(dev)


@pytest.mark.parametrize("name", A.NAMES)
def test_fusion_facts_hold_on_the_mock_device(name, device):
    """Where the table says a form fuses, ttnn 0.81.1 takes it; where ttnn refuses it, the table
    says it does not fuse (a form ttnn drops silently, hardswish in conv2d/binary, is read off the
    JIT defines: docs/spec.md)."""
    tt, dev = device
    act = A.parse(name)
    d = A.get(act)
    uwp = A.unary_with_param(tt, act)

    def refused(fn) -> bool:
        try:
            fn()
            return False
        except Exception:           # noqa: BLE001 - ttnn's TT_THROW surfaces as RuntimeError
            return True

    a = tt.from_torch(torch.randn(1, 1, 64, 64), dtype=tt.bfloat16, layout=tt.TILE_LAYOUT, device=dev)
    b = tt.from_torch(torch.randn(64, 64), dtype=tt.bfloat16, layout=tt.TILE_LAYOUT, device=dev)
    pc = tt.MatmulMultiCoreReuseMultiCast1DProgramConfig(
        compute_with_storage_grid_size=(1, 1), in0_block_w=2, out_subblock_h=1, out_subblock_w=1,
        per_core_M=2, per_core_N=2, fuse_batch=True, fused_activation=uwp, mcast_in0=True)
    mm = refused(lambda: tt.matmul(a, b, program_config=pc))
    binary = refused(lambda: tt.add(a, a, activations=[uwp]))
    fn, args, kw = A.standalone(tt, act)
    standalone = refused(lambda: fn(a, *args, **kw))
    assert not standalone, name
    assert mm == (not d.fuses_matmul), (name, mm)      # the matmul refuses what it cannot fuse
    if d.fuses_binary:
        assert not binary, name
    if binary:
        assert not d.fuses_binary, name


def test_sim_unary_op_types_mirror_ttnn(device):
    """The sim's UnaryOpType is ttnn 0.81.1's, member for member, so a table row needs no sim
    enum change; one the table does not model is refused by name."""
    tt, _ = device
    from ttmodels.backends import sim
    real = {m.name: int(m.value) for m in tt.UnaryOpType.__members__.values()} \
        if hasattr(tt.UnaryOpType, "__members__") else \
        {m: int(getattr(tt.UnaryOpType, m).value) for m in dir(tt.UnaryOpType) if m.isupper()}
    assert {m.name: m.value for m in sim.UnaryOpType} == real
    dev = sim.open_device(device_id=0)
    t = sim.from_torch(torch.randn(1, 1, 32, 32), dtype=sim.bfloat16, layout=sim.TILE_LAYOUT,
                       device=dev)
    with pytest.raises(Exception, match="softcap.*not modelled"):
        sim.add(t, t, activations=[sim.UnaryWithParam(sim.UnaryOpType.SOFTCAP, 1.0)])



def test_hardtanh_and_mish_run_for_real_on_the_mock_device(real_run):
    """Fused hardtanh (conv, matmul-free), standalone hardtanh and mish, and mish after an add
    and a linear (where it cannot fuse): ttnn's allocator runs every step as planned."""
    spec = {"name": "acts", "inputs": {"x": {"channels": 32, "size": 16}}, "layers": [
        {"name": "c1", "op": "conv2d", "out": 64, "kernel": 3, "padding": 1, "bn": "bn1",
         "act": "mish"},
        {"name": "c2", "op": "conv2d", "out": 64, "kernel": 1, "act": {"hardtanh": [-2, 2]}},
        {"name": "h", "op": "hardtanh", "min_val": 0, "max_val": 6},
        {"name": "m", "op": "mish"},
        {"name": "a", "op": "add", "in": ["m", "c1"], "act": "mish"},
        {"name": "p", "op": "global_avg_pool"},
        {"name": "fc", "op": "linear", "out": 10, "act": "mish"}]}
    plan, report = real_run(spec)
    assert report.real and report.completed, report
    bad = [(s.name, s.error) for s in report.steps if not s.ok]
    assert not bad and len(report.steps) >= len(plan.layers)
    ops = {c.name for c in report.steps}
    assert {"c1", "c2", "h", "m", "a", "fc"} <= ops
