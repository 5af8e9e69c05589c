"""The exact float32 max/avg pool (ops/pool/exact_window.py): sim against torch float32, the
plan (no typecast for float32, bfloat16 unchanged), and one real run on the mock device."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from ttmodels.backends import open_backend
from ttmodels.language.graph import Graph, Node, Precision, TensorShape
from ttmodels.ops.pool import exact_window
from ttmodels.planning import planner
from ttmodels.runtime.executor import Executor, to_torch_nchw

S = TensorShape
F32 = Precision("float32", "float32", "HiFi4", True)
BF16 = Precision("bfloat16", "bfloat16", "HiFi4", False)


@pytest.fixture(scope="module")
def be():
    with open_backend("sim") as b:
        yield b


def pool_graph(op, attrs, n, h, w, c, precision=F32, relu_after=False):
    """x -> the pool (-> a relu, whose TILE input makes the pool's output TILE)."""
    ref = F.max_pool2d if op == "max_pool2d" else F.avg_pool2d
    k, s = attrs["kernel"], attrs["stride"]
    t, b, l, r = attrs["padding"]
    kw = dict(kernel_size=k, stride=s, padding=(t, l), ceil_mode=attrs["ceil_mode"])
    if op == "max_pool2d":
        kw["dilation"] = attrs["dilation"]
    else:
        kw["count_include_pad"] = attrs["count_include_pad"]
    o = ref(torch.zeros(1, 1, h, w), **kw).shape
    nodes = [Node("p", op, ["x"], attrs, S(n, o[2], o[3], c), precision=precision)]
    outs = ["p"]
    if relu_after:
        nodes.append(Node("r", "relu", ["p"], {}, S(n, o[2], o[3], c), precision=precision))
        outs = ["r"]
    g = Graph("pool", {"x": S(n, h, w, c)}, nodes, {}, outs, input_precision=precision)
    return g, (lambda x: ref(x, **kw))


def max_attrs(k, s, p, d=1, ceil=False):
    return dict(kernel=(k, k), stride=(s, s), padding=(p, p, p, p), dilation=(d, d),
                ceil_mode=ceil)


def avg_attrs(k, s, p, ceil=False, include=True):
    return dict(kernel=(k, k), stride=(s, s), padding=(p, p, p, p), ceil_mode=ceil,
                count_include_pad=include)


def run(be, g, x):
    plan = planner.plan_graph(g)
    out = Executor(plan, {}, be).run({"x": x})
    name = g.outputs[0]
    return plan, to_torch_nchw(be, out[name], g.shape_of(name))


MAX_CASES = [
    (3, 2, 1, 1, False),        # resnet's stem pool
    (3, 2, 0, 1, True),         # googlenet's ceil_mode pools (a window past the map)
    (2, 2, 0, 1, False),
    (3, 1, 1, 1, False),        # inception's branch pool
    (3, 2, 1, 2, False),        # dilation
    (1, 2, 0, 1, False),        # a strided 1x1 (one tap)
]


@pytest.mark.parametrize("k,s,p,d,ceil", MAX_CASES)
def test_float32_max_pool_is_bit_exact(be, k, s, p, d, ceil):
    g, ref = pool_graph("max_pool2d", max_attrs(k, s, p, d, ceil), 2, 15, 13, 24)
    x = torch.randn(2, 24, 15, 13, generator=torch.Generator().manual_seed(k * 10 + s))
    plan, y = run(be, g, x)
    assert layer(plan, "p").config.exact
    want = ref(x)
    assert y.shape == want.shape and y.dtype == torch.float32
    assert torch.equal(y, want)         # bit for bit: a max is exact or wrong


AVG_CASES = [
    (2, 2, 0, False, True),     # resnet-d's downsample pool
    (3, 1, 1, False, True),     # inception's branch pool (count_include_pad=True)
    (3, 1, 1, False, False),    # the same, padding not counted: per-position divisors
    (3, 2, 1, True, True),      # ceil_mode windows clipped at the padded map
    (2, 2, 0, True, False),     # timm's AvgPool2d(2, 2, ceil_mode=True, count_include_pad=False)
]


@pytest.mark.parametrize("k,s,p,ceil,include", AVG_CASES)
def test_float32_avg_pool_matches_torch_to_float32_rounding(be, k, s, p, ceil, include):
    g, ref = pool_graph("avg_pool2d", avg_attrs(k, s, p, ceil, include), 2, 15, 13, 24,
                        relu_after=True)
    x = torch.randn(2, 24, 15, 13, generator=torch.Generator().manual_seed(k * 10 + s))
    plan, y = run(be, g, x)
    assert layer(plan, "p").config.exact
    want = F.relu(ref(x))
    assert y.shape == want.shape
    # the same float32 sum in torch's tap order, then x * (1/n) for torch's x / n: an ulp or so
    torch.testing.assert_close(y, want, rtol=3e-7, atol=1e-7)


def test_divisors_follow_torch():
    """The per-position counts are torch's (checked on a ones map, where avg = count / divisor)."""
    for k, s, p, ceil, include in AVG_CASES + [(3, 2, 1, False, False), (3, 3, 1, True, False)]:
        kw = dict(kernel_size=k, stride=s, padding=p, ceil_mode=ceil, count_include_pad=include)
        ones = torch.ones(1, 1, 11, 10)
        counts = F.avg_pool2d(ones, divisor_override=1, **kw)     # real cells per window
        y = F.avg_pool2d(ones, **kw)
        g = exact_window.window(avg_attrs(k, s, p, ceil, include), "avg_pool2d",
                                S(1, 11, 10, 1), S(1, y.shape[2], y.shape[3], 1))
        d = torch.tensor(exact_window.divisors(g, include), dtype=torch.float32)
        torch.testing.assert_close(counts[0, 0] / d, y[0, 0])


def layer(plan, name):
    return next(pl for pl in plan.layers if pl.name == name)


def adapters_into(plan, name):
    return [a.kind for a in plan.adapters if a.dst == name]


def test_plan_float32_pool_has_no_typecast_and_bfloat16_is_unchanged():
    g32, _ = pool_graph("max_pool2d", max_attrs(3, 2, 1), 1, 16, 16, 32)
    p32 = planner.plan_graph(g32)
    lay = layer(p32, "p")
    assert lay.config.exact and lay.output.dtype == "float32" and lay.inputs[0].dtype == "float32"
    assert "typecast" not in adapters_into(p32, "p")
    g16, _ = pool_graph("max_pool2d", max_attrs(3, 2, 1), 1, 16, 16, 32, precision=BF16)
    p16 = planner.plan_graph(g16)
    assert not layer(p16, "p").config.exact and layer(p16, "p").output.dtype == "bfloat16"
    assert layer(p16, "p").config.num_cores         # pool2d's parallel config, as before


F32_SPEC = {"activations": "float32", "weights": "float32", "math_fidelity": "HiFi4",
            "fp32_accum": True}
# a float32 spec with both window pools, one into a conv (TILE output), one with per-position
# divisors into a relu, both fed by a sharded conv output
BOTH_POOLS = {"name": "f32_pools", "inputs": {"x": {"channels": 16, "size": [20, 20]}},
              "defaults": {"precision": F32_SPEC},
              "layers": [{"name": "c1", "op": "conv2d", "out": 32, "kernel": 3, "padding": 1,
                          "act": "relu"},
                         {"name": "mp", "op": "max_pool2d", "kernel": 3, "stride": 2,
                          "padding": 1, "ceil_mode": True},
                         {"name": "c2", "op": "conv2d", "out": 32, "kernel": 1},
                         {"name": "ap", "op": "avg_pool2d", "kernel": 3, "stride": 1,
                          "padding": 1, "count_include_pad": False},
                         {"name": "r", "op": "relu"}]}


def test_both_float32_pools_run_for_real(real_run):
    """The mock n150 runs every ttnn call of the lowering (it allocates and validates; it
    computes nothing): pad, strided slices, maximum / add, the divisor multiply."""
    plan, report = real_run(BOTH_POOLS)
    assert plan.layer("mp").config.exact and plan.layer("ap").config.exact
    assert report.real and report.completed, report
    bad = [(s.name, s.error) for s in report.steps if not s.ok]
    assert not bad and {s.name for s in report.steps} >= {"mp", "ap"}


@pytest.mark.parametrize("c,in_tiled,out_tiled,padded,ttnn_op", [
    # ttnn's own op figure (`ttmodels verify` on the 0.81.1 mock n150, float32 pools)
    (16, False, False, True, 32_832),       # the row-major pad's 32 KiB CB + a stick
    (1024, False, False, True, 69_632),     # wider sticks: 16 of them + one
    (768, False, False, True, 52_224),
    (2048, False, False, True, 139_264),
    (2048, False, False, False, 24_576),    # no pad: the binary's 3 x 2 float32 tiles
    (64, True, True, False, 24_576),
    (1024, True, True, False, 262_144),     # untilize: 2 CBs of a row of 32 float32 tiles
    (2048, True, True, False, 32_768),      # wider: the block factory's 2 x 4 tiles
    (2048, False, True, False, 24_576),
])
def test_exact_pool_l1_is_its_largest_programs_cbs_as_measured(c, in_tiled, out_tiled, padded,
                                                               ttnn_op):
    from ttmodels.ops.pool.l1 import exact_l1
    from ttmodels.planning.liveness import INTERLEAVED_TILIZE_MAX_TILES
    assert exact_l1(c, in_tiled=in_tiled, out_tiled=out_tiled, padded=padded,
                    row_tiles_max=INTERLEAVED_TILIZE_MAX_TILES).total == ttnn_op


def test_exact_pool_cost_is_its_programs():
    """Each tap is a slice and each fold a binary: a 3x3 pool costs more than a 2x2 one, and
    both more than pool2d's halo and window reads in bfloat16."""
    from ttmodels.planning.estimate import estimate

    def pool_us(op, attrs, prec):
        g, _ = pool_graph(op, attrs, 1, 56, 56, 64, precision=prec)
        est = estimate(planner.plan_graph(g, oracle=False))
        return sum(s.us for s in est.steps if s.name == "p")
    k3 = pool_us("max_pool2d", max_attrs(3, 2, 1), F32)
    k2 = pool_us("max_pool2d", max_attrs(2, 2, 0), F32)
    assert k3 > k2 > pool_us("max_pool2d", max_attrs(2, 2, 0), BF16)
