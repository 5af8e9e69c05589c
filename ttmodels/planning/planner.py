"""The planner: resolve every tensor's TensorLayout and insert adapters only where needed.

Procedure (see docs/layouts.md):
1. Graph inputs enter interleaved in DRAM (row-major, or TILE for block-float dtypes); constants
   are TILE, interleaved in L1 (tiny; binary_ng broadcasts them, see rules ``binary.broadcast``).
2. Layers in topological order. Each op first receives its producers' layouts; the op's own
   decisions (conv shard scheme, pool shard scheme, output layout/dtype arguments) are made so
   that the op converts on its own wherever ttnn lets it (conv2d shards an interleaved input,
   pools take ``dtype``/``output_layout``, binary ops take ``dtype``). Those decisions are the
   op's own: ``plan(ctx, node)`` in ``ops/<op>/plan.py`` (``OpDef.plan``), given this planner
   through a ``plan_context.PlanningView`` (``PlanContext``'s members only); this module is the
   op-agnostic core around them.
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
from functools import partial

from ..arch import ARCHS
from . import l1 as l1m
from . import liveness as lv
from . import rules as R
from ..errors import LayoutError, SpecError
from ..formats import is_block_float
from ..language.graph import Graph, Node, TensorShape, const_flat, moved
from .layout import (BLOCK, HEIGHT, INTERLEAVED, ROW_MAJOR, TILE_LAYOUT, WIDTH, MemSpec,
                     TensorLayout)
from .. import ops
from .plan_context import PlanningView
from .plans import Adapter, BlockingNote, Plan, PlannedLayer, ReorderNote
from ..ops.conv2d.sharding import determine_parallel_config


# how often an op plans again against less L1 when ttnn sizes it over what is left (try_plan)
TTNN_REPLANS = 4


def _flat(shape: TensorShape) -> tuple[int, int, int, int]:
    return shape.flat


class _Planner:
    """The planning walk over one graph; what each op's ``plan(ctx, node)`` receives as ``ctx``
    (``plan_context.PlanContext`` documents the part ops may use)."""

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
        # the same before try_plan lowered op_budget for ttnn's own figures: what those must fit
        self.ttnn_budget = self.budget
        self.grid, self.banks = ARCHS[arch].grid, ARCHS[arch].l1_banks
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
        # conv -> why the estimate picked its layout (its µs, the runner-up's)
        self.choices: dict[str, str] = {}
        # plan_live's second pass: the fit test does not count the previous program's CBs;
        # allowed only in plan_graph's second attempt (``uncounted_ok``)
        self.carry_free = False
        self.uncounted_ok = False
        # the layers that failed with the previous program's CBs counted (plan_graph makes its
        # second attempt only when there are some)
        self.carry_blocked: list[str] = []
        self.view = PlanningView(self)     # what each op's plan(ctx, node) gets

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

    def to_dram(self, node, idx, cur, reason):
        dram = MemSpec(INTERLEAVED, "dram")
        if cur.memory == dram:
            return cur
        if cur.memory.sharded:
            return self.to_interleaved(node, idx, cur, reason, buffer="dram")
        return self.adapt(node, idx, cur, "to_memory_config", replace(cur, memory=dram), reason)

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
            if d is None:
                raise LayoutError(f"no planning rule for op '{node.op}'", layer=node.name)
            layer = self.plan_live(i, node, partial(d.plan, self.view))   # ops/<op>/plan.py
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
                    spills=self.spills, l1_small_size=self.l1_small_size,
                    choices=dict(self.choices))
        # the final figures: later spills shortened earlier layers' live sets and carries
        lv.refresh(plan)
        return plan

    # ---- liveness ----------------------------------------------------------------------------
    def others(self, i: int, node: Node, received=None) -> dict[str, int]:
        return lv.others_alive(i, node, self.alive_at(i), self.last, self.keep, self.g, received,
                               self.banks)

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
        """fn(node) with the L1 that ``others`` leave; (layer or None, error, live others).

        With ttnn asked (``oracle``), ttnn's own per-core figure for the layer is what must fit:
        where it exceeds what ``others`` leave, the op plans again against less, by ttnn's
        excess over the estimate (smaller blocks, other layouts, more DRAM slices), a few
        times; if ttnn's figure still does not fit, the layer does not fit here."""
        mark = len(self.adapters)
        self.ttnn_budget = self.op_budget = self.budget - sum(others.values())
        for _ in range(TTNN_REPLANS + 1):
            try:
                layer = fn(node)
            except LayoutError as e:
                del self.adapters[mark:]
                return None, e, others
            ans = self.ttnn_verdict(layer)
            if ans is not None and ans.judged and not ans.accepted:
                # ttnn refuses the call itself: the real run would fail there, so the layer
                # has no plan here (issue 33: never a plan with a step ttnn rejected)
                del self.adapters[mark:]
                return None, LayoutError(f"ttnn rejects {node.op} as planned: {ans.error}",
                                         layer=node.name), others
            refused = self.ttnn_refuses_moves(self.adapters[mark:])
            if refused is not None:
                # an adapter the op asked for that ttnn refuses: no plan here either (the
                # remedies, down to the DRAM forms, bring the operand another way)
                del self.adapters[mark:]
                return None, LayoutError(refused, layer=node.name), others
            l1 = ttnn_figure(ans)
            if l1 is None or l1 <= self.ttnn_budget:
                return with_ttnn_figure(layer, l1), None, others
            del self.adapters[mark:]
            self.op_budget -= max(l1 - layer.l1_bytes_per_core, l1 - self.ttnn_budget, 1)
        return None, LayoutError(
            f"ttnn sizes {node.op} at {l1:,} B per core, over the {self.ttnn_budget:,} B "
            f"left by the {self.budget:,} B bank of {self.arch} and the tensors alive around "
            f"it (the estimate says {layer.l1_bytes_per_core:,} B), after {TTNN_REPLANS} "
            "replans against less L1", layer=node.name), others

    def ttnn_refuses_moves(self, moves) -> str | None:
        """Why ttnn refuses one of ``moves`` (adapters or spills the planner inserts), asked as
        ``confirm`` asks them; None when it accepts them all (or is not asked). A returned plan
        then never holds a move ttnn rejects (issue 33)."""
        if self.oracle is None or not self.with_adapters:
            return None
        judge = getattr(self.oracle, "judge_adapter", None)
        for m in moves if judge is not None else ():
            ans = judge(self.g, m, self.flat)
            if ans is not None and ans.judged and not ans.accepted:
                what = f"the spill of {m.tensor}" if m.kind == "spill" else \
                    f"the {m.kind} adapter {m.edge}"
                note = f"ttnn rejects {what} as planned: {ans.error}"
                if note not in self.ttnn_rejected:
                    self.ttnn_rejected.append(note)
                return note
        return None

    def spills_of(self, i: int, chosen, saved: dict[str, TensorLayout], for_layer: str):
        """The spills that move ``chosen`` (held as ``saved``) to DRAM for layer ``i``."""
        return [lv.Spill(t, self.spill_point(i, t), saved[t], self.spilled_layout(saved[t]),
                         lv.bank_bytes(saved[t], *lv.tensor_rows_c(self.g, t), self.banks),
                         for_layer) for t in chosen]

    def ttnn_verdict(self, layer: PlannedLayer):
        """ttnn's verdict on ``layer`` when ttnn is asked, else None."""
        if self.oracle is None or not self.with_adapters:
            return None
        return self.oracle.judge_layer(self.g, layer, self.flat)

    def plan_live(self, i: int, node: Node, fn) -> PlannedLayer:
        """Plan layer ``i`` against the L1 that the tensors alive around it leave, counting the
        previous program's CBs as reserved (liveness.py: ttnn's timeline counts them, so a plan
        that fits that way keeps ttnn's own peak figure within the bank); when no remedy fits
        that way, again with those CBs not counted (``carry_free``; only in plan_graph's second
        attempt, ``uncounted_ok``). ttnn's allocator does not reserve them: a buffer may be
        placed over the previous program's CB region, and a program's CBs are checked only
        against the buffers alive when it is placed (measured:
        tests/test_auto_matmul_addresses.py), which the address model (plan_alloc) then checks.
        yolov8s b32 ``model.22.cv2.0.0.conv``: 1,562,624 B with the 901,120 B of CBs before it
        counted (the oracle's figure for a 1x1 conv that matmul's automatic config runs: it
        takes less in the run), 661,504 without; the real run's timeline showed 1,210,528."""
        try:
            return self._plan_live(i, node, fn)
        except LayoutError as counted:
            if self.carry_free or not self.carry_in():
                raise
            if not self.uncounted_ok:
                self.carry_blocked.append(node.name)
                raise
            self.carry_free = True
            try:
                layer = self._plan_live(i, node, fn)
            except LayoutError as uncounted:
                # it does not fit even so: say why without the CBs ttnn does not reserve
                raise uncounted from counted
            finally:
                self.carry_free = False
            self.note_choice(node.name, "remedy: the previous program's "
                             f"{self.carry_in():,} B of CBs not counted (ttnn's allocator does "
                             "not reserve them; counted, no remedy fitted)")
            return layer

    def fit_carry(self) -> int:
        """The previous program's CBs as the fit test counts them (``plan_live``)."""
        return 0 if self.carry_free else self.carry_in()

    def _plan_live(self, i: int, node: Node, fn) -> PlannedLayer:
        """Plan layer ``i`` against the L1 that the tensors alive around it leave (and the
        previous program's CBs, ``fit_carry``). Remedies, when it does not fit (fewest bytes
        moved first): a smaller blocking of the previous conv (``_CapCBs``); the op's own
        smaller blockings, other layouts and DRAM slicing (inside ``fn``, against
        ``op_budget``); an earlier place in the order (``_Reorder``); spilling live tensors to
        DRAM (``Spill``), when that moves fewer bytes than DRAM slicing or nothing else fits."""
        mark = len(self.adapters)
        self.slice_miss = []            # this layer's own (a conv's plan notes them)
        self.apply_spill_hints(i, node)
        pre = self.others(i, node)
        carry = self.fit_carry()

        def attempt(others: dict[str, int], fn=fn):
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
        # (the fastest by the device estimate: a spill moves the tensor to DRAM and back; the
        # spills' moves alone at or over the sliced layer's µs cannot win)
        sliced = layer if fits else None
        sliced_us = self.steps_us(sliced, mark) if sliced is not None else None
        best = None
        for chosen in self.spill_sets(i, node, pre):
            moved = sum(self.spill_us(t) for t in chosen)
            if sliced_us is not None and moved >= sliced_us:
                break
            del self.adapters[mark:]
            saved = {t: self.layouts[t] for t in chosen}
            for t in chosen:
                self.layouts[t] = self.spilled_layout(saved[t])
            cand, _, ok, _ = attempt(self.others(i, node))
            ok = ok and not cand.config.slice and self.ttnn_refuses_moves(
                self.spills_of(i, chosen, saved, node.name)) is None
            if ok:
                total = moved + self.steps_us(cand, mark)
                if sliced_us is not None:
                    win = total < sliced_us
                    a, b = (f"spill {', '.join(chosen)}", total), ("DRAM slices", sliced_us)
                    self.note_choice(node.name, "remedy: {}: {:,.1f} µs estimated; runner-up "
                                     "{}: {:,.1f} µs".format(*(a + b if win else b + a)))
                    if not win:
                        self.layouts.update(saved)
                        break
                best = (chosen, saved, cand)
                break
            self.layouts.update(saved)
        if best is not None:
            chosen, saved, cand = best
            self.spills.extend(self.spills_of(i, chosen, saved, node.name))
            return self.finish(i, node, cand, mark)
        if sliced is not None:      # planned again against what it was planned with
            del self.adapters[mark:]
            layer, _, _ = self.try_plan(node, fn, used)
            return self.finish(i, node, layer, mark)
        # the last remedy: the op from and/or into DRAM interleaved (ttnn's ops read and write
        # DRAM; the L1 then holds only the op's own buffers)
        if layer is not None:       # its adapters again, for the message
            del self.adapters[mark:]
            layer, err, _ = self.try_plan(node, fn, pre)
        failure = err if layer is None else self.over_bank_error(i, node, layer, mark)
        # a conv whose DRAM slicings did not fit has tried its output in DRAM already
        sliced_out = bool(self.slice_miss)
        del self.adapters[mark:]
        fallback = self.dram_fallback(i, node, fn, mark, attempt, out_dram=not sliced_out)
        if fallback is not None:
            return fallback
        raise failure

    def over_bank_error(self, i: int, node: Node, layer: PlannedLayer, mark: int) -> LayoutError:
        """Why ``layer`` does not fit: its step with the most L1 (an adapter in front of it, or
        the layer), and that step's parts, which add up to its total."""
        steps = self.live_steps(i, node, layer, mark, self.fit_carry())
        step = max(steps, key=lambda s: s.total)
        live = ", ".join(f"{k} {v:,}" for k, v in sorted(step.others.items(),
                                                          key=lambda kv: -kv[1]))
        if step.first + step.carry > step.own:
            own = (f"{step.first:,} B allocated while the previous program's circular buffers "
                   f"({step.carry:,} B) are still reserved")
        else:
            own = f"{step.own:,} B"
        what = (f"the op {own} ({dict(layer.config.l1_parts)})" if step.kind == "layer"
                else f"its {step.kind} {step.name} {own}")
        why = layer.config.inplace_blocked
        return LayoutError(
            f"needs {step.total:,} B of L1 per core, over the {self.budget:,} B bank of "
            f"{self.arch}: {what} + live tensors {sum(step.others.values()):,} B "
            f"({live or 'none'}); no spill, smaller blocking or DRAM interleaved form fits"
            + (f"; cannot write in place into operand a: {why}" if why else "")
            + "; use a smaller batch or input size (--batch / --input-size)",
            layer=node.name)

    def dram_fallback(self, i: int, node: Node, fn, mark: int, attempt, out_dram: bool = True):
        """The op with its L1 inputs moved to DRAM (a spill right after each is made: its move
        allocates no L1 and ends the previous program, so its circular buffers go too), with
        its output in DRAM interleaved, or both: of those that fit (and ttnn accepts, when
        asked), the fastest by the device estimate; None when none does. gernet_s float32's
        ``stages.3.0.conv3_1x1.conv``: the reshard into it came while the depthwise conv's
        1.1 MB of CBs were still reserved; from DRAM it fits."""
        ins = [t for t in dict.fromkeys(node.inputs) if t in self.layouts and
               t not in self.g.constants and t not in self.g.inputs and
               self.layouts[t].memory.buffer == "l1"]
        to_dram = replace(node, layout=replace(node.layout, kind=INTERLEAVED, buffer="dram"))
        variants = []
        if ins:
            variants.append((tuple(ins), node))
        if node.layout.kind == "auto" and out_dram:
            variants.append(((), to_dram))
            if ins:
                variants.append((tuple(ins), to_dram))
        best = None
        for chosen, as_node in variants:
            del self.adapters[mark:]
            saved = {t: self.layouts[t] for t in chosen}
            for t in chosen:
                self.layouts[t] = self.spilled_layout(saved[t])
            cand, _, ok, _ = attempt(self.others(i, node), lambda _n, m=as_node: fn(m))
            if ok and cand is not None and (as_node is node or
                                            cand.output.memory.buffer == "dram") and \
                    self.honours_policy(node, cand) and \
                    self.ttnn_refuses_moves(self.spills_of(i, chosen, saved, node.name)) is None:
                us = sum(self.spill_us(t) for t in chosen) + self.steps_us(cand, mark)
                if best is None or us < best[0]:
                    best = (us, chosen, saved, as_node, cand)
            self.layouts.update(saved)
        if best is None:
            return None
        us, chosen, saved, as_node, _ = best
        del self.adapters[mark:]
        for t in chosen:
            self.layouts[t] = self.spilled_layout(saved[t])
        cand, _, _, _ = attempt(self.others(i, node), lambda _n: fn(as_node))
        self.spills.extend(self.spills_of(i, chosen, saved, node.name))
        what = " and ".join(([f"inputs {', '.join(chosen)} from DRAM"] if chosen else []) +
                            (["output to DRAM interleaved"] if as_node is not node else []))
        self.note_choice(node.name, f"remedy: {what} ({us:,.1f} µs estimated; nothing in L1 "
                         "fitted)")
        return self.finish(i, node, replace(cand, node=node), mark)

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
                                  self.carry_in() if carry is None else carry, self.banks)
        return steps

    def live_total(self, i: int, node: Node, layer: PlannedLayer, mark: int,
                   carry: int | None = None) -> int:
        """The fit test's figure: the largest step total, with ``fit_carry`` by default."""
        return max(s.total for s in self.live_steps(
            i, node, layer, mark, self.fit_carry() if carry is None else carry))

    def cap_previous_cbs(self, i: int, node: Node, layer: PlannedLayer, mark: int) -> None:
        """Raise ``_CapCBs`` when layer ``i`` (or an adapter in front of it) would fit but for
        the previous conv's CBs, and that conv has not been asked already."""
        if not self.layers or layer.config.slice:
            return
        prev = self.layers[-1]
        carry = self.fit_carry()
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
        cands = [t for t in others if t in self.layouts and t not in self.g.constants and self.layouts[t].memory.buffer
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
            spill = self.spills_of(i, (t,), {t: lay}, node.name)
            if self.ttnn_refuses_moves(spill) is not None:
                continue        # ttnn refuses the move: the tensor stays (the address model
                #                 then finds another remedy or refuses)
            self.layouts[t] = self.spilled_layout(lay)
            self.spills.extend(spill)

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

    def steps_us(self, layer: PlannedLayer, mark: int) -> float:
        """Estimated µs of ``layer`` and its adapters (``self.adapters[mark:]``)."""
        from .estimate import step_time
        env = self.cost_env()
        return step_time("layer", layer, env).us + sum(
            step_time("adapter", a, env).us for a in self.adapters[mark:])

    def spill_us(self, t: str) -> float:
        """Estimated µs of spilling ``t``: to DRAM, and read back once (twice its move)."""
        from .estimate import movement_phase, phase_us, FPU_EFFICIENCY
        env, shape = self.cost_env(), self.g.shape_of(t)
        lay = self.layouts[t]
        p = movement_phase(env, [(lay, shape)], (self.spilled_layout(lay), shape), "spill")
        return 2 * phase_us(p, env, FPU_EFFICIENCY)[0]

    def cost_env(self):
        from types import SimpleNamespace
        from ..arch import get as arch_get
        from .estimate import CostEnv
        return CostEnv(arch_get(self.arch), SimpleNamespace(graph=self.g))

    def note_choice(self, name: str, note: str) -> None:
        """Add ``note`` to layer ``name``'s choice note (a replan of the layer replaces it)."""
        prev = self.choices.get(name, "").split("; then remedy: ")[0]
        if prev.startswith("remedy: "):
            prev = ""
        self.choices[name] = f"{prev}; then {note}" if prev else note

    @staticmethod
    def honours_policy(node: Node, layer: PlannedLayer) -> bool:
        """``layer``'s output is what the layer's explicit layout asks (any, for auto)."""
        p, m = node.layout, layer.output.memory
        return p.kind == "auto" or (
            m.memory_layout == p.kind and (p.buffer is None or m.buffer == p.buffer) and
            (p.grid is None or tuple(m.grid or ()) == tuple(p.grid)))

    def check_policy(self, node: Node, layer: PlannedLayer) -> None:
        """An explicit layout is honoured or rejected naming the spec line, never replaced."""
        p = node.layout
        if not self.with_adapters or self.honours_policy(node, layer):
            return
        m = layer.output.memory
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
        pc = determine_parallel_config(p.kind, rows, c, c, self.grid)
        return R.sharded_memspec(p.kind, rows, c, num_cores=pc.num_cores, device_grid=self.grid)

    def consumers_need_tile(self, node: Node) -> bool:
        return any(ops.get(c.op).tile_input or is_block_float(c.precision.activations)
                   for c in self.g.consumers(node.name))


def rule_op(node: Node) -> str:
    """The ttnn op whose rules a node's layer obeys (its registry entry's ``rule_op``: an
    align_corners upsample obeys ``grid_sample``'s, its lowering)."""
    return ops.get(node.op).rule_op(node)


def with_ttnn_figure(layer: PlannedLayer, l1: int | None) -> PlannedLayer:
    """``layer`` sized by ttnn's own figure where that is larger than the estimate: the
    difference counts as the op's circular buffers (``ttnn_extra_cb``), so liveness and the
    address model see the CBs ttnn places (efficientnet_b2 float32's SE fc1: estimated
    979,200 B, ttnn 1,114,368 B, its CBs ran into an L1 buffer)."""
    parts = dict(layer.config.l1_parts or {})
    if l1 is None or l1 <= layer.l1_bytes_per_core or not parts:
        return layer
    if "matmul" in parts:
        # a matmul conv's estimate is one figure that ``l1.layer_parts`` splits; the excess is
        # the gap it counts as CBs (timm dpn68 float32 conv4_12.c1x1_a: estimated 1,134,592 B,
        # ttnn 1,220,608; its CBs ran 28,000 B into an L1 buffer)
        return replace(layer, l1_bytes_per_core=l1)
    parts["ttnn_extra_cb"] = l1 - layer.l1_bytes_per_core
    return replace(layer, l1_bytes_per_core=l1, config=replace(layer.config, l1_parts=parts))


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


def ttnn_figure(ans) -> int | None:
    """ttnn's per-core L1 figure in a verdict (op + its L1 inputs), None when it gives none."""
    l1 = getattr(ans, "op_l1", None)
    return l1 if isinstance(l1, int) and not isinstance(l1, bool) else None


def plan_graph(graph: Graph, *, arch: str = "wormhole_b0", adapters: bool = True,
               l1_small_size: int = 32768, addresses: bool = True,
               spill_hints: frozenset[tuple[str, str]] = frozenset(),
               cap_hints: frozenset[tuple[str, int]] = frozenset(),
               oracle=None) -> Plan:
    """Resolve every tensor's layout and insert adapters only on disagreeing edges. The L1
    budget is the allocator's bank for a device opened with ``l1_small_size``.

    ``oracle``: ask the installed ttnn on a mock device about conv candidates and every step of
    the plan (``tools/ttnn_oracle.py``; None: on unless ``TTMODELS_TTNN_ORACLE=0`` or without
    ttnn; True / False; or a ``planning.oracle.StepOracle`` to use, e.g. a ``ttnn_oracle.Oracle``).
    ``plan.ttnn`` records its verdicts, or that the steps are unconfirmed.

    Remedy "execution order": a layer that does not fit where it is may be moved to right after
    its inputs (fewer tensors alive there); the plan of the reordered graph is kept when it
    works, else the layer stays and the other remedies (spills) apply."""
    from .oracle import resolve
    o = resolve(oracle, arch)         # the ttnn-backed one lives above (tools/ttnn_oracle.py)
    rejected: list[str] = []
    since = o.mark()
    args = (graph, arch, adapters, l1_small_size, addresses, spill_hints, cap_hints,
            o if o.asks else None, rejected)
    carried: list[str] = []
    try:
        try:
            plan = _plan_graph(*args, carried=carried)
        except LayoutError as first:
            if not carried:     # no layer failed with those CBs counted: nothing to try
                raise
            # A second attempt in which a layer that fits nowhere with the previous program's
            # CBs counted may be planned with them not counted (plan_live): only when the
            # first finds no plan, so that every plan it finds stays as it was. Per layer from
            # the start, the uncounted pass changed which reorders and replans worked and gave
            # yolov8s b16 another plan, whose DRAM-sliced model.22.cv3.1.1.conv the address
            # model misjudges (DEVELOPERS.md, y4): it failed the real run.
            try:
                plan = _plan_graph(*args, uncounted=True)
            except LayoutError:
                raise first from None
    except (LayoutError, SpecError) as e:
        raise _at_another_batch(e, graph) from None
    plan.reordered = final_moves(plan)
    o.confirm(plan, rejected, since)
    return plan


def final_moves(plan: Plan) -> list[ReorderNote]:
    """The plan's reorder notes that its order bears out, each once: the replans of the address
    remedies add their own notes to the plan's, and a layer moved before another in one replan
    may be moved back in the next (yolov8s b8 listed "model.16.conv runs before
    model.22.cv2.0.0.conv" and the reverse)."""
    pos = {pl.name: k for k, pl in enumerate(plan.layers)}
    out: list[ReorderNote] = []
    for n in plan.reordered:
        if n not in out and pos.get(n.layer, 0) < pos.get(n.before, -1):
            out.append(n)
    return out


def _at_another_batch(e, graph: Graph):
    """``e`` with the batch the spec's layouts were written for, when it is planned at another
    (``batch:``, resnet50_tt's 16): its explicit grids can be what fails there (at batch 1 its
    layer2.0.conv3 lands on 8x4 cores, not the 8x7 asked; at 32 layer2's 8x7 shards overflow L1)."""
    n = next(iter(graph.inputs.values())).n if graph.inputs else None
    if graph.batch is None or n is None or n == graph.batch:
        return e
    why = (f"{e.reason} (the spec's explicit layouts were written for batch {graph.batch}, its "
           f"`batch:`, not batch {n}: use --batch {graph.batch}, or 'layout: auto' at other "
           "batches)")
    if isinstance(e, SpecError):
        return SpecError(why, file=e.file, line=e.line, layer=e.layer)
    return LayoutError(why, layer=e.layer, rule=e.rule, file=e.file, line=e.line)


def _plan_graph(graph, arch, adapters, l1_small_size, addresses, spill_hints, cap_hints, o,
                rejected, frozen: frozenset[str] = frozenset(), uncounted: bool = False,
                carried: list[str] | None = None) -> Plan:
    caps: dict[str, int] = dict(cap_hints)  # conv -> CB bytes it may keep (for the next step,
    #                                         or for its own CBs to stay below L1 buffers)
    asked: dict[str, str] = {n: n for n, _ in cap_hints}   # conv -> the layer that asked
    no_cap: frozenset[str] = frozenset()
    current, moves = graph, []
    planner = None

    def make(g: Graph) -> _Planner:
        p = _Planner(g, arch, adapters, l1_small_size, frozen, caps, no_cap, spill_hints,
                     o, rejected)
        p.uncounted_ok = uncounted
        if carried is not None:
            p.carry_blocked = carried
        return p

    try:
        for _ in range(3 * len(graph.nodes) + 1):
            try:
                planner = make(current)
                plan = planner.run()
                plan.reordered = [ReorderNote(*m) for m in moves]
                plan.blockings = [BlockingNote(n, _conv_choice(pl), lv.layer_cbs(pl), asked[n])
                                  for n, pl in ((n, plan.layer(n)) for n in caps)
                                  if pl.node.op == "conv2d" and lv.layer_cbs(pl) <= caps[n]]
                if not (adapters and addresses):
                    return plan

                def replan(g: Graph, hints=spill_hints, capped=cap_hints,
                           in_order: bool = False) -> Plan:
                    # in_order: the layers this plan moved keep their places. Planned afresh, a
                    # moved layer's neighbour can be moved back over it (yolov8s b8:
                    # model.16.conv and model.22.cv2.0.0.conv swapped on every replan, and
                    # every address remedy replanned into a step the plan had passed);
                    # asked for by _fit_addresses when the address remedies fail otherwise
                    keep = frozenset(n.layer for n in plan.reordered) if in_order else frozenset()
                    out = _plan_graph(g, arch, adapters, l1_small_size, False,
                                      frozenset(hints), frozenset(capped), o, rejected, keep,
                                      uncounted, carried)
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
        try:
            return plan_alloc.fit(plan, replan=replan)
        except LayoutError as first:
            # once more with replans that keep the layers the plan moved in place (``replan``'s
            # in_order): only then, so that a plan found the first way stays as it was
            try:
                return plan_alloc.fit(plan, replan=partial(replan, in_order=True))
            except LayoutError:
                raise first from None
    except LayoutError as e:
        node = next((n for n in plan.graph.nodes if n.name == e.layer), None)
        loc = getattr(node, "loc", None)
        raise (e.at(loc.file, loc.line) if loc else e) from None
