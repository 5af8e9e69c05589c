"""The planner: resolve every tensor's TensorLayout and insert adapters only where needed.

Procedure (see docs/layouts.md):
1. Graph inputs enter interleaved in DRAM (row-major, or TILE for block-float dtypes); constants
   are TILE, interleaved in L1 (tiny; binary_ng broadcasts them, see rules ``binary.broadcast``).
2. Layers in topological order. Each op first receives its producers' layouts; the op's own
   decisions (conv shard scheme, pool shard scheme, output layout/dtype arguments) are made so
   that the op converts on its own wherever ttnn lets it (conv2d shards an interleaved input,
   pools take ``dtype``/``output_layout``, binary ops take ``dtype``).
3. ``rules.check`` is run on the op with its inputs; each violation is repaired by one adapter on
   the offending edge (``to_layout``, ``typecast``, ``sharded_to_interleaved``, ``reshard``, ...).
   ``rules.advise`` (perf rules) adds a reshard only for binary ops with two sharded operands
   whose shard specs differ; it moves the operand that costs fewer bytes (ties: operand b, so the
   output keeps operand a's config, ttnn's default).
4. Every layer's L1 bytes/core is estimated (``l1.py``). "auto" layouts are chosen as ttnn's
   ``determine_conv_config_for_auto_shard`` does: estimate height, block and width sharding and
   take the smallest (block only with more cores than a grid row, width never for matmul convs).
   Over budget: the other schemes, then a smaller act_block_h, then (convs) DRAM slicing; an
   add/multiply over budget writes its output into operand a (``output_tensor=a``, as TT's
   ResNet50 ``ttnn.add_``; config ``inplace``) when a has the output's shape, dtype and memory and
   nothing else reads it; else LayoutError with the bytes.

``adapters=False`` keeps each op at its ttnn defaults (e.g. pool outputs ROW_MAJOR, producers'
dtypes) and inserts nothing, so the sim backend can show what the card would reject.
"""
from __future__ import annotations

import itertools
from dataclasses import replace

from .arch import ARCHS
from . import l1 as l1m
from . import liveness as lv
from . import rules as R
from .errors import LayoutError, SpecError
from .formats import is_block_float
from .activations import matmul_split
from .graph import TILE, Graph, Node, TensorShape, const_flat, moved, round_up
from .layout import (BLOCK, HEIGHT, INTERLEAVED, ROW_MAJOR, TILE_LAYOUT, WIDTH, MemSpec,
                     TensorLayout)
from . import ops
from .ops.batch_norm import BatchNormPlan
from .ops.binary import BinaryPlan
from .ops.concat import ConcatPlan
from .ops.conv2d import Conv2dPlan
from .ops.conv_transpose2d import ConvTranspose2dPlan
from .ops.linear import LinearPlan
from .ops.pad import PadPlan
from .ops.pool import PoolPlan
from .ops.upsample import GridSamplePlan, UpsamplePlan
from .plan_config import PlanConfig, SliceConfig
from .plans import Adapter, BlockingNote, Plan, PlannedLayer, ReorderNote



def _flat(shape: TensorShape) -> tuple[int, int, int, int]:
    return shape.flat


def _padding4(p) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) from a pool's (h, w) or 4-value padding."""
    p = tuple(int(v) for v in p)
    return p if len(p) == 4 else (p[0], p[0], p[1], p[1])


class _Planner:
    def __init__(self, graph: Graph, arch: str, adapters: bool, l1_small_size: int = 32768,
                 no_reorder: frozenset[str] = frozenset(), cb_caps: dict[str, int] | None = None,
                 no_cap: frozenset[str] = frozenset(),
                 spill_hints: frozenset[tuple[str, str]] = frozenset(), oracle=None,
                 ttnn_rejected: list[str] | None = None):
        if arch not in ARCHS:
            raise LayoutError(f"unknown arch {arch!r}; known: {sorted(ARCHS)}")
        self.g, self.arch, self.with_adapters = graph, arch, adapters
        self.l1_small_size = int(l1_small_size)
        self.budget = l1m.l1_bank_bytes(arch, self.l1_small_size)
        # what the op being planned may use: the bank less every other tensor alive in L1
        self.op_budget = self.budget
        self.grid = l1m.ARCH_GRID[arch]
        self.spills: list[lv.Spill] = []
        # (tensor, layer): spill the tensor for that layer whatever the sums say (the address
        # model found its free blocks short there: plan_alloc.fit)
        self.spill_hints = spill_hints
        self.last = lv.last_uses(graph.nodes)
        self.keep = set(graph.outputs) | set(graph.constants)
        self.no_reorder = no_reorder if adapters else frozenset(n.name for n in graph.nodes)
        # convs asked to keep their CBs small for the step after them (cap_previous_cbs), and
        # the ones for which that did not work (they are not asked again)
        self.cb_caps = dict(cb_caps or {})
        self.no_cap = no_cap if adapters else frozenset(n.name for n in graph.nodes)
        self.layouts: dict[str, TensorLayout] = {}
        self.flat: dict[str, tuple[int, int, int, int]] = {}
        self.adapters: list[Adapter] = []
        self.adapted: set[tuple[str, int]] = set()   # (dst layer, operand index) with an adapter
        self.slice_miss: list[tuple] = []   # this conv's failed DRAM slicings, for its error
        self.current: Node | None = None
        self._alive: dict[str, None] = {}        # see alive_at
        self._alive_seen, self._alive_i = 0, -1
        self.layers: list[PlannedLayer] = []
        self.input_layouts: dict[str, TensorLayout] = {}
        self.constant_layouts: dict[str, TensorLayout] = {}
        # ttnn in the loop (ttnn_oracle): asked about conv candidates; the ones it refused
        self.oracle = oracle
        self.ttnn_rejected = ttnn_rejected if ttnn_rejected is not None else []

    # ---- sources ---------------------------------------------------------------------------
    def seed(self) -> None:
        dt = self.g.input_precision.activations
        for name, shape in self.g.inputs.items():
            t = TensorLayout(MemSpec(INTERLEAVED, "dram"),
                             TILE_LAYOUT if is_block_float(dt) else ROW_MAJOR, dt)
            self.input_layouts[name] = self.layouts[name] = t
            self.flat[name] = _flat(shape)
        for name, c in self.g.constants.items():
            t = TensorLayout(MemSpec(INTERLEAVED, "l1"), TILE_LAYOUT, c.dtype)
            self.constant_layouts[name] = self.layouts[name] = t
            self.flat[name] = const_flat(c.shape)

    # ---- adapters --------------------------------------------------------------------------
    def adapt(self, node: Node, idx: int, cur: TensorLayout, kind: str, after: TensorLayout,
              reason: str) -> TensorLayout:
        src = node.inputs[idx]
        attrs = {"dtype": after.dtype, "layout": after.layout}
        vs = R.check(kind, [cur], attrs, after.memory, shapes=[self.flat[src]])
        if vs:
            raise LayoutError(f"internal: adapter {kind} on {src} -> {node.name} breaks "
                              f"{[str(v) for v in vs]}", layer=node.name, rule=vs[0].rule)
        self.adapters.append(Adapter(src, node.name, idx, kind, cur, after, reason))
        self.adapted.add((node.name, idx))
        return after

    def to_interleaved(self, node, idx, cur, reason, buffer="l1"):
        after = TensorLayout(MemSpec(INTERLEAVED, buffer), cur.layout, cur.dtype)
        return self.adapt(node, idx, cur, "sharded_to_interleaved", after, reason)

    def to_tile(self, node, idx, cur, reason):
        return self.adapt(node, idx, cur, "to_layout", replace(cur, layout=TILE_LAYOUT), reason)

    def to_row_major(self, node, idx, cur, reason):
        # block-float exists only in TILE (rule to_layout.dtype): untilize to bfloat16
        dtype = "bfloat16" if is_block_float(cur.dtype) else cur.dtype
        return self.adapt(node, idx, cur, "to_layout", replace(cur, layout=ROW_MAJOR, dtype=dtype),
                          reason)

    # ---- the walk --------------------------------------------------------------------------
    def run(self) -> Plan:
        self.seed()
        for i, node in enumerate(self.g.nodes):
            self.current = node        # plan_graph locates any LayoutError at this layer
            for src in node.inputs:
                if src not in self.layouts:
                    raise LayoutError(f"input '{src}' has no layout (not a graph input, constant "
                                      "or earlier layer)", layer=node.name)
            if node.layout.kind in (HEIGHT, WIDTH, BLOCK) and node.layout.buffer == "dram":
                raise LayoutError(f"policy {node.layout.kind} in dram: sharded activations live "
                                  "in L1", layer=node.name, rule="tensor.shard_l1")
            d = ops.REGISTRY.get(node.op)
            fn = getattr(self, d.plan, None) if d is not None else None   # the op's hook
            if fn is None:
                raise LayoutError(f"no planning rule for op '{node.op}'", layer=node.name)
            layer = self.plan_live(i, node, fn)
            self.layers.append(layer)
            for t, lay in layer.tensor_layouts().items():   # a split has several outputs
                self.layouts[t] = lay
                self.flat[t] = _flat(self.g.shape_of(t))
            if self.with_adapters:
                vs = R.check(self.rule_op(node), layer.inputs, self.check_attrs(layer),
                             None, shapes=[self.flat[s] for s in node.inputs])
                R.raise_if_violations(vs, node.name)
            self.check_policy(node, layer)
        plan = Plan(self.g, self.layers, self.adapters, self.input_layouts,
                    self.constant_layouts, self.arch, self.grid, self.budget,
                    spills=self.spills, l1_small_size=self.l1_small_size)
        # the final figures: later spills shortened earlier layers' live sets and carries
        lv.refresh(plan)
        return plan

    # ---- liveness ----------------------------------------------------------------------------
    def others(self, i: int, node: Node, received=None) -> dict[str, int]:
        return lv.others_alive(i, node, self.alive_at(i), self.last, self.keep, self.g, received)

    def alive_at(self, i: int) -> dict[str, TensorLayout]:
        """``self.layouts`` less the tensors freed before layer ``i`` (``others_alive`` skips
        them anyway), kept incrementally: the liveness queries then cost O(live tensors) per
        layer instead of O(layers so far), and planning stays linear in depth."""
        alive = self._alive
        new = len(self.layouts) - self._alive_seen
        if new > 0:          # layouts only grows at its end (seed, then one layer at a time)
            for name in itertools.islice(reversed(self.layouts), new):
                alive[name] = None
            self._alive_seen = len(self.layouts)
        if i != self._alive_i:
            for name in [n for n in alive if self.last.get(n, -1) < i and n not in self.keep]:
                del alive[name]
            self._alive_i = i
        return {n: self.layouts[n] for n in alive}

    def try_plan(self, node: Node, fn, others: dict[str, int]):
        """fn(node) with the L1 that ``others`` leave; (layer or None, error, live others)."""
        mark = len(self.adapters)
        self.op_budget = self.budget - sum(others.values())
        try:
            layer = fn(node)
        except LayoutError as e:
            del self.adapters[mark:]
            return None, e, others
        return layer, None, others

    def plan_live(self, i: int, node: Node, fn) -> PlannedLayer:
        """Plan layer ``i`` against the L1 that the tensors alive around it leave (and the
        previous program's CBs, liveness.py). Remedies, when it does not fit (fewest bytes moved
        first): a smaller blocking of the previous conv (``_CapCBs``); the op's own smaller
        blockings, other layouts and DRAM slicing (inside ``fn``, against ``op_budget``); an
        earlier place in the order (``_Reorder``); spilling live tensors to DRAM (``Spill``),
        when that moves fewer bytes than DRAM slicing or nothing else fits."""
        mark = len(self.adapters)
        self.apply_spill_hints(i, node)
        pre = self.others(i, node)
        carry = self.carry_in()

        def attempt(others: dict[str, int]):
            """fn against ``others``; if that does not fit only because of the previous
            program's CBs, again against what they leave (the op's own smaller blockings,
            layouts or DRAM slicing). (layer or None, error, fits, the others it used)."""
            del self.adapters[mark:]
            got, e, _ = self.try_plan(node, fn, others)
            if got is not None and self.live_total(i, node, got, mark) <= self.budget:
                return got, e, True, others
            if got is not None and carry:
                tight = dict(others, **{"(previous program's CBs)": carry})
                del self.adapters[mark:]
                cand, _, _ = self.try_plan(node, fn, tight)
                if cand is not None and self.live_total(i, node, cand, mark) <= self.budget:
                    return cand, None, True, tight
                del self.adapters[mark:]
                got, e, _ = self.try_plan(node, fn, others)
            return got, e, False, others

        layer, err, _ = self.try_plan(node, fn, pre)
        fits = layer is not None and self.live_total(i, node, layer, mark) <= self.budget
        if fits and not layer.config.slice:
            return self.finish(i, node, layer, mark)
        # the previous program's CBs, still reserved while this step allocates, are what tips
        # it over: a smaller blocking of the previous conv (0 bytes moved; plan_graph replans)
        if layer is not None and not fits:
            self.cap_previous_cbs(i, node, layer, mark)
        used = pre
        if not fits:
            layer, err, fits, used = attempt(pre)
            if fits and not layer.config.slice:
                return self.finish(i, node, layer, mark)
        # an earlier place in the order, where fewer tensors are alive (0 bytes moved): e.g. a
        # bottleneck's downsample right after the block input, before the branch (plan_graph
        # replans the reordered graph, and keeps the order only if that plan works)
        earliest = self.earliest_position(i, node)
        if earliest < i and node.name not in self.no_reorder:
            raise _Reorder(node.name, earliest)
        # spills: tensors alive in L1 across this layer that a later layer reads again
        sliced = layer if fits else None
        sliced_moves = self.slice_bytes(node) if sliced is not None else None
        best = None
        for chosen in self.spill_sets(i, node, pre):
            moved = sum(2 * self.total_bytes(t) for t in chosen)
            if sliced_moves is not None and moved >= sliced_moves:
                break
            del self.adapters[mark:]
            saved = {t: self.layouts[t] for t in chosen}
            for t in chosen:
                self.layouts[t] = self.spilled_layout(saved[t])
            cand, _, ok, _ = attempt(self.others(i, node))
            ok = ok and not cand.config.slice
            if ok:
                best = (chosen, saved, cand)
                break
            self.layouts.update(saved)
        if best is not None:
            chosen, saved, cand = best
            for t in chosen:
                after = self.spill_point(i, t)
                frees = lv.bank_bytes(saved[t], *lv.tensor_rows_c(self.g, t))
                self.spills.append(lv.Spill(t, after, saved[t], self.layouts[t], frees, node.name))
            return self.finish(i, node, cand, mark)
        if sliced is not None:      # planned again against what it was planned with
            del self.adapters[mark:]
            layer, _, _ = self.try_plan(node, fn, used)
            return self.finish(i, node, layer, mark)
        if err is not None and layer is None:
            raise err
        total = self.live_total(i, node, layer, mark)
        others = self.others(i, node, layer.inputs)
        why = layer.config.inplace_blocked
        live = ", ".join(f"{k} {v:,}" for k, v in sorted(others.items(), key=lambda kv: -kv[1]))
        raise LayoutError(
            f"needs {total:,} B of L1 per core, over the {self.budget:,} B bank of {self.arch}: "
            f"the op {layer.l1_bytes_per_core:,} B ({dict(layer.config.l1_parts)}) + live "
            f"tensors {sum(others.values()):,} B ({live or 'none'}); no spill or smaller "
            "blocking fits" + (f"; cannot write in place into operand a: {why}" if why else "")
            + "; use a smaller batch or input size (--batch / --input-size)",
            layer=node.name)

    def earliest_position(self, i: int, node: Node) -> int:
        """The first index at which ``node`` could run: right after its last-produced input."""
        pos = {n.name: k for k, n in enumerate(self.g.nodes)}
        return max([pos[s] + 1 for s in node.inputs if s in pos] + [0])

    def carry_in(self) -> int:
        """The CBs the previous program still holds when layer ``len(self.layers)`` starts: the
        previous layer's, unless a spill ran after it (liveness.py)."""
        if not self.layers:
            return 0
        prev = self.layers[-1]
        if any(sp.after == prev.name for sp in self.spills):
            return 0
        return lv.layer_cbs(prev)

    def live_steps(self, i: int, node: Node, layer: PlannedLayer, mark: int,
                   carry: int | None = None) -> list[lv.StepL1]:
        """Layer ``i``'s steps (its adapters ``self.adapters[mark:]``, then the layer) with the
        L1 ttnn's timeline counts for each (liveness.layer_steps)."""
        steps, _ = lv.layer_steps(i, node, layer, self.adapters[mark:], self.alive_at(i),
                                  self.last, self.keep, self.g,
                                  self.carry_in() if carry is None else carry)
        return steps

    def live_total(self, i: int, node: Node, layer: PlannedLayer, mark: int,
                   carry: int | None = None) -> int:
        return max(s.total for s in self.live_steps(i, node, layer, mark, carry))

    def cap_previous_cbs(self, i: int, node: Node, layer: PlannedLayer, mark: int) -> None:
        """Raise ``_CapCBs`` when layer ``i`` (or an adapter in front of it) would fit but for
        the previous conv's CBs, and that conv has not been asked already."""
        if not self.layers or layer.config.slice:
            return
        prev = self.layers[-1]
        carry = self.carry_in()
        if prev.node.op != "conv2d" or prev.name in self.no_cap or carry == 0 or \
                self.live_total(i, node, layer, mark, carry=0) > self.budget:
            return
        excess = self.live_total(i, node, layer, mark) - self.budget
        raise _CapCBs(prev.name, carry - excess, node.name)

    def finish(self, i: int, node: Node, layer: PlannedLayer, mark: int) -> PlannedLayer:
        step = self.live_steps(i, node, layer, mark)[-1]
        layer.live_tensors = dict(step.others)
        layer.live_l1 = step.total
        return layer

    def spill_sets(self, i: int, node: Node, others: dict[str, int]):
        """Candidate sets of tensors to spill, fewest bytes moved first: each single tensor that
        a later layer reads again (or a graph output, kept to the end), then the largest ones
        together."""
        cands = [t for t in others if t not in self.g.constants and self.layouts[t].memory.buffer
                 == "l1" and (self.last.get(t, -1) > i or t in self.g.outputs)]
        cands.sort(key=self.total_bytes)
        for t in cands:
            yield (t,)
        by_size = sorted(cands, key=lambda t: -others[t])
        for k in range(2, len(by_size) + 1):
            yield tuple(by_size[:k])

    def apply_spill_hints(self, i: int, node: Node) -> None:
        """Spill the tensors ``spill_hints`` name for ``node`` (alive in L1, read again later)."""
        for t, for_layer in sorted(self.spill_hints):
            if for_layer != node.name or t not in self.layouts or t in self.g.constants:
                continue
            lay = self.layouts[t]
            if lay.memory.buffer != "l1" or not (self.last.get(t, -1) > i or t in self.g.outputs):
                continue
            self.layouts[t] = self.spilled_layout(lay)
            frees = lv.bank_bytes(lay, *lv.tensor_rows_c(self.g, t))
            self.spills.append(lv.Spill(t, self.spill_point(i, t), lay, self.layouts[t], frees,
                                        node.name))

    def spill_point(self, i: int, t: str) -> str:
        """The layer after which ``t`` goes to DRAM: its last reader before layer ``i``, or its
        producer."""
        after = self.g.producer(t).name if t not in self.g.inputs else t
        for node in self.g.nodes[:i]:
            if t in node.inputs:
                after = node.name
        return after

    @staticmethod
    def spilled_layout(t: TensorLayout) -> TensorLayout:
        return replace(t, memory=MemSpec(INTERLEAVED, "dram"))

    def total_bytes(self, name: str) -> int:
        rows, c = lv.tensor_rows_c(self.g, name)
        return l1m.total_bytes(self.layouts[name], rows, c)

    def slice_bytes(self, node: Node) -> int:
        """What DRAM slicing moves: the conv's input and output through DRAM."""
        return self.total_bytes(node.inputs[0]) + int(node.shape.rows * node.shape.c * 2)

    def check_policy(self, node: Node, layer: PlannedLayer) -> None:
        """An explicit layout is honoured or rejected naming the spec line, never replaced."""
        p = node.layout
        if p.kind == "auto" or not self.with_adapters:
            return
        m = layer.output.memory
        grid = tuple(m.grid) if m.grid else None
        if m.memory_layout == p.kind and (p.buffer is None or m.buffer == p.buffer) and \
                (p.grid is None or grid == tuple(p.grid)):
            return
        asked = " ".join([p.kind] + ([p.buffer] if p.buffer else []) +
                         ([f"{p.grid[0]}x{p.grid[1]}"] if p.grid else []))
        if layer.config.slice:
            why = "no L1 layout fits, so it runs DRAM-sliced"
        else:
            # why an op's output cannot take a layout of its own (its registry entry says)
            why = ops.get(node.op).follows_input or f"{node.op} does not take this layout here"
        loc = node.loc
        raise SpecError(f"layout '{asked}' cannot be applied to this {node.op}: the plan gives "
                        f"{m.short()} ({why}); use 'layout: auto' or another layout",
                        file=loc.file if loc else self.g.source, line=loc.line if loc else None,
                        layer=node.name)

    @staticmethod
    def rule_op(node: Node) -> str:
        return rule_op(node)

    @staticmethod
    def check_attrs(layer: PlannedLayer) -> dict:
        c = layer.config.as_attrs()
        c.setdefault("dtype", layer.output.dtype)
        return c

    def inputs_of(self, node: Node) -> list[TensorLayout]:
        return [self.layouts[s] for s in node.inputs]

    def rc(self, name: str) -> tuple[int, int]:
        f = self.flat[name]
        return f[0] * f[1] * f[2], f[3]

    def requested_memory(self, node: Node, rows: int, c: int) -> MemSpec | None:
        """A MemSpec for an explicit non-auto policy, None for auto."""
        p = node.layout
        if p.kind == "auto":
            return None
        if p.kind == INTERLEAVED:
            return MemSpec(INTERLEAVED, p.buffer or "l1")
        if p.buffer == "dram":
            raise LayoutError(f"policy {p.kind} in dram: sharded activations live in L1 "
                              f"[rule tensor.shard_l1]", layer=node.name, rule="tensor.shard_l1")
        if p.kind == BLOCK:
            g = p.grid or self.grid
            return R.sharded_memspec(BLOCK, rows, c, grid=g, device_grid=self.grid)
        if p.grid:
            # the cores of the x-by-y rectangle the spec names (core_ranges gives it back as one
            # CoreRange), not the same number of cores laid out along rows
            return R.reshape_memspec(MemSpec(p.kind, "l1", tuple(p.grid), p.grid[0] * p.grid[1]),
                                     rows, c)
        pc = R.determine_parallel_config(p.kind, rows, c, c, self.grid)
        return R.sharded_memspec(p.kind, rows, c, num_cores=pc.num_cores, device_grid=self.grid)

    # ---- conv2d ----------------------------------------------------------------------------
    @staticmethod
    def is_mm(node: Node) -> bool:
        a = node.attrs
        return R.is_matmul_conv(a["kernel"], a["stride"], a["padding"], a.get("dilation", (1, 1)),
                                a.get("groups", 1))

    def conv_candidate(self, node: Node, kind: str, x: TensorLayout, act_block_h: int | None,
                       follow_input: bool, dims: tuple[int, int, int] | None = None,
                       slice_hw: tuple[int, int, int, int] | None = None):
        """One conv layout and its L1 estimate; ``dims`` = (input rows, input width, output rows)
        and ``slice_hw`` = (ih, iw, oh, ow) of one DRAM slice instead of the whole tensors."""
        a = node.attrs
        in_shape = self.g.shape_of(node.inputs[0])
        in_rows, _ = self.rc(node.inputs[0])
        out_rows, c_out = node.shape.rows, node.shape.c
        in_w = in_shape.w
        if dims is not None:
            in_rows, in_w, out_rows = dims
        c_in = a["in_channels"]
        is_mm = self.is_mm(node)
        if follow_input and R.conv_reshards_input(x.memory, c_in, is_mm=is_mm):
            # conv2d would reshard this input itself onto its own parallel config: plan that
            # config, so an adapter does the reshard in the open (and the L1 estimate sees it)
            pc = R.conv_input_parallel_config(x.memory, out_rows, c_in, c_out, is_mm=is_mm,
                                              device_grid=self.grid, act_block_h=act_block_h)
            conv_in = TensorLayout(R.conv_memspec(pc.kind, in_rows, c_in, pc), x.layout, x.dtype)
        elif follow_input:
            pc = R.parallel_config_of(x.memory)
            conv_in = x
        else:
            pc = R.determine_parallel_config(kind, out_rows, c_in, c_out, self.grid,
                                             channels_padding=not is_mm, act_block_h=act_block_h)
            # a DRAM slice reaches the conv as padded_slice's row-major sticks (measured on the
            # mock device: its shards hold 8-aligned, not tile-aligned, channels)
            conv_in = TensorLayout(R.conv_memspec(kind, in_rows, c_in, pc),
                                   ROW_MAJOR if dims is not None else x.layout, x.dtype)
        # ttnn's output spec: output parallel config, then (matmul convs) only the cores that
        # hold output blocks (rules.conv_output_memspec)
        out_mem = R.conv_output_memspec(pc, out_rows, c_out, is_mm=is_mm, device_grid=self.grid)
        out = TensorLayout(out_mem, TILE_LAYOUT, node.precision.activations)
        ih, iw, oh, ow = slice_hw or (in_shape.h, in_shape.w, node.shape.h, node.shape.w)
        geo = l1m.ConvGeometry(in_shape.n, ih, iw, oh, ow, tuple(a["kernel"]), tuple(a["stride"]),
                               tuple(a["padding"]))
        # what the layer receives (alive throughout): a sharded producer is resharded to conv_in
        # by an adapter (plan_conv2d), an interleaved one is read as it is; a DRAM slice reads DRAM
        if dims is not None:        # a slice: an adapter puts any input in DRAM first
            received = TensorLayout(MemSpec(INTERLEAVED, "dram"), x.layout, x.dtype)
        else:
            received = None if follow_input or x.memory.sharded else x
        est = l1m.conv_l1(kind=kind, in_layout=conv_in, out_layout=out, in_rows=in_rows,
                          in_w=in_w, c_in=c_in, out_rows=out_rows, c_out=c_out,
                          kernel=tuple(a["kernel"]), cores_nhw=pc.cores_nhw, cores_c=pc.cores_c,
                          num_cores=pc.num_cores, weights_dtype=node.precision.weights,
                          fp32_accum=node.precision.fp32_accum, act_block_h=act_block_h,
                          bias=bool(a.get("bias") or node.bn), geometry=geo, is_mm=is_mm,
                          received=received)
        return dict(kind=kind, pc=pc, conv_in=conv_in, out=out, est=est, is_mm=is_mm,
                    act_block_h=act_block_h or 0)

    def plan_conv_on_grid(self, node: Node, x: TensorLayout) -> PlannedLayer:
        """An explicit grid (``layout: block_sharded l1 4x4``): an adapter shards the conv's input
        on exactly those cores, and conv2d uses an already sharded input as it is (conv2d.cpp:
        no reshard with reshard_if_not_optimal=False), so the output lands on the same cores."""
        p = node.layout
        rows, c_in = self.rc(node.inputs[0])
        want = R.reshape_memspec(self.requested_memory(node, rows, c_in), rows, c_in, x.layout)
        xin = replace(x, memory=want)
        cands = [self.conv_candidate(node, p.kind, xin, abh, True) for abh in (None, 128, 64, 32)]
        fit = next((c for c in cands if c["est"].total <= self.op_budget), None)
        if fit is None:
            best = min(cands, key=lambda c: c["est"].total)
            raise LayoutError(f"on the {p.grid[0]}x{p.grid[1]} grid the spec asks for, conv2d "
                              f"needs {best['est'].total} B of L1 per core ({best['est']}), over "
                              f"the {self.op_budget} B left by the {self.budget} B bank of "
                              f"{self.arch} and the tensors alive around it", layer=node.name)
        cin = x
        if self.with_adapters and x.memory != want:
            kind = "reshard" if x.memory.sharded else "interleaved_to_sharded"
            cin = self.adapt(node, 0, x, kind, xin, f"layout asks {p.kind} on "
                             f"{p.grid[0]}x{p.grid[1]} cores; conv2d keeps a sharded input's grid")
        return self.conv_layer(node, cin, fit, None)

    def plan_conv2d(self, node: Node) -> PlannedLayer:
        if node.layout.grid is not None and node.attrs.get("lowering") != "linear":
            return self.plan_conv_on_grid(node, self.layouts[node.inputs[0]])
        if (node.attrs.get("lowering") or "conv2d") in ("linear", "auto"):
            from .matmul_solver import resolve_lowering
            # explicit linear that cannot lower raises here, naming the layer
            if resolve_lowering(node, grid=self.grid) == "linear":
                return self.plan_conv_as_linear(node)
        x = self.layouts[node.inputs[0]]
        policy = node.layout
        follow = False
        if policy.kind in (HEIGHT, BLOCK, WIDTH):
            kinds = [policy.kind]
        elif x.memory.sharded and x.memory.memory_layout in (HEIGHT, BLOCK, WIDTH) and not (
                x.memory.memory_layout == WIDTH and self.is_mm(node)) and not (
                self.is_mm(node) and R.check("conv2d", [x], {"is_mm_conv": True})):
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
            if k == WIDTH and len(kinds) == 3 and self.is_mm(node):
                continue  # ttnn: a matmul (1x1) conv is never auto width-sharded
            try:
                cand = self.conv_candidate(node, k, x, None, follow)
                # an output spec ttnn would refuse for this shape (e.g. width shards on fewer
                # cores than shards) is no candidate
                if R.tensor_checks(cand["out"], _flat(node.shape), "conv2d output"):
                    continue
                cands.append(cand)
            except (ValueError, ZeroDivisionError):
                continue
        if not cands and follow and policy.kind == "auto":
            # following the input gives no valid output spec: choose afresh (a reshard follows)
            follow = False
            for k in (HEIGHT, BLOCK) if self.is_mm(node) else (HEIGHT, BLOCK, WIDTH):
                try:
                    cand = self.conv_candidate(node, k, x, None, False)
                except (ValueError, ZeroDivisionError):
                    continue
                if not R.tensor_checks(cand["out"], _flat(node.shape), "conv2d output"):
                    cands.append(cand)
        if policy.kind == "auto" and not follow and len(cands) >= 2:
            chosen = self.auto_pick(cands)
        else:
            chosen = cands[0] if cands else None
        if follow and policy.kind == "auto" and chosen is not None:
            # Following the input is ttnn's own choice, but matmul convs shrink their output grid
            # to the cores holding blocks (rules.conv_output_memspec), and a chain of them can
            # leave a stage on a couple of cores (ResNet50 layer4 at batch 1: 2 cores of
            # 32x2048 shards). Reshard to ttnn's fresh auto choice when that spreads the conv
            # over at least twice the cores for less L1.
            fresh = []
            for k in (HEIGHT, BLOCK, WIDTH):
                if k == WIDTH and self.is_mm(node):
                    continue
                try:
                    fresh.append(self.conv_candidate(node, k, x, None, False))
                except (ValueError, ZeroDivisionError):
                    continue
            if len(fresh) >= 2:
                pick = self.auto_pick(fresh)
                if pick["pc"].num_cores >= 2 * chosen["pc"].num_cores and \
                        pick["est"].total < chosen["est"].total:
                    chosen, cands, follow = pick, fresh, False
        if chosen is None:
            raise LayoutError("no shard layout fits this conv", layer=node.name)
        tried = [chosen] + [c for c in cands if c is not chosen]
        # over budget: other schemes (auto only), then smaller act blocks, then un-follow input
        fallback = []
        for c in tried:
            fallback.append(c)
            for abh in (128, 64, 32):
                fallback.append(self.conv_candidate(node, c["kind"], x, abh, follow))
        if follow and policy.kind == "auto":
            for k in (HEIGHT, BLOCK, WIDTH):
                for abh in (None, 64, 32):
                    fallback.append(self.conv_candidate(node, k, x, abh, False))
        cap = self.cb_caps.get(node.name)
        fit = self.ttnn_first(node, x, [c for c in fallback if c["est"].total <= self.op_budget
                                        and (cap is None or l1m.estimate_cbs(c["est"]) <= cap)])
        if fit is None and cap is not None:     # the cap cannot be met: plan as if unasked
            fit = self.ttnn_first(node, x, [c for c in fallback
                                            if c["est"].total <= self.op_budget])
        self.slice_miss = []
        if fit is None and not self.is_mm(node) and policy.kind in ("auto", INTERLEAVED):
            sliced = self.plan_conv_sliced(node, x)
            if sliced is not None:
                return sliced
        if fit is None:
            best = min(fallback, key=lambda c: c["est"].total)
            sliced = "".join(
                f"; DRAM-sliced into {k} {st} slices of {r} output "
                f"{'row' if st == 'height' else 'column'}{'s' if r > 1 else ''} it still needs "
                f"{need} B" for st, k, r, need in self.slice_miss)
            raise LayoutError(
                f"conv2d needs at least {best['est'].total} B of L1 per core "
                f"({best['kind']}, {best['est']}), over the {self.op_budget} B of L1 per core left "
                f"by the {self.budget} B bank of {self.arch} and the tensors alive around it"
                f"{sliced}; use a smaller input size or batch", layer=node.name)
        return self.conv_on_candidate(node, x, fit, "conv")

    def ttnn_first(self, node: Node, x: TensorLayout, cands: list[dict]) -> dict | None:
        """The first of ``cands`` (the table's order of preference, all fitting L1) that ttnn
        accepts as planned, asked on the mock device (``ttnn_oracle``); the table's first when
        ttnn is not asked or accepts none of them (the plan then shows the step unconfirmed)."""
        if self.oracle is None or len(cands) == 0:
            return cands[0] if cands else None
        from . import ttnn_oracle as O
        params = O._param_shapes(self.g)
        for c in cands:
            cin = replace(c["conv_in"], layout=x.layout) if x.memory.sharded else x
            requested = self.requested_memory(node, node.shape.rows, node.shape.c) \
                if node.layout.kind == INTERLEAVED else None
            probe = self.conv_layer(node, cin, c, requested)
            ans = self.oracle.ask([O.layer_step(self.g, probe, self.flat, params)])[0]
            if ans is None or not ans.judged or ans.as_planned:
                return c
            note = (f"{node.name}: {c['kind']} on {c['pc'].num_cores} cores, act_block_h "
                    f"{c['act_block_h'] or 'auto'}: " + (ans.error if not ans.accepted else
                                                          f"ttnn gives {ans.memory} {ans.layout}"))
            if note not in self.ttnn_rejected:
                self.ttnn_rejected.append(note)
        return cands[0]

    def conv_on_candidate(self, node: Node, x: TensorLayout, c: dict, what: str) -> PlannedLayer:
        """The planned conv for candidate ``c``: a sharded producer on other cores is resharded
        to the candidate's input spec (conv2d keeps a sharded input's grid), and an interleaved
        policy asks its output memory config."""
        cin = x
        if self.with_adapters and x.memory.sharded and x.memory != c["conv_in"].memory:
            cin = self.adapt(node, 0, x, "reshard", replace(c["conv_in"], layout=x.layout),
                             f"{what} wants its input {c['kind']} on {c['pc'].num_cores} cores; "
                             f"producer gives {x.memory.short()}")
        requested = self.requested_memory(node, node.shape.rows, node.shape.c) \
            if node.layout.kind == INTERLEAVED else None
        return self.conv_layer(node, cin, c, requested)

    def conv_layer(self, node: Node, cin: TensorLayout, c: dict, requested: MemSpec | None
                   ) -> PlannedLayer:
        out = c["out"]
        if requested is not None:
            out = replace(out, memory=requested)
        config = Conv2dPlan(
            shard_layout=c["kind"], act_block_h_override=c["act_block_h"],
            reshard_if_not_optimal=False, override_sharding_config=False,
            output_layout=out.layout, dtype=out.dtype, is_mm_conv=c["is_mm"],
            num_cores=c["pc"].num_cores, core_grid=c["pc"].grid,
            input_memory=c["conv_in"].memory, memory_config=requested,
            weights_dtype=node.precision.weights, l1_parts=c["est"].parts,
        )
        return PlannedLayer(node, [cin], out, c["est"].total, config)

    def slice_dims(self, node: Node, slice_type: str, num_slices: int):
        """((input rows, input width, output rows), (in h, in w, out h, out w)) of the largest
        of ``num_slices`` slices."""
        a = node.attrs
        s_in, s_out = self.g.shape_of(node.inputs[0]), node.shape
        kh, kw = a["kernel"]
        sh, sw = a["stride"]
        dh, dw = a.get("dilation", (1, 1))
        dim, rnd = R.conv_slice_dim(slice_type, s_out.h, s_out.w, TILE_LAYOUT)
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

    def slice_candidate(self, node: Node, x: TensorLayout, slice_type: str, num_slices: int):
        """The best conv layout for the largest of ``num_slices`` DRAM slices (op_slicing.cpp
        compute_L1_usage_for_slice_config takes the max over slices; the first is the largest)."""
        dims, hw = self.slice_dims(node, slice_type, num_slices)
        cands = []
        for k in (HEIGHT, BLOCK, WIDTH):
            try:
                cands.append(self.conv_candidate(node, k, x, None, False, dims, hw))
            except (ValueError, ZeroDivisionError):
                continue
        if not cands:
            return None
        chosen = self.auto_pick(cands) if len(cands) >= 2 and cands[0]["kind"] == HEIGHT \
            else cands[0]
        tried = [chosen] + [c for c in cands if c is not chosen]
        for c in tried:
            for cand in [c] + [self.conv_candidate(node, c["kind"], x, abh, False, dims, hw)
                               for abh in (128, 64, 32)]:
                if cand["est"].total <= self.op_budget:
                    return cand
        return None

    # Slice counts up to this are tried one by one; beyond it the search doubles, then bisects
    # (a slice's L1 need does not grow as slices shrink), so a huge input costs O(log) estimates
    # instead of one per output row.
    LINEAR_SLICES = 32

    def fewest_slices(self, node: Node, x: TensorLayout, st: str):
        """(slice type, k, candidate) for the smallest k >= 2 slices along ``st`` whose largest
        slice fits L1, or None; a miss is noted in ``slice_miss`` for the error message."""
        dim, rnd = R.conv_slice_dim(st, node.shape.h, node.shape.w, TILE_LAYOUT)
        units = -(-dim // rnd)
        if units < 2:
            return None
        finest = self.slice_candidate(node, x, st, units)
        if finest is None:     # not even slices of one row / one tile column fit
            self.slice_miss.append((st, units, rnd, self.slice_need(node, x, st, units)))
            return None
        for k in range(2, min(units, self.LINEAR_SLICES) + 1):
            c = self.slice_candidate(node, x, st, k)
            if c is not None:
                return st, k, c
        lo, hi = self.LINEAR_SLICES, self.LINEAR_SLICES   # lo: known not to fit
        while hi < units:
            hi = min(units, hi * 2)
            if self.slice_candidate(node, x, st, hi) is not None:
                break
            lo = hi
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.slice_candidate(node, x, st, mid) is not None:
                hi = mid
            else:
                lo = mid
        return st, hi, (finest if hi == units else self.slice_candidate(node, x, st, hi))

    def slice_need(self, node: Node, x: TensorLayout, st: str, k: int) -> int | None:
        """Smallest L1 bytes/core estimate over the layouts of the largest of k slices."""
        best = None
        for kind in (HEIGHT, BLOCK, WIDTH):
            for abh in (None, 32):
                try:
                    dims, hw = self.slice_dims(node, st, k)
                    t = self.conv_candidate(node, kind, x, abh, False, dims, hw)["est"].total
                except (ValueError, ZeroDivisionError):
                    continue
                best = t if best is None else min(best, t)
        return best

    def plan_conv_sliced(self, node: Node, x: TensorLayout) -> PlannedLayer | None:
        """No L1 layout fits: run conv2d DRAM-sliced (rules ``conv2d.slice_*``). The smallest
        number of slices whose per-slice L1 estimate fits, along ttnn's preferred dimension first
        (op_slicing.cpp best_guess_slice_type), then the other one. Input and output are DRAM
        interleaved; the L1 estimate is the largest slice's."""
        s_in = self.g.shape_of(node.inputs[0])
        first = R.conv_slice_type_guess(s_in.h, s_in.w, TILE_LAYOUT)
        found = None
        for st in (first, "width" if first == "height" else "height"):
            found = self.fewest_slices(node, x, st)
            if found:
                break
        if found is None:
            return None
        st, k, c = found
        dram = MemSpec(INTERLEAVED, "dram")
        cin = x
        if self.with_adapters and x.memory != dram:
            if x.memory.sharded:
                cin = self.to_interleaved(node, 0, x, "DRAM-sliced conv2d reads its input from "
                                          "DRAM interleaved", buffer="dram")
            else:
                cin = self.adapt(node, 0, x, "to_memory_config", replace(x, memory=dram),
                                 "DRAM-sliced conv2d reads its input from DRAM interleaved")
        out = TensorLayout(dram, TILE_LAYOUT, node.precision.activations)
        config = Conv2dPlan(
            shard_layout=c["kind"], act_block_h_override=c["act_block_h"],
            reshard_if_not_optimal=False, override_sharding_config=False,
            output_layout=out.layout, dtype=out.dtype, is_mm_conv=False,
            num_cores=c["pc"].num_cores, core_grid=c["pc"].grid,
            input_memory=dram, memory_config=None,
            weights_dtype=node.precision.weights,
            slice=SliceConfig(st, k),
            output_hw=(node.shape.h, node.shape.w),
            slice_input_memory=c["conv_in"].memory, slice_output_memory=c["out"].memory,
            l1_parts=c["est"].parts,
        )
        return PlannedLayer(node, [cin], out, c["est"].total, config)

    def plan_conv_as_linear(self, node: Node) -> PlannedLayer:
        """A 1x1 stride-1 conv run as ttnn.linear with the solver's program config: in0 must be
        TILE and sharded exactly as the config expects (1D: height, 2D: block), the output is
        sharded the same way (matmul_device_operation.cpp 1D/2D branches)."""
        from .matmul_solver import KIND_1D, solve_node
        cfg = solve_node(node, grid=self.grid, l1_budget=max(self.op_budget, 1))
        kind = HEIGHT if cfg.kind == KIND_1D else BLOCK
        x = self.layouts[node.inputs[0]]
        cin = x
        if self.with_adapters:
            why = f"linear lowering ({cfg.kind}) wants in0 {cfg.in0_memory.short()} tile"
            if cin.layout != TILE_LAYOUT:
                if cin.memory.sharded:
                    cin = self.to_interleaved(node, 0, cin, why)
                cin = self.to_tile(node, 0, cin, "matmul inputs must be tilized")
            if cin.memory != cfg.in0_memory:
                ad = "reshard" if cin.memory.sharded else "interleaved_to_sharded"
                cin = self.adapt(node, 0, cin, ad, replace(cin, memory=cfg.in0_memory), why)
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

    @staticmethod
    def auto_pick(cands):
        """conv2d_utils.cpp determine_conv_config_for_auto_shard: height unless block is smaller
        in L1 and uses more cores than one grid row; then width if smaller still (not for mm)."""
        by = {c["kind"]: c for c in cands}
        win = by[HEIGHT]
        b, w = by.get(BLOCK), by.get(WIDTH)
        if b and b["est"].total < win["est"].total and b["pc"].num_cores > 8:
            win = b
        if w and w["est"].total < win["est"].total and not w["is_mm"]:
            win = w
        return win

    # ---- pools -----------------------------------------------------------------------------

    def consumers_need_tile(self, node: Node) -> bool:
        return any(ops.get(c.op).tile_input or is_block_float(c.precision.activations)
                   for c in self.g.consumers(node.name))

    def plan_pool(self, node: Node) -> PlannedLayer:
        x = self.layouts[node.inputs[0]]
        in_rows, c = self.rc(node.inputs[0])
        in_shape = self.g.shape_of(node.inputs[0])
        policy = node.layout
        scheme = x.memory.memory_layout if x.memory.sharded else (
            policy.kind if policy.kind in (HEIGHT, WIDTH, BLOCK) else
            R.select_conv_shard_layout(node.shape.rows, c, c, device_grid=self.grid))
        if policy.kind in (HEIGHT, WIDTH, BLOCK) and x.memory.sharded and policy.kind != scheme \
                and self.with_adapters:
            want = self.requested_memory(node, in_rows, c)
            x = self.adapt(node, 0, x, "reshard", replace(x, memory=want),
                           f"policy asks {policy.kind}; producer gives {x.memory.short()}")
            scheme = policy.kind
        dtype = node.precision.activations
        out_layout = TILE_LAYOUT if (self.with_adapters and (self.consumers_need_tile(node) or
                                                             is_block_float(dtype))) else ROW_MAJOR
        if not self.with_adapters or node.op == "adaptive_avg_pool2d":
            # adaptive_avg_pool2d has no dtype / output_layout arguments (0.81.1 signature)
            dtype = "bfloat16"
        if node.op == "adaptive_avg_pool2d":
            out_layout = ROW_MAJOR
        if node.op == "global_avg_pool":
            kernel = (in_shape.h, in_shape.w)
        elif node.op == "adaptive_avg_pool2d":
            kernel = tuple(-(-i // o) for i, o in zip((in_shape.h, in_shape.w), node.attrs["size"]))
        else:
            kernel = tuple(node.attrs["kernel"])
        attrs = {"output_layout": out_layout, "dtype": dtype,
                 "applied_shard_scheme": None if x.memory.sharded else scheme,
                 "out_shape": _flat(node.shape), "device_grid": self.grid}
        # generic_pools.cpp: an interleaved input is moved to the shard spec pool2d derives from
        # applied_shard_scheme (pool_parallel_config); a sharded one is used as it is.
        in_tiled = x.layout == TILE_LAYOUT
        if x.memory.sharded:
            pc = R.pool_parallel_config_of(x.memory)
            pool_in = x
        else:
            pc = R.pool_parallel_config(scheme, node.shape.rows, c, in_tiled=in_tiled,
                                        out_tiled=out_layout == TILE_LAYOUT, device_grid=self.grid)
            pool_in = replace(x, memory=R.pool_input_memspec(pc, in_rows, c, in_tiled=in_tiled))
        # The global pool's output is asked for: left to itself, ttnn 0.81.1 reduces some
        # whole-map pools to interleaved L1 and runs others (batch 3, 6, 10 of a sharded map; an
        # interleaved input) as pool2d with sharded outputs (measured on the mock device)
        requested = MemSpec(INTERLEAVED, "l1") if (
            self.with_adapters and node.op == "global_avg_pool") else None
        out = R.output_layout(node.op, [x], attrs, requested, [self.flat[node.inputs[0]]])
        # the global pool reduces the input as it is (no pool2d sharding of it)
        geo = None
        if node.op in ("max_pool2d", "avg_pool2d"):
            geo = l1m.ConvGeometry(in_shape.n, in_shape.h, in_shape.w, node.shape.h, node.shape.w,
                                   kernel, tuple(node.attrs["stride"]),
                                   _padding4(node.attrs.get("padding", (0, 0))))
        est = l1m.pool_l1(in_layout=x if node.op == "global_avg_pool" else pool_in,
                          out_layout=out, in_rows=in_rows, in_w=in_shape.w,
                          c=c, out_rows=node.shape.rows, kernel=kernel, num_cores=pc.num_cores,
                          global_pool=node.op == "global_avg_pool", geometry=geo,
                          cores_nhw=pc.cores_nhw)
        config = PoolPlan(applied_shard_scheme=attrs["applied_shard_scheme"],
                          shard_scheme=scheme, output_layout=out_layout, dtype=dtype,
                          kernel=kernel, num_cores=pc.num_cores, core_grid=pc.grid,
                          input_memory=pool_in.memory, out_shape=attrs["out_shape"],
                          memory_config=requested, l1_parts=est.parts)
        if self.with_adapters and est.total > self.op_budget and \
                node.op not in ("global_avg_pool", "adaptive_avg_pool2d"):
            sliced = self.plan_pool_sliced(node, x, est, config)
            if sliced is not None:
                return sliced
        return PlannedLayer(node, [x], out, est.total, config)

    def plan_pool_sliced(self, node: Node, x: TensorLayout, est, config) -> PlannedLayer | None:
        """A max/avg pool over the L1 it has, run DRAM-sliced (``dram_slice_config``, ttnn
        0.81.1 pool2d: input read from DRAM slice by slice, output DRAM interleaved; checked on
        the mock device). Height slices of the output, the fewest that fit; the per-slice L1 is
        the whole pool's input/halo/output scaled to the slice's rows (the window CB stays)."""
        s_in, s_out = self.g.shape_of(node.inputs[0]), node.shape
        kh, _ = node.attrs["kernel"]
        sh, _ = node.attrs.get("stride", node.attrs["kernel"])
        dh, _ = node.attrs.get("dilation", (1, 1))
        fixed = {k: v for k, v in est.parts.items() if k.endswith("_cb")}
        scaled_in = {k: v for k, v in est.parts.items() if k in ("input", "halo")}
        scaled_out = {k: v for k, v in est.parts.items() if k == "output"}
        # bounded search: at most one output row per slice, and no more than 64 slices
        for k in range(2, min(s_out.h, 64) + 1):
            oh = -(-s_out.h // k)
            ih = min(s_in.h, (oh - 1) * sh + dh * (kh - 1) + 1)
            parts = dict(fixed)
            parts.update({n: -(-v * ih // s_in.h) for n, v in scaled_in.items()})
            parts.update({n: -(-v * oh // s_out.h) for n, v in scaled_out.items()})
            total = sum(parts.values())
            if total <= self.op_budget:
                break
        else:
            return None
        dram = MemSpec(INTERLEAVED, "dram")
        cin = x
        if x.memory != dram:
            why = "a DRAM-sliced pool reads its input from DRAM interleaved"
            cin = self.to_interleaved(node, 0, x, why, buffer="dram") if x.memory.sharded else \
                self.adapt(node, 0, x, "to_memory_config", replace(x, memory=dram), why)
        out = TensorLayout(dram, config.output_layout, config.dtype)
        config = replace(config, applied_shard_scheme=None, input_memory=dram, l1_parts=parts,
                         slice=SliceConfig("height", k))
        return PlannedLayer(node, [cin], out, total, config)

    # ---- eltwise ---------------------------------------------------------------------------
    def plan_binary(self, node: Node) -> PlannedLayer:
        ins = self.inputs_of(node)
        shapes = [self.flat[s] for s in node.inputs]
        s0, s1 = (self.g.shape_of(i) if i not in self.g.constants else None for i in node.inputs)
        commutes = node.op in ("add", "multiply")
        # b is the operand that broadcasts: a constant, or a per-image vector [N, 1, 1, C]
        swap = commutes and (
            (node.inputs[0] in self.g.constants and node.inputs[1] not in self.g.constants)
            or (s0 is not None and s1 is not None and s0 != s1 and s0.h == s0.w == 1))
        if not swap and commutes and node.inputs[1] not in self.g.constants and s0 == s1 and \
                ins[0].memory.buffer == "dram" and ins[1].memory.sharded:
            # a DRAM operand (a spilled shortcut) next to a sharded one: binary_ng gives the
            # output a sharded spec anyway (seen on the mock device), so make the sharded
            # tensor operand a: the output follows it, and in place it is its buffer
            swap = True
        ia, ib = (1, 0) if swap else (0, 1)
        a, b = ins[ia], ins[ib]
        sa, sb = (s1, s0) if swap else (s0, s1)
        per_image = sa is not None and sb is not None and sa != sb and sa.n > 1
        if self.with_adapters and per_image:
            # [1,1,N*H*W,C] against [1,1,N,C] does not broadcast per image: the layer reshapes
            # them to [N,1,H*W,C] and [N,1,1,C]; a TILE reshape that changes the tile padding
            # copies and takes no sharded tensor (rules binary.reshape_broadcast)
            why = "per-image broadcast reshapes its operands to [N, 1, H*W, C] / [N, 1, 1, C]"
            if a.memory.sharded:
                a = self.to_interleaved(node, ia, a, why)
            if b.memory.sharded:
                b = self.to_interleaved(node, ib, b, why)
            if a.layout != TILE_LAYOUT:
                a = self.to_tile(node, ia, a, "binary operands in TILE")
            if b.layout != TILE_LAYOUT:
                b = self.to_tile(node, ib, b, "binary operands in TILE")
        if self.with_adapters and not per_image:
            # a row-major shard that is not whole tiles cannot be tilized where it is (ttnn
            # tilizes with the shard spec: tensor.shard_tile): it goes interleaved first
            if a.layout != TILE_LAYOUT and a.memory.sharded and not R.tile_aligned_shard(a.memory):
                a = self.to_interleaved(node, ia, a, "row-major shards that are not whole tiles")
            if b.layout != TILE_LAYOUT and b.memory.sharded and not R.tile_aligned_shard(b.memory):
                b = self.to_interleaved(node, ib, b, "row-major shards that are not whole tiles")
            if a.layout != TILE_LAYOUT and (a.memory.sharded or b.memory.sharded):
                a = self.to_tile(node, ia, a, "binary_ng's row-major path takes no sharded tensors")
            if b.layout != TILE_LAYOUT and (a.memory.sharded or b.memory.sharded):
                b = self.to_tile(node, ib, b, "binary_ng's row-major path takes no sharded tensors")
            if a.layout == TILE_LAYOUT and b.layout != TILE_LAYOUT:
                b = self.to_tile(node, ib, b, "operand layouts must agree (TILE)")
            adv = R.advise(node.op, [a, b], {}, None, shapes=[shapes[ia], shapes[ib]])
            # only a different shard spec is worth a move: equal specs that are not native
            # (uneven shards) stay on the TensorAccessor path whatever we do
            if adv and a.memory.sharded and b.memory.sharded and shapes[ia] == shapes[ib] \
                    and a.memory != b.memory:
                cost_a = R.tensor_bytes(a, *self.rc(node.inputs[ia]))
                cost_b = R.tensor_bytes(b, *self.rc(node.inputs[ib]))
                # move the operand on fewer cores onto the other's grid: that is where ttnn
                # puts the output anyway (rules.binary_output_source), and it keeps the stage
                # on the wider grid; equal core counts: the cheaper move (ties: b)
                na, nb = R.core_count(a.memory), R.core_count(b.memory)
                if na < nb or (na == nb and cost_a < cost_b):
                    a = self.adapt(node, ia, a, "reshard", replace(a, memory=b.memory),
                                   f"shard specs differ ({a.memory.short()} vs {b.memory.short()}); "
                                   f"a on {na} cores, b on {nb}; moving a costs {cost_a} B "
                                   f"(b: {cost_b} B); same spec = native L1-sharded binary_ng")
                else:
                    b = self.adapt(node, ib, b, "reshard", replace(b, memory=a.memory),
                                   f"shard specs differ ({a.memory.short()} vs {b.memory.short()}); "
                                   f"a on {na} cores, b on {nb}; moving b costs {cost_b} B "
                                   f"(a: {cost_a} B); same spec = native L1-sharded binary_ng")
        req = None if per_image else self.requested_memory(node, node.shape.rows, node.shape.c)
        dtype = node.precision.activations if self.with_adapters else a.dtype
        attrs = {"dtype": dtype, "out_shape": _flat(node.shape)}
        out = R.output_layout(node.op, [a, b], attrs, req, [shapes[ia], shapes[ib]])
        received = [None, None]
        received[ia], received[ib] = a, b
        est = l1m.eltwise_l1(inputs=[(a, *self.rc(node.inputs[ia])), (b, *self.rc(node.inputs[ib]))],
                             out_layout=out, out_rows=node.shape.rows, c=node.shape.c)
        inplace, blocker = False, "per-image broadcast" if per_image else None
        if self.with_adapters and est.total > self.op_budget and not per_image:
            if node.op != "subtract" and \
                    self.inplace_blocker(node, ia, a, shapes[ia], dtype, req) is not None and \
                    self.inplace_blocker(node, ib, b, shapes[ib], dtype, req) is None:
                # add/multiply commute: write into the operand nothing else reads
                ia, ib, a, b, swap = ib, ia, b, a, not swap
                received[ia], received[ib] = a, b
            blocker = self.inplace_blocker(node, ia, a, shapes[ia], dtype, req)
            inplace = blocker is None
        if inplace:
            # TT's ResNet50 bottleneck: ttnn.add_(out, ds_out) = add(a, b, output_tensor=a).
            # The output is a's buffer (binary_ng compute_output_specs returns the preallocated
            # tensor's spec), so it costs no L1 of its own.
            out = a
            est = l1m.eltwise_l1(inputs=[(a, *self.rc(node.inputs[ia])),
                                         (b, *self.rc(node.inputs[ib]))],
                                 out_layout=out, out_rows=node.shape.rows, c=node.shape.c,
                                 output_aliases_input=0)
        native = R.is_native_binary_sharding(a, b, out.memory, shapes[ia], shapes[ib])
        if not native and shapes[ia] != shapes[ib] and (a.memory.sharded or b.memory.sharded):
            est = l1m.with_unborrowed_binary_cbs(est)
        elif not native and a.memory.sharded != b.memory.sharded:
            est = l1m.with_unborrowed_binary_cbs(est, cbs=3)
        config = BinaryPlan(swap_operands=swap, dtype=dtype, memory_config=req,
                            native_l1_sharding=native,
                            broadcast="per_image" if per_image else (
                                "row_b" if shapes[ib] != shapes[ia] else None),
                            activation=node.attrs.get("activation"), l1_parts=est.parts)
        if inplace:
            config = replace(config, inplace=True, out_shape=_flat(node.shape))
        elif est.total > self.op_budget and self.with_adapters:
            # the plan fails: say why output_tensor=a won't do
            config = replace(config, inplace_blocked=blocker)
        return PlannedLayer(node, received, out, est.total, config)

    def inplace_blocker(self, node: Node, ia: int, a: TensorLayout, shape_a, dtype: str,
                        req: MemSpec | None) -> str | None:
        """Why the binary op cannot write its output into operand a (``output_tensor=a``), or
        None when it can. binary_ng takes the preallocated tensor's spec as the output spec, so
        it must have the broadcast output shape, the output dtype ('If both output dtype and
        output tensor provided dtype should match') and the requested memory config; and the
        tensor a is overwritten, so nothing may read it afterwards."""
        src = node.inputs[ia]
        if shape_a != _flat(node.shape):
            return "operand a is broadcast"
        if a.dtype != dtype:
            return f"output dtype {dtype} differs from a's {a.dtype}"
        if req is not None and req != a.memory:
            return "a memory_config other than a's is requested"
        if a.memory.buffer != "l1":
            return "a is not in L1 (nothing to save)"
        if node.inputs.count(src) > 1:
            return "both operands are the same tensor"
        if (node.name, ia) in self.adapted:
            return None                    # a is the adapter's fresh copy: safe to overwrite
        if src in self.g.inputs or src in self.g.constants or src in self.g.outputs:
            return f"{src} is a graph input, constant or output"
        if [c.name for c in self.g.consumers(src)] != [node.name]:
            return f"{src} is read by other layers too"
        return None

    def plan_unary(self, node: Node) -> PlannedLayer:
        x = self.layouts[node.inputs[0]]
        want = node.precision.activations
        if self.with_adapters and x.dtype != want:
            after = replace(x, dtype=want, layout=TILE_LAYOUT if is_block_float(want) else x.layout)
            kind = "typecast" if x.layout == TILE_LAYOUT else "to_layout"
            x = self.adapt(node, 0, x, kind, after,
                           f"{node.op} has no dtype argument: {x.dtype} -> {want} before it")
        out = R.output_layout(node.op, [x], {}, None, [self.flat[node.inputs[0]]])
        rows, c = self.rc(node.inputs[0])
        est = l1m.eltwise_l1(inputs=[(x, rows, c)], out_layout=out, out_rows=rows, c=c)
        return PlannedLayer(node, [x], out, est.total, PlanConfig(l1_parts=est.parts))

    def per_channel_constant(self, node: Node, why: str):
        """x times (plus) [1, 1, 1, C] TILE constants in L1, as batch_norm and layer_scale run:
        binary_ng broadcasts them over x's rows whatever x's sharding (binary.broadcast).
        ``(x as fed, the constants' layout, output dtype, output layout, L1 estimate)``."""
        x = self.layouts[node.inputs[0]]
        if self.with_adapters and x.layout != TILE_LAYOUT:
            x = self.to_tile(node, 0, x, why)
        rows, c = self.rc(node.inputs[0])
        const = TensorLayout(MemSpec(INTERLEAVED, "l1"), TILE_LAYOUT, "bfloat16")
        dtype = node.precision.activations if self.with_adapters else x.dtype
        out = R.output_layout(node.op, [x, const], {"dtype": dtype, "out_shape": _flat(node.shape)},
                              None, [self.flat[node.inputs[0]], (1, 1, 1, c)])
        est = l1m.eltwise_l1(inputs=[(x, rows, c), (const, 1, c)], out_layout=out, out_rows=rows,
                             c=c)
        return x, const, dtype, out, est

    def plan_batch_norm(self, node: Node) -> PlannedLayer:
        """x * scale + shift with [1, 1, 1, C] TILE constants in L1 (rules batch_norm.as_binary):
        binary_ng broadcasts them over x's rows whatever x's sharding (binary.broadcast)."""
        x, const, dtype, out, est = self.per_channel_constant(
            node, "binary operands in TILE (the constants are TILE)")
        return PlannedLayer(node, [x], out, est.total,
                            BatchNormPlan(dtype=dtype, constant_memory=const.memory,
                                          constant_dtype=const.dtype,
                                          activation=node.attrs.get("activation"),
                                          l1_parts=est.parts))

    # ---- issue 23's ops: layer_norm, layer_scale, softmax, reshape/permute --------------------
    def interleaved_tile_input(self, node: Node, why: str, dtype: str | None = None) -> TensorLayout:
        """Input 0 interleaved (same buffer) and TILE, and in ``dtype`` when given (adapters)."""
        x = self.layouts[node.inputs[0]]
        if not self.with_adapters:
            return x
        if x.memory.sharded:
            x = self.to_interleaved(node, 0, x, why)
        if x.layout != TILE_LAYOUT:
            x = self.to_tile(node, 0, x, f"{node.op} runs on TILE tensors")
        if dtype is not None and x.dtype != dtype:
            x = self.adapt(node, 0, x, "typecast", replace(x, dtype=dtype),
                           f"{node.op} has no dtype argument: {x.dtype} -> {dtype} before it")
        return x

    def plan_layer_norm(self, node: Node) -> PlannedLayer:
        """ttnn.layer_norm on an interleaved TILE input (rule layer_norm.interleaved), output in
        the input's memory config and dtype; weight and bias [1, 1, 1, C] TILE in DRAM."""
        from .ops.layer_norm import LayerNormPlan
        x = self.interleaved_tile_input(node, "layer_norm without a sharded program config",
                                        node.precision.activations)
        rows, c = self.rc(node.inputs[0])
        out = R.output_layout("layer_norm", [x], {}, None, [self.flat[node.inputs[0]]])
        est = l1m.layer_norm_l1(x, out, rows, c)
        return PlannedLayer(node, [x], out, est.total,
                            LayerNormPlan(constant_memory=MemSpec(INTERLEAVED, "dram"),
                                          l1_parts=est.parts))

    def plan_layer_scale(self, node: Node) -> PlannedLayer:
        """x * gamma, gamma a [1, 1, 1, C] TILE constant in L1 (as batch_norm's scale)."""
        from .ops.layer_scale import LayerScalePlan
        x, const, dtype, out, est = self.per_channel_constant(
            node, "binary operands in TILE (the scale is TILE)")
        return PlannedLayer(node, [x], out, est.total,
                            LayerScalePlan(dtype=dtype, constant_memory=const.memory,
                                           constant_dtype=const.dtype, l1_parts=est.parts))

    def plan_softmax(self, node: Node) -> PlannedLayer:
        from .ops.softmax import SoftmaxPlan
        x = self.interleaved_tile_input(node, "softmax: interleaved input (no sharded program "
                                        "config is planned)", node.precision.activations)
        rows, c = self.rc(node.inputs[0])
        out = R.output_layout("softmax", [x], {}, None, [self.flat[node.inputs[0]]])
        est = l1m.eltwise_l1(inputs=[(x, rows, c)], out_layout=out, out_rows=rows, c=c)
        return PlannedLayer(node, [x], out, est.total, SoftmaxPlan(l1_parts=est.parts))

    def plan_reshape(self, node: Node) -> PlannedLayer:
        """flatten / reshape / permute / channel_shuffle: ttnn.reshape and ttnn.permute on an
        interleaved bfloat16 TILE input (rule reshape.interleaved); the output in its memory."""
        x = self.interleaved_tile_input(node, f"{node.op} runs on interleaved tensors",
                                        "bfloat16")
        rows, c = self.rc(node.inputs[0])
        out = R.output_layout(node.op, [x], {}, None, [self.flat[node.inputs[0]]])
        est = l1m.eltwise_l1(inputs=[(x, rows, c)], out_layout=out, out_rows=node.shape.rows,
                             c=node.shape.c)
        return PlannedLayer(node, [x], out, est.total, PlanConfig(l1_parts=est.parts))

    def plan_slice(self, node: Node) -> PlannedLayer:
        x = self.layouts[node.inputs[0]]
        if self.with_adapters and x.memory.sharded:
            x = self.to_interleaved(node, 0, x, "slice takes interleaved tensors")
        out = R.output_layout("slice", [x], {}, None, [self.flat[node.inputs[0]]])
        rows, c = self.rc(node.inputs[0])
        est = l1m.eltwise_l1(inputs=[(x, rows, c)], out_layout=out, out_rows=rows,
                             c=node.shape.c)
        return PlannedLayer(node, [x], out, est.total, PlanConfig(l1_parts=est.parts))

    def plan_split(self, node: Node) -> PlannedLayer:
        """One ttnn.slice per named output (layers/slice.py Split): the input interleaved (rule
        slice.memory), every output in the input's memory config."""
        x = self.layouts[node.inputs[0]]
        if self.with_adapters and x.memory.sharded:
            x = self.to_interleaved(node, 0, x, "split runs ttnn.slice, which takes interleaved "
                                    "tensors")
        out = R.output_layout("split", [x], {}, None, [self.flat[node.inputs[0]]])
        rows, c = self.rc(node.inputs[0])
        est = l1m.split_l1(in_layout=x, out_layout=out, rows=rows, c_in=c,
                           channels=[hi - lo for _, lo, hi in node.attrs["sections"]])
        return PlannedLayer(node, [x], out, est.total, PlanConfig(l1_parts=est.parts),
                            outputs={t: out for t in node.outputs})

    # ---- conv_transpose2d --------------------------------------------------------------------
    def conv_transpose_candidate(self, node: Node, kind: str, x: TensorLayout,
                                 act_block_h: int | None, follow: bool) -> dict:
        """One layout of a conv_transpose2d and its L1 estimate: conv2d's parallel config and
        output spec for the transposed conv's output rows, the conv2d micro-op's CBs and halo
        over the zero-inserted full input (conv_transpose2d.cpp conv_transpose2d_L1 calls
        determine_conv_config_for_auto_shard / shard_or_reshard_tensor_if_required with the
        output size and the full input size)."""
        a = node.attrs
        s_in = self.g.shape_of(node.inputs[0])
        rows_in, c_in = self.rc(node.inputs[0])
        out_rows, c_out = node.shape.rows, node.shape.c
        is_mm = R.is_matmul_conv(a["kernel"], a["stride"], a["padding"], a["dilation"],
                                 a["groups"])
        if follow:
            pc, conv_in = R.parallel_config_of(x.memory), x
        else:
            pc = R.determine_parallel_config(kind, out_rows, c_in, c_out, self.grid,
                                             channels_padding=not is_mm, act_block_h=act_block_h)
            conv_in = TensorLayout(R.conv_memspec(kind, rows_in, c_in, pc), x.layout, x.dtype)
        out = TensorLayout(R.conv_output_memspec(pc, out_rows, c_out, is_mm=False,
                                                 device_grid=self.grid),
                           TILE_LAYOUT, node.precision.activations)
        geo = l1m.conv_transpose_geometry(s_in.n, s_in.h, s_in.w, node.shape.h, node.shape.w,
                                          a["kernel"], a["stride"], a["padding"],
                                          a["output_padding"], a["dilation"])
        est = l1m.conv_l1(kind=kind, in_layout=conv_in, out_layout=out, in_rows=rows_in,
                          in_w=s_in.w, c_in=c_in, out_rows=out_rows, c_out=c_out,
                          kernel=tuple(a["kernel"]), cores_nhw=pc.cores_nhw, cores_c=pc.cores_c,
                          num_cores=pc.num_cores, weights_dtype=node.precision.weights,
                          fp32_accum=node.precision.fp32_accum, act_block_h=act_block_h,
                          bias=bool(a.get("bias")), geometry=geo, is_mm=is_mm,
                          received=None if follow or x.memory.sharded else x)
        return dict(kind=kind, pc=pc, conv_in=conv_in, out=out, est=est, is_mm=is_mm,
                    act_block_h=act_block_h or 0)

    def plan_conv_transpose2d(self, node: Node) -> PlannedLayer:
        """Like conv2d's plan on its L1 path: follow a sharded input, else ttnn's auto choice
        among height/block/width (auto_pick); smaller act blocks when over budget. No DRAM
        slicing (its slice path is not modelled): an input in DRAM is first moved to L1
        interleaved (rule conv_transpose2d.l1_path)."""
        x = self.layouts[node.inputs[0]]
        policy = node.layout
        if self.with_adapters and x.memory.buffer == "dram":
            x = self.adapt(node, 0, x, "to_memory_config",
                           replace(x, memory=MemSpec(INTERLEAVED, "l1")),
                           "conv_transpose2d runs its L1 path on an L1 input")
        follow = policy.kind == "auto" and x.memory.sharded
        kinds = [policy.kind] if policy.kind in (HEIGHT, BLOCK, WIDTH) else (
            [x.memory.memory_layout] if follow else [HEIGHT, BLOCK, WIDTH])
        cands = []
        for k in kinds:
            try:
                cand = self.conv_transpose_candidate(node, k, x, None, follow)
            except (ValueError, ZeroDivisionError):
                continue
            if not R.tensor_checks(cand["out"], _flat(node.shape), "conv_transpose2d output"):
                cands.append(cand)
        if not cands:
            raise LayoutError("no shard layout gives ttnn a valid conv_transpose2d output",
                              layer=node.name)
        chosen = self.auto_pick(cands) if len(cands) >= 2 else cands[0]
        tried = [chosen] + [c for c in cands if c is not chosen]
        fallback = [c2 for c in tried for c2 in
                    [c] + [self.conv_transpose_candidate(node, c["kind"], x, abh, follow)
                           for abh in (128, 64, 32)]]
        fit = next((c for c in fallback if c["est"].total <= self.op_budget), None)
        if fit is None:
            best = min(fallback, key=lambda c: c["est"].total)
            raise LayoutError(
                f"conv_transpose2d needs at least {best['est'].total} B of L1 per core "
                f"({best['kind']}, {best['est']}), over the {self.op_budget} B left by the "
                f"{self.budget} B bank of {self.arch} and the tensors alive around it (it is not "
                "DRAM-sliced); use a smaller input size or batch", layer=node.name)
        layer = self.conv_on_candidate(node, x, fit, "conv_transpose2d")
        a = node.attrs
        layer.config = ConvTranspose2dPlan.of(layer.config, kernel=tuple(a["kernel"]),
                                              padding=tuple(a["padding"]),
                                              dilation=tuple(a["dilation"]))
        return layer

    # ---- linear ----------------------------------------------------------------------------
    def plan_linear(self, node: Node) -> PlannedLayer:
        x = self.layouts[node.inputs[0]]
        rows, k = self.rc(node.inputs[0])
        if self.with_adapters:
            if x.memory.sharded:
                x = self.to_interleaved(node, 0, x, "linear runs without a sharded program config: "
                                        "interleaved input")
            if x.layout != TILE_LAYOUT:
                x = self.to_tile(node, 0, x, "matmul inputs must be tilized")
        dtype = node.precision.activations
        out = TensorLayout(MemSpec(INTERLEAVED, "l1"), TILE_LAYOUT, dtype)
        per_pixel = node.shape.h * node.shape.w > 1
        estimate = l1m.pixel_linear_l1 if per_pixel else l1m.linear_l1
        kw = dict(in_layout=x, rows=rows, k=k, n=node.shape.c,
                  weights_dtype=node.precision.weights, bias=bool(node.attrs.get("bias", True)))
        if per_pixel:
            kw["budget"] = self.op_budget
        est = estimate(out_layout=out, **kw)
        if per_pixel and self.with_adapters and est.total > self.op_budget:
            # a per-pixel linear's output too large for L1 (ConvNeXt's pwconv1 at batch 8)
            # goes to DRAM interleaved: ttnn.linear takes any interleaved output memory config
            out = replace(out, memory=MemSpec(INTERLEAVED, "dram"))
            est = estimate(out_layout=out, **kw)
        return PlannedLayer(node, [x], out, est.total,
                            LinearPlan(dtype=dtype, memory_config=out.memory, program_config=None,
                                       # what the matmul fuses (the rest runs after it)
                                       activation=matmul_split(node.attrs.get("activation"))[0],
                                       l1_parts=est.parts))

    # ---- upsample / concat / pad -----------------------------------------------------------
    def plan_upsample(self, node: Node) -> PlannedLayer:
        if node.attrs.get("align_corners"):
            return self.plan_grid_sample(node)
        x = self.layouts[node.inputs[0]]
        mode = node.attrs.get("mode", "nearest")
        if self.with_adapters:
            if mode == "bilinear":
                rows, c = self.rc(node.inputs[0])
                x = self.to_row_major_height(
                    node, 0, x, R.bilinear_upsample_memspec(rows, c, self.grid), "bfloat16",
                    "bilinear upsample needs bfloat16 ROW_MAJOR height shards (ttnn's autoshard)")
            else:
                if x.memory.memory_layout == WIDTH:
                    x = self.to_interleaved(node, 0, x, "upsample takes no width-sharded input")
                in_shape = self.g.shape_of(node.inputs[0])
                if x.layout != ROW_MAJOR and (x.memory.sharded or in_shape.w % TILE or
                                              in_shape.c % TILE):
                    x = self.to_row_major(node, 0, x, "sharded upsample needs ROW_MAJOR" if
                                          x.memory.sharded else "a TILE upsample input must be "
                                          "tile aligned in its [N,H,W,C] view")
        attrs = {"mode": mode, "out_shape": _flat(node.shape), "lowering": "upsample",
                 "in_w": self.g.shape_of(node.inputs[0]).w}
        out = R.output_layout("upsample", [x], attrs, None, [self.flat[node.inputs[0]]])
        rows, c = self.rc(node.inputs[0])
        est = l1m.eltwise_l1(inputs=[(x, rows, c)], out_layout=out, out_rows=node.shape.rows, c=c)
        return PlannedLayer(node, [x], out, est.total, UpsamplePlan(**attrs, l1_parts=est.parts))

    def to_row_major_height(self, node: Node, idx: int, x: TensorLayout, want: MemSpec,
                            dtype: str, reason: str) -> TensorLayout:
        """Adapters that bring ``x`` to ``want`` (height shards), ROW_MAJOR, ``dtype``: typecast
        (TILE), out of width/block shards (and out of height shards whose channels are not
        whole tiles), to ROW_MAJOR, then reshard / interleaved_to_sharded. Whatever the producer
        (interleaved, any sharding, a graph input) the chain ends at exactly ``want``."""
        _, c = self.rc(node.inputs[idx])
        if x.dtype != dtype:
            x = self.adapt(node, idx, x, "typecast", replace(x, dtype=dtype), f"{reason}: {x.dtype} in")
        if x.memory.sharded and (x.memory.memory_layout != HEIGHT or
                                 (x.layout == TILE_LAYOUT and c % TILE)):
            x = self.to_interleaved(node, idx, x, f"{reason}: leave {x.memory.memory_layout} shards")
        if x.layout != ROW_MAJOR:
            x = self.to_row_major(node, idx, x, reason)
        if x.memory != want:
            kind = "reshard" if x.memory.sharded else "interleaved_to_sharded"
            x = self.adapt(node, idx, x, kind, replace(x, memory=want), reason)
        return x

    def plan_grid_sample(self, node: Node) -> PlannedLayer:
        """Bilinear upsample with align_corners=True as ttnn.grid_sample with a precomputed grid
        (docs/spec.md): input ROW_MAJOR bfloat16/float32, interleaved or height sharded; the grid
        ([N, Ho, Wo, 6] bfloat16, prepared at build) in DRAM; the output interleaved (DRAM unless
        the layer's policy says ``interleaved l1``): with an interleaved grid and output the
        kernel splits the output pixels over the cores itself (split_work_to_cores)."""
        src = node.inputs[0]
        x = self.layouts[src]
        rows, c = self.rc(src)
        if self.with_adapters:
            if x.dtype not in ("bfloat16", "float32"):
                x = self.adapt(node, 0, x, "typecast", replace(x, dtype="bfloat16"),
                               "grid_sample takes bfloat16 or float32")
            if x.memory.memory_layout not in (INTERLEAVED, HEIGHT) or (
                    x.memory.sharded and x.layout == TILE_LAYOUT and c % TILE):
                x = self.to_interleaved(node, 0, x, "grid_sample takes interleaved or height-sharded input")
            if x.layout != ROW_MAJOR:
                x = self.to_row_major(node, 0, x, "grid_sample takes ROW_MAJOR input")
        p = node.layout
        if p.kind in (HEIGHT, WIDTH, BLOCK):
            raise LayoutError(f"policy {p.kind}: the grid_sample lowering of an align_corners "
                              "upsample writes an interleaved output (use interleaved [dram|l1] "
                              "or auto)", layer=node.name, rule="grid_sample.output")
        out_mem = MemSpec(INTERLEAVED, (p.buffer or "dram") if p.kind == INTERLEAVED else "dram")
        n = node.shape.n
        grid = TensorLayout(MemSpec(INTERLEAVED, "dram"), ROW_MAJOR, "bfloat16")
        attrs = {"mode": "bilinear", "align_corners": True, "use_precomputed_grid": True,
                 "padding_mode": "zeros", "lowering": "grid_sample", "grid": grid,
                 "grid_memory": grid.memory, "grid_shape": (n, node.shape.h, node.shape.w, 6),
                 "batch": n, "grid_batch": n, "out_shape": _flat(node.shape),
                 "memory_config": out_mem}
        out = R.output_layout("grid_sample", [x], attrs, out_mem, [self.flat[src]])
        est = l1m.eltwise_l1(inputs=[(x, rows, c)], out_layout=out, out_rows=node.shape.rows, c=c)
        return PlannedLayer(node, [x], out, est.total, GridSamplePlan(**attrs, l1_parts=est.parts))

    def plan_concat(self, node: Node) -> PlannedLayer:
        ins = self.inputs_of(node)
        shapes = [self.flat[s] for s in node.inputs]
        if self.with_adapters and node.layout.kind == HEIGHT and node.layout.buffer != "dram" \
                and ins[0].memory.memory_layout != HEIGHT:
            # asked for height sharding: shard the first input so (below) the others follow it
            rows, c = self.rc(node.inputs[0])
            want = R.reshape_memspec(self.requested_memory(node, rows, c), rows, c, ins[0].layout)
            kind = "reshard" if ins[0].memory.sharded else "interleaved_to_sharded"
            ins[0] = self.adapt(node, 0, ins[0], kind, replace(ins[0], memory=want),
                                "layout asks height_sharded; the other inputs follow this one")
        if self.with_adapters and R.check("concat", ins, {"dim": -1}, None, shapes=shapes):
            first = ins[0]
            channels = [self.rc(s)[1] for s in node.inputs]
            misaligned = R.concat_shard_misalignment(HEIGHT, channels, first.dtype)
            for i, t in enumerate(ins):
                rows, c = self.rc(node.inputs[i])
                if first.memory.sharded and first.memory.memory_layout == HEIGHT and not misaligned:
                    want = R.reshape_memspec(first.memory, rows, c)
                    if t.memory != want:
                        kind = "reshard" if t.memory.sharded else "interleaved_to_sharded"
                        ins[i] = self.adapt(node, i, t, kind, replace(t, memory=want),
                                            "channel concat needs equal height shards on one grid")
                elif t.memory.sharded:
                    ins[i] = self.to_interleaved(node, i, t, misaligned or
                                                 "concat inputs all interleaved")
            if R.check("concat", ins, {"dim": -1}, None, shapes=shapes):
                ins = self.concat_format(node, ins)
        out = R.output_layout("concat", ins, {"out_shape": _flat(node.shape)}, None, shapes)
        est = l1m.eltwise_l1(inputs=[(t, *self.rc(s)) for t, s in zip(ins, node.inputs)],
                             out_layout=out, out_rows=node.shape.rows, c=node.shape.c)
        return PlannedLayer(node, ins, out, est.total, ConcatPlan(dim=-1, l1_parts=est.parts))

    def concat_format(self, node: Node, ins: list[TensorLayout]) -> list[TensorLayout]:
        """Adapters giving every concat input one layout and dtype (rules concat.same_layout,
        concat.same_format): TILE when any input is TILE (block-float exists only in TILE, so
        untilizing would change its dtype), the layer's activation dtype when they differ."""
        want_layout = TILE_LAYOUT if any(t.layout == TILE_LAYOUT for t in ins) else ROW_MAJOR
        dtypes = {t.dtype for t in ins}
        act = node.precision.activations
        want_dtype = ins[0].dtype if len(dtypes) == 1 else act if act in dtypes else ins[0].dtype
        if want_layout == ROW_MAJOR and is_block_float(want_dtype):
            want_dtype = "bfloat16"
        for i, t in enumerate(ins):
            if t.layout != want_layout:
                ins[i] = self.adapt(node, i, t, "to_layout",
                                    replace(t, layout=want_layout, dtype=want_dtype),
                                    "concat inputs share one layout and dtype")
            elif t.dtype != want_dtype:
                ins[i] = self.adapt(node, i, t, "typecast", replace(t, dtype=want_dtype),
                                    "concat inputs share one dtype")
        return ins

    def plan_pad(self, node: Node) -> PlannedLayer:
        x = self.layouts[node.inputs[0]]
        if self.with_adapters and R.check("pad", [x], {}, None, shapes=[self.flat[node.inputs[0]]]):
            x = self.to_interleaved(node, 0, x, "spatial pad runs on interleaved tensors")
        # ttnn.pad keeps the input's memory config unless given one; a height-sharded input
        # gets more rows, so the plan passes a memory_config refitted to the padded shape
        # (same grid and cores, taller shards), or the card rejects the output's shard spec.
        requested = None
        if self.with_adapters and x.memory.sharded:
            requested = R.reshape_memspec(x.memory, node.shape.rows, node.shape.c, x.layout)
        attrs = {"out_shape": _flat(node.shape)}
        out = R.output_layout("pad", [x], attrs, requested, [self.flat[node.inputs[0]]])
        rows, c = self.rc(node.inputs[0])
        est = l1m.eltwise_l1(inputs=[(x, rows, c)], out_layout=out, out_rows=node.shape.rows, c=c)
        return PlannedLayer(node, [x], out, est.total,
                            PadPlan(padding=node.attrs.get("padding"),
                                    value=node.attrs.get("value", 0.0), memory_config=requested,
                                    out_shape=attrs["out_shape"], l1_parts=est.parts))


def rule_op(node: Node) -> str:
    """The ttnn op whose rules a node's layer obeys (its registry entry's ``rule_op``: an
    align_corners upsample obeys ``grid_sample``'s, its lowering)."""
    return ops.get(node.op).rule_op(node)


class _Reorder(Exception):
    """Raised by the planner: layer ``name`` does not fit where it is; try it at ``index``."""

    def __init__(self, name: str, index: int):
        super().__init__(name, index)
        self.name, self.index = name, index


def _conv_choice(layer: PlannedLayer) -> str:
    """``block_sharded on 64 cores, act_block_h 64``: how a planned conv runs."""
    c = layer.config
    how = f"{c.shard_layout} on {c.num_cores} cores"
    return how + (f", act_block_h {c.act_block_h_override}" if c.act_block_h_override else "")


class _CapCBs(Exception):
    """Raised by the planner: the next step would fit if conv ``name`` kept its circular buffers
    to ``cap`` bytes per core (ttnn releases them only when the next program starts)."""

    def __init__(self, name: str, cap: int, for_layer: str):
        super().__init__(name, cap, for_layer)
        self.name, self.cap, self.for_layer = name, cap, for_layer


def plan_graph(graph: Graph, *, arch: str = "wormhole_b0", adapters: bool = True,
               l1_small_size: int = 32768, addresses: bool = True,
               spill_hints: frozenset[tuple[str, str]] = frozenset(),
               cap_hints: frozenset[tuple[str, int]] = frozenset(),
               oracle=None) -> Plan:
    """Resolve every tensor's layout and insert adapters only on disagreeing edges. The L1
    budget is the allocator's bank for a device opened with ``l1_small_size``.

    ``oracle``: ask the installed ttnn on a mock device about conv candidates and every step of
    the plan (``ttnn_oracle``; None: on unless ``TTMODELS_TTNN_ORACLE=0`` or without ttnn;
    True / False; or an ``ttnn_oracle.Oracle`` to use).
    ``plan.ttnn`` records its verdicts, or that the steps are unconfirmed.

    Remedy "execution order": a layer that does not fit where it is may be moved to right after
    its inputs (fewer tensors alive there); the plan of the reordered graph is kept when it
    works, else the layer stays and the other remedies (spills) apply."""
    from . import ttnn_oracle
    if isinstance(oracle, ttnn_oracle.Oracle):       # a caller's own (tests, tools)
        off, o = None, oracle
    else:
        off = ttnn_oracle.why_off(oracle)
        o = None if off else ttnn_oracle.get(oracle)
    rejected: list[str] = []
    since = (o.queries, o.hits) if o is not None else None
    plan = _plan_graph(graph, arch, adapters, l1_small_size, addresses, spill_hints, cap_hints,
                       o, rejected)
    ttnn_oracle.confirm(plan, o, off, rejected, since)
    return plan


def _plan_graph(graph, arch, adapters, l1_small_size, addresses, spill_hints, cap_hints, o,
                rejected) -> Plan:
    frozen: frozenset[str] = frozenset()
    caps: dict[str, int] = dict(cap_hints)  # conv -> CB bytes it may keep (for the next step,
    #                                         or for its own CBs to stay below L1 buffers)
    asked: dict[str, str] = {n: n for n, _ in cap_hints}   # conv -> the layer that asked
    no_cap: frozenset[str] = frozenset()
    current, moves = graph, []
    planner = None

    def make(g: Graph) -> _Planner:
        return _Planner(g, arch, adapters, l1_small_size, frozen, caps, no_cap, spill_hints,
                        o, rejected)

    try:
        for _ in range(3 * len(graph.nodes) + 1):
            try:
                planner = make(current)
                plan = planner.run()
                plan.reordered = [ReorderNote(*m) for m in moves]
                plan.blockings = [BlockingNote(n, _conv_choice(pl), lv.layer_cbs(pl), asked[n])
                                  for n, pl in ((n, plan.layer(n)) for n in caps)
                                  if lv.layer_cbs(pl) <= caps[n]]
                if not (adapters and addresses):
                    return plan

                def replan(g: Graph, hints=spill_hints, capped=cap_hints) -> Plan:
                    out = _plan_graph(g, arch, adapters, l1_small_size, False,
                                      frozenset(hints), frozenset(capped), o, rejected)
                    out.reordered = plan.reordered + out.reordered
                    out.spill_hints, out.cap_hints = frozenset(hints), frozenset(capped)
                    return out
                return _fit_addresses(plan, replan)
            except _CapCBs as c:
                if c.name in caps or c.cap <= 0:
                    # asked before and its blockings could not get there: the next step takes
                    # the other remedies (spills) instead
                    caps.pop(c.name, None)
                    no_cap = no_cap | {c.name}
                else:
                    caps[c.name] = c.cap
                    asked[c.name] = c.for_layer
            except _Reorder as r:
                frozen = frozen | {r.name}
                candidate = moved(current, r.name, r.index)
                try:
                    make(candidate).run()
                except (_Reorder, _CapCBs):
                    pass                # the moved layer fitted; another one asks next
                except LayoutError:
                    continue            # no better there: keep the order, spill instead
                before = current.nodes[r.index].name
                current = candidate
                moves.append((r.name, before))
        raise LayoutError("internal: the planner did not settle on an execution order")
    except LayoutError as e:
        # the README promises file and line for spec mistakes: every layer's LayoutError
        # carries where that layer was written
        loc = planner.current.loc if planner is not None and planner.current is not None else None
        raise (e.at(loc.file, loc.line) if loc else e) from None


def _fit_addresses(plan: Plan, replan) -> Plan:
    """The sums fit; now the addresses: ttnn's allocator model over the executor's order
    (``plan_alloc``), with in-place ops, reorders and reallocations where a free block falls
    short. ``replan(graph)``: the plan of a reordered graph (without this step)."""
    from . import plan_alloc
    try:
        return plan_alloc.fit(plan, replan=replan)
    except LayoutError as e:
        node = next((n for n in plan.graph.nodes if n.name == e.layer), None)
        loc = getattr(node, "loc", None)
        raise (e.at(loc.file, loc.line) if loc else e) from None


def check_plan(plan: Plan) -> list[tuple[str, R.Violation]]:
    """Run rules.check on every layer with the layouts it receives (after adapters) and on every
    adapter; returns (layer or edge, violation) pairs. An empty list means the card accepts it."""
    out = []
    flat = {n: s.flat for n, s in plan.graph.inputs.items()}
    flat.update({n: const_flat(c.shape) for n, c in plan.graph.constants.items()})
    flat.update({l.name: l.node.shape.flat for l in plan.layers})
    for a in plan.adapters:
        for v in R.check(a.kind, [a.before], {"dtype": a.after.dtype, "layout": a.after.layout},
                         a.after.memory, shapes=[flat[a.src]]):
            out.append((a.edge, v))
    for sp in plan.spills:
        for v in R.check("to_memory_config", [sp.before], {"dtype": sp.to.dtype,
                         "layout": sp.to.layout}, sp.to.memory, shapes=[flat[sp.tensor]]):
            out.append((f"spill {sp.tensor} after {sp.after}", v))
    for layer in plan.layers:
        attrs = layer.config.as_attrs()
        attrs.setdefault("dtype", layer.output.dtype)
        for v in R.check(rule_op(layer.node), layer.inputs, attrs, None,
                         shapes=[flat[s] for s in layer.node.inputs]):
            out.append((layer.name, v))
    return out


def edge_mismatches(plan: Plan) -> list[str]:
    """Edges where what the producer gives (after that edge's adapters, in order) is not what the
    consumer receives. Empty for every plan made with adapters=True."""
    out = []
    given = dict(plan.input_layouts)
    given.update(plan.constant_layouts)
    spills = {}
    for sp in plan.spills:
        spills.setdefault(sp.after, []).append(sp)
    for layer in plan.layers:
        given[layer.name] = layer.output
    for layer in plan.layers:
        for i, src in enumerate(layer.node.inputs):
            t = given[src]
            for a in plan.adapters:
                if a.dst == layer.name and a.index == i:
                    if a.before != t:
                        out.append(f"{a.edge}: adapter expects {a.before.short()}, gets {t.short()}")
                    t = a.after
            if t != layer.inputs[i]:
                out.append(f"{src} -> {layer.name}[{i}]: gives {t.short()}, "
                           f"receives {layer.inputs[i].short()}")
        for sp in spills.get(layer.name, ()):
            if given[sp.tensor] != sp.before:
                out.append(f"spill {sp.tensor} after {layer.name}: expects {sp.before.short()}, "
                           f"the tensor is {given[sp.tensor].short()}")
            given[sp.tensor] = sp.to
    return out
