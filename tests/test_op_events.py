"""Measured allocation rows of ``plan_alloc.op_events`` (issue 33). The sizes ttnn allocated were
read from the real run on the mock n150 (scripts: ``ttmodels verify`` with the L1 timeline's
events; docs/layouts.md, "L1 by address"), for the spec below at batch 8:

* ``c1`` (3x3 conv, two width slices), per slice: input copy 528,384 B, halo 565,760, free both,
  halo 565,760, output slice 524,288, free both;
* ``mp`` (max pool, two height slices), per slice: input copy 524,288 / 528,384, halo 561,280,
  free both, halo 561,280, output slice 131,072, free both;
* ``up`` (nearest upsample, height shards), ``cat`` (channel concat of height shards) and
  their adapters: the output only.
The model takes the largest slice for all (each leaves L1 as it found it)."""
from ttmodels.language.spec import load_graph
from ttmodels.planning import plan_alloc as PA
from ttmodels.planning.planner import plan_graph

M1 = {"name": "m1", "inputs": {"x": {"channels": 64, "size": [256, 256]}},
      "layers": [{"name": "c1", "op": "conv2d", "out": 64, "kernel": 3, "padding": 1,
                  "act": "relu"},
                 {"name": "mp", "op": "max_pool2d", "kernel": 3, "stride": 2, "padding": 1},
                 {"name": "ds", "op": "conv2d", "in": "mp", "out": 128, "kernel": 1,
                  "stride": 2},
                 {"name": "c2", "op": "conv2d", "in": "ds", "out": 64, "kernel": 1},
                 {"name": "up", "op": "upsample", "in": "c2", "scale": 2},
                 {"name": "cat", "op": "concat", "in": ["up", "mp"]}]}

# (in_copy, halo, output slice) ttnn allocated per bank, largest slice
MEASURED = {"c1": (528_384, 565_760, 524_288), "mp": (528_384, 561_280, 131_072)}


def _sizes(events):
    return {e[1]: e[2] for e in events if e[0] == PA.ALLOC}


def test_a_dram_sliced_conv_or_pool_allocates_its_slice_buffers_in_ttnns_order():
    plan = plan_graph(load_graph(M1, batch_size=8), oracle=False)
    for name, (copy, halo, out) in MEASURED.items():
        pl = plan.layer(name)
        assert pl.config.slice, name
        ev = PA.op_events(pl, plan.graph, plan.l1_banks)
        order = [(e[0], e[1]) for e in ev if e[0] != PA.PROGRAM and not e[1].startswith("out:")]
        assert order == [(PA.ALLOC, "in_copy"), (PA.ALLOC, "halo0"), (PA.FREE, "in_copy"),
                         (PA.FREE, "halo0"), (PA.ALLOC, "halo"), (PA.ALLOC, "slice_out"),
                         (PA.FREE, "halo"), (PA.FREE, "slice_out")], name
        got = _sizes(ev)
        # within 3 % of what ttnn allocated (the halo is the estimate's: l1.py)
        for key, want in (("in_copy", copy), ("halo0", halo), ("slice_out", out)):
            assert abs(got[key] - want) <= 0.03 * want, (name, key, got[key], want)


def test_a_failure_inside_a_slice_is_seen_by_the_address_model():
    """With a live tensor taking all but the slice's output, the walk fails at the sliced step
    (today's model allocated nothing for it and saw no failure)."""
    plan = plan_graph(load_graph(M1, batch_size=8), oracle=False)
    steps = PA.simulate(plan, l1_small_size=32768 + 700_000)
    bad = PA.first_failure(steps)
    assert bad is not None and bad.name in ("c1", "mp")


def test_ttnns_excess_over_a_sliced_convs_estimate_is_its_halo():
    """resnet50 at batch 32: ttnn's halo for the sliced layer2.0.downsample.0 is 442,304 B per
    bank (the real run's out of memory), the estimate 387,008; with ttnn's figure in the plan
    (``ttnn_extra_cb``) the slice's halo is ttnn's and the CBs are the estimate's."""
    from dataclasses import replace
    plan = plan_graph(load_graph("resnet50", batch_size=32), oracle=False)
    pl = plan.layer("layer2.0.downsample.0")
    assert pl.config.slice
    raw = dict(pl.config.l1_parts)
    extra = 442_304 - raw["halo"]
    ttnn = replace(pl, l1_bytes_per_core=pl.l1_bytes_per_core + extra,
                   config=replace(pl.config, l1_parts={**raw, "ttnn_extra_cb": extra}))
    base, got = (PA.op_events(x, plan.graph, plan.l1_banks) for x in (pl, ttnn))
    assert _sizes(got)["halo"] == _sizes(got)["halo0"] == 442_304
    prog = [e[1] for e in got if e[0] == PA.PROGRAM]
    assert prog == [e[1] for e in base if e[0] == PA.PROGRAM]
