"""linear's planning (``OpDef.plan``)."""
from __future__ import annotations

from dataclasses import replace

from ...planning import l1 as l1m
from ..activations import matmul_split
from ...language.graph import Node
from ...planning.layout import INTERLEAVED, TILE_LAYOUT, MemSpec, TensorLayout
from ...planning.plan_context import PlanContext
from ...planning.plans import PlannedLayer
from . import LinearPlan


def plan(ctx: PlanContext, node: Node) -> PlannedLayer:
    x = ctx.layouts[node.inputs[0]]
    rows, k = ctx.rc(node.inputs[0])
    if ctx.with_adapters:
        if x.memory.sharded:
            x = ctx.to_interleaved(node, 0, x, "linear runs without a sharded program config: "
                                   "interleaved input")
        if x.layout != TILE_LAYOUT:
            x = ctx.to_tile(node, 0, x, "matmul inputs must be tilized")
    dtype = node.precision.activations
    out = TensorLayout(MemSpec(INTERLEAVED, "l1"), TILE_LAYOUT, dtype)
    per_pixel = node.shape.h * node.shape.w > 1
    estimate = l1m.pixel_linear_l1 if per_pixel else l1m.linear_l1
    kw = dict(in_layout=x, rows=rows, k=k, n=node.shape.c,
              weights_dtype=node.precision.weights, bias=bool(node.attrs.get("bias", True)))
    cap = ctx.cb_caps.get(node.name) if per_pixel else None
    if per_pixel:
        kw["budget"] = ctx.op_budget
        if cap:
            # the address model found its CBs reaching into an L1 buffer (plan_alloc._capped):
            # smaller output blocks, held to ``cap`` bytes of CBs
            est = estimate(out_layout=out, **kw)
            kw["budget"] = min(ctx.op_budget, est.total - l1m.estimate_cbs(est) + cap)
    est = estimate(out_layout=out, **kw)
    # the capped blocks are passed to ttnn as a program config: its automatic one would size
    # them to the L1 it finds free, which the plan cannot promise
    program_config = capped_program_config(ctx, node, est, rows) if cap else None
    if per_pixel and ctx.with_adapters and est.total > ctx.op_budget:
        # a per-pixel linear's output too large for L1 (ConvNeXt's pwconv1 at batch 8)
        # goes to DRAM interleaved: ttnn.linear takes any interleaved output memory config
        out = replace(out, memory=MemSpec(INTERLEAVED, "dram"))
        est = estimate(out_layout=out, **kw)
    return PlannedLayer(node, [x], out, est.total,
                        LinearPlan(dtype=dtype, memory_config=out.memory,
                                   program_config=program_config,
                                   # what the matmul fuses (the rest runs after it)
                                   activation=matmul_split(node.attrs.get("activation"))[0],
                                   l1_parts=est.parts))


def capped_program_config(ctx: PlanContext, node: Node, est, rows: int) -> dict | None:
    """The 1D (in1 multicast) program config ttnn's automatic one is for a tall per-pixel
    linear (``l1.pixel_linear_l1``'s 1D branch: per-core M over every core, the whole N, in0
    block 1 tile), with the output block ``est`` was sized for; None for the 2D branch."""
    from ...language.graph import TILE
    n = node.shape.c
    if rows // max(n, 1) <= 8:
        return None
    cores = ctx.grid[0] * ctx.grid[1]
    m_tiles = -(-rows // TILE)
    m_c, n_c = -(-m_tiles // cores), -(-n // TILE)
    t_out = l1m.tile_bytes(node.precision.activations)
    block_h = int(est.parts["out_cb"]) // (n_c * t_out)
    sub_w = next(d for d in (4, 3, 2, 1) if n_c % d == 0)
    return {"kind": "1d", "grid": tuple(ctx.grid), "in0_block_w": 1, "out_subblock_h": 1,
            "out_subblock_w": sub_w, "per_core_M": m_c, "per_core_N": n_c,
            "out_block_h": block_h, "out_block_w": n_c, "fuse_batch": True,
            "mcast_in0": False}
