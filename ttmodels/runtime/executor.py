"""Running a Plan on a Backend: build every layer once, then run them in plan order.

    ex = Executor(plan, params, backend)
    outs = ex.run({"image": x_nchw})           # name -> backend tensor ([1, 1, N*H*W, C])
    y = to_torch_nchw(backend, outs["logits"], plan.graph.shape_of("logits"))

Tensors are freed (``tt.deallocate``) as soon as their last consumer has run; graph outputs,
constants and backend tensors the caller passed in are never freed by the executor. The order of
everything (adapters, reallocations, spills, frees) is ``planning.plan_walk``'s: the executor
carries out its events, as the L1 sums and the address model count them.
"""
from __future__ import annotations

from typing import Any

from ..planning import plan_walk as pw
from ..backends import common
from ..errors import Error, LayoutError, WeightsError
from ..language.graph import Constant, TensorShape, const_flat
from .layers import AdapterLayer, make_layer
from ..planning.plans import Plan


def _is_torch(x) -> bool:
    import torch
    return isinstance(x, torch.Tensor)


class Executor:
    """Builds every layer of ``plan`` once on ``backend`` from ``params`` (node or constant name ->
    {"weight"/"bias"/"value": float32 torch tensor}, as ``weights.prepare_parameters`` makes them)
    and runs the plan. ``record()`` records every ``tt.*`` call (see ``Backend.record``).
    Layers drop their host parameters once their backend tensors exist, unless ``keep_params``
    (``layer.params`` then still holds them, e.g. for inspection next to a reference run)."""

    def __init__(self, plan: Plan, params: dict[str, dict[str, Any]] | None, backend, *,
                 keep_params: bool = False):
        self.plan, self.backend = plan, backend
        chips = getattr(backend, "num_chips", 1)
        if chips != plan.num_chips:
            raise Error(f"the plan is for {plan.num_chips} chip(s) but the {backend.name} backend "
                        f"was opened on {chips}: pass the same mesh= to plan and backend")
        params = params or {}
        g = plan.graph
        self.layers = {}
        for pl in plan.layers:
            shapes = [None if s in g.constants else g.shape_of(s) for s in pl.node.inputs]
            # ``params`` the executor may consume (a PreparedParameters the builder made): each
            # layer's host tensors are dropped as soon as it holds its prepared ones, so the
            # build never holds two full copies of the weights
            mine = getattr(params, "consumable", False) and not keep_params
            p = params.pop(pl.name, None) if mine else params.get(pl.name)
            layer = make_layer(pl, p, backend, input_shapes=shapes)
            del p
            layer.precompute()
            if not keep_params:
                layer.release_params()          # one copy of each weight: the prepared one
            self.layers[pl.name] = layer
        self.adapters: dict[tuple[str, int], list[AdapterLayer]] = {}
        for a in plan.adapters:
            self.adapters.setdefault((a.dst, a.index), []).append(AdapterLayer(a, backend))
        used = {s for pl in plan.layers for s in pl.node.inputs}
        self.constants = {name: self._constant(c, params.get(name))
                          for name, c in g.constants.items() if name in used}
        self.outputs = list(g.outputs)
        self._trace = None
        # ``step_hook(kind, planned, inputs, call)`` runs each adapter ("adapter", AdapterLayer)
        # and layer ("layer", PlannedLayer) instead of ``call()``: ttmodels.tools.verify uses it to
        # capture each step under ttnn's graph capture.
        self.step_hook = None

    @property
    def tt(self):
        return self.backend.tt

    def record(self):
        return self.backend.record()

    # ---- sources ---------------------------------------------------------------------------
    def _constant(self, c: Constant, p: dict | None):
        import torch
        tt = self.tt
        value = None if p is None else (p.get("value") if p.get("value") is not None
                                        else p.get("tensor"))
        if value is None:
            if c.value is None:
                raise WeightsError(f"constant '{c.name}' has no value: expected params['{c.name}']"
                                   f"['value'] (weights key '{c.weights}')",
                                   missing=[c.weights or c.name])
            value = c.value
        t = torch.as_tensor(value, dtype=torch.float32)
        if t.dim() == 0 or t.numel() == 1 and tuple(c.shape) != tuple(t.shape):
            t = torch.full(tuple(c.shape), float(t.reshape(-1)[0]))
        if tuple(t.shape) != tuple(c.shape):
            raise WeightsError(f"constant '{c.name}' has shape {tuple(t.shape)}, the spec declares "
                               f"{tuple(c.shape)}", mismatched=[c.weights or c.name])
        lay = self.plan.constant_layouts.get(c.name)
        if lay is None:
            raise LayoutError(f"the plan has no layout for constant '{c.name}'")
        return tt.from_torch(t.reshape(const_flat(c.shape)).contiguous(),
                             dtype=common.data_type(tt, lay.dtype),
                             layout=common.layout(tt, lay.layout), device=self.backend.device,
                             memory_config=common.memory_config(tt, lay.memory),
                             **common.replicated(self.backend))

    def input_tensor(self, name: str, x, *, on_device: bool = True):
        """A graph input as a backend tensor: NCHW float torch -> [1, 1, N*H*W, C] with the
        plan's input layout (dtype, tile layout, memory config). On a mesh of k chips ``x`` holds
        the whole batch (k x the plan's): it becomes [k, 1, n*H*W, C], split on dim 0 so that
        chip i gets samples i*n .. i*n+n-1 as its own [1, 1, n*H*W, C]."""
        g = self.plan.graph
        if name not in g.inputs:
            raise Error(f"unknown model input '{name}'; the graph's inputs are {list(g.inputs)}")
        s = g.inputs[name]
        chips = self.plan.num_chips
        check_input_shape(self.plan, name, x)
        tt = self.tt
        lay = self.plan.input_layouts[name]
        flat = x.detach().float().permute(0, 2, 3, 1).reshape((chips,) + tuple(s.flat[1:]))
        flat = flat.contiguous()
        kw = dict(dtype=common.data_type(tt, lay.dtype), layout=common.layout(tt, lay.layout),
                  **common.batch_sharded(self.backend))
        if on_device:
            kw.update(device=self.backend.device, memory_config=common.memory_config(tt, lay.memory))
        return tt.from_torch(flat, **kw)

    # ---- running ---------------------------------------------------------------------------
    def run(self, inputs: dict[str, Any], *, keep_all: bool = False) -> dict[str, Any]:
        """Run the plan. ``inputs``: graph input name -> NCHW float torch tensor, or a backend
        tensor already in the plan's input layout (never freed). Returns output name -> backend
        tensor; with ``keep_all`` every layer's output (for per-layer comparisons)."""
        g, tt = self.plan.graph, self.tt
        missing = [n for n in g.inputs if n not in inputs]
        if missing:
            raise Error(f"missing model input(s) {missing}; the graph's inputs are {list(g.inputs)}")
        unknown = [n for n in inputs if n not in g.inputs]
        if unknown:
            raise Error(f"unknown model input(s) {unknown}; the graph's inputs are {list(g.inputs)}")
        env: dict[str, Any] = {}
        keep: set[str] = set(self.outputs)
        if keep_all:
            keep.update(t for pl in self.plan.layers for t in pl.node.tensors)
        for name in g.inputs:
            x = inputs[name]
            if _is_torch(x):
                env[name] = self.input_tensor(name, x)
            else:
                env[name] = x
                keep.add(name)
        env.update(self.constants)
        keep.update(self.constants)
        st = _RunState(env, keep, passed={n for n in g.inputs if not _is_torch(inputs[n])})
        # the order (adapters, frees, spills, reallocations) is plan_walk's, which the L1 sums
        # and the address model read too; an in-place op runs out of place when every output
        # is kept
        for ev in pw.walk(self.plan, keep=keep, in_place=not keep_all):
            if ev.i != st.i:
                # no reference of the last layer's tensors outlives it but env's: ttnn.reallocate
                # (ttnn::move) refuses a tensor that something else still holds ("Expect input
                # tensor to be deallocated after move op")
                st.next_layer(ev.i)
            self._event(ev, st)
        if keep_all:
            return {t: env[t] for pl in self.plan.layers for t in pl.node.tensors}
        return {name: env[name] for name in self.outputs}

    def _event(self, ev: pw.Event, st: "_RunState") -> None:
        """Carry out one ``plan_walk`` event on the backend."""
        tt, env, pl = self.tt, st.env, ev.layer
        if isinstance(ev, pw.Reallocate):
            # plan_alloc: moved so that the next step's buffers or CBs find room; ttnn frees the
            # old buffer itself. Not a constant, nor a backend tensor the caller passed in.
            r = ev.reallocation
            if r.tensor in env and r.tensor not in self.constants and \
                    r.tensor not in st.passed:
                t = env[r.tensor]
                env[r.tensor] = self._call(f"reallocate {r.tensor}", pl.name,
                                           lambda: tt.reallocate(t), step=("reallocate", r, t))
        elif isinstance(ev, pw.Adapt):
            t = st.buffer(ev.source, pl.name)
            ad = self.adapters[(pl.name, ev.operand)][ev.position]
            t2 = self._call(ad.name, pl.name, lambda: ad(t), step=("adapter", ad, t))
            st.copies[ev.copy] = t2
            if t2 is not t:
                st.owned.add(ev.copy)           # a tensor of its own: ours to free
            elif ev.source in st.owned:         # the adapter had nothing to do: same tensor
                st.owned.discard(ev.source)
                st.owned.add(ev.copy)
        elif isinstance(ev, pw.FreeOriginal):
            # this copy is the original's last use: free the original now, before the op
            # allocates (plan_walk.freed_after_adapters)
            if st.copies[ev.copy] is not env[ev.tensor]:
                tt.deallocate(env.pop(ev.tensor))
            else:           # no copy was made: the "copy" is the original, freed with them
                env.pop(ev.tensor)
                st.owned.add(ev.copy)
        elif isinstance(ev, pw.Run):
            layer = self.layers[pl.name]
            args = [st.buffer(b, pl.name) for b in ev.operands]
            # An in-place op's output lives in one operand's buffer: that operand must not be
            # freed (on a card ttnn returns a new Tensor object sharing it, so identity with
            # ``out`` is no guide: WriteInPlace names it).
            inplace = getattr(layer, "inplace", False)
            try:
                if inplace and ev.in_place is None:
                    layer.inplace = False
                out = self._call(pl.name, pl.name, lambda: layer(args), step=("layer", pl, args))
            finally:
                if inplace:
                    layer.inplace = True
            if pl.node.outputs:            # split: one tensor per named output, in order
                env.update(zip(pl.node.outputs, out))
            else:
                env[pl.name] = out
            st.out = out
        elif isinstance(ev, pw.WriteInPlace):
            st.alias = st.buffer(ev.holder, pl.name)
        elif isinstance(ev, pw.SpillTensor):
            # liveness.Spill: the tensor waits for its next reader in DRAM, not L1
            sp = ev.spill
            t = env[sp.tensor]
            moved = self._call(f"spill {sp.tensor}", pl.name,
                               lambda: tt.to_memory_config(t, common.memory_config(
                                   tt, sp.to.memory)), step=("spill", sp, t))
            tt.deallocate(t)        # a layer's output: ours to free
            env[sp.tensor] = moved
        elif isinstance(ev, pw.FreeCopy):
            t = st.copies.pop(ev.copy)
            if ev.copy in st.owned and t is not st.out and t is not st.alias:
                tt.deallocate(t)
            st.owned.discard(ev.copy)
        elif isinstance(ev, pw.FreeTensor):
            src = ev.tensor
            if src in env:
                if (env[src] is not st.out or src == pl.name) and env[src] is not st.alias:
                    tt.deallocate(env[src])
                del env[src]
        elif isinstance(ev, pw.DropName):
            env.pop(ev.tensor, None)        # its buffer is the in-place output's now

    def _call(self, what: str, layer: str, fn, step=None):
        try:
            with self.backend.layer_scope(layer):
                if self.step_hook is not None and step is not None:
                    # (kind, PlannedLayer or AdapterLayer, its input tensor(s), the call)
                    return self.step_hook(*step, fn)
                return fn()
        except LayoutError as e:
            # a run-time rejection (the sim) points at the spec line of its layer, as the
            # planner's own LayoutErrors do
            loc = next((pl.node.loc for pl in self.plan.layers if pl.name == layer), None)
            if loc is None or e.file is not None:
                raise
            raise e.at(loc.file, loc.line) from None
        except Error:
            raise
        except Exception as e:
            e.add_note(f"ttmodels: while running {what} (layer '{layer}') on the "
                       f"{self.backend.name} backend")
            raise

    # ---- tracing ---------------------------------------------------------------------------
    def capture_trace(self, inputs: dict[str, Any]) -> None:
        """Capture one run on fixed-shape inputs (NCHW torch) as a ttnn trace; afterwards
        ``run_traced`` replays it. Needs ``open_backend(..., trace_region_size=...)`` on a card;
        on the sim the replay simply re-runs the plan."""
        from ..backends.ttnn_backend import Trace
        self.release_trace()
        dev = {name: self.input_tensor(name, x) for name, x in inputs.items()}
        self._trace = Trace(self.tt, self.backend.device, self.run, dev)

    def run_traced(self, inputs: dict[str, Any]) -> dict[str, Any]:
        if self._trace is None:
            raise Error("no trace captured: call capture_trace(inputs) first")
        host = {name: self.input_tensor(name, x, on_device=False) for name, x in inputs.items()}
        return self._trace.replay(host)

    def release_trace(self) -> None:
        if self._trace is not None:
            self._trace.release()
            self._trace = None


class _RunState:
    """What one ``Executor.run`` holds between walk events: ``env`` (tensor name -> backend
    tensor), ``keep`` (never freed), the current layer's adapter copies (``owned``: the ones
    that are tensors of their own), its output and the operand its in-place output lives in."""

    def __init__(self, env: dict[str, Any], keep: set[str], passed: set[str]):
        self.env, self.keep, self.passed = env, keep, passed     # passed: the caller's tensors
        self.i = -1
        self.next_layer(-1)

    def next_layer(self, i: int) -> None:
        self.i = i
        self.copies: dict[pw.Copy, Any] = {}
        self.owned: set[pw.Copy] = set()
        self.out = self.alias = None

    def buffer(self, b: pw.Buffer, layer: str):
        if isinstance(b, pw.Copy):
            return self.copies[b]
        if b not in self.env:
            raise LayoutError(f"input '{b}' is not available (freed or never produced)",
                              layer=layer)
        return self.env[b]


def check_input_shape(plan: Plan, name: str, x) -> None:
    """An NCHW input must hold the whole batch (every chip's share on a mesh)."""
    s = plan.graph.inputs[name]
    chips = plan.num_chips
    expected = (s.n * chips, s.c, s.h, s.w)
    if tuple(x.shape) != expected:
        on = f" on {plan.mesh.describe()}, {s.n} per chip" if chips > 1 else ""
        raise Error(f"input '{name}' has shape {tuple(x.shape)}, the plan expects NCHW "
                    f"{expected} (batch_size={s.n * chips}{on}, input_size=({s.h}, {s.w}))")


def to_torch_nchw(*args) -> "torch.Tensor":  # noqa: F821
    """A backend activation as a float32 NCHW torch tensor.

    ``to_torch_nchw(tensor, shape)`` or ``to_torch_nchw(backend, tensor, shape)``; ``shape`` is
    the tensor's NHWC ``TensorShape`` (``graph.shape_of(name)``). Accepts [1, 1, N*H*W, C] (any
    layout, tile padding stripped) and NHWC [N, H, W, C]. On a mesh backend ``shape`` is one
    chip's and the result holds every chip's samples, chip 0 first (the whole batch)."""
    import torch
    if len(args) == 3:
        backend, tensor, shape = args
        tt = backend.tt
    elif len(args) == 2:
        tensor, shape = args
        tt = _namespace_of(tensor)
    else:
        raise TypeError("to_torch_nchw(tensor, shape) or to_torch_nchw(backend, tensor, shape)")
    if not isinstance(shape, TensorShape):
        raise TypeError(f"shape must be a TensorShape, got {type(shape).__name__}")
    chips = getattr(backend, "num_chips", 1) if len(args) == 3 else 1
    if chips > 1:
        # Chip i's [1, 1, rows, C] lands at [i] of a [chips, 1, rows, C] gather; each part is
        # un-padded and un-flattened alone, then the samples follow each other chip by chip.
        t = tt.to_torch(tensor, **common.batch_gathered(backend)).to(torch.float32)
        parts = [_nchw_of(t[i], shape) for i in range(chips)]
        return torch.cat(parts, dim=0)
    t = tt.to_torch(tensor)
    return _nchw_of(t.to(torch.float32), shape)


def _nchw_of(t, shape: TensorShape):
    """One chip's [.., rows, C] activation (tile padding included) as NCHW float32."""
    c = shape.c
    t2 = t.reshape(-1, t.shape[-1]) if t.dim() >= 2 else t.reshape(1, -1)
    if t2.shape[0] < shape.rows or t2.shape[1] < c:
        raise LayoutError(f"backend tensor of shape {tuple(t.shape)} does not hold an activation "
                          f"of NHWC shape {shape}")
    t2 = t2[:shape.rows, :c]
    return t2.reshape(shape.n, shape.h, shape.w, c).permute(0, 3, 1, 2).contiguous()


def _namespace_of(tensor):
    mod = type(tensor).__module__ or ""
    if mod.startswith("ttnn"):
        from ..backends.ttnn_backend import import_ttnn
        return import_ttnn()
    from ..backends import sim
    return sim
