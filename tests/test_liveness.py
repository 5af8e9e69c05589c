"""Liveness-aware L1: which tensors are alive in L1 while each layer runs (executor order and
deallocation points), the per-layer live figure, and spills when the bank is short."""
import pytest
import torch

import ttmodels
from ttmodels.planning import liveness as lv
from ttmodels.errors import LayoutError
from ttmodels.language.graph import Graph, LayoutPolicy, Node, TensorShape
from ttmodels.planning.l1 import bank_bytes, l1_bank_bytes
from ttmodels.planning.layout import BLOCK, HEIGHT, INTERLEAVED, TILE_LAYOUT, MemSpec, TensorLayout
from ttmodels.planning.planner import plan_graph
from ttmodels.planning.plan_checks import check_plan, edge_mismatches

from test_planner import conv


def shape(h, c, n=1):
    return TensorShape(n, h, h, c)


def add(name, a, b, out):
    return Node(name, "add", [a, b], dict(activation="relu"), out)


def residual_block():
    """x -> c1 -> c2 -> add(c2, x): x stays alive across c1 and c2 for the add."""
    return Graph("res", {"x": shape(56, 64)}, [
        conv("stem", "x", shape(56, 64), 64, 64, 3),
        conv("c1", "stem", shape(56, 64), 64, 64, 3),
        conv("c2", "c1", shape(56, 64), 64, 64, 3),
        add("sum", "c2", "stem", shape(56, 64)),
    ], {}, ["sum"])


def test_last_uses_follow_the_executor():
    g = residual_block()
    assert lv.last_uses(g.nodes) == {"x": 0, "stem": 3, "c1": 2, "c2": 3, "sum": 3}


def test_residual_shortcut_is_live_while_the_branch_runs():
    plan = plan_graph(residual_block())
    stem = plan.layer("stem")
    held = bank_bytes(stem.output, 56 * 56, 64)
    assert held > 0
    # c1 reads stem itself: not "other"; c2 does not: stem is alive around it
    assert "stem" not in plan.layer("c1").live_tensors
    assert plan.layer("c2").live_tensors == {"stem": held}
    c2 = plan.layer("c2")
    assert c2.live_l1 == c2.l1_bytes_per_core + held
    # the add reads it: its own estimate counts it; nothing else is alive then
    assert plan.layer("sum").live_tensors == {}


def test_tensor_with_three_consumers_lives_until_the_last():
    g = Graph("fan", {"x": shape(28, 64)}, [
        conv("p", "x", shape(28, 64), 64, 64, 3),
        conv("a", "p", shape(28, 64), 64, 64, 1),
        conv("b", "p", shape(28, 64), 64, 64, 1),
        conv("q", "a", shape(28, 64), 64, 64, 3),
        add("s1", "q", "b", shape(28, 64)),
        add("s2", "s1", "p", shape(28, 64)),
    ], {}, ["s2"])
    plan = plan_graph(g)
    p = bank_bytes(plan.layer("p").output, 28 * 28, 64)
    assert "p" not in plan.layer("a").live_tensors                 # reads p
    assert plan.layer("q").live_tensors.keys() == {"p", "b"}       # p (3rd reader later), b
    assert plan.layer("s1").live_tensors == {"p": p}
    assert plan.layer("s2").live_tensors == {}                     # p is its operand


def test_fpn_merge_keeps_the_lateral_alive():
    """Top-down FPN: the lateral of the shallow level waits while the deep level is upsampled."""
    g = Graph("fpn", {"x": shape(32, 64)}, [
        conv("c3", "x", shape(32, 128), 64, 128, 3),
        conv("c4", "c3", shape(16, 256), 128, 256, 3, 2),
        conv("lat3", "c3", shape(32, 64), 128, 64, 1),
        conv("lat4", "c4", shape(16, 64), 256, 64, 1),
        Node("up", "upsample", ["lat4"], dict(scale=(2, 2), mode="nearest"), shape(32, 64)),
        add("merge", "lat3", "up", shape(32, 64)),
    ], {}, ["merge", "c4"])
    plan = plan_graph(g)
    lat3 = bank_bytes(plan.layer("lat3").output, 32 * 32, 64)
    up = plan.layer("up")
    assert up.live_tensors.get("lat3") == lat3
    # c4 is a graph output: kept alive to the end, so it is counted after its last reader too
    assert "c4" in plan.layer("merge").live_tensors


def test_bank_is_ttnn_bank_for_the_l1_small_size():
    assert l1_bank_bytes("wormhole_b0", 32768) == 1_360_544
    assert l1_bank_bytes("wormhole_b0", 0) == 1_393_312
    g = residual_block()
    assert plan_graph(g).l1_budget == 1_360_544
    assert plan_graph(g, l1_small_size=0).l1_budget == 1_393_312


def test_bank_bytes_interleaved_pages_round_robin():
    t = TensorLayout(MemSpec(INTERLEAVED, "l1"), TILE_LAYOUT, "bfloat16")
    # 98 x 2 tiles over 64 banks: 4 tiles per bank at most
    assert bank_bytes(t, 3136, 64) == 4 * 2048
    assert bank_bytes(TensorLayout(MemSpec(INTERLEAVED, "dram")), 3136, 64) == 0


def big_residual(n=16, c=384):
    """A bottleneck at resnet50 layer1's size, batch 16, 384 channels: the identity shortcut
    (800x384 shard, 614,400 B/core) is alive while the branch runs; with it the branch's last
    1x1 conv (which cannot be DRAM-sliced) does not fit the bank."""
    s = lambda ch: TensorShape(n, 56, 56, ch)  # noqa: E731
    pol = LayoutPolicy(HEIGHT, "l1")
    return Graph("big", {"x": s(64)}, [
        conv("stem", "x", s(c), 64, c, 1, layout=pol),
        conv("c1", "stem", s(64), c, 64, 1, layout=pol),
        conv("c2", "c1", s(64), 64, 64, 3, layout=pol),
        conv("c3", "c2", s(c), 64, c, 1, layout=pol),
        add("sum", "c3", "stem", s(c)),
    ], {}, ["sum"])


def test_over_budget_spills_the_shortcut_with_a_reason():
    plan = plan_graph(big_residual())
    assert check_plan(plan) == [] and edge_mismatches(plan) == []
    assert plan.spills, str(plan)
    sp = plan.spills[0]
    assert sp.tensor == "stem" and sp.after == "c1" and sp.for_layer == "c3"
    assert sp.to.memory == MemSpec(INTERLEAVED, "dram")
    assert sp.reason == f"spill: frees {sp.frees:,} B/core for {sp.for_layer}"
    assert sp.frees == bank_bytes(sp.before, 16 * 56 * 56, 384) == 614_400
    for layer in plan.layers:
        assert layer.live_l1 <= plan.l1_budget, layer.name
    assert "stem" not in plan.layer(sp.for_layer).live_tensors
    text = str(plan)
    assert "spills (1):" in text and sp.reason in text
    d = plan.to_dict()
    assert d["spills"][0]["reason"] == sp.reason
    assert d["layers"][2]["live_tensors"] == plan.layers[2].live_tensors


def test_spill_runs_on_sim_and_matches_the_unspilled_result():
    """The executor moves the spilled tensor to DRAM after its spill point; results are
    bit-identical to running the same graph with the shortcut kept in L1."""
    g_small = big_residual(n=1)
    plan = plan_graph(big_residual(n=1))
    assert not plan.spills
    forced = plan_graph(big_residual(n=1))
    stem = forced.layer("stem").output
    forced.spills.append(lv.Spill("stem", "c1", stem, TensorLayout(MemSpec(INTERLEAVED, "dram"),
                                                                      stem.layout, stem.dtype),
                                  0, "c2"))
    # the add now reads the shortcut from DRAM
    add_layer = forced.layer("sum")
    add_layer.inputs[1] = forced.spills[0].to
    from ttmodels.backends import open_backend
    from ttmodels.runtime.executor import Executor
    torch.manual_seed(1)
    params = {n.name: {"weight": torch.randn(n.attrs["out_channels"], n.attrs["in_channels"],
                                             *n.attrs["kernel"]) * 0.05,
                       "bias": torch.randn(n.attrs["out_channels"]) * 0.1}
              for n in g_small.nodes if n.op == "conv2d"}
    x = torch.randn(1, 64, 56, 56)
    outs = []
    for p in (plan, forced):
        with open_backend("sim") as be:
            ex = Executor(p, params, be)
            with be.record() as calls:
                y = ex.run({"x": x})["sum"]
            outs.append(be.tt.to_torch(y))
            names = [c.name for c in calls]
        if p is forced:
            assert "to_memory_config" in names
    assert torch.equal(outs[0], outs[1])


def test_no_remedy_names_layer_live_tensors_and_bytes():
    g = big_residual()
    # nothing may move: every tensor in one explicit L1 layout and the add is too big anyway
    g.nodes[1] = conv("c1", "stem", TensorShape(16, 56, 56, 2048), 256, 2048, 1,
                      layout=LayoutPolicy(HEIGHT, "l1"))
    g.nodes[2] = conv("c2", "c1", TensorShape(16, 56, 56, 64), 2048, 64, 3,
                      layout=LayoutPolicy(HEIGHT, "l1"))
    with pytest.raises(LayoutError) as e:
        plan_graph(g)
    msg = str(e.value)
    assert "layer '" in msg and "B of L1 per core" in msg


def test_resnet50_batch16_plan_fits_the_bank_with_live_tensors():
    plan = ttmodels.plan("resnet50", batch_size=16)
    assert all(l.live_l1 is not None and l.live_l1 <= plan.l1_budget for l in plan.layers)
    assert check_plan(plan) == [] and edge_mismatches(plan) == []


def test_pool_over_the_bank_is_dram_sliced_and_runs_on_sim():
    """resnet50's stem at batch 32: the max pool alone needs 1.8 MB/core in L1, so it runs
    DRAM-sliced (dram_slice_config), reading the sliced stem conv's DRAM output."""
    g = Graph("pool", {"x": TensorShape(32, 112, 112, 64)}, [
        Node("pool", "max_pool2d", ["x"], dict(kernel=(3, 3), stride=(2, 2),
                                              padding=(1, 1, 1, 1), dilation=(1, 1)),
             TensorShape(32, 56, 56, 64)),
    ], {}, ["pool"])
    plan = plan_graph(g)
    pool = plan.layer("pool")
    assert pool.config.slice.type == "height" and pool.config.slice.num_slices >= 2
    assert pool.output.memory == pool.inputs[0].memory == MemSpec(INTERLEAVED, "dram")
    assert pool.live_l1 <= plan.l1_budget
    assert check_plan(plan) == [] and edge_mismatches(plan) == []
    small = Graph("pool", {"x": TensorShape(2, 16, 16, 64)}, [
        Node("pool", "max_pool2d", ["x"], dict(kernel=(3, 3), stride=(2, 2),
                                              padding=(1, 1, 1, 1), dilation=(1, 1)),
             TensorShape(2, 8, 8, 64)),
    ], {}, ["pool"])
    from ttmodels.backends import open_backend
    from ttmodels.runtime.executor import Executor
    x = torch.randn(2, 64, 16, 16)
    sliced = plan_graph(small)
    from dataclasses import replace
    from ttmodels.planning.plan_config import SliceConfig
    sliced.layers[0].config = replace(sliced.layers[0].config, slice=SliceConfig("height", 2),
                                      applied_shard_scheme=None)
    sliced.layers[0].output = TensorLayout(MemSpec(INTERLEAVED, "dram"),
                                           sliced.layers[0].output.layout,
                                           sliced.layers[0].output.dtype)
    outs = []
    for p in (plan_graph(small), sliced):
        with open_backend("sim") as be:
            with be.record() as calls:
                y = Executor(p, {}, be).run({"x": x})["pool"]
            kw = next(c.kwargs for c in calls if c.name == "max_pool2d")
            outs.append((be.tt.to_torch(y).reshape(-1, 64)[:128], kw.get("dram_slice_config"),
                         y.memory_config()))
    assert outs[0][1] is None and outs[1][1] is not None
    assert "DRAM" in str(outs[1][2].buffer_type)
    assert torch.equal(outs[0][0], outs[1][0])
    ref = torch.nn.functional.max_pool2d(x, 3, 2, 1).permute(0, 2, 3, 1).reshape(-1, 64)
    assert torch.allclose(outs[1][0].float(), ref, atol=0.02, rtol=0.01)


def bottleneck_with_downsample(c=320):
    """stem -> c1 -> c2 -> c3, and a 1x1 downsample of the block input added to c3 (the spec's
    order puts the downsample last, as torchvision's Bottleneck does). Where it stands, the
    downsample's own buffers plus c3's waiting output do not fit the bank; right after the stem
    nothing else is alive."""
    s = lambda ch: TensorShape(16, 56, 56, ch)  # noqa: E731
    pol = LayoutPolicy(HEIGHT, "l1")
    return Graph("ds", {"x": s(64)}, [
        conv("stem", "x", s(c), 64, c, 1, layout=pol),
        conv("c1", "stem", s(64), c, 64, 1, layout=pol),
        conv("c2", "c1", s(64), 64, 64, 3, layout=pol),
        conv("c3", "c2", s(c), 64, c, 1, layout=pol),
        conv("ds", "stem", s(c), c, c, 1, layout=pol),
        add("sum", "c3", "ds", s(c)),
    ], {}, ["sum"])


def test_reorder_runs_the_downsample_before_the_branch():
    g = bottleneck_with_downsample()
    order = [n.name for n in g.nodes]
    plan = plan_graph(g)
    assert [n.name for n in g.nodes] == order                # the caller's graph is untouched
    assert [l.name for l in plan.layers] == ["stem", "ds", "c1", "c2", "c3", "sum"]
    assert [(r.layer, r.before) for r in plan.reordered] == [("ds", "c1")]
    assert plan.spills == []                                 # reordering moves no bytes
    assert all(l.live_l1 <= plan.l1_budget for l in plan.layers)
    assert "ds" in plan.layer("c2").live_tensors and "stem" not in plan.layer("c2").live_tensors
    assert check_plan(plan) == [] and edge_mismatches(plan) == []
    assert "reorder: ds runs before c1" in str(plan)
    assert plan.to_dict()["reordered"][0]["layer"] == "ds"
    # without room to gain, nothing moves
    small = plan_graph(bottleneck_with_downsample(c=64))
    assert small.reordered == [] and [l.name for l in small.layers] == order


# ---- circular buffers outlive their program (liveness.StepL1, step_figures) ------------------

def test_step_total_counts_the_previous_programs_cbs_while_the_step_allocates():
    """ttnn frees a program's CBs only when the next program starts: a step that allocates more
    than the previous one freed peaks at what it allocates plus those CBs."""
    st = lv.StepL1("layer", "c3", own=700, cbs=30, first=670, carry=100, others={"x": 500})
    assert st.total == 500 + 670 + 100 and st.carried
    small = lv.StepL1("layer", "c", own=700, cbs=300, first=400, carry=100, others={})
    assert small.total == 700 and not small.carried


def _to_layout(memory, shard, grid, layout, dtype="bfloat16", out_dtype=None):
    from ttmodels.planning.plans import Adapter
    m = MemSpec(memory, "l1", grid, None, shard)
    before = TensorLayout(m, "tile" if layout == "row_major" else "row_major", dtype)
    return Adapter("x", "y", 0, "to_layout", before, TensorLayout(m, layout, out_dtype or dtype), "t")


@pytest.mark.parametrize("rows, c, memory, shard, grid, dtype, out_dtype, cbs", [
    # tilize_with_val_padding's default factory: two CBs of the whole row's tiles, in and out
    (196, 128, BLOCK, (128, 32), (4, 2), "bfloat16", None, 2 * 8192),
    (196, 512, BLOCK, (64, 128), (4, 4), "bfloat16", None, 2 * 32768),
    (196, 1536, BLOCK, (128, 192), (8, 2), "bfloat16", None, 2 * 98304),
    (196, 128, BLOCK, (128, 32), (4, 2), "bfloat16", "bfloat8_b", 8192 + 4352),
    (196, 128, BLOCK, (128, 32), (4, 2), "float32", None, 2 * 16384),
    # whole tiles: the sharded tilize factory, CBs on the shards themselves
    (256, 256, BLOCK, (128, 32), (8, 2), "bfloat16", None, 0),
    (256, 512, BLOCK, (64, 128), (4, 4), "bfloat16", None, 0),
    (8192, 32, HEIGHT, (128, 32), (8, 8), "bfloat16", None, 0),
    # height sharded with padding: pad, then the sharded tilize
    (196, 64, HEIGHT, (128, 64), (2, 1), "bfloat16", None, 0),
    (1000, 128, HEIGHT, (64, 128), (8, 2), "bfloat16", None, 0),
])
def test_sharded_tilize_leaves_the_cbs_ttnn_measured(rows, c, memory, shard, grid, dtype,
                                                      out_dtype, cbs):
    """``adapter_cbs`` of a tilize (to_layout row major -> tile) of a sharded tensor: the CBs its
    last program leaves (own CBs, not the ones on a tensor's buffer), as measured on the mock n150
    (ttnn 0.81.1) for each case."""
    a = _to_layout(memory, shard, grid, "tile", dtype, out_dtype)
    assert lv.adapter_cbs(a, rows, c) == cbs


@pytest.mark.parametrize("rows, c, buffer, out_dtype, cbs", [
    # measured on the mock n150 (NO_DISPATCH capture of to_layout(row major -> tile) of an
    # interleaved tensor into interleaved L1): a CB of a row of tiles in and one out
    (196, 128, "l1", None, 2 * 8192), (224, 128, "dram", None, 2 * 8192),
    (196, 256, "l1", None, 2 * 16384), (196, 1024, "dram", None, 2 * 65536),
    (196, 21, "l1", None, 2 * 2048), (196, 128, "l1", "bfloat8_b", 8192 + 4352),
    (784, 64, "dram", "bfloat8_b", 4096 + 2176),
    # wider rows: the block factory, 2-4 tiles a CB (the lower bound is counted)
    (64, 1536, "l1", None, 2 * 4096),
])
def test_interleaved_tilize_leaves_the_cbs_ttnn_measured(rows, c, buffer, out_dtype, cbs):
    from ttmodels.planning.plans import Adapter
    before = TensorLayout(MemSpec(INTERLEAVED, buffer), "row_major", "bfloat16")
    after = TensorLayout(MemSpec(INTERLEAVED, "l1"), "tile", out_dtype or "bfloat16")
    assert lv.adapter_cbs(Adapter("x", "y", 0, "to_layout", before, after, "t"), rows, c) == cbs


def test_untilize_double_buffers_a_row_of_the_shards_tiles():
    a = _to_layout(BLOCK, (128, 128), (2, 2), "row_major")
    assert lv.adapter_cbs(a, 256, 256) == 2 * 4 * 2048


def bottleneck_branch():
    """a 3x3 conv with large CBs, then a 1x1 conv expanding 64 -> 256 channels: the expansion's
    output is allocated while the 3x3 conv's CBs are still held."""
    return Graph("expand", {"x": shape(56, 64, n=8)}, [
        conv("c1", "x", shape(56, 64, n=8), 64, 64, 1),
        conv("c2", "c1", shape(56, 64, n=8), 64, 64, 3),
        conv("c3", "c2", shape(56, 256, n=8), 64, 256, 1),
    ], {}, ["c3"])


def test_each_step_inherits_the_cbs_of_the_step_before_it():
    plan = plan_graph(bottleneck_branch())
    steps = plan.step_l1
    assert [s.kind for s in steps].count("layer") == 3
    for prev, st in zip(steps, steps[1:]):
        pl = plan.layer(prev.name) if prev.kind == "layer" else None
        assert st.carry == (lv.layer_cbs(pl) if pl is not None else prev.cbs)
        assert st.total == sum(st.others.values()) + max(st.own, st.first + st.carry)
    for st in steps:
        if st.kind == "layer":
            assert plan.layer(st.name).live_l1 == st.total


def test_a_halo_conv_allocates_its_output_after_the_halo_program():
    plan = plan_graph(bottleneck_branch())
    from ttmodels.planning.l1 import layer_parts
    c2, c3 = plan.layer("c2"), plan.layer("c3")
    p2 = layer_parts(c2)
    assert p2["halo"] > 0
    assert lv.layer_first(c2) == c2.l1_bytes_per_core - p2["cb"] - p2["outputs"]
    p3 = layer_parts(c3)                       # a 1x1 (matmul) conv: no halo program
    assert p3["halo"] == 0 and lv.layer_first(c3) == c3.l1_bytes_per_core - p3["cb"]


def test_an_adapted_operand_at_its_last_use_is_freed_before_the_op_allocates():
    """x's last reader takes it through an adapter: the executor frees x right after the copy,
    and the liveness figures do not count it while the op runs."""
    g = Graph("i2s", {"x": shape(56, 64, n=2)}, [
        conv("c1", "x", shape(56, 64, n=2), 64, 64, 3,
             layout=LayoutPolicy(HEIGHT, "l1")),
        conv("c2", "c1", shape(56, 64, n=2), 64, 64, 1,
             layout=LayoutPolicy("block_sharded", "l1")),
    ], {}, ["c2"])
    plan = plan_graph(g)
    assert plan.adapters_into("c2"), str(plan)
    i = [pl.name for pl in plan.layers].index("c2")
    assert lv.freed_after_adapters("c1", i, plan.layer("c2").node, lv.last_uses(g.nodes), ())
    assert "c1" not in plan.layer("c2").live_tensors
    # and the executor does free it before the layer runs: c1's buffer is deallocated between
    # the adapter's call and c2's conv2d
    from ttmodels.backends import open_backend
    from ttmodels.runtime.executor import Executor
    torch.manual_seed(0)
    params = {n.name: {"weight": torch.randn(64, 64, *n.attrs["kernel"]) * 0.05,
                       "bias": torch.zeros(64)} for n in g.nodes}
    with open_backend("sim") as be:
        ex = Executor(plan, params, be)
        outs = {}

        def hook(kind, obj, inputs, call):
            out = call()
            if kind == "layer":
                outs[obj.name] = out
            return out
        ex.step_hook = hook
        with be.record() as calls:
            ex.run({"x": torch.randn(2, 64, 56, 56)})
    convs = [k for k, c in enumerate(calls) if c.name == "conv2d"]
    freed = [k for k, c in enumerate(calls) if c.name == "deallocate" and c.args and
             c.args[0] is outs["c1"]]
    assert len(convs) == 2 and freed and convs[0] < freed[0] < convs[1]


def test_blocking_remedy_is_reported_with_its_reason():
    """bevdet at batch 6: convs whose CBs would overflow the next step run with a smaller
    blocking or layout (0 bytes moved); the plan says so in the table and the JSON."""
    plan = ttmodels.plan("bevdet_r50_encoder", batch_size=6, input_size=(256, 704))
    assert plan.blockings
    figures = {(s.kind, s.name): s for s in plan.step_l1}
    for b in plan.blockings:
        assert b.reason.startswith(f"blocking: {b.layer} runs ") and b.for_layer in b.reason
        assert lv.layer_cbs(plan.layer(b.layer)) == b.cbs
        assert figures[("layer", b.for_layer)].total <= plan.l1_budget
    assert all(s.total <= plan.l1_budget for s in plan.step_l1)
    assert "blockings (" in str(plan) and plan.blockings[0].reason in str(plan)
    d = plan.to_dict()
    assert d["blockings"][0]["reason"] == plan.blockings[0].reason
    assert len(d["steps_l1"]) == len(plan.step_l1)


def test_per_channel_constants_are_alive_at_every_step():
    """batch_norm / layer_scale constants are put in L1 when the model is built and held to the
    end: timm dpn68's real run held 110,592 B per bank (27 batch_norm layers, 2 x 2048 B each)
    beyond the plan's sums at every step until liveness counted them."""
    from ttmodels.language.spec import load_graph
    from ttmodels.planning import plan_alloc as PA
    spec = {"name": "bns", "inputs": {"x": {"channels": 64, "size": [16, 16]}},
            "layers": [{"name": "c1", "op": "conv2d", "out": 64, "kernel": 3, "padding": 1},
                       {"name": "b1", "op": "batch_norm", "act": "relu"},
                       {"name": "c2", "op": "conv2d", "out": 2304, "kernel": 1},
                       {"name": "b2", "op": "batch_norm"}]}
    plan = plan_graph(load_graph(spec), oracle=False)
    # 64 channels: 2 tiles, one page per bank; 2304: 72 tiles, two pages on some banks
    want = 2 * 2048 + 2 * 2 * 2048
    assert lv.resident_constant_bytes(plan.graph, plan.l1_banks) == want
    own = {"b1": 2 * 2048, "b2": 2 * 2 * 2048}    # a layer's own constants are its operands
    for st in plan.step_l1:
        mine = own.get(st.name, 0) if st.kind == "layer" else 0
        assert st.others.get(lv.RESIDENT) == want - mine, st.name
    # the address model places them before the run: nothing else is below them at the start
    steps = PA.simulate(plan)
    assert steps[0].allocated >= want
