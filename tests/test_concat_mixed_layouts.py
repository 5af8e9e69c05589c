"""A channel concat of interleaved inputs of two layouts, and the nearest upsample that makes
one of them (issue 33: unet_resnet34 at batch 32 planned and then ran out of memory at
``decoder.blocks.1.cat``).

``CAT_MIXED`` has that concat's shapes at batch 32: a nearest upsample's ROW_MAJOR output
(256 channels, block shards moved to interleaved L1) next to a TILE skip (128 channels,
interleaved L1). ttnn's ``concat_impl`` converts the input not in the concat's layout with
``ttnn::to_layout`` in its own memory before it allocates the output (measured with
``scripts/measure_op_events.py SPEC --batch 32 --only cat``: +131,072 the skip untilized,
+393,216 the output, -131,072). The address model allocated the output only, so in unet's
fragmented L1 it placed the output in a 393,216 B block that ttnn's copy had taken first.

``up2`` is a nearest upsample of an interleaved TILE input: ttnn writes ROW_MAJOR (the plan
said TILE: unet's ``decoder.blocks.4.up`` was "differs")."""
from ttmodels.language.spec import load_graph
from ttmodels.planning import plan_alloc as PA
from ttmodels.planning.planner import plan_graph
from mock_helpers import signed_sizes  # noqa: E402

CAT_MIXED = {
    "name": "cat_mixed", "inputs": {"x": {"channels": 128, "size": [32, 32]}},
    "layers": [
        {"name": "s", "op": "conv2d", "in": "x", "out": 128, "kernel": 3, "padding": 1},
        {"name": "d", "op": "conv2d", "in": "s", "out": 256, "kernel": 3, "stride": 2,
         "padding": 1, "layout": "block_sharded"},
        {"name": "up", "op": "upsample", "in": "d", "scale": 2, "mode": "nearest"},
        {"name": "cat", "op": "concat", "in": ["up", "s"]},
        {"name": "up2", "op": "upsample", "in": "s", "scale": 2, "mode": "nearest",
         "layout": "interleaved dram"}],
    "outputs": ["cat", "up2"]}

# what ttnn allocated (+) and freed (-) inside the concat, bytes per bank, in order (measured)
TTNN_CAT = [131_072, 393_216, -131_072]

# the other direction: the TILE skip first (interleaved L1), so the concat is TILE and ttnn
# tilizes the ROW_MAJOR upsample output; measured the same way: +262,144, +393,216, -262,144
CAT_TILE_FIRST = dict(CAT_MIXED, layers=[
    dict(CAT_MIXED["layers"][0], layout="interleaved l1"), *CAT_MIXED["layers"][1:3],
    {"name": "cat", "op": "concat", "in": ["s", "up"]}], outputs=["cat"])
TTNN_CAT_TILE_FIRST = [262_144, 393_216, -262_144]


def _plan():
    return plan_graph(load_graph(CAT_MIXED, batch_size=32), oracle=False)


def test_the_concat_of_two_layouts_allocates_ttnns_copy_before_its_output():
    plan = _plan()
    cat = plan.layer("cat")
    assert [t.layout for t in cat.inputs] == ["row_major", "tile"]
    assert all(not t.memory.sharded and t.memory.buffer == "l1" for t in cat.inputs)
    assert signed_sizes(PA.op_events(cat, plan.graph, plan.l1_banks)) == TTNN_CAT
    # the estimate counts the copy too (before: the inputs, the output and CBs only)
    assert cat.config.l1_parts["to_layout_phase"] == TTNN_CAT[0]


def test_one_layout_or_dram_inputs_make_no_copy():
    from ttmodels.ops.concat import l1 as CL
    from ttmodels.planning.layout import INTERLEAVED, ROW_MAJOR, TILE_LAYOUT, MemSpec, TensorLayout
    rows = 32 * 32 * 32
    l1_tile = TensorLayout(MemSpec(INTERLEAVED, "l1"), TILE_LAYOUT, "bfloat16")
    l1_rm = TensorLayout(MemSpec(INTERLEAVED, "l1"), ROW_MAJOR, "bfloat16")
    dram_tile = TensorLayout(MemSpec(INTERLEAVED, "dram"), TILE_LAYOUT, "bfloat16")
    assert CL.layout_copies([l1_tile, l1_tile], rows, [256, 128], 64) == [0, 0]
    assert CL.layout_copies([l1_rm, dram_tile], rows, [256, 128], 64) == [0, 0]


def test_a_tile_first_input_has_the_row_major_ones_tilized():
    plan = plan_graph(load_graph(CAT_TILE_FIRST, batch_size=32), oracle=False)
    cat = plan.layer("cat")
    assert [t.layout for t in cat.inputs] == ["tile", "row_major"] and \
        cat.output.layout == "tile" and not cat.output.memory.sharded
    assert signed_sizes(PA.op_events(cat, plan.graph, plan.l1_banks)) == TTNN_CAT_TILE_FIRST


def test_the_real_run_allocates_what_the_model_says(monkeypatch):
    """ttnn's own L1 events inside the concat (the real run's timeline) are the model's; the
    nearest upsample of an interleaved TILE input is confirmed ROW_MAJOR."""
    from ttmodels.planning import l1_timeline
    seen = []
    read = l1_timeline.read
    monkeypatch.setattr(l1_timeline, "read", lambda graph: seen.append(read(graph)) or seen[-1])
    plan = plan_graph(load_graph(CAT_MIXED, batch_size=32), oracle=False)
    from ttmodels.tools.verify import verify
    report = verify(None, plan=plan)
    assert report.real and report.completed, report
    assert not [(s.name, s.error) for s in report.steps if not s.ok]
    step = seen[-1].step("layer", "cat")
    ttnn = [s if w == "alloc" else -s for w, _, s in step.l1_events]
    assert ttnn == signed_sizes(PA.op_events(plan.layer("cat"), plan.graph, plan.l1_banks))
    assert plan.layer("up2").output.layout == "row_major"
