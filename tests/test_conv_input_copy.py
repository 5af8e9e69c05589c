"""A halo conv's own sharded copy of an input it is not given sharded (issue 33: an out of memory
inside such a step was out of the address model's sight when the input was interleaved in L1,
and the DRAM stem's copy was counted at 2 B a channel whatever its format).

Measured on the mock n150 (ttnn 0.81.1) with ``scripts/measure_op_events.py`` (and
``--profile``), bytes per bank in ttnn's order, + an allocation, - a free: ``SPEC`` at batch 2,
32 x 32, with 3 and 16 input channels, in the spec's defaults (bfloat16) and its float32 profile.
``c0`` is the stem (DRAM input), ``ch`` and ``cb`` 3x3 convs (height, block sharded) on ``c1``'s
interleaved L1 output: each copies its input into its shards beside a first halo pass, frees
both, then haloes again beside its output (yolov8s b4's model.4.m.0.cv1.conv, 106,496 B).
``OUTS``: a conv whose output is not sharded writes a sharded one first (``_conv_run``)."""
import pytest

from ttmodels.language.spec import load_graph
from ttmodels.planning import plan_alloc as PA
from ttmodels.planning.planner import plan_graph
from mock_helpers import signed_sizes  # noqa: E402


def spec(channels: int) -> dict:
    return {"name": f"s{channels}", "inputs": {"x": {"channels": channels, "size": [32, 32]}},
            "profiles": {"float32": {"activations": "float32", "weights": "float32",
                                     "math_fidelity": "HiFi4", "fp32_accum": True}},
            "layers": [
                {"name": "c0", "op": "conv2d", "out": 64, "kernel": 3, "padding": 1,
                 "act": "relu"},
                {"name": "c1", "op": "conv2d", "out": 128, "kernel": 1,
                 "layout": "interleaved l1"},
                {"name": "ch", "op": "conv2d", "in": "c1", "out": 64, "kernel": 3, "padding": 1},
                {"name": "cb", "op": "conv2d", "in": "c1", "out": 128, "kernel": 3, "padding": 1,
                 "layout": "block_sharded l1"}],
            "outputs": ["ch", "cb"]}


def _halo_row(copy: int, halo: int, out: int) -> list[int]:
    return [copy, halo, -copy, -halo, halo, out, -halo]


# (channels, profile) -> layer -> (copy, halo, output) as ttnn allocated them
TTNN = {
    (3, None): {"c0": (512, 1632, 4096), "ch": (8192, 26112, 4096),
                "cb": (16384, 21760, 16384)},
    # a 3-channel float32 stem: 8 channels of 4 B a row (the old model: 16 B, 512)
    (3, "float32"): {"c0": (1024, 3264, 8192), "ch": (16384, 52224, 8192),
                     "cb": (32768, 43520, 32768)},
    (16, None): {"c0": (1024, 3264, 4096), "ch": (8192, 26112, 4096),
                 "cb": (16384, 21760, 16384)},
    (16, "float32"): {"c0": (2048, 6528, 8192), "ch": (16384, 52224, 8192),
                      "cb": (32768, 43520, 32768)},
}


@pytest.mark.parametrize("channels,profile", list(TTNN))
def test_a_halo_conv_copies_an_input_it_is_not_given_sharded_as_ttnn_does(channels, profile):
    plan = plan_graph(load_graph(spec(channels), batch_size=2, profile=profile), oracle=False)
    for name, (copy, halo, out) in TTNN[channels, profile].items():
        pl = plan.layer(name)
        assert not pl.inputs[0].memory.sharded, name        # DRAM (c0) or interleaved L1
        got = signed_sizes(PA.op_events(pl, plan.graph, plan.l1_banks))
        assert got == _halo_row(copy, halo, out), name


def test_the_estimate_counts_that_copy_with_the_first_halo_pass():
    """ops/conv2d/l1.py's halo phase and op_events' copy are one figure (own_input_copy)."""
    plan = plan_graph(load_graph(spec(16), batch_size=2, profile="float32"), oracle=False)
    for name in ("c0", "ch", "cb"):
        pl = plan.layer(name)
        parts = pl.config.l1_parts
        copy = PA.conv_input_copy(pl, plan.graph, plan.l1_banks)
        assert copy == TTNN[16, "float32"][name][0]
        assert pl.l1_bytes_per_core >= parts["input"] + copy + parts["halo"]


# 3x3 64 -> 64 on the float32 1x1's interleaved L1 output, run with deallocate_activation
FREED = {"name": "m3", "inputs": {"x": {"channels": 16, "size": [32, 32]}},
         "profiles": {"float32": {"activations": "float32", "weights": "float32",
                                  "math_fidelity": "HiFi4", "fp32_accum": True}},
         "layers": [
             {"name": "c0", "op": "conv2d", "out": 64, "kernel": 3, "padding": 1, "act": "relu"},
             {"name": "c1", "op": "conv2d", "out": 64, "kernel": 1, "layout": "interleaved l1"},
             {"name": "c2", "op": "conv2d", "in": "c1", "out": 64, "kernel": 3, "padding": 1}],
         "outputs": {"out": "c2"}}


def test_a_halo_conv_freeing_its_interleaved_input_frees_it_after_its_copy():
    """Measured (the plan with ``freeing_input`` on ``out``, batch 2, float32): the copy 8,192 B,
    the input (c1, 8,192) freed, the copy freed and made again at the same address (ttnn's
    move), the first halo pass 26,112 beside it, both freed, the halo, the output."""
    plan = plan_graph(load_graph(FREED, batch_size=2, profile="float32"), oracle=False)
    pl = plan.layer("out")
    assert PA.can_free_input(pl, plan)
    freed = PA.freeing_input(pl, plan.graph)
    src = pl.node.inputs[0]
    inp = PA.tensor_bank_bytes(plan.graph, src, plan.layer(src).output, plan.l1_banks)
    got = signed_sizes(PA.op_events(freed, plan.graph, plan.l1_banks), {"in:0": inp})
    assert got == [8192, -8192, -8192, 8192, 26112, -8192, -26112, 26112, 8192, -26112]
    # its peak: the input beside the copy, or the copy beside a halo, or the conv without it
    parts = freed.config.l1_parts
    assert freed.l1_bytes_per_core >= max(inp + 8192, 8192 + 26112)
    assert freed.l1_bytes_per_core == max(pl.l1_bytes_per_core - inp, inp + 8192)
    assert parts["input"] == freed.l1_bytes_per_core - (pl.l1_bytes_per_core - inp)


# convs whose output is not sharded: 3x3 (halo) and 1x1 (matmul) on c0's height shards, with
# interleaved L1 and DRAM outputs (bfloat16, batch 2)
OUTS = {"name": "s5", "inputs": {"x": {"channels": 16, "size": [32, 32]}},
        "layers": [
            {"name": "c0", "op": "conv2d", "out": 64, "kernel": 3, "padding": 1, "act": "relu"},
            {"name": "hi", "op": "conv2d", "in": "c0", "out": 64, "kernel": 3, "padding": 1,
             "layout": "interleaved l1"},
            {"name": "hd", "op": "conv2d", "in": "c0", "out": 64, "kernel": 3, "padding": 1,
             "layout": "interleaved dram"},
            {"name": "mi", "op": "conv2d", "in": "c0", "out": 128, "kernel": 1,
             "layout": "interleaved l1"},
            {"name": "md", "op": "conv2d", "in": "c0", "out": 128, "kernel": 1,
             "layout": "interleaved dram"}],
        "outputs": ["hi", "hd", "mi", "md"]}

# measured: the conv writes its sharded output, then the layer's (L1 only: a DRAM one has no L1
# buffer), then frees the sharded one; a halo conv frees its halo last
TTNN_OUTS = {"hi": [13056, -13056, 13056, 4096, 4096, -4096, -13056],
             "hd": [13056, -13056, 13056, 4096, -4096, -13056],
             "mi": [8192, 8192, -8192],
             "md": [8192, -8192]}


def test_a_conv_with_an_unsharded_output_writes_a_sharded_one_first_as_ttnn_does():
    plan = plan_graph(load_graph(OUTS, batch_size=2), oracle=False)
    got = {n: signed_sizes(PA.op_events(plan.layer(n), plan.graph, plan.l1_banks)) for n in TTNN_OUTS}
    assert got == TTNN_OUTS


def test_ttnns_excess_for_an_interleaved_l1_output_is_that_buffer_not_cbs():
    """The oracle's figure for ``hi`` exceeds the estimate by 4,096 B (``ttnn_extra_cb``): the
    interleaved output beside the sharded one, which op_events places itself."""
    from dataclasses import replace
    plan = plan_graph(load_graph(OUTS, batch_size=2), oracle=False)
    pl = plan.layer("hi")
    raw = dict(pl.config.l1_parts)
    ttnn = replace(pl, l1_bytes_per_core=pl.l1_bytes_per_core + 4096,
                   config=replace(pl.config, l1_parts={**raw, "ttnn_extra_cb": 4096}))
    cbs = [max(e[1] for e in PA.op_events(x, plan.graph, plan.l1_banks) if e[0] == PA.PROGRAM)
           for x in (pl, ttnn)]
    assert cbs[0] == cbs[1]
