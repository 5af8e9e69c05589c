"""``ttmodels probe-1x1 SPEC``: time conv2d against linear lowerings of every 1x1 stride-1 conv.

Needs a Tenstorrent card. For each distinct 1x1 stride-1 conv problem (M, K, N, fused activation,
precision) of the spec's graph, and for each matmul config kind the solver finds (1D / 2D
multicast), the same sharded input is fed to

* ``ttnn.conv2d`` with the matching ``shard_layout`` (height for 1D, block for 2D), and
* ``ttnn.linear`` with the solver's program config,

each op captured once in a metal trace and replayed ``iterations`` times (host wall time of the
replays / iterations = device time per call without host dispatch). Outputs are compared bit for
bit against the conv2d output of the same sharding. A JSON report is written; ``--write-spec``
writes a lowering overrides file (YAML, keyed by expanded layer name) with the fastest lowering of
each layer. The user's spec is never rewritten: PyYAML cannot round-trip its comments, and layers
expanded from blocks/repeats have no line of their own to carry a per-layer key.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..backends.select import card_present  # noqa: F401  (tests replace it here)
from ..errors import Error, LayoutError
from ..language.graph import Graph
from ..planning.matmul_solver import (KINDS, KIND_1D, LOWERINGS, MatmulConfig, conv1x1_as_matmul_shape,
                            is_conv1x1_stride1, solve, to_ttnn)

DEFAULT_ITERATIONS = 50
TRACE_REGION_SIZE = 32 * 1024 * 1024
NO_CARD_MESSAGE = ("error: probe-1x1 measures kernels on a Tenstorrent card, and none was found "
                   "(no device under /dev/tenstorrent); nothing was run. --mock checks which "
                   "configs ttnn accepts, with their L1 figures, on a mock device")
MOCK_NOTE = ("mock device (no card): ttnn's acceptance and per-core L1 figures only; timing and "
             "bit identity need a Tenstorrent card")


# ---------------------------------------------------------------------------------------------
# problems
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Problem:
    """One distinct 1x1 conv as a matmul, with what decides its numerics."""
    M: int
    K: int
    N: int
    n: int
    h: int
    w: int
    activation: str | None
    act_dtype: str
    weights_dtype: str
    math_fidelity: str
    fp32_accum: bool
    bias: bool


@dataclass
class Candidate:
    lowering: str                         # "conv2d" | "linear"
    kind: str                             # matmul kind / matching conv shard layout
    config: dict[str, Any] | None = None
    time_us: float | None = None
    bit_identical_to_conv2d: bool | None = None
    max_abs_diff: float | None = None
    error: str | None = None
    accepted: bool | None = None          # --mock: ttnn accepted the op (validation + program)
    ttnn_peak_cb: int | None = None       # --mock: ttnn's per-core figures for the op alone
    #                                       (cb: circular + dataflow buffers)
    ttnn_peak_l1: int | None = None
    ttnn_peak_total: int | None = None


@dataclass
class ShapeReport:
    problem: Problem
    layers: list[str]
    candidates: list[Candidate] = field(default_factory=list)

    def winner(self) -> Candidate | None:
        ok = [c for c in self.candidates if c.time_us is not None and c.error is None]
        return min(ok, key=lambda c: c.time_us) if ok else None

    def to_dict(self) -> dict[str, Any]:
        w = self.winner()
        return {"problem": vars(self.problem), "layers": self.layers,
                "candidates": [vars(c) for c in self.candidates],
                "winner": None if w is None else {"lowering": w.lowering, "kind": w.kind,
                                                  "time_us": w.time_us}}


def problems_of(graph: Graph) -> dict[Problem, list[str]]:
    """Distinct 1x1 stride-1 conv problems of ``graph`` -> the layers that have them."""
    out: dict[Problem, list[str]] = {}
    for node in graph.nodes:
        if node.op != "conv2d" or not is_conv1x1_stride1(node):
            continue
        M, K, N = conv1x1_as_matmul_shape(node)
        p = node.precision
        s = node.shape
        prob = Problem(M, K, N, s.n, s.h, s.w, node.attrs.get("activation"), p.activations,
                       p.weights, p.math_fidelity, p.fp32_accum,
                       bool(node.attrs.get("bias")) or node.bn is not None)
        out.setdefault(prob, []).append(node.name)
    return out


# ---------------------------------------------------------------------------------------------
# lowering overrides file
# ---------------------------------------------------------------------------------------------

def write_lowering_overrides(path: str | Path, lowerings: dict[str, str], *, header: str = "") -> None:
    import yaml
    for name, low in lowerings.items():
        if low not in ("conv2d", "linear"):
            raise Error(f"layer '{name}': lowering must be conv2d or linear, got {low!r}")
    text = "".join(f"# {line}\n" for line in header.splitlines())
    text += yaml.safe_dump({"lowering": dict(lowerings)}, sort_keys=False)
    Path(path).write_text(text)


def load_lowering_overrides(path: str | Path) -> dict[str, str]:
    """``{layer name: lowering}`` from an overrides file written by ``probe-1x1 --write-spec``."""
    import yaml
    try:
        data = yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as e:
        raise Error(f"{path}: not a YAML lowering overrides file: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("lowering"), dict):
        raise Error(f"{path}: expected a mapping 'lowering: {{layer name: conv2d|linear|auto}}'")
    out = {}
    for name, low in data["lowering"].items():
        if low not in LOWERINGS:
            raise Error(f"{path}: layer '{name}': lowering must be one of {', '.join(LOWERINGS)}, "
                        f"got {low!r}")
        out[str(name)] = low
    return out


def apply_lowering_overrides(graph: Graph, overrides: dict[str, str]) -> Graph:
    """Set ``attrs['lowering']`` of the named conv layers (in place; returns ``graph``)."""
    by_name = {n.name: n for n in graph.nodes}
    for name, low in overrides.items():
        node = by_name.get(name)
        if node is None:
            raise Error(f"lowering override names layer '{name}', which {graph.source} does not have")
        if node.op != "conv2d":
            raise Error(f"lowering override for layer '{name}': it is a {node.op}, not a conv2d")
        if low not in LOWERINGS:
            raise Error(f"layer '{name}': lowering must be one of {', '.join(LOWERINGS)}, got {low!r}")
        node.attrs = replace(node.attrs, lowering=low)     # attrs are frozen: a new value
    return graph


# ---------------------------------------------------------------------------------------------
# the probe
# ---------------------------------------------------------------------------------------------

def run_probe(spec, *, batch_size: int = 1, input_size=None, profile: str | None = None,
              out: str | None = "probe-1x1.json", write_spec: str | None = None,
              iterations: int = DEFAULT_ITERATIONS, device_id: int = 0, mock: bool = False) -> int:
    """Run the probe; returns the process exit code (2 without a card). ``mock``: on a mock
    n150 instead (``ttmodels.backends.mock_device``): which candidates ttnn accepts and their L1."""
    if mock:
        if write_spec is not None:
            raise Error("--write-spec picks the fastest lowering, and a mock device times "
                        "nothing: run it on a card")
    elif not card_present():
        print(NO_CARD_MESSAGE, file=sys.stderr)
        return 2
    if write_spec is not None and isinstance(spec, (str, Path)) and Path(spec).exists() \
            and Path(write_spec).resolve() == Path(spec).resolve():
        raise Error(f"--write-spec {write_spec} would overwrite the spec itself; give another path "
                    f"(the overrides file is separate from the spec)")
    from .. import load_graph
    graph = load_graph(spec, batch_size=batch_size, input_size=input_size, profile=profile)
    problems = problems_of(graph)
    reports = [ShapeReport(p, layers) for p, layers in problems.items()]
    if reports and mock:
        from ..backends import mock_device
        from ..backends.ttnn_backend import DEFAULT_L1_SMALL_SIZE
        ttnn, device = mock_device.open_device("n150", l1_small_size=DEFAULT_L1_SMALL_SIZE)
        try:
            for rep in reports:
                _probe_problem(ttnn, device, rep, iterations, mock=True)
        finally:
            ttnn.close_device(device)
    elif reports:
        from ..backends.ttnn_backend import close_device, open_device
        ttnn, device = open_device(device_id=device_id, trace_region_size=TRACE_REGION_SIZE)
        try:
            for rep in reports:
                _probe_problem(ttnn, device, rep, iterations)
        finally:
            close_device(ttnn, device)

    report = {"spec": graph.source, "batch_size": batch_size,
              "input_size": list(input_size) if input_size else None, "profile": profile,
              "iterations": None if mock else iterations,
              "timing": MOCK_NOTE if mock else "metal trace replay, host wall time / iteration",
              "shapes": [r.to_dict() for r in reports]}
    if out:
        Path(out).write_text(json.dumps(report, indent=2))
    if mock:
        print(MOCK_NOTE)
        for r in reports:
            p = r.problem
            cands = "; ".join(
                f"{c.lowering}/{c.kind} " + (f"accepted, {c.ttnn_peak_total:,} B/core "
                                             f"(cb {c.ttnn_peak_cb:,}, l1 {c.ttnn_peak_l1:,})"
                                             if c.accepted else f"rejected: {c.error}")
                for c in r.candidates)
            print(f"M={p.M} K={p.K} N={p.N} ({len(r.layers)} layers): {cands}")
        return 0
    lowerings: dict[str, str] = {}
    for r in reports:
        w = r.winner()
        p = r.problem
        if w is None:
            print(f"M={p.M} K={p.K} N={p.N}: every candidate failed (see {out})")
            continue
        for name in r.layers:
            lowerings[name] = w.lowering
        times = ", ".join(f"{c.lowering}/{c.kind} {c.time_us:.1f} us" for c in r.candidates
                          if c.time_us is not None)
        print(f"M={p.M} K={p.K} N={p.N} ({len(r.layers)} layers): {w.lowering} wins [{times}]")
    if write_spec:
        write_lowering_overrides(
            write_spec, lowerings,
            header=(f"ttmodels probe-1x1: fastest lowering per 1x1 stride-1 conv of {graph.source}\n"
                    f"batch {batch_size}, input {input_size or 'spec default'}, "
                    f"profile {profile or 'default'}; keys are expanded layer names"))
    return 0


def _probe_problem(ttnn, device, rep: ShapeReport, iterations: int, mock: bool = False) -> None:
    import torch
    from ..backends import common
    from ..language.graph import Precision

    p = rep.problem
    g = torch.Generator().manual_seed(0)
    x = torch.randn(p.M, p.K, generator=g)
    weight = torch.randn(p.N, p.K, 1, 1, generator=g) / p.K ** 0.5
    bias = torch.randn(p.N, generator=g) * 0.1 if p.bias else None
    precision = Precision(weights=p.weights_dtype, activations=p.act_dtype,
                          math_fidelity=p.math_fidelity, fp32_accum=p.fp32_accum)
    compute = common.compute_config(ttnn, device, precision)
    act_dt = common.data_type(ttnn, p.act_dtype)
    w_dt = common.data_type(ttnn, p.weights_dtype)
    relu = common.unary_relu(ttnn) if p.activation == "relu" else None

    for kind in KINDS:
        try:
            cfg = solve(p.M, p.K, p.N, prefer=kind, fp32_accum=p.fp32_accum,
                        activation=p.activation, act_dtype=p.act_dtype,
                        weights_dtype=p.weights_dtype, bias=p.bias, packer_l1_acc=True)
        except LayoutError as e:
            rep.candidates.append(Candidate("linear", kind, error=f"no config: {e}"))
            continue
        in_mem = common.memory_config(ttnn, cfg.in0_memory)
        out_mem = common.memory_config(ttnn, cfg.out_memory)

        def make_input():
            return ttnn.from_torch(x.reshape(1, 1, p.M, p.K), dtype=act_dt,
                                   layout=ttnn.TILE_LAYOUT, device=device, memory_config=in_mem)
        if mock:
            conv = Candidate("conv2d", kind)
            lin = Candidate("linear", kind, config=cfg.to_dict())
            _check_candidate(ttnn, conv, make_input, lambda x_dev: _conv_op(
                ttnn, device, p, x_dev, weight, bias, kind, relu, compute, act_dt, w_dt)())
            _check_candidate(ttnn, lin, make_input, lambda x_dev: _linear_op(
                ttnn, device, p, x_dev, weight, bias, cfg, compute, act_dt, w_dt, out_mem)())
            rep.candidates += [conv, lin]
            continue
        x_dev = make_input()
        try:
            conv = Candidate("conv2d", kind)
            conv_out = _run_candidate(ttnn, device, conv, iterations,
                                      _conv_op(ttnn, device, p, x_dev, weight, bias, kind, relu,
                                               compute, act_dt, w_dt))
            lin = Candidate("linear", kind, config=cfg.to_dict())
            lin_out = _run_candidate(ttnn, device, lin, iterations,
                                     _linear_op(ttnn, device, p, x_dev, weight, bias, cfg, compute,
                                                act_dt, w_dt, out_mem))
            if conv_out is not None and lin_out is not None:
                a = conv_out.reshape(-1, conv_out.shape[-1])[:p.M, :p.N].float()
                b = lin_out.reshape(-1, lin_out.shape[-1])[:p.M, :p.N].float()
                lin.bit_identical_to_conv2d = bool(torch.equal(a.view(torch.int32),
                                                               b.view(torch.int32)))
                lin.max_abs_diff = float((a - b).abs().max())
            rep.candidates += [conv, lin]
        finally:
            ttnn.deallocate(x_dev)


def _check_candidate(ttnn, cand: Candidate, make_input, op) -> None:
    """Mock device: run ``op`` once under NO_DISPATCH capture (inputs made inside it, as pool2d
    and the allocator's mock expect) and keep ttnn's verdict and the op's own L1 figures (a
    nested capture holds only the op, not its input)."""
    from .verify import split_error
    ttnn.graph.begin_graph_capture(ttnn.graph.RunMode.NO_DISPATCH)
    try:
        x_dev = make_input()
        ttnn.graph.begin_graph_capture(ttnn.graph.RunMode.NO_DISPATCH)
        err = None
        try:
            op(x_dev)
        except Exception as e:         # ttnn's TT_FATAL: a result, not a crash of the probe
            err = e
        finally:
            inner = ttnn.graph.end_graph_capture()
    finally:
        ttnn.graph.end_graph_capture()
    cand.accepted = err is None
    if err is not None:
        msg, loc = split_error(err)
        cand.error = msg + (f" ({loc})" if loc else "")
        return
    u = ttnn.graph.extract_resource_usage_per_core(inner)
    # circular and dataflow buffers together, as ttmodels.tools.verify reports them
    cand.ttnn_peak_cb = int(u.peak_cb) + int(u.peak_dataflow_buffer)
    cand.ttnn_peak_l1, cand.ttnn_peak_total = int(u.peak_l1), int(u.peak_total)


def _conv_op(ttnn, device, p: Problem, x_dev, weight, bias, kind, relu, compute, act_dt, w_dt):
    """conv2d on the shared sharded input; the first call prepares weights on device."""
    shard = (ttnn.TensorMemoryLayout.HEIGHT_SHARDED if kind == KIND_1D
             else ttnn.TensorMemoryLayout.BLOCK_SHARDED)
    conv_config = ttnn.Conv2dConfig(weights_dtype=w_dt, activation=relu, shard_layout=shard,
                                    deallocate_activation=False)
    state = {"w": ttnn.from_torch(weight, dtype=ttnn.float32),
             "b": (ttnn.from_torch(bias.reshape(1, 1, 1, -1), dtype=ttnn.float32)
                   if bias is not None else None)}

    def op():
        out, (state["w"], state["b"]) = ttnn.conv2d(
            input_tensor=x_dev, weight_tensor=state["w"], bias_tensor=state["b"], device=device,
            in_channels=p.K, out_channels=p.N, batch_size=p.n, input_height=p.h, input_width=p.w,
            kernel_size=(1, 1), stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1,
            dtype=act_dt, conv_config=conv_config, compute_config=compute,
            return_output_dim=False, return_weights_and_bias=True)
        return out
    return op


def _linear_op(ttnn, device, p: Problem, x_dev, weight, bias, cfg: MatmulConfig, compute, act_dt,
               w_dt, out_mem):
    # [Cout, Cin, 1, 1] -> [1, 1, K, N]: the same matrix conv2d's weight preparation builds for a
    # 1x1 kernel, quantized to the weights dtype by the same host tilizer.
    w = weight.reshape(p.N, p.K).t().contiguous().reshape(1, 1, p.K, p.N)
    w_dev = ttnn.from_torch(w, dtype=w_dt, layout=ttnn.TILE_LAYOUT, device=device,
                            memory_config=ttnn.DRAM_MEMORY_CONFIG)
    b_dev = (ttnn.from_torch(bias.reshape(1, 1, 1, p.N), dtype=w_dt, layout=ttnn.TILE_LAYOUT,
                             device=device, memory_config=ttnn.DRAM_MEMORY_CONFIG)
             if bias is not None else None)
    program_config = to_ttnn(ttnn, cfg)

    def op():
        return ttnn.linear(x_dev, w_dev, bias=b_dev, program_config=program_config,
                           memory_config=out_mem, dtype=act_dt, compute_kernel_config=compute)
    return op


def _run_candidate(ttnn, device, cand: Candidate, iterations: int, op):
    """Compile, capture a trace, replay it; fills ``cand`` and returns the output as torch."""
    tid = None
    out = None
    try:
        warm = op()                                  # compiles kernels, prepares conv weights
        ttnn.synchronize_device(device)
        ttnn.deallocate(warm)
        tid = ttnn.begin_trace_capture(device)
        try:
            out = op()
        finally:
            ttnn.end_trace_capture(device, tid)
        ttnn.execute_trace(device, tid, blocking=True)
        t0 = time.perf_counter()
        for _ in range(iterations):
            ttnn.execute_trace(device, tid, blocking=False)
        ttnn.synchronize_device(device)
        cand.time_us = (time.perf_counter() - t0) / iterations * 1e6
        return ttnn.to_torch(out)
    except Exception as e:  # a config the card rejects is a result, not a crash of the probe
        cand.error = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:400] if str(e).strip() else ''}"
        return None
    finally:
        if tid is not None:
            ttnn.release_trace(device, tid)
        if out is not None:
            ttnn.deallocate(out)
