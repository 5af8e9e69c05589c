"""Concat and split run from DRAM interleaved when their L1 form does not fit (issue 33: the
planner never fails a model ttnn can run). The sweep refused unet_resnet34 at batch 8-32 at a
decoder concat and yolov8n at batch 16 at its first split; these specs are the smallest that
show the same two failures: the op's L1 need over the bank, and an L1 output the allocator
finds no free block for."""
from ttmodels.language.spec import load_graph
from ttmodels.planning.layout import INTERLEAVED
from ttmodels.planning.planner import plan_graph

# two 64-channel maps of 448x448 whose height-sharded concat needs 1.6 MB per core in L1
BIG_CAT = {"name": "big_cat", "inputs": {"a": {"channels": 64, "size": [448, 448]}},
           "layers": [{"name": "c1", "op": "conv2d", "out": 64, "kernel": 1},
                      {"name": "c2", "op": "conv2d", "in": "a", "out": 64, "kernel": 1},
                      {"name": "cat", "op": "concat", "in": ["c1", "c2"]},
                      {"name": "c3", "op": "conv2d", "out": 32, "kernel": 1}]}

# a split whose interleaved L1 input and outputs (1.18 MB per core) fit the bank by size, but
# not beside the conv that made them at the addresses ttnn's allocator gives
BIG_SPLIT = {"name": "big_split", "inputs": {"a": {"channels": 128, "size": [384, 384]}},
             "layers": [{"name": "c1", "op": "conv2d", "out": 128, "kernel": 1},
                        {"name": "sp", "op": "split", "channels": {"s0": 64, "s1": 64}},
                        {"name": "add", "op": "add", "in": ["sp.s0", "sp.s1"]}]}


def _dram(layout) -> bool:
    return layout.memory == layout.memory.__class__(INTERLEAVED, "dram")


def test_a_concat_too_big_for_l1_runs_from_dram():
    plan = plan_graph(load_graph(BIG_CAT), oracle=False)
    cat = plan.layer("cat")
    assert all(_dram(t) for t in cat.inputs) and _dram(cat.output)
    reasons = {a.reason for a in plan.adapters if a.dst == "cat"}
    assert reasons and all("runs from DRAM" in r for r in reasons), reasons
    assert cat.l1_bytes_per_core < 64 * 1024     # its CBs only


def test_a_split_the_allocator_cannot_place_runs_from_dram():
    plan = plan_graph(load_graph(BIG_SPLIT), oracle=False)
    sp = plan.layer("sp")
    assert _dram(sp.inputs[0]) and all(_dram(o) for o in sp.tensor_layouts().values())
    (a,) = [a for a in plan.adapters if a.dst == "sp"]
    assert "no free block" in a.reason
    assert plan.cap_hints == frozenset({("sp", 0)})


def test_both_run_for_real(real_run):
    """The real run on the mock n150: ttnn's own allocator places every buffer and runs every
    program of the two DRAM fallbacks."""
    for spec, layer in ((BIG_CAT, "cat"), (BIG_SPLIT, "sp")):
        plan, report = real_run(spec)
        assert _dram(plan.layer(layer).output)
        assert report.real and report.completed, (spec["name"], report)
        bad = [(s.name, s.error) for s in report.steps if not s.ok]
        assert not bad and layer in {s.name for s in report.steps}, bad
