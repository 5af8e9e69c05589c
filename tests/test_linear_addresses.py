"""Issue 33: a biased per-pixel linear's bytes are placed once by the address model.

ttnn.linear with a bias writes the matmul's output, then the bias add's (the layer's output),
and frees the first (plan_alloc.op_events, measured). That first output is a buffer the
allocator places; it was also counted among the op's circular buffers (``l1.classify_part``),
so the model put the matmul's CB region one output too high and refused convnext_tiny at batch
8 (``features.1.0.block.3``, "CBs end at 805,728, above the lowest L1 buffer at 751,616"),
which ttnn runs (`ttmodels verify convnext_tiny --batch 8`: 140/140 steps, its figure for the
step 1,076,736 B = the estimate, CBs 398,848 B)."""
from __future__ import annotations

import ttmodels
from ttmodels.planning import plan_alloc as pa
from ttmodels.planning.l1 import layer_parts

# ConvNeXt's block at stage 1 (96 channels, 56x56) at batch 8, less the 7x7 depthwise conv: a
# 1x1 conv whose output the add reads again, LayerNorm, pwconv1 (96 -> 384, GELU) and pwconv2
BLOCK = {"name": "pwconv_b8", "inputs": {"x": {"channels": 96, "size": [56, 56]}},
         "layers": [{"name": "c1", "op": "conv2d", "out": 96, "kernel": 1, "bias": True},
                    {"name": "ln", "op": "layer_norm", "eps": 1e-6},
                    {"name": "pw1", "op": "linear", "out": 384, "act": "gelu"},
                    {"name": "pw2", "op": "linear", "out": 96},
                    {"name": "sum", "op": "add", "in": ["pw2", "c1"]}]}


def _placed(pl, plan) -> tuple[int, int]:
    """(bytes the layer's own events allocate, its programs' largest CB region)."""
    events = pa.op_events(pl, plan.graph, banks=plan.l1_banks)
    allocs = sum(e[2] for e in events if e[0] == pa.ALLOC)
    cbs = max([e[1] for e in events if e[0] == pa.PROGRAM] + [0])
    return allocs, cbs


def test_a_biased_linears_matmul_output_is_a_buffer_not_a_cb():
    plan = ttmodels.plan(BLOCK, batch_size=8, oracle=False)
    pl = plan.layer("pw1")
    raw = pl.config.l1_parts
    assert pl.output.memory.buffer == "l1" and raw["bias_add_output"] > 0
    allocs, cbs = _placed(pl, plan)
    # each part of the estimate once: the two outputs as buffers, the matmul's CBs as CBs
    assert allocs == raw["output"] + raw["bias_add_output"]
    assert cbs == raw["in0_cb"] + raw["in1_cb"] + raw["out_cb"] == layer_parts(pl)["cb"]
    assert allocs + cbs + raw["input"] == pl.l1_bytes_per_core


def test_the_block_at_batch_8_plans_with_its_cbs_below_every_buffer():
    """Refused before ("CB clash: its circular buffers end at 805,728, above the lowest L1
    buffer at 788,480; no remedy ..."): the region was one 301,056 B output too high."""
    plan = ttmodels.plan(BLOCK, batch_size=8, oracle=False)
    st = next(s for s in plan.step_addr if s.name == "pw1")
    assert st.ok and st.lowest is not None and st.cb_end <= st.lowest
    assert not plan.spills          # nothing had to leave L1 for it
