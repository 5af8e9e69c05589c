"""conv2d's planning (``OpDef.plan``): its own layout choice among ttnn's auto-shard
candidates (the search shared with conv_transpose2d is in ``plan_context``), an explicit grid,
the ttnn oracle's verdict on the candidates, DRAM slicing when no L1 layout fits, and the
lowering to ttnn.linear (``matmul_solver``)."""
from __future__ import annotations

from dataclasses import replace

from ...planning import l1 as l1m
from ...planning import rules as R
from ...errors import LayoutError
from ...language.graph import Node
from ...planning.layout import BLOCK, HEIGHT, INTERLEAVED, TILE_LAYOUT, WIDTH, MemSpec, TensorLayout
from ...planning.plan_config import SliceConfig
from ...planning.plan_context import (ConvCandidate, PlanContext, auto_pick, conv_candidate, conv_layer,
                             conv_on_candidate, is_mm, smaller_act_blocks)
from ...planning.plans import PlannedLayer
from . import Conv2dPlan
from .rules import ConvArgs
from .sharding import conv_slice_dim, conv_slice_type_guess, kernel_stride_fold


from .cost import MARGIN, fastest_first, lowering_us, why
from ..linear.auto_config import interleaved_matmul_l1


def plan(ctx: PlanContext, node: Node) -> PlannedLayer:
    if node.layout.grid is not None and node.attrs.get("lowering") != "linear":
        return plan_conv_on_grid(ctx, node, ctx.layouts[node.inputs[0]])
    if (node.attrs.get("lowering") or "conv2d") in ("linear", "auto"):
        from ...planning.matmul_solver import resolve_lowering
        # explicit linear that cannot lower raises here, naming the layer
        try:
            lowering = resolve_lowering(node, grid=ctx.grid)
        except LayoutError as e:
            linear = explicit_linear_from_dram(ctx, node, e)
            if linear is None:
                raise
            return linear
        if lowering == "linear":
            if node.attrs.get("lowering") != "auto":
                return plan_conv_as_linear(ctx, node)
            # auto: the faster estimated of linear and the conv (ops/conv2d/cost.py)
            lin, conv = lowering_us(ctx, node, ctx.layouts[node.inputs[0]])
            if conv is None or lin <= conv * (1 + MARGIN):
                ctx.choices[node.name] = (f"lowering auto: linear {lin:,.1f} µs estimated; "
                                          f"runner-up conv2d " + (f"{conv:,.1f} µs" if conv
                                                                  else "(does not fit L1)"))
                return plan_conv_as_linear(ctx, node)
            ctx.choices[node.name] = (f"lowering auto: conv2d {conv:,.1f} µs estimated; "
                                      f"runner-up linear {lin:,.1f} µs")
    x = ctx.layouts[node.inputs[0]]
    policy = node.layout
    follow = False
    if policy.kind in (HEIGHT, BLOCK, WIDTH):
        kinds = [policy.kind]
    elif x.memory.sharded and x.memory.memory_layout in (HEIGHT, BLOCK, WIDTH) and not (
            x.memory.memory_layout == WIDTH and is_mm(node)) and not (
            is_mm(node) and R.check("conv2d", [x], ConvArgs(is_mm_conv=True))):
        # (a width-sharded input of a 1x1 matmul conv cannot be followed: rule
        # conv2d.mm_width_sharded; nor can a row-major block-sharded one of partial tile
        # rows, a pool's output: rule conv2d.mm_block_row_major; both are resharded to the
        # auto choice below)
        # ttnn: an already sharded input is used as is (determine_conv_config_for_auto_shard
        # returns early; reshard_if_not_optimal=False), so auto follows the producer.
        kinds = [x.memory.memory_layout]
        follow = True
    else:
        kinds = [HEIGHT, BLOCK, WIDTH]
    cands = []
    for k in kinds:
        if k == WIDTH and len(kinds) == 3 and (is_mm(node) or _folds(ctx, node, x)):
            # ttnn: a matmul (1x1) conv is never auto width-sharded; a folded one (kernel =
            # stride, sharding.kernel_stride_fold) runs as a matmul conv, which refuses width
            # shards (measured on the mock device)
            continue
        try:
            cand = conv_candidate(ctx, node, k, x, None, follow)
            # an output spec ttnn would refuse for this shape (e.g. width shards on fewer
            # cores than shards) is no candidate
            if R.tensor_checks(cand.out, node.shape.flat, "conv2d output"):
                continue
            cands.append(cand)
        except (ValueError, ZeroDivisionError):
            continue
    if not cands and follow and policy.kind == "auto":
        # following the input gives no valid output spec: choose afresh (a reshard follows)
        follow = False
        for k in (HEIGHT, BLOCK) if is_mm(node) else (HEIGHT, BLOCK, WIDTH):
            try:
                cand = conv_candidate(ctx, node, k, x, None, False)
            except (ValueError, ZeroDivisionError):
                continue
            if not R.tensor_checks(cand.out, node.shape.flat, "conv2d output"):
                cands.append(cand)
    if policy.kind == "auto" and not follow and len(cands) >= 2:
        chosen = auto_pick(cands)
    else:
        chosen = cands[0] if cands else None
    if follow and policy.kind == "auto" and chosen is not None:
        # Following the input is ttnn's own choice, but matmul convs shrink their output grid
        # to the cores holding blocks (sharding.conv_output_memspec), and a chain of them can
        # leave a stage on a couple of cores (ResNet50 layer4 at batch 1: 2 cores of
        # 32x2048 shards). Reshard to ttnn's fresh auto choice when that spreads the conv
        # over at least twice the cores for less L1.
        fresh = []
        for k in (HEIGHT, BLOCK, WIDTH):
            if k == WIDTH and is_mm(node):
                continue
            try:
                fresh.append(conv_candidate(ctx, node, k, x, None, False))
            except (ValueError, ZeroDivisionError):
                continue
        if len(fresh) >= 2:
            pick = auto_pick(fresh)
            if pick.pc.num_cores >= 2 * chosen.pc.num_cores and \
                    pick.est.total < chosen.est.total:
                chosen, cands, follow = pick, fresh, False
    if chosen is None:
        raise LayoutError("no shard layout fits this conv", layer=node.name)
    tried = [chosen] + [c for c in cands if c is not chosen]
    # over budget: other schemes (auto only), then smaller act blocks, then un-follow input
    fallback = smaller_act_blocks(ctx, node, x, tried, follow)
    if follow and policy.kind == "auto":
        for k in (HEIGHT, BLOCK, WIDTH):
            for abh in (None, 64, 32):
                fallback.append(conv_candidate(ctx, node, k, x, abh, False))
    # an output spec ttnn would refuse (a smaller act block or un-followed input can put a
    # matmul conv's width shards on fewer cores than shards) is no fallback either
    fallback = [c for c in fallback
                if not R.tensor_checks(c.out, node.shape.flat, "conv2d output")] or fallback
    cap = ctx.cb_caps.get(node.name)
    fitting = [c for c in fallback if c.est.total <= ctx.op_budget
               and (cap is None or l1m.estimate_cbs(c.est) <= cap)]
    us: dict = {}
    default = fitting[0] if fitting else None
    if policy.kind == "auto":
        # the fastest estimated of those that fit (ops/conv2d/cost.py), then ttnn's verdict
        fitting, us = fastest_first(ctx, node, x, fitting)
    fit = ttnn_first(ctx, node, x, fitting)
    note = why(fit, fitting, us, default)
    if note:    # after the lowering's note, when ``lowering: auto`` chose the conv
        prev = ctx.choices.get(node.name)
        ctx.choices[node.name] = f"{prev}; then {note}" if prev else note
    if fit is None and cap is not None:     # the cap cannot be met: plan as if unasked
        fit = ttnn_first(ctx, node, x, [c for c in fallback
                                        if c.est.total <= ctx.op_budget])
    ctx.slice_miss = []
    if fit is None and not is_mm(node) and policy.kind in ("auto", INTERLEAVED):
        sliced = plan_conv_sliced(ctx, node, x)
        if sliced is not None:
            return sliced
    if fit is None and ctx.with_adapters and policy.kind in ("auto", INTERLEAVED):
        linear = plan_linear_fallback(ctx, node)
        if linear is not None:
            return linear
    if fit is None and is_mm(node) and policy.kind in ("auto", INTERLEAVED):
        from_dram = plan_mm_from_dram(ctx, node, x)
        if from_dram is not None:
            return from_dram
    if fit is None:
        best = min(fallback, key=lambda c: c.est.total)
        sliced = "".join(
            f"; DRAM-sliced into {k} {st} slices of {r} output "
            f"{'row' if st == 'height' else 'column'}{'s' if r > 1 else ''} it still needs "
            f"{need} B" for st, k, r, need in ctx.slice_miss)
        raise LayoutError(
            f"conv2d needs at least {best.est.total} B of L1 per core "
            f"({best.kind}, {best.est}), over the {ctx.op_budget} B of L1 per core left "
            f"by the {ctx.budget} B bank of {ctx.arch} and the tensors alive around it"
            f"{sliced}; use a smaller input size or batch", layer=node.name)
    return conv_on_candidate(ctx, node, x, fit, "conv")


def plan_conv_on_grid(ctx: PlanContext, node: Node, x: TensorLayout) -> PlannedLayer:
    """An explicit grid (``layout: block_sharded l1 4x4``): an adapter shards the conv's input
    on exactly those cores, and conv2d uses an already sharded input as it is (conv2d.cpp:
    no reshard with reshard_if_not_optimal=False), so the output lands on the same cores."""
    p = node.layout
    rows, c_in = ctx.rc(node.inputs[0])
    want = R.reshape_memspec(ctx.requested_memory(node, rows, c_in), rows, c_in, x.layout)
    xin = replace(x, memory=want)
    cands = [conv_candidate(ctx, node, p.kind, xin, abh, True) for abh in (None, 128, 64, 32)]
    fit = next((c for c in cands if c.est.total <= ctx.op_budget), None)
    if fit is None:
        best = min(cands, key=lambda c: c.est.total)
        raise LayoutError(f"on the {p.grid[0]}x{p.grid[1]} grid the spec asks for, conv2d "
                          f"needs {best.est.total} B of L1 per core ({best.est}), over "
                          f"the {ctx.op_budget} B left by the {ctx.budget} B bank of "
                          f"{ctx.arch} and the tensors alive around it", layer=node.name)
    cin = x
    if ctx.with_adapters and x.memory != want:
        kind = "reshard" if x.memory.sharded else "interleaved_to_sharded"
        cin = ctx.adapt(node, 0, x, kind, xin, f"layout asks {p.kind} on "
                        f"{p.grid[0]}x{p.grid[1]} cores; conv2d keeps a sharded input's grid")
    return conv_layer(ctx, node, cin, fit, None)


def _folds(ctx: PlanContext, node: Node, x: TensorLayout) -> bool:
    a, s = node.attrs, ctx.g.shape_of(node.inputs[0])
    return kernel_stride_fold(a["kernel"], a["stride"], a.get("padding", (0, 0)),
                              a.get("dilation", (1, 1)), (s.h, s.w), x.memory) > 1


def ttnn_first(ctx: PlanContext, node: Node, x: TensorLayout, cands: list[ConvCandidate]
               ) -> ConvCandidate | None:
    """The first of ``cands`` (the table's order of preference, all fitting L1) that ttnn
    accepts as planned within the L1 it has (``ctx.ttnn_budget``), asked on the mock device
    (``planning.oracle``); when ttnn accepts none, the table's first that ttnn does not size over
    that L1 (the plan then shows the step unconfirmed), or None when ttnn sizes every one
    over it (the caller then slices the conv)."""
    if ctx.oracle is None or len(cands) == 0:
        return cands[0] if cands else None
    from ...planning.oracle import over_bank
    within = []
    for c in cands:
        cin = replace(c.conv_in, layout=x.layout) if x.memory.sharded else x
        requested = ctx.requested_memory(node, node.shape.rows, node.shape.c) \
            if node.layout.kind == INTERLEAVED else None
        probe = conv_layer(ctx, node, cin, c, requested)
        ans = ctx.oracle.judge_candidate(ctx.g, probe, ctx.flat)
        over = over_bank(ans, ctx.ttnn_budget)
        if ans is None or not ans.judged or (ans.as_planned and not over):
            return c
        if not over:
            within.append(c)
        why = (ans.error if not ans.accepted else
               f"ttnn sizes it at {ans.op_l1:,} B per core, over the {ctx.ttnn_budget:,} B "
               "it has" if over else f"ttnn gives {ans.memory} {ans.layout}")
        note = (f"{node.name}: {c.kind} on {c.pc.num_cores} cores, act_block_h "
                f"{c.act_block_h or 'auto'}: " + why)
        if note not in ctx.ttnn_rejected:
            ctx.ttnn_rejected.append(note)
    return within[0] if within else None


def slice_dims(ctx: PlanContext, node: Node, slice_type: str, num_slices: int):
    """((input rows, input width, output rows), (in h, in w, out h, out w)) of the largest
    of ``num_slices`` slices."""
    a = node.attrs
    s_in, s_out = ctx.g.shape_of(node.inputs[0]), node.shape
    kh, kw = a["kernel"]
    sh, sw = a["stride"]
    dh, dw = a.get("dilation", (1, 1))
    dim, rnd = conv_slice_dim(slice_type, s_out.h, s_out.w, TILE_LAYOUT)
    units = -(-dim // rnd)
    o = min(dim, rnd * -(-units // num_slices))
    if slice_type == "height":
        oh, ow = o, s_out.w
        ih, iw = min(s_in.h, (oh - 1) * sh + dh * (kh - 1) + 1), s_in.w
    else:
        oh, ow = s_out.h, o
        ih, iw = s_in.h, min(s_in.w, (ow - 1) * sw + dw * (kw - 1) + 1)
    n = s_out.n
    return (n * ih * iw, iw, n * oh * ow), (ih, iw, oh, ow)


def slice_candidate(ctx: PlanContext, node: Node, x: TensorLayout, slice_type: str,
                    num_slices: int):
    """The best conv layout for the largest of ``num_slices`` DRAM slices (op_slicing.cpp
    compute_L1_usage_for_slice_config takes the max over slices; the first is the largest)."""
    dims, hw = slice_dims(ctx, node, slice_type, num_slices)
    cands = []
    for k in (HEIGHT, BLOCK, WIDTH):
        try:
            cands.append(conv_candidate(ctx, node, k, x, None, False, dims, hw))
        except (ValueError, ZeroDivisionError):
            continue
    if not cands:
        return None
    chosen = auto_pick(cands) if len(cands) >= 2 and cands[0].kind == HEIGHT \
        else cands[0]
    tried = [chosen] + [c for c in cands if c is not chosen]
    for c in tried:
        for cand in [c] + [conv_candidate(ctx, node, c.kind, x, abh, False, dims, hw)
                           for abh in (128, 64, 32)]:
            if slice_peak(cand, x) <= ctx.op_budget:
                return cand
    return None


def slice_peak(c: ConvCandidate, x: TensorLayout) -> int:
    """L1 per core a DRAM slice of candidate ``c`` needs at its peak: the estimate, or the
    slice's input copy beside its first halo pass (``plan_alloc.op_events``, measured), which
    the estimate does not hold (its ``input`` part is 0: the input is in DRAM)."""
    copy = (l1m.slice_input_copy_bytes(c.conv_in.memory, x.dtype)
            if c.conv_in.memory.shard_shape else 0)
    return max(c.est.total, copy + int(c.est.parts.get("halo", 0)))


# Slice counts up to this are tried one by one; beyond it the search doubles, then bisects
# (a slice's L1 need does not grow as slices shrink), so a huge input costs O(log) estimates
# instead of one per output row.
LINEAR_SLICES = 32


def fewest_slices(ctx: PlanContext, node: Node, x: TensorLayout, st: str):
    """(slice type, k, candidate) for the smallest k >= 2 slices along ``st`` whose largest
    slice fits L1, or None; a miss is noted in ``slice_miss`` for the error message."""
    dim, rnd = conv_slice_dim(st, node.shape.h, node.shape.w, TILE_LAYOUT)
    units = -(-dim // rnd)
    if units < 2:
        return None
    finest = slice_candidate(ctx, node, x, st, units)
    if finest is None:     # not even slices of one row / one tile column fit
        ctx.slice_miss.append((st, units, rnd, slice_need(ctx, node, x, st, units)))
        return None
    for k in range(2, min(units, LINEAR_SLICES) + 1):
        c = slice_candidate(ctx, node, x, st, k)
        if c is not None:
            return st, k, c
    lo, hi = LINEAR_SLICES, LINEAR_SLICES   # lo: known not to fit
    while hi < units:
        hi = min(units, hi * 2)
        if slice_candidate(ctx, node, x, st, hi) is not None:
            break
        lo = hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if slice_candidate(ctx, node, x, st, mid) is not None:
            hi = mid
        else:
            lo = mid
    return st, hi, (finest if hi == units else slice_candidate(ctx, node, x, st, hi))


def slice_need(ctx: PlanContext, node: Node, x: TensorLayout, st: str, k: int) -> int | None:
    """Smallest L1 bytes/core peak (``slice_peak``) over the layouts of the largest of k slices."""
    best = None
    for kind in (HEIGHT, BLOCK, WIDTH):
        for abh in (None, 32):
            try:
                dims, hw = slice_dims(ctx, node, st, k)
                t = slice_peak(conv_candidate(ctx, node, kind, x, abh, False, dims, hw), x)
            except (ValueError, ZeroDivisionError):
                continue
            best = t if best is None else min(best, t)
    return best


def plan_conv_sliced(ctx: PlanContext, node: Node, x: TensorLayout) -> PlannedLayer | None:
    """No L1 layout fits: run conv2d DRAM-sliced (rules ``conv2d.slice_*``), along ttnn's
    preferred dimension first (op_slicing.cpp best_guess_slice_type), then the other one. Of
    the smallest number of slices whose per-slice L1 estimate fits and a few more
    (``fastest_slices``), the fastest estimated. Input and output are DRAM interleaved; the L1
    estimate is the largest slice's."""
    s_in = ctx.g.shape_of(node.inputs[0])
    first = conv_slice_type_guess(s_in.h, s_in.w, TILE_LAYOUT)
    found = None
    for st in (first, "width" if first == "height" else "height"):
        found = fewest_slices(ctx, node, x, st)
        if found:
            break
    if found is None:
        return None
    st, k, c = fastest_slices(ctx, node, x, *found)
    cin = ctx.to_dram(node, 0, x, "DRAM-sliced conv2d reads its input from DRAM "
                      "interleaved") if ctx.with_adapters else x
    return sliced_layer(node, cin, st, k, c)


def sliced_layer(node: Node, cin: TensorLayout, st: str, k: int, c) -> PlannedLayer:
    """The planned conv run in ``k`` DRAM slices along ``st`` on candidate ``c`` (the largest
    slice's layout), reading ``cin``."""
    dram = MemSpec(INTERLEAVED, "dram")
    out = TensorLayout(dram, TILE_LAYOUT, node.precision.activations)
    config = Conv2dPlan(
        shard_layout=c.kind, act_block_h_override=c.act_block_h,
        reshard_if_not_optimal=False, override_sharding_config=False,
        output_layout=out.layout, dtype=out.dtype, is_mm_conv=False,
        num_cores=c.pc.num_cores, core_grid=c.pc.grid,
        input_memory=dram, memory_config=None,
        weights_dtype=node.precision.weights,
        slice=SliceConfig(st, k),
        output_hw=(node.shape.h, node.shape.w),
        slice_input_memory=c.conv_in.memory, slice_output_memory=c.out.memory,
        l1_parts=c.est.parts,
    )
    return PlannedLayer(node, [cin], out, c.est.total, config)


# Slice counts weighed beyond the fewest that fits: a few more, and twice as many (more slices
# cost a launch, a halo and a weights read each, but may let a faster layout fit per slice)
MORE_SLICES = (1, 2, 4)
SLICE_NOTE = "; then slices: "


def fastest_slices(ctx: PlanContext, node: Node, x: TensorLayout, st: str, k: int, c):
    """Of ``k`` (the fewest slices along ``st`` that fit) and a few more that fit
    (``MORE_SLICES``, ``2 k``), the fastest estimated (``cost.sliced_us``); the fewest stays
    unless another is ``MARGIN`` faster. Records the pick's and the runner-up's µs in
    ``ctx.choices``. Returns (st, count, candidate)."""
    from .cost import sliced_us
    dim, rnd = conv_slice_dim(st, node.shape.h, node.shape.w, TILE_LAYOUT)
    units = -(-dim // rnd)
    counts = sorted({n for n in [k + d for d in MORE_SLICES] + [2 * k] if k < n <= units})
    options = [(k, c)]
    for n in counts:
        cand = slice_candidate(ctx, node, x, st, n)
        if cand is not None:
            options.append((n, cand))
    dram = replace(x, memory=MemSpec(INTERLEAVED, "dram"))
    us = {n: sliced_us(ctx, sliced_layer(node, dram, st, n, cand)) for n, cand in options}
    best = min(options, key=lambda o: us[o[0]])
    pick = best if us[best[0]] < us[k] * (1 - MARGIN) else (k, c)
    others = [n for n, _ in options if n != pick[0]]
    if others:
        r = min(others, key=lambda n: us[n])
        note = (f"DRAM slices: {pick[0]} {st} slices: {us[pick[0]]:,.1f} µs estimated; "
                f"runner-up {r} slices: {us[r]:,.1f} µs")
        if pick[0] != k:
            note = f"by the estimate, not the fewest ({k}: {us[k]:,.1f} µs): " + note
        # after the conv's own note (lowering, layout); a replan of the layer replaces it
        prev = ctx.choices.get(node.name) or ""
        for mark in (SLICE_NOTE, "by the estimate, not the fewest", "DRAM slices:"):
            prev = prev.split(mark)[0]
        prev = prev or None
        ctx.choices[node.name] = f"{prev}{SLICE_NOTE}{note}" if prev else note
    return st, pick[0], pick[1]


def plan_mm_from_dram(ctx: PlanContext, node: Node, x: TensorLayout) -> PlannedLayer | None:
    """No L1 layout of a 1x1 stride-1 (matmul) conv fits, nor ttnn.linear's sharded configs:
    conv2d runs it out of DRAM interleaved (rule ``conv2d.mm_interleaved``): given a DRAM input
    and no shard_layout, it shards nothing and calls ttnn.linear with matmul's automatic
    program config, which streams in0 and the weights through circular buffers and writes a DRAM
    interleaved output. A DRAM slice_config changes nothing for such a conv (``conv2d.slice_mm``),
    so this is its fallback, not slicing. Its L1 is the matmul's CBs alone, from ttnn's
    automatic matmul config (``ops/linear/auto_config.py``, measured to the byte); ttnn's own
    figure replaces the estimate where larger (``planner.with_ttnn_figure``)."""
    dram = MemSpec(INTERLEAVED, "dram")
    if not ctx.with_adapters and x.memory != dram:
        return None
    out = TensorLayout(dram, TILE_LAYOUT, node.precision.activations)
    rows, k = ctx.rc(node.inputs[0])
    # (a ROW_MAJOR input is tilized first: the matmul reads tiles of its dtype)
    est = interleaved_matmul_l1(rows=rows, k=k, n=node.shape.c, in_dtype=x.dtype,
                                weights_dtype=node.precision.weights, out_dtype=out.dtype,
                                fp32_accum=node.precision.fp32_accum,
                                bias=bool(node.attrs.get("bias") or node.bn),
                                grid=tuple(ctx.grid), max_l1=ctx.op_budget)
    if est.total > ctx.op_budget:
        return None
    cin = ctx.to_dram(node, 0, x, "a 1x1 conv too large for L1 runs its matmul out of DRAM "
                      "interleaved") if ctx.with_adapters else x
    config = Conv2dPlan(
        shard_layout=None, act_block_h_override=0, reshard_if_not_optimal=False,
        override_sharding_config=False, output_layout=TILE_LAYOUT, dtype=out.dtype,
        is_mm_conv=True, num_cores=ctx.grid[0] * ctx.grid[1], core_grid=tuple(ctx.grid),
        input_memory=dram, memory_config=None, weights_dtype=node.precision.weights,
        l1_parts=est.parts,
    )
    return PlannedLayer(node, [cin], out, est.total, config)


def explicit_linear_from_dram(ctx: PlanContext, node: Node, err: LayoutError
                              ) -> PlannedLayer | None:
    """``lowering: linear`` on a 1x1 conv for which no sharded matmul program config fits (the
    solver's ``err``, rule linear.program_config; bevdet_r50_bev_encoder's ``neck`` at batch 8:
    M=131072, K=N=256): still ttnn.linear, on DRAM interleaved operands with matmul's automatic
    config, which is what conv2d runs for such a conv (``plan_mm_from_dram``). None when that
    does not fit either (the solver's error stands)."""
    if err.rule != "linear.program_config" or not is_mm(node):
        return None
    layer = plan_mm_from_dram(ctx, node, ctx.layouts[node.inputs[0]])
    if layer is not None:
        ctx.choices[node.name] = (f"{err.reason}: ttnn.linear with matmul's automatic config "
                                  "out of DRAM instead (conv2d's 1x1 path)")
    return layer


def plan_linear_fallback(ctx: PlanContext, node: Node) -> PlannedLayer | None:
    """No conv2d layout fits a 1x1 stride-1 conv (conv2d keeps every weight on each core of a
    height-sharded matmul conv: float32 expansions of 1,248+ channels): ttnn.linear with the
    solver's program config, which splits the weights over the cores, when one fits."""
    from ...planning.matmul_solver import is_conv1x1_stride1
    if not is_conv1x1_stride1(node):
        return None
    try:
        return plan_conv_as_linear(ctx, node)
    except LayoutError:
        return None


def plan_conv_as_linear(ctx: PlanContext, node: Node) -> PlannedLayer:
    """A 1x1 stride-1 conv run as ttnn.linear with the solver's program config: in0 must be
    TILE and sharded exactly as the config expects (1D: height, 2D: block), the output is
    sharded the same way (matmul_device_operation.cpp 1D/2D branches)."""
    from ...planning.matmul_solver import KIND_1D, solve_node
    cfg = None
    cap = ctx.cb_caps.get(node.name)
    if cap:
        # the address model found this linear's CBs reaching an L1 buffer (plan_alloc._capped):
        # a blocking or the other kind (2D's block shards) with fewer CBs, when one fits
        try:
            cfg = solve_node(node, grid=ctx.grid, l1_budget=max(ctx.op_budget, 1), cb_cap=cap)
        except LayoutError:
            cfg = None
    if cfg is None:
        cfg = solve_node(node, grid=ctx.grid, l1_budget=max(ctx.op_budget, 1))
    kind = HEIGHT if cfg.kind == KIND_1D else BLOCK
    x = ctx.layouts[node.inputs[0]]
    cin = x
    if ctx.with_adapters:
        why = f"linear lowering ({cfg.kind}) wants in0 {cfg.in0_memory.short()} tile"
        if cin.layout != TILE_LAYOUT:
            if cin.memory.sharded:
                cin = ctx.to_interleaved(node, 0, cin, why)
            cin = ctx.to_tile(node, 0, cin, "matmul inputs must be tilized")
        if cin.memory != cfg.in0_memory:
            ad = "reshard" if cin.memory.sharded else "interleaved_to_sharded"
            cin = ctx.adapt(node, 0, cin, ad, replace(cin, memory=cfg.in0_memory), why)
    out = TensorLayout(cfg.out_memory, TILE_LAYOUT, node.precision.activations)
    config = Conv2dPlan(
        lowering="linear", matmul=cfg.to_dict(),
        # what conv2d itself would be configured with for the same sharding (the layer may
        # still run ttnn.conv2d, whose mm_conv branch then sees the same shards)
        shard_layout=kind, act_block_h_override=0, reshard_if_not_optimal=False,
        override_sharding_config=False, output_layout=TILE_LAYOUT, dtype=out.dtype,
        is_mm_conv=True, num_cores=cfg.num_cores,
        core_grid=cfg.compute_with_storage_grid_size, input_memory=cfg.in0_memory,
        memory_config=None, weights_dtype=node.precision.weights,
        l1_parts={"matmul": cfg.l1_bytes_per_core},
    )
    return PlannedLayer(node, [cin], out, cfg.l1_bytes_per_core, config)
