"""upsample's planning (``OpDef.plan``): nearest / bilinear upsample, and the grid_sample lowering
of an align_corners upsample."""
from __future__ import annotations

from dataclasses import replace

from ...planning import l1 as l1m
from ...planning import rules as R
from ...errors import LayoutError
from ...language.graph import TILE, Node
from ...planning.layout import (BLOCK, HEIGHT, INTERLEAVED, ROW_MAJOR, TILE_LAYOUT, WIDTH, MemSpec,
                       TensorLayout)
from ...planning.plan_context import PlanContext
from ...planning.plans import PlannedLayer
from . import GridSamplePlan, UpsamplePlan
from .sharding import bilinear_upsample_memspec


def plan(ctx: PlanContext, node: Node) -> PlannedLayer:
    if node.attrs.get("align_corners"):
        return plan_grid_sample(ctx, node)
    x = ctx.layouts[node.inputs[0]]
    mode = run_mode(ctx, node)
    if mode == "bilinear" and ctx.rc(node.inputs[0])[1] % TILE:
        return plan_padded_bilinear(ctx, node, x)
    if ctx.with_adapters:
        if mode == "bilinear":
            rows, c = ctx.rc(node.inputs[0])
            x = to_row_major_height(
                ctx, node, 0, x, bilinear_upsample_memspec(rows, c, ctx.grid), "bfloat16",
                "bilinear upsample needs bfloat16 ROW_MAJOR height shards (ttnn's autoshard)")
        else:
            in_shape = ctx.g.shape_of(node.inputs[0])
            if x.memory.sharded and node.layout.kind == INTERLEAVED:
                x = ctx.to_interleaved(node, 0, x, "an interleaved nearest upsample output "
                                       "comes from an interleaved input")
            elif x.memory.memory_layout == WIDTH:
                x = ctx.to_interleaved(node, 0, x, "upsample takes no width-sharded input")
            elif x.memory.sharded and x.layout == TILE_LAYOUT and in_shape.c % TILE:
                # a TILE shard of 16 channels is a tile wide; its ROW_MAJOR copy would be 16
                # wide, which the shard spec cannot describe (timm hrnet_w18_small's fuse layers)
                x = ctx.to_interleaved(node, 0, x, "a sharded TILE input whose channels are "
                                       "not whole tiles leaves its shards before ROW_MAJOR")
            if x.layout != ROW_MAJOR and (x.memory.sharded or in_shape.w % TILE or
                                          in_shape.c % TILE):
                x = ctx.to_row_major(node, 0, x, "sharded upsample needs ROW_MAJOR" if
                                     x.memory.sharded else "a TILE upsample input must be "
                                     "tile aligned in its [N,H,W,C] view")
    attrs = {"mode": mode, "out_shape": node.shape.flat, "lowering": "upsample",
             "in_w": ctx.g.shape_of(node.inputs[0]).w}
    requested = None
    if mode == "nearest" and node.layout.kind == INTERLEAVED and not x.memory.sharded:
        # interleaved in, interleaved out where the layer asks (the planner's DRAM fallback:
        # a 1x1 -> 64x64 map of 256 channels is 2 MB, too much for one core's shard)
        requested = attrs["memory_config"] = MemSpec(INTERLEAVED, node.layout.buffer or "l1")
    out = R.output_layout("upsample", [x], attrs, requested, [ctx.flat[node.inputs[0]]])
    rows, c = ctx.rc(node.inputs[0])
    est = l1m.eltwise_l1(inputs=[(x, rows, c)], out_layout=out, out_rows=node.shape.rows, c=c)
    if mode == "bilinear" and x.memory.sharded and x.memory.shard_shape:
        # bilinear's halo step (measured: allocated before the output, freed after the program)
        halo = bilinear_halo_bytes(x.memory.shard_shape[0], ctx.g.shape_of(node.inputs[0]).w, c)
        est = l1m.L1Estimate(est.total + halo, {**est.parts, "halo": halo})
    return PlannedLayer(node, [x], out, est.total, UpsamplePlan(**attrs, l1_parts=est.parts))


def run_mode(ctx: PlanContext, node: Node) -> str:
    """The mode ttnn.upsample runs: a bilinear upsample of a 1x1 map runs as nearest. With
    half-pixel centres (ttnn's and torch's align_corners=False) every output pixel samples the
    one input pixel with weight 1, so both give it everywhere; nearest takes interleaved inputs
    and outputs, where bilinear puts the whole output on the input's one height shard (torchvision
    ASPP's image-pooling branch: 1x1 -> 64x64 of 256 channels, 2 MB on one core)."""
    mode = node.attrs.get("mode", "nearest")
    s = ctx.g.shape_of(node.inputs[0])
    if mode == "bilinear" and not node.attrs.get("align_corners") and s.h == s.w == 1:
        return "nearest"
    return mode


def plan_padded_bilinear(ctx: PlanContext, node: Node, x: TensorLayout) -> PlannedLayer:
    """A bilinear upsample of channels not a multiple of 32 (a segmentation head's 21 classes):
    ttnn's bilinear kernel refuses them (rule ``upsample.channels``), so the layer pads an
    interleaved ROW_MAJOR bfloat16 input to ``pad_c`` channels in DRAM, upsamples that (ttnn
    height-shards it itself: ``bilinear_upsample_memspec``) and slices the ``c`` channels back
    into an interleaved output (DRAM unless the policy says ``interleaved l1``). Measured on
    the mock n150: 21 -> 32 channels at 28x28 x8 and 1 -> 32 at 28x28 x4 run."""
    src = node.inputs[0]
    rows, c = ctx.rc(src)
    pad_c = -(-c // TILE) * TILE
    if ctx.with_adapters:
        reason = f"a bilinear upsample of {c} channels pads an interleaved ROW_MAJOR input"
        if x.dtype != "bfloat16":
            x = ctx.adapt(node, 0, x, "typecast", replace(x, dtype="bfloat16"), reason)
        if x.memory.sharded:
            x = ctx.to_interleaved(node, 0, x, reason)
        if x.layout != ROW_MAJOR:
            x = ctx.to_row_major(node, 0, x, reason)
    out_mem = interleaved_output(node, f"a bilinear upsample of {c} channels (not a "
                                 "multiple of 32)", "upsample.channels")
    attrs = {"mode": "bilinear", "out_shape": node.shape.flat, "lowering": "upsample",
             "in_w": ctx.g.shape_of(src).w, "pad_c": pad_c, "memory_config": out_mem}
    out = R.output_layout("upsample", [x], attrs, out_mem, [ctx.flat[src]])
    est = padded_bilinear_l1(x, rows, c, pad_c, node.shape.rows, out, ctx.grid,
                             ctx.g.shape_of(src).w)
    return PlannedLayer(node, [x], out, est.total, UpsamplePlan(**attrs, l1_parts=est.parts))


def bilinear_halo_bytes(shard_rows: int, w: int, c: int) -> int:
    """Per core: bilinear upsample's haloed input (bfloat16 row major): the image rows its shard
    touches and one row above and below, each padded by a pixel at both ends. Measured on the
    mock n150 (0.81.1): 32-pixel shards of a 32-wide map 3 x 34 pixels (64 channels 13,056 B,
    32 channels 6,528 B); 13-pixel shards of a 28-wide map 3 x 30 (32 channels 5,760 B)."""
    return (-(-shard_rows // w) + 2) * (w + 2) * c * 2


def padded_bilinear_l1(x: TensorLayout, rows: int, c: int, pad_c: int, out_rows: int,
                       out: TensorLayout, grid: tuple[int, int], w: int) -> l1m.L1Estimate:
    """Per core: the interleaved input, ttnn's height-sharded copy of the padded input (the
    pad itself goes to DRAM), its halo, the padded sharded upsample output (``upsample_phase``:
    a buffer, freed in the step: ``plan_alloc.op_events``), the sliced output (interleaved)
    and the eltwise CBs."""
    base = l1m.eltwise_l1(inputs=[(x, rows, c)], out_layout=out, out_rows=out_rows, c=c)
    shards = bilinear_upsample_memspec(rows, pad_c, grid)
    n = shards.num_cores
    row_b = pad_c * 2
    copy = shards.shard_shape[0] * row_b
    halo = bilinear_halo_bytes(shards.shard_shape[0], w, pad_c)
    up_out = -(-out_rows // n) * row_b
    parts = {**base.parts, "input_copy": copy, "halo": halo, "upsample_phase": up_out}
    return l1m.L1Estimate(sum(parts.values()), parts)


def to_row_major_height(ctx: PlanContext, node: Node, idx: int, x: TensorLayout, want: MemSpec,
                        dtype: str, reason: str) -> TensorLayout:
    """Adapters that bring ``x`` to ``want`` (height shards), ROW_MAJOR, ``dtype``: typecast
    (TILE), out of width/block shards (and out of height shards whose channels are not
    whole tiles), to ROW_MAJOR, then reshard / interleaved_to_sharded. Whatever the producer
    (interleaved, any sharding, a graph input) the chain ends at exactly ``want``."""
    _, c = ctx.rc(node.inputs[idx])
    if x.dtype != dtype:
        x = ctx.adapt(node, idx, x, "typecast", replace(x, dtype=dtype), f"{reason}: {x.dtype} in")
    if x.memory.sharded and (x.memory.memory_layout != HEIGHT or
                             (x.layout == TILE_LAYOUT and c % TILE)):
        x = ctx.to_interleaved(node, idx, x, f"{reason}: leave {x.memory.memory_layout} shards")
    if x.layout != ROW_MAJOR:
        x = ctx.to_row_major(node, idx, x, reason)
    if x.memory != want:
        kind = "reshard" if x.memory.sharded else "interleaved_to_sharded"
        x = ctx.adapt(node, idx, x, kind, replace(x, memory=want), reason)
    return x


def plan_grid_sample(ctx: PlanContext, node: Node) -> PlannedLayer:
    """Bilinear upsample with align_corners=True as ttnn.grid_sample with a precomputed grid
    (docs/spec.md): input ROW_MAJOR bfloat16/float32, interleaved or height sharded; the grid
    ([N, Ho, Wo, 6] bfloat16, prepared at build) in DRAM; the output interleaved (DRAM unless
    the layer's policy says ``interleaved l1``): with an interleaved grid and output the
    kernel splits the output pixels over the cores itself (split_work_to_cores)."""
    src = node.inputs[0]
    x = ctx.layouts[src]
    rows, c = ctx.rc(src)
    if ctx.with_adapters:
        if x.dtype not in ("bfloat16", "float32"):
            x = ctx.adapt(node, 0, x, "typecast", replace(x, dtype="bfloat16"),
                          "grid_sample takes bfloat16 or float32")
        if x.memory.memory_layout not in (INTERLEAVED, HEIGHT) or (
                x.memory.sharded and c % TILE):
            # channels % 32 run padded from an interleaved input (below)
            x = ctx.to_interleaved(node, 0, x,
                                   "grid_sample takes interleaved or height-sharded input")
        if x.layout != ROW_MAJOR:
            x = ctx.to_row_major(node, 0, x, "grid_sample takes ROW_MAJOR input")
    out_mem = interleaved_output(node, "the grid_sample lowering of an align_corners upsample",
                                 "grid_sample.output")
    n = node.shape.n
    grid = TensorLayout(MemSpec(INTERLEAVED, "dram"), ROW_MAJOR, "bfloat16")
    attrs = {"mode": "bilinear", "align_corners": True, "use_precomputed_grid": True,
             "padding_mode": "zeros", "lowering": "grid_sample", "grid": grid,
             "grid_memory": grid.memory, "grid_shape": (n, node.shape.h, node.shape.w, 6),
             "batch": n, "grid_batch": n, "out_shape": node.shape.flat,
             "memory_config": out_mem}
    if c % TILE:
        # grid_sample needs channels % 32 (rule grid_sample.input): the layer pads them in
        # DRAM and slices the result back (smp DeepLabV3Plus's 1-class head; measured on the
        # mock n150: 1 -> 32 channels run)
        attrs["pad_c"] = -(-c // TILE) * TILE
    out = R.output_layout("grid_sample", [x], attrs, out_mem, [ctx.flat[src]])
    est = l1m.eltwise_l1(inputs=[(x, rows, c)], out_layout=out, out_rows=node.shape.rows, c=c)
    return PlannedLayer(node, [x], out, est.total, GridSamplePlan(**attrs, l1_parts=est.parts))


def interleaved_output(node: Node, what: str, rule: str) -> MemSpec:
    """The interleaved output memory of a lowering that writes no shards (``what``): the
    layout's buffer when it asks interleaved, else DRAM; a sharded policy is refused."""
    p = node.layout
    if p.kind in (HEIGHT, WIDTH, BLOCK):
        raise LayoutError(f"policy {p.kind}: {what} writes an interleaved output (use "
                          "interleaved [dram|l1] or auto)", layer=node.name, rule=rule)
    return MemSpec(INTERLEAVED, (p.buffer or "dram") if p.kind == INTERLEAVED else "dram")
