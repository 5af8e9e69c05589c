"""An interleaved channel concat of TILE inputs whose channels pad a tile (issue 33 point 4;
``ops/concat/l1.py``): ttnn 0.81.1 runs its native factory only when its CBs and output fit
below the lowest L1 buffer, else untilizes every input, concatenates row-major and tilizes
back. Measured on the mock n150 (``scripts/measure_op_events.py SPEC --batch 8 --only cat``,
this spec): ttnn allocated +102,400 x3, +307,200, then freed them; yolov8n batch 8's
``model.2.cat`` the same (its out-of-memory message: 1,228,800 B allocated = the inputs
614,400 + those 614,400 when the 409,600 B output failed)."""
from ttmodels.language.spec import load_graph
from ttmodels.planning import plan_alloc as PA
from ttmodels.planning.planner import plan_graph

# yolov8n's model.2.cat at batch 8: three 16-channel maps (a tile wide each), 48 out (64)
CAT16 = {"name": "cat16", "batch": 8, "inputs": {"x": {"channels": 16, "size": [160, 160]}},
         "layers": [
             {"name": "c0", "op": "conv2d", "in": "x", "out": 16, "kernel": 1,
              "layout": "interleaved l1"},
             {"name": "c1", "op": "conv2d", "in": "c0", "out": 16, "kernel": 1,
              "layout": "interleaved l1"},
             {"name": "c2", "op": "conv2d", "in": "c1", "out": 16, "kernel": 1,
              "layout": "interleaved l1"},
             {"name": "cat", "op": "concat", "in": ["c0", "c1", "c2"],
              "layout": "interleaved l1"}],
         "outputs": ["cat"]}

MEASURED_RM = [102_400, 102_400, 102_400, 307_200]     # ttnn's allocations, per bank


def _plan():
    return plan_graph(load_graph(CAT16, batch_size=8), oracle=False)


def test_the_row_major_path_is_what_ttnn_allocated():
    """ttnn's buffers on its row-major path, measured on the mock n150 at batch 8: interleaved
    L1 inputs (``scripts/measure_op_events.py``: +102,400 x3, +307,200) and height-sharded ones
    (its figure 1,748,992 B per core: the 614,400 B inputs, the 409,600 B output, 8,192 B of
    CBs and these)."""
    from ttmodels.ops.concat import l1 as CL
    from ttmodels.planning.layout import HEIGHT, INTERLEAVED, TILE_LAYOUT, MemSpec, TensorLayout
    rows = 8 * 160 * 160
    t = TensorLayout(MemSpec(INTERLEAVED, "l1"), TILE_LAYOUT, "bfloat16")
    assert CL.untilized_copies([t] * 3, rows, [16] * 3, 64) == MEASURED_RM[:3]
    assert CL.row_major_concat([t] * 3, t, rows, 48, 64) == MEASURED_RM[3]
    assert CL.native_cbs([t] * 3, [16] * 3, t) == 15 * 2048
    sh = TensorLayout(MemSpec(HEIGHT, "l1", (8, 8), 64, (3200, 32)), TILE_LAYOUT, "bfloat16")
    out = TensorLayout(MemSpec(HEIGHT, "l1", (8, 8), 64, (3200, 64)), TILE_LAYOUT, "bfloat16")
    assert CL.untilizes([sh] * 3, [16] * 3, out) and CL.native_cbs([sh] * 3, [16] * 3, out) is None
    copies = CL.untilized_copies([sh] * 3, rows, [16] * 3, 64)
    assert copies == [102_400] * 3
    assert 3 * 204_800 + 409_600 + sum(copies) + CL.row_major_concat([sh] * 3, out, rows, 48, 64) \
        + 8_192 == 1_748_992


def test_an_l1_concat_counts_and_allocates_the_row_major_path():
    """Before: the output and 16,384 B of CBs only, and the plan of CAT16 at batch 8 said it
    fitted where ttnn ran out of memory (measured: the 409,600 B output after 1,228,800 B of
    inputs, copies and row-major concat)."""
    import pytest
    from ttmodels.errors import LayoutError
    with pytest.raises(LayoutError) as e:
        plan_graph(load_graph(CAT16, batch_size=8), oracle=False)
    assert e.value.layer == "cat" and "untilize_phase" in str(e.value)
    plan = plan_graph(load_graph(dict(CAT16, batch=4), batch_size=4), oracle=False)
    cat = plan.layer("cat")
    half = [b // 2 for b in MEASURED_RM]
    assert cat.config.l1_parts["untilize_phase"] == sum(half[:3])
    assert cat.config.l1_parts["rm_concat_phase"] == half[3]
    ev = PA.op_events(cat, plan.graph, plan.l1_banks)
    assert [e[2] for e in ev if e[0] == PA.ALLOC] == half + [204_800]
    assert [e[1] for e in ev if e[0] == PA.FREE] == ["rm_concat", "untilized0", "untilized1",
                                                    "untilized2"]


AUTO8 = dict(CAT16, layers=[dict(layer, layout="auto") for layer in CAT16["layers"]])


def test_a_dram_concat_asks_the_address_model_for_the_native_cbs():
    plan = plan_graph(load_graph(AUTO8, batch_size=8), oracle=False)
    cat = plan.layer("cat")
    assert cat.output.memory.buffer == "dram"
    (room,) = PA.op_events(cat, plan.graph, plan.l1_banks)
    assert room[0] == PA.ROOM and room[1] == 15 * 2048


def test_the_auto_concat_runs_for_real(real_run):
    """On the commit before, the rule table planned the concat height-sharded and ttnn ran out
    of memory on it (its figure 1,748,992 B per core)."""
    plan, report = real_run(AUTO8, batch_size=8)
    assert report.real and report.completed, report
    assert not [(s.name, s.error) for s in report.steps if not s.ok]
