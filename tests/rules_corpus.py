"""A generated corpus of single-op cases: ``rules.check``'s verdict against ttnn's own.

Each case is one ttnn call the project makes (a graph layer through ``ttmodels.runtime.layers``, or a
layout adapter through ``AdapterLayer``) with given input layouts, shapes and config. The rules
verdict is ``rules.check`` exactly as ``plan_checks.check_plan`` runs it; ttnn's verdict is whether
the installed ttnn 0.81.1 accepts the same call on a mock Wormhole n150 under NO_DISPATCH graph
capture (inputs created inside the capture) *and* returns the dtype the plan asked for (an op
without a dtype argument that silently keeps its input's dtype did not do what was asked).

Cases are generated from small axes (ops x input memory layouts x dtypes x tile/row-major x
shapes that do and do not divide), not written one by one; ``cases()`` returns them all.
Run ``python tests/rules_corpus.py`` for the agreement table (tests/test_rules_vs_ttnn.py is the
CI test).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any

from ttmodels.planning import rules as R
from ttmodels.ops.conv2d.sharding import conv_memspec, determine_parallel_config
from ttmodels.language.graph import Node, Precision, TensorShape
from ttmodels.planning.layout import (BLOCK, HEIGHT, INTERLEAVED, ROW_MAJOR, TILE_LAYOUT, WIDTH, MemSpec,
                             TensorLayout)
from ttmodels.planning.plans import Adapter, PlannedLayer

DRAM = MemSpec(INTERLEAVED, "dram")
L1 = MemSpec(INTERLEAVED, "l1")


@dataclass
class Case:
    id: str
    op: str                                   # rule op (layer op or adapter kind)
    inputs: list[TensorLayout]
    in_shapes: list[TensorShape]              # NHWC of each input ([1,1,1,C] constant: (1,1,1,C))
    out_shape: TensorShape
    output: TensorLayout                      # what the plan expects the op to produce
    attrs: dict[str, Any] = field(default_factory=dict)    # node attrs (graph ops)
    config: dict[str, Any] = field(default_factory=dict)   # planned config (graph ops)
    precision: Precision = field(default_factory=Precision)

    @property
    def adapter(self) -> bool:
        return self.op in R.ADAPTER_OPS

    @property
    def flat_shapes(self):
        return [s.flat for s in self.in_shapes]

    def rule_violations(self) -> list[R.Violation]:
        """rules.check as plan_checks.check_plan calls it."""
        if self.adapter:
            return R.check(self.op, self.inputs, {"dtype": self.output.dtype,
                                                  "layout": self.output.layout},
                           self.output.memory, shapes=self.flat_shapes)
        attrs = dict(self.config)
        attrs.setdefault("dtype", self.output.dtype)
        return R.check(self.op, self.inputs, attrs, None, shapes=self.flat_shapes)


# ---------------------------------------------------------------------------------------------
# axes
# ---------------------------------------------------------------------------------------------

def _fit(mem: MemSpec, rows: int, c: int, layout: str) -> MemSpec:
    return R.reshape_memspec(mem, rows, c, layout)


def memories(rows: int, c: int, layout: str, *, bad: bool = True) -> list[tuple[str, MemSpec]]:
    """Interleaved DRAM/L1, height/width/block shards on several grids (shards derived with the
    project's layout math, so uneven tensors get padded shards), and a few broken shard specs."""
    out = [("dram", DRAM), ("l1", L1)]
    for n in (2, 8, 20):
        out.append((f"h{n}", _fit(R.sharded_memspec(HEIGHT, rows, c, num_cores=n), rows, c, layout)))
    for n in (2, 4):
        out.append((f"w{n}", R.sharded_memspec(WIDTH, rows, c, num_cores=n)))
    for g in ((2, 2), (2, 4)):
        out.append((f"b{g[0]}x{g[1]}", R.sharded_memspec(BLOCK, rows, c, grid=g)))
    if bad:
        h = _fit(R.sharded_memspec(HEIGHT, rows, c, num_cores=4), rows, c, layout)
        out.append(("h4short", replace(h, shard_shape=(h.shard_shape[0] // 2, h.shard_shape[1]))))
        if rows % 4 == 0:
            out.append(("h4exact", replace(h, shard_shape=(rows // 4, h.shard_shape[1]))))
        out.append(("hdram", replace(h, buffer="dram")))
    return out


def _hdram(s: TensorShape) -> tuple[str, MemSpec]:
    return ("hdram", replace(R.sharded_memspec(HEIGHT, s.rows, s.c, num_cores=8), buffer="dram"))


DTYPES = ("bfloat16", "bfloat8_b", "float32")
SHAPES = {"even": TensorShape(1, 16, 16, 64), "odd": TensorShape(1, 10, 10, 48)}


def T(mem: MemSpec, layout: str = TILE_LAYOUT, dtype: str = "bfloat16") -> TensorLayout:
    return TensorLayout(mem, layout, dtype)


# ---------------------------------------------------------------------------------------------
# generators, one per op family
# ---------------------------------------------------------------------------------------------

def relu_cases():
    for (sk, s), layout, dtype in itertools.product(SHAPES.items(), (TILE_LAYOUT, ROW_MAJOR),
                                                    DTYPES):
        if dtype == "float32" and sk == "odd":
            continue
        for mk, m in memories(s.rows, s.c, layout, bad=(dtype == "bfloat16")):
            if dtype != "bfloat16" and mk not in ("dram", "h8", "w2", "b2x2"):
                continue
            x = T(m, layout, dtype)
            yield Case(f"relu/{sk}/{mk}/{layout}/{dtype}", "relu", [x], [s], s,
                       R.output_layout("relu", [x], {}, None, [s.flat]))
    s = SHAPES["even"]
    for mk, m in memories(s.rows, s.c, TILE_LAYOUT, bad=False)[:4]:
        x = T(m)
        yield Case(f"relu/even/{mk}/tile/to-bfloat8_b", "relu", [x], [s], s,
                   replace(R.output_layout("relu", [x], {}, None, [s.flat]), dtype="bfloat8_b"))


def binary_cases():
    s = SHAPES["even"]
    c = TensorShape(1, 1, 1, s.c)
    hs = R.sharded_memspec(HEIGHT, s.rows, s.c, num_cores=8)
    other = {
        "same": None, "dram": DRAM, "l1": L1,
        "h4": R.sharded_memspec(HEIGHT, s.rows, s.c, num_cores=4),
        "b2x2": R.sharded_memspec(BLOCK, s.rows, s.c, grid=(2, 2)),
        "w2": R.sharded_memspec(WIDTH, s.rows, s.c, num_cores=2),
    }
    a_mems = [("dram", DRAM), ("l1", L1), ("h8", hs),
              ("b2x2", R.sharded_memspec(BLOCK, s.rows, s.c, grid=(2, 2))),
              ("w2", R.sharded_memspec(WIDTH, s.rows, s.c, num_cores=2)), _hdram(s)]
    for op in R.BINARY:
        for (ak, am), (bk, bm) in itertools.product(a_mems, other.items()):
            for la, lb in ((TILE_LAYOUT, TILE_LAYOUT), (ROW_MAJOR, ROW_MAJOR), (TILE_LAYOUT, ROW_MAJOR)):
                if op != "add" and (la, lb) != (TILE_LAYOUT, TILE_LAYOUT):
                    continue
                if la == ROW_MAJOR and am.sharded and bk not in ("same", "dram"):
                    continue
                a = T(_fit(am, s.rows, s.c, la), la)
                b = T(_fit(bm or am, s.rows, s.c, lb), lb)
                yield _binary(f"{op}/{ak}+{bk}/{la}+{lb}", op, a, b, s, s)
        # per-channel constant [1,1,1,C] (the field report), and dtypes
        for (ak, am), (ck, cm), lb in itertools.product(a_mems, (("l1", L1), ("dram", DRAM)),
                                                        (TILE_LAYOUT, ROW_MAJOR)):
            yield _binary(f"{op}/{ak}*const-{ck}/{lb}", op, T(am), T(cm, lb), s, c)
        for dt_a, dt_b, dt_o in (("bfloat8_b", "bfloat16", "bfloat16"),
                                 ("bfloat16", "bfloat16", "bfloat8_b"),
                                 ("float32", "bfloat16", "bfloat16")):
            yield _binary(f"{op}/h8+same/{dt_a}+{dt_b}->{dt_o}", op, T(hs, dtype=dt_a),
                          T(hs, dtype=dt_b), s, s, dtype=dt_o)
        # a row-major operand next to a TILE one is tilized with its shard spec (pool2d
        # outputs: row-major height shards that are not whole tiles)
        rm8 = MemSpec(HEIGHT, "l1", (8, 4), 32, (8, 64))
        yield _binary(f"{op}/h8+h32rm8/tile+row_major", op, T(hs), T(rm8, ROW_MAJOR), s, s)
        yield _binary(f"{op}/h32rm8+h32rm8/row_major+row_major", op, T(rm8, ROW_MAJOR),
                      T(rm8, ROW_MAJOR), s, s)
        # shapes that do not broadcast
        yield _binary(f"{op}/dram+dram/nobroadcast", op, T(DRAM), T(DRAM),
                      s, TensorShape(1, 16, 16, 32))
    # the field report itself: 112x112x64 conv output height sharded on 56 cores times an
    # interleaved per-channel constant
    fs = TensorShape(1, 112, 112, 64)
    conv_out = conv_memspec(HEIGHT, fs.rows, 64, determine_parallel_config(HEIGHT, fs.rows, 16, 64))
    yield _binary("multiply/field-report/conv-h56*const-l1", "multiply", T(conv_out), T(L1), fs,
                  TensorShape(1, 1, 1, 64))
    yield _binary("multiply/field-report/conv-h56*const-l1-bf8", "multiply",
                  T(conv_out, dtype="bfloat8_b"), T(L1), fs, TensorShape(1, 1, 1, 64),
                  dtype="bfloat8_b")
    # in place (output_tensor=a)
    for dt in ("bfloat16", "bfloat8_b"):
        yield _binary(f"add/h8+h8/inplace/out-{dt}", "add", T(hs), T(hs), s, s, dtype=dt,
                      inplace=True)
    yield _binary("add/h8+b2x2/inplace", "add", T(hs), T(other["b2x2"]), s, s, inplace=True)


def unary_cases():
    """The other unary ops (activations, identity) on relu's axes, bfloat16 (default params)."""
    s = SHAPES["even"]
    for op in R.UNARY:
        if op == "relu":
            continue
        for layout in (TILE_LAYOUT, ROW_MAJOR):
            for mk, m in memories(s.rows, s.c, layout, bad=False)[:5]:
                x = T(m, layout)
                yield Case(f"{op}/even/{mk}/{layout}", op, [x], [s], s,
                           R.output_layout(op, [x], {}, None, [s.flat]))


def batch_norm_cases():
    """x * scale + shift with [1, 1, 1, C] TILE constants (the layer's two binary_ng calls)."""
    s = SHAPES["even"]
    for (mk, m), (ck, cm) in itertools.product(memories(s.rows, s.c, TILE_LAYOUT, bad=False)[:5],
                                               (("l1", L1), ("dram", DRAM))):
        x = T(m)
        cfg = {"dtype": "bfloat16", "constant_memory": cm, "constant_dtype": "bfloat16"}
        out = R.output_layout("batch_norm", [x, T(cm)], {"dtype": "bfloat16",
                                                         "out_shape": s.flat}, None,
                              [s.flat, (1, 1, 1, s.c)])
        yield Case(f"batch_norm/{mk}/const-{ck}", "batch_norm", [x], [s], s, out,
                   {"activation": None}, cfg)


def slice_cases():
    s = SHAPES["even"]
    for layout in (TILE_LAYOUT, ROW_MAJOR):
        for mk, m in memories(s.rows, s.c, layout, bad=False)[:5]:
            for lo, hi in ((0, 32), (32, s.c)) if layout == TILE_LAYOUT else ((0, 16), (8, 40)):
                x = T(m, layout)
                o = TensorShape(s.n, s.h, s.w, hi - lo)
                yield Case(f"slice/{mk}/{layout}/{lo}-{hi}", "slice", [x], [s], o,
                           R.output_layout("slice", [x], {}, None, [s.flat]),
                           {"start": lo, "stop": hi})


def split_cases():
    """split: one ttnn.slice per named output (aligned and unaligned sections)."""
    s = SHAPES["even"]
    for layout in (TILE_LAYOUT, ROW_MAJOR):
        for mk, m in memories(s.rows, s.c, layout, bad=False)[:5]:
            for secs in ((("a", 0, 32), ("b", 32, s.c)), (("a", 0, 8), ("b", 8, s.c))):
                x = T(m, layout)
                name = "-".join(str(hi - lo) for _, lo, hi in secs)
                yield Case(f"split/{mk}/{layout}/{name}", "split", [x], [s], s,
                           R.output_layout("split", [x], {}, None, [s.flat]),
                           {"sections": secs})


def conv_transpose_cases():
    """conv_transpose2d on an 8x8 map: a 2x2/2 upsample, a 3x3/2 with output_padding, and a
    padding over dilation * (kernel - 1); L1 inputs (interleaved, height/block/width shards) and
    a DRAM one."""
    s = TensorShape(1, 8, 8, 32)
    for ck, (k, st, p, op_) in {"2x2s2": (2, 2, 0, 0), "3x3s2p1op1": (3, 2, 1, 1),
                                "3x3s2p3": (3, 2, 3, 0)}.items():
        oh = (s.h - 1) * st - 2 * p + (k - 1) + op_ + 1
        o = TensorShape(s.n, oh, oh, 32)
        attrs = dict(in_channels=s.c, out_channels=32, kernel=(k, k), stride=(st, st),
                     padding=(p,) * 4, output_padding=(op_, op_), dilation=(1, 1), groups=1,
                     bias=True, activation=None)
        for mk, m in memories(s.rows, s.c, TILE_LAYOUT, bad=False)[:6]:
            x = T(m)
            kind = m.memory_layout if m.sharded else HEIGHT
            cfg = {"shard_layout": kind, "act_block_h_override": 0, "reshard_if_not_optimal": False,
                   "override_sharding_config": False, "output_layout": TILE_LAYOUT,
                   "dtype": "bfloat16", "is_mm_conv": False, "memory_config": None,
                   "weights_dtype": "bfloat8_b", "kernel": (k, k), "padding": (p,) * 4,
                   "dilation": (1, 1)}
            out = R.output_layout("conv_transpose2d", [x],
                                  {**cfg, "in_channels": s.c, "out_shape": o.flat}, None, [s.flat])
            yield Case(f"conv_transpose2d/{ck}/{mk}", "conv_transpose2d", [x], [s], o, out,
                       attrs, cfg)


def adaptive_pool_cases():
    s = TensorShape(1, 16, 16, 64)
    for size in ((1, 1), (4, 4)):
        o = TensorShape(1, *size, 64)
        for mk, m in memories(s.rows, s.c, TILE_LAYOUT, bad=False)[:5] + [_hdram(s)]:
            for layout in (TILE_LAYOUT, ROW_MAJOR):
                x = T(_fit(m, s.rows, s.c, layout), layout)
                yield _pool(f"adaptive_avg_pool2d/{size[0]}x{size[1]}/{mk}/{layout}",
                            "adaptive_avg_pool2d", x, s, o, {"size": size},
                            None if m.sharded else HEIGHT, ROW_MAJOR, "bfloat16")


def _binary(cid, op, a, b, sa, sb, *, dtype=None, inplace=False):
    out_shape = TensorShape(*(max(x, y) for x, y in zip(sa.nhwc, sb.nhwc)))
    dtype = dtype or a.dtype
    attrs = {"dtype": dtype, "out_shape": out_shape.flat}
    out = a if inplace else R.output_layout(op, [a, b], attrs, None, [sa.flat, sb.flat])
    out = replace(out, dtype=dtype)
    cfg = {"swap_operands": False, "dtype": dtype, "memory_config": None}
    if inplace:
        cfg.update(inplace=True, out_shape=out_shape.flat)
    return Case(cid, op, [a, b], [sa, sb], out_shape, out, {"activation": None}, cfg)


def conv_cases():
    # 3x3 pad 1 and 1x1 convs on 16x16 maps; 10x10 maps with 48 channels (nothing divides)
    for (sk, s), k in itertools.product(SHAPES.items(), (3, 1)):
        cout = 64
        o = TensorShape(s.n, s.h, s.w, cout)
        is_mm = k == 1
        attrs = dict(in_channels=s.c, out_channels=cout, kernel=(k, k), stride=(1, 1),
                     padding=(k // 2,) * 4, dilation=(1, 1), groups=1, bias=True, activation=None)
        for mk, m in memories(s.rows, s.c, TILE_LAYOUT, bad=False) + [_hdram(s)]:
            for layout in (TILE_LAYOUT, ROW_MAJOR):
                if m.sharded and layout == ROW_MAJOR and mk != "h8":
                    continue
                x = T(_fit(m, s.rows, s.c, layout), layout)
                kinds = [m.memory_layout] if m.sharded else [None, HEIGHT, BLOCK, WIDTH]
                for kind in kinds:
                    yield _conv(f"conv2d/{k}x{k}/{sk}/{mk}/{layout}/shard-{kind}", x, s, o, attrs,
                                kind, is_mm)
        x = T(R.sharded_memspec(HEIGHT, s.rows, s.c, num_cores=8))
        yield _conv(f"conv2d/{k}x{k}/{sk}/h8/rm-out-bf8", x, s, o, attrs, HEIGHT, is_mm,
                    output_layout=ROW_MAJOR, dtype="bfloat8_b")
        yield _conv(f"conv2d/{k}x{k}/{sk}/h8/rm-out-bf16", x, s, o, attrs, HEIGHT, is_mm,
                    output_layout=ROW_MAJOR, dtype="bfloat16")
        yield _conv(f"conv2d/{k}x{k}/{sk}/h8/abh33", x, s, o, attrs, HEIGHT, is_mm, act_block_h=33)
        if sk == "even":
            yield _conv(f"conv2d/{k}x{k}/{sk}/dram/bf8-in", T(DRAM, dtype="bfloat8_b"), s, o, attrs,
                        HEIGHT, is_mm)
    yield from mm_block_row_major_cases()


def mm_block_row_major_cases():
    """Issue 21: a 1x1 (matmul) conv fed a pool's row-major block shards (rows not whole tiles:
    conv2d.mm_block_row_major), and the same with tile-high shards or a 3x3 kernel."""
    s = TensorShape(1, 7, 7, 1024)
    o = TensorShape(1, 7, 7, 512)
    for rows, grid in ((7, (8, 7)), (16, (8, 4)), (32, (8, 2))):
        m = MemSpec(BLOCK, "l1", grid, grid[0] * grid[1], (rows, 1024 // grid[0]))
        for k in (1, 3):
            attrs = dict(in_channels=s.c, out_channels=o.c, kernel=(k, k), stride=(1, 1),
                         padding=(k // 2,) * 4, dilation=(1, 1), groups=1, bias=True,
                         activation=None)
            yield _conv(f"conv2d/{k}x{k}/7x7x1024/block-rm-{rows}rows", T(m, ROW_MAJOR), s, o,
                        attrs, BLOCK, k == 1)


def _conv(cid, x, s, o, attrs, kind, is_mm, *, output_layout=TILE_LAYOUT, dtype="bfloat16",
          act_block_h=0):
    cfg = {"shard_layout": kind, "act_block_h_override": act_block_h,
           "reshard_if_not_optimal": False, "override_sharding_config": False,
           "output_layout": output_layout, "dtype": dtype, "is_mm_conv": is_mm,
           "memory_config": None, "weights_dtype": "bfloat8_b"}
    out = R.output_layout("conv2d", [x], {**cfg, "in_channels": s.c, "out_shape": o.flat}, None,
                          [s.flat])
    out = replace(out, layout=output_layout, dtype=dtype)
    return Case(cid, "conv2d", [x], [s], o, out, attrs, cfg)


def pool_cases():
    s = TensorShape(1, 16, 16, 64)
    so = TensorShape(1, 8, 8, 64)
    for op in ("max_pool2d", "avg_pool2d", "global_avg_pool"):
        o = TensorShape(1, 1, 1, 64) if op == "global_avg_pool" else so
        attrs = {} if op == "global_avg_pool" else dict(kernel=(2, 2), stride=(2, 2),
                                                        padding=(0, 0, 0, 0), ceil_mode=False)
        if op == "max_pool2d":
            attrs["dilation"] = (1, 1)          # avg_pool2d has none (its typed attrs say so)
        for mk, m in memories(s.rows, s.c, TILE_LAYOUT, bad=False) + [_hdram(s)]:
            for layout in (TILE_LAYOUT, ROW_MAJOR):
                x = T(_fit(m, s.rows, s.c, layout), layout)
                schemes = [None] if m.sharded else [HEIGHT, WIDTH, BLOCK]
                for scheme in schemes:
                    for out_layout, dtype in ((ROW_MAJOR, "bfloat16"), (TILE_LAYOUT, "bfloat16"),
                                              (ROW_MAJOR, "bfloat8_b"), (TILE_LAYOUT, "bfloat8_b")):
                        if (out_layout, dtype) != (ROW_MAJOR, "bfloat16") and mk not in ("dram", "h8"):
                            continue
                        yield _pool(f"{op}/{mk}/{layout}/{scheme}/{out_layout}-{dtype}", op, x, s,
                                    o, attrs, scheme, out_layout, dtype)


def _pool(cid, op, x, s, o, attrs, scheme, out_layout, dtype):
    cfg = {"applied_shard_scheme": scheme, "output_layout": out_layout, "dtype": dtype,
           "out_shape": o.flat}
    out = R.output_layout(op, [x], {**cfg, "device_grid": (8, 8)}, None, [s.flat])
    return Case(cid, op, [x], [s], o, replace(out, dtype=dtype, layout=out_layout), attrs, cfg)


def linear_cases():
    s = TensorShape(1, 1, 32, 64)       # 32 rows (e.g. a pooled batch), 64 features
    o = TensorShape(1, 1, 32, 96)
    attrs = dict(in_features=64, out_features=96, bias=True, activation=None)
    for mk, m in memories(s.rows, s.c, TILE_LAYOUT, bad=False):
        for layout in (TILE_LAYOUT, ROW_MAJOR):
            for dtype in ("bfloat16", "bfloat8_b"):
                if dtype != "bfloat16" and (layout == ROW_MAJOR or mk not in ("dram", "l1")):
                    continue
                x = T(_fit(m, s.rows, s.c, layout), layout, dtype)
                out = T(L1)
                yield Case(f"linear/{mk}/{layout}/{dtype}", "linear", [x], [s], o, out, attrs,
                           {"dtype": "bfloat16", "memory_config": L1, "program_config": None,
                            "activation": None})


def matmul_conv_cases():
    """1x1 convs lowered to ttnn.linear with the matmul solver's program config (1D mcast in1 on
    height shards, 2D mcast on block shards), fed the config's in0 memory or something else."""
    from ttmodels.planning.matmul_solver import solve_node
    for s, cout in ((TensorShape(2, 16, 16, 64), 128), (TensorShape(1, 14, 14, 256), 256),
                    (TensorShape(1, 32, 32, 64), 64)):
        o = TensorShape(s.n, s.h, s.w, cout)
        attrs = dict(in_channels=s.c, out_channels=cout, kernel=(1, 1), stride=(1, 1),
                     padding=(0, 0, 0, 0), dilation=(1, 1), groups=1, bias=True, activation=None,
                     lowering="linear")
        cfg = solve_node(Node("n", "conv2d", ["x"], attrs, o), grid=(8, 8))
        other = (R.sharded_memspec(BLOCK, s.rows, s.c, grid=(2, 2)) if cfg.in0_memory.memory_layout
                 == HEIGHT else R.sharded_memspec(HEIGHT, s.rows, s.c, num_cores=8))
        for mk, m, layout in (("in0", cfg.in0_memory, TILE_LAYOUT), ("in0", cfg.in0_memory, ROW_MAJOR),
                              ("l1", L1, TILE_LAYOUT), ("dram", DRAM, TILE_LAYOUT),
                              ("other", other, TILE_LAYOUT)):
            x = T(_fit(m, s.rows, s.c, layout), layout)
            conf = {"lowering": "linear", "matmul": cfg.to_dict(), "is_mm_conv": True,
                    "output_layout": TILE_LAYOUT, "dtype": "bfloat16", "memory_config": None,
                    "weights_dtype": "bfloat8_b"}
            yield Case(f"conv2d/linear-{cfg.kind}/{s.n}x{s.h}x{s.w}x{s.c}/{mk}/{layout}", "conv2d",
                       [x], [s], o, T(cfg.out_memory), attrs, conf)


def upsample_cases():
    for s in (TensorShape(1, 8, 8, 64), TensorShape(1, 2, 32, 64)):
        yield from _upsample_cases(s, TensorShape(s.n, 2 * s.h, 2 * s.w, s.c))


def _upsample_cases(s, o):
    for mode in ("nearest", "bilinear"):
        for mk, m in memories(s.rows, s.c, TILE_LAYOUT, bad=False):
            for layout in (TILE_LAYOUT, ROW_MAJOR):
                for dtype in ("bfloat16", "bfloat8_b"):
                    if dtype == "bfloat8_b" and (layout == ROW_MAJOR or mk not in ("dram", "h8")):
                        continue
                    x = T(_fit(m, s.rows, s.c, layout), layout, dtype)
                    attrs = {"scale": (2, 2), "mode": mode}
                    out = R.output_layout("upsample", [x], {"mode": mode, "out_shape": o.flat},
                                          None, [s.flat])
                    yield Case(f"upsample/{s.h}x{s.w}/{mode}/{mk}/{layout}/{dtype}", "upsample", [x], [s], o,
                               out, attrs, {"mode": mode, "out_shape": o.flat,
                                                       "in_w": s.w})


def upsample_channel_cases():
    """Bilinear upsample of channels not a multiple of 32 (a segmentation head's 21 classes, an
    smp head's 1): ttnn's bilinear kernel refuses them; the plan's channel-padded form (pad_c:
    pad in DRAM, upsample, slice back into an interleaved output) runs from an interleaved
    ROW_MAJOR input."""
    for s in (TensorShape(1, 4, 4, 21), TensorShape(1, 4, 4, 1)):
        o = TensorShape(s.n, 2 * s.h, 2 * s.w, s.c)
        for mk, m in (("dram", DRAM), ("l1", L1), ("h2", _fit(R.sharded_memspec(
                HEIGHT, s.rows, s.c, num_cores=2), s.rows, s.c, ROW_MAJOR))):
            for layout in (ROW_MAJOR, TILE_LAYOUT):
                x = T(m, layout)
                base = {"mode": "bilinear", "out_shape": o.flat, "in_w": s.w}
                out = R.output_layout("upsample", [x], base, None, [s.flat])
                yield Case(f"upsample/c{s.c}/bilinear/{mk}/{layout}", "upsample", [x], [s], o, out,
                           {"scale": (2, 2), "mode": "bilinear"}, base)
                for buf in ("dram", "l1"):
                    mem = MemSpec(INTERLEAVED, buf)
                    conf = {**base, "pad_c": 32, "memory_config": mem}
                    out = R.output_layout("upsample", [x], conf, mem, [s.flat])
                    yield Case(f"upsample/c{s.c}/bilinear-pad32/{mk}/{layout}/out-{buf}",
                               "upsample", [x], [s], o, out, {"scale": (2, 2), "mode": "bilinear"},
                               conf)


def concat_cases():
    s1, s2 = TensorShape(1, 8, 8, 64), TensorShape(1, 8, 8, 32)
    o = TensorShape(1, 8, 8, 96)
    for layout in (TILE_LAYOUT, ROW_MAJOR):
        m1s = memories(s1.rows, s1.c, layout, bad=False)
        m2s = dict(memories(s2.rows, s2.c, layout, bad=False))
        for mk, m1 in m1s:
            for k2 in dict.fromkeys((mk, "dram", "h8", "h2")):
                m2 = m2s.get(k2)
                if m2 is None:
                    continue
                a, b = T(_fit(m1, s1.rows, s1.c, layout), layout), T(m2, layout)
                out = R.output_layout("concat", [a, b], {"out_shape": o.flat}, None,
                                      [s1.flat, s2.flat])
                yield Case(f"concat/{mk}+{k2}/{layout}", "concat", [a, b], [s1, s2], o, out, {},
                           {"dim": -1})
    a, b = T(L1), T(L1, dtype="bfloat8_b")
    yield Case("concat/l1+l1/bf16+bf8", "concat", [a, b], [s1, s2], o, T(L1), {}, {"dim": -1})
    a, b = T(L1), T(L1, ROW_MAJOR)
    yield Case("concat/l1+l1/tile+rm", "concat", [a, b], [s1, s2], o, T(L1), {}, {"dim": -1})
    yield from concat_align_cases()


def concat_align_cases():
    """Issue 21: sharded channel concats of channel counts that are not multiples of 32
    (concat.shard_align), and sharded inputs of mixed layouts (concat.same_layout)."""
    for (c1, c2), layout in itertools.product(((24, 24), (58, 58), (48, 16), (80, 16), (92, 24)),
                                              (TILE_LAYOUT, ROW_MAJOR)):
        s1, s2, o = TensorShape(1, 16, 16, c1), TensorShape(1, 16, 16, c2), \
            TensorShape(1, 16, 16, c1 + c2)
        for mk, kind in (("h8", HEIGHT), ("b1x2", BLOCK)):
            if kind == HEIGHT:
                m1, m2 = (_fit(R.sharded_memspec(HEIGHT, s.rows, s.c, num_cores=8), s.rows, s.c,
                               layout) for s in (s1, s2))
            else:
                m1, m2 = (R.sharded_memspec(BLOCK, s.rows, s.c, grid=(1, 2)) for s in (s1, s2))
            a, b = T(m1, layout), T(m2, layout)
            out = R.output_layout("concat", [a, b], {"out_shape": o.flat}, None, [s1.flat, s2.flat])
            yield Case(f"concat/align/{mk}/{c1}+{c2}/{layout}", "concat", [a, b], [s1, s2], o, out,
                       {}, {"dim": -1})
    s = TensorShape(1, 16, 16, 64)
    o = TensorShape(1, 16, 16, 128)
    for l1, l2 in ((ROW_MAJOR, TILE_LAYOUT), (TILE_LAYOUT, ROW_MAJOR)):
        a, b = (T(_fit(R.sharded_memspec(HEIGHT, s.rows, s.c, num_cores=8), s.rows, s.c, lay), lay)
                for lay in (l1, l2))
        out = R.output_layout("concat", [a, b], {"out_shape": o.flat}, None, [s.flat, s.flat])
        yield Case(f"concat/h8+h8/{l1}+{l2}", "concat", [a, b], [s, s], o, out, {}, {"dim": -1})


def pad_cases():
    s = TensorShape(1, 8, 8, 32)
    o = TensorShape(1, 10, 10, 32)
    attrs = {"padding": (1, 1, 1, 1), "value": 0.0}
    for mk, m in memories(s.rows, s.c, TILE_LAYOUT, bad=False):
        for layout in (TILE_LAYOUT, ROW_MAJOR):
            x = T(_fit(m, s.rows, s.c, layout), layout)
            for refit in (False, True):
                if refit and not m.sharded:
                    continue
                req = R.reshape_memspec(x.memory, o.rows, o.c, layout) if refit else None
                out = R.output_layout("pad", [x], {"out_shape": o.flat}, req, [s.flat])
                yield Case(f"pad/{mk}/{layout}/{'refit' if refit else 'keep'}", "pad", [x], [s],
                           o, out, attrs, {"padding": attrs["padding"], "value": 0.0,
                                           "memory_config": req, "out_shape": o.flat})


def adapter_cases():
    s = TensorShape(1, 16, 16, 64)
    rows, c = s.rows, s.c
    sh = {k: m for k, m in memories(rows, c, TILE_LAYOUT, bad=False) if m.sharded}
    inter = {"dram": DRAM, "l1": L1}
    bad_h = replace(sh["h8"], shard_shape=(16, 64))
    for layout in (TILE_LAYOUT, ROW_MAJOR):
        fit = {k: _fit(m, rows, c, layout) for k, m in sh.items()}
        for (sk, sm), (ik, im) in itertools.product(fit.items(), inter.items()):
            yield _adapter(f"s2i/{sk}->{ik}/{layout}", "sharded_to_interleaved",
                           T(sm, layout), T(im, layout), s)
            yield _adapter(f"i2s/{ik}->{sk}/{layout}", "interleaved_to_sharded",
                           T(im, layout), T(sm, layout), s)
            yield _adapter(f"tmc/{sk}->{ik}/{layout}", "to_memory_config", T(sm, layout),
                           T(im, layout), s)
            yield _adapter(f"tmc/{ik}->{sk}/{layout}", "to_memory_config", T(im, layout),
                           T(sm, layout), s)
        for (k1, m1), (k2, m2) in itertools.permutations(fit.items(), 2):
            if layout == ROW_MAJOR and k1[0] != k2[0]:
                continue
            yield _adapter(f"reshard/{k1}->{k2}/{layout}", "reshard", T(m1, layout),
                           T(m2, layout), s)
        yield _adapter(f"s2i/dram->l1/{layout}", "sharded_to_interleaved", T(DRAM, layout),
                       T(L1, layout), s)
        yield _adapter(f"i2s/h8->h4/{layout}", "interleaved_to_sharded", T(fit["h8"], layout),
                       T(fit.get("h2"), layout), s)
        yield _adapter(f"reshard/l1->h8/{layout}", "reshard", T(L1, layout),
                       T(fit["h8"], layout), s)
    yield _adapter("i2s/l1->h8-badshard/tile", "interleaved_to_sharded", T(L1), T(bad_h), s)
    yield _adapter("reshard/h8->b2x2/tile/to-bf8", "reshard", T(sh["h8"]),
                   T(sh["b2x2"], dtype="bfloat8_b"), s)
    for dt_in, dt_out in (("bfloat16", "bfloat8_b"), ("bfloat8_b", "bfloat16"),
                          ("bfloat16", "float32")):
        for mk, m in (("dram", DRAM), ("l1", L1), ("h8", sh["h8"]), ("b2x2", sh["b2x2"])):
            yield _adapter(f"s2i/{mk}->l1/{dt_in}->{dt_out}", "sharded_to_interleaved",
                           T(m, dtype=dt_in), T(L1, dtype=dt_out), s)
            yield _adapter(f"i2s/l1->{mk}/{dt_in}->{dt_out}", "interleaved_to_sharded",
                           T(L1, dtype=dt_in), T(m, dtype=dt_out), s)
            yield _adapter(f"tmc/l1->{mk}/{dt_in}->{dt_out}", "to_memory_config",
                           T(L1, dtype=dt_in), T(m, dtype=dt_out), s)
            yield _adapter(f"typecast/{mk}/{dt_in}->{dt_out}", "typecast", T(m, dtype=dt_in),
                           T(m, dtype=dt_out), s)
        yield _adapter(f"tmc/l1->l1/rm/{dt_in}->{dt_out}", "to_memory_config",
                       T(L1, ROW_MAJOR, "bfloat16"), T(L1, ROW_MAJOR, dt_out), s)
    # typecast that also moves (memory layout changes), row-major typecast
    yield _adapter("typecast/h8->l1/bf16->bf8", "typecast", T(sh["h8"]), T(L1, dtype="bfloat8_b"), s)
    yield _adapter("typecast/l1/rm/bf16->bf8", "typecast", T(L1, ROW_MAJOR), T(L1, ROW_MAJOR, "bfloat8_b"), s)
    yield _adapter("typecast/l1/rm/bf16->f32", "typecast", T(L1, ROW_MAJOR), T(L1, ROW_MAJOR, "float32"), s)
    # to_layout, both directions, interleaved and sharded, with dtype changes
    for mk, m in (("dram", DRAM), ("l1", L1), ("h8", sh["h8"]), ("w2", sh["w2"]), ("b2x2", sh["b2x2"])):
        mt, mr = _fit(m, rows, c, TILE_LAYOUT), _fit(m, rows, c, ROW_MAJOR)
        yield _adapter(f"to_layout/{mk}/tile->rm", "to_layout", T(mt), T(mr, ROW_MAJOR), s)
        yield _adapter(f"to_layout/{mk}/rm->tile", "to_layout", T(mr, ROW_MAJOR), T(mt), s)
        yield _adapter(f"to_layout/{mk}/rm->tile-bf8", "to_layout", T(mr, ROW_MAJOR),
                       T(mt, dtype="bfloat8_b"), s)
        yield _adapter(f"to_layout/{mk}/tile-bf8->rm-bf16", "to_layout", T(mt, dtype="bfloat8_b"),
                       T(mr, ROW_MAJOR), s)
        yield _adapter(f"to_layout/{mk}/tile->rm-bf8", "to_layout", T(mt), T(mr, ROW_MAJOR, "bfloat8_b"), s)


def issue23_cases():
    """layer_norm (interleaved, height / width / block shards: a height-sharded input is
    refused), layer_scale (x * a [1, 1, 1, C] constant), softmax, and the reshape/permute
    lowerings of flatten, reshape, permute and channel_shuffle (on interleaved inputs, as
    planned)."""
    s = SHAPES["even"]
    mems = dict(memories(s.rows, s.c, TILE_LAYOUT, bad=False))
    for mk in ("dram", "l1", "h8", "w2", "b2x2"):
        x = T(mems[mk])
        cfg = {"constant_memory": DRAM, "constant_dtype": "bfloat16"}
        yield Case(f"layer_norm/{mk}", "layer_norm", [x], [s], s,
                   R.output_layout("layer_norm", [x], {}, None, [s.flat]),
                   {"eps": 1e-6, "affine": True}, cfg)
        yield Case(f"softmax/{mk}", "softmax", [x], [s], s,
                   R.output_layout("softmax", [x], {}, None, [s.flat]))
    for mk, ck in itertools.product(("l1", "dram", "h8"), ("l1", "dram")):
        x, cm = T(mems[mk]), {"l1": L1, "dram": DRAM}[ck]
        out = R.output_layout("layer_scale", [x, T(cm)], {"dtype": "bfloat16",
                                                          "out_shape": s.flat}, None,
                              [s.flat, (1, 1, 1, s.c)])
        yield Case(f"layer_scale/{mk}/const-{ck}", "layer_scale", [x], [s], s, out,
                   {"param_shape": "vector"},
                   {"dtype": "bfloat16", "constant_memory": cm, "constant_dtype": "bfloat16"})
    reshapes = (("flatten", {}, TensorShape(s.n, 1, 1, s.c * s.h * s.w)),
                ("reshape", {"shape": (32, 32, 16)}, TensorShape(s.n, 32, 16, 32)),
                ("permute", {"dims": (0, 2, 3, 1)}, TensorShape(s.n, s.w, s.c, s.h)),
                ("channel_shuffle", {"groups": 4}, s))
    for (op, attrs, o), mk in itertools.product(reshapes, ("l1", "dram")):
        x = T(mems[mk])
        yield Case(f"{op}/{mk}", op, [x], [s], o,
                   R.output_layout(op, [x], {}, None, [s.flat]), attrs)


def group_norm_cases():
    """group_norm (issue 34) as its layer calls it (interleaved input, the DRAM grid helper's
    core grid, inplace=False, the input's memory config): interleaved L1/DRAM, height / width /
    block shards (refused), bfloat16 / float32 (with fp32 accumulation only) / bfloat8_b
    (refused), C a multiple of 32 and of
    the groups or not (refused), batch 2 (reshaped to [N, 1, H*W, C])."""
    even, odd = SHAPES["even"], SHAPES["odd"]
    b2 = TensorShape(2, 8, 8, 64)
    mems = dict(memories(even.rows, even.c, TILE_LAYOUT, bad=False))
    cfg = {"constant_memory": DRAM, "constant_dtype": "bfloat16"}
    for (sk, s, g), mk, dtype in itertools.product(
            (("even", even, 32), ("odd", odd, 16), ("b2", b2, 8)),
            ("dram", "l1", "h8", "w2", "b2x2"), ("bfloat16", "float32", "bfloat8_b")):
        if sk != "even" and (mk not in ("dram", "l1") or dtype != "bfloat16"):
            continue
        m = mems[mk] if sk == "even" else {"dram": DRAM, "l1": L1}[mk]
        x = T(m, dtype=dtype)
        for acc in ((False, True) if dtype == "float32" and mk in ("dram", "l1") else (False,)):
            yield Case(f"group_norm/{sk}/g{g}/{mk}/{dtype}" + ("/fp32acc" if acc else ""),
                       "group_norm", [x], [s], s,
                       R.output_layout("group_norm", [x], {}, m, [s.flat]),
                       {"groups": g, "eps": 1e-5, "affine": True},
                       dict(cfg, num_groups=g, memory_config=m, fp32_dest_acc_en=acc),
                       Precision(activations=dtype, fp32_accum=acc))


def grn_cases():
    """grn (issue 34), the composition its layer runs (sum over H*W, sqrt, mean over C, divide,
    broadcast multiply/add): interleaved L1/DRAM and height-sharded TILE inputs in bfloat16 /
    bfloat8_b / float32, a row-major one (tilized first by the planner), batch 2."""
    s, b2 = SHAPES["even"], TensorShape(2, 8, 8, 64)
    mems = dict(memories(s.rows, s.c, TILE_LAYOUT, bad=False))
    cfg = {"constant_memory": L1, "constant_dtype": "bfloat16"}
    for (sk, sh), mk, dtype, lay in itertools.product(
            (("even", s), ("b2", b2)), ("dram", "l1", "h8"), ("bfloat16", "bfloat8_b", "float32"),
            (TILE_LAYOUT, ROW_MAJOR)):
        if (sk == "b2" or lay == ROW_MAJOR) and (mk != "l1" or dtype != "bfloat16"):
            continue
        m = mems[mk] if sk == "even" else L1
        x = T(m, lay, dtype)
        yield Case(f"grn/{sk}/{mk}/{lay}/{dtype}", "grn", [x], [sh], sh,
                   R.output_layout("grn", [x], {}, m, [sh.flat]), {"eps": 1e-6},
                   dict(cfg, memory_config=m))


def _adapter(cid, kind, before, after, s):
    return Case(cid, kind, [before], [s], s, after)


def pool_rm_width_cases():
    """ROW_MAJOR pool outputs of channels that are not a multiple of cores_c * 16 (issue 34,
    ghostnetv2_100's DFC avg pool: 80 channels on 2 block columns, a 64-wide output shard):
    ROW_MAJOR input shards as narrow as the channels allow (8-element aligned), every sharding
    kind; ``ops.pool.sharding.row_major_shard_width`` is the rule. tests/test_import_pool_rule.py
    also compares ttnn's output shard with the planned one on these cases."""
    s, o = TensorShape(1, 8, 8, 0), TensorShape(1, 4, 4, 0)
    attrs = dict(kernel=(2, 2), stride=(2, 2), padding=(0, 0, 0, 0), ceil_mode=False)
    for op, kind, c, nc in (("avg_pool2d", BLOCK, 80, 2), ("max_pool2d", BLOCK, 80, 2),
                            ("avg_pool2d", BLOCK, 144, 4), ("avg_pool2d", BLOCK, 24, 2),
                            ("avg_pool2d", BLOCK, 96, 2), ("avg_pool2d", WIDTH, 72, 2),
                            ("avg_pool2d", HEIGHT, 40, 2), ("max_pool2d", HEIGHT, 200, 2)):
        si, so = replace(s, c=c), replace(o, c=c)
        sw = c if kind == HEIGHT else -(-(-(-c // nc)) // 8) * 8
        grid = (nc, 2) if kind == BLOCK else (nc, 1)
        sh = si.rows // (grid[1] if kind == BLOCK else 1 if kind == WIDTH else nc)
        x = T(MemSpec(kind, "l1", grid, grid[0] * grid[1], (sh, sw)), ROW_MAJOR)
        a = dict(attrs, dilation=(1, 1)) if op == "max_pool2d" else attrs
        yield _pool(f"{op}/rm-width/{kind}/c{c}x{nc}", op, x, si, so, a, None, ROW_MAJOR,
                    "bfloat16")


GENERATORS = (relu_cases, unary_cases, batch_norm_cases, slice_cases, split_cases,
              conv_transpose_cases, adaptive_pool_cases,
              binary_cases, conv_cases, matmul_conv_cases, pool_cases, linear_cases, upsample_cases,
              upsample_channel_cases,
              concat_cases, pad_cases, adapter_cases, issue23_cases, group_norm_cases,
              grn_cases, pool_rm_width_cases)


def cases() -> list[Case]:
    out = [c for gen in GENERATORS for c in gen()]
    ids = [c.id for c in out]
    dup = {i for i in ids if ids.count(i) > 1}
    assert not dup, f"duplicate case ids {sorted(dup)[:5]}"
    return out


# ---------------------------------------------------------------------------------------------
# ttnn's verdict
# ---------------------------------------------------------------------------------------------

@dataclass
class TtnnVerdict:
    accepted: bool                 # ttnn ran it and gave the asked-for dtype
    error: str | None = None
    location: str | None = None
    stage: str = "op"              # "input" (creating the input tensor failed), "op", "dtype"
    memory: str | None = None      # ttnn's output memory config (for information)


def _params(case: Case):
    import torch
    if case.op == "conv2d":
        a = case.attrs
        k = a["kernel"]
        return {"weight": torch.zeros(a["out_channels"], a["in_channels"] // a.get("groups", 1), *k),
                "bias": torch.zeros(a["out_channels"])}
    if case.op == "conv_transpose2d":
        a = case.attrs
        return {"weight": torch.zeros(a["in_channels"], a["out_channels"] // a["groups"],
                                      *a["kernel"]), "bias": torch.zeros(a["out_channels"])}
    if case.op == "batch_norm":
        c = case.out_shape.c
        return {"scale": torch.full((c,), 0.5), "shift": torch.zeros(c)}
    if case.op in ("layer_norm", "group_norm", "grn"):
        c = case.out_shape.c
        return {"weight": torch.ones(c), "bias": torch.zeros(c)}
    if case.op == "layer_scale":
        return {"scale": torch.full((case.out_shape.c,), 0.5)}
    if case.op == "linear":
        return {"weight": torch.zeros(case.attrs["out_features"], case.attrs["in_features"]),
                "bias": torch.zeros(case.attrs["out_features"])}
    return None


def ttnn_verdict(case: Case, tt, dev) -> TtnnVerdict:
    """Run ``case`` through the project's own layer/adapter code on the open mock device."""
    import torch

    from ttmodels.backends import Backend, common
    from ttmodels.runtime.layers import AdapterLayer, make_layer
    from ttmodels.tools.verify import split_error, ttnn_memory_key, describe_key

    be = Backend("ttnn-mock", tt, dev, {})
    stage = "input"
    tt.graph.begin_graph_capture(tt.graph.RunMode.NO_DISPATCH)
    try:
        xs = [tt.from_torch(torch.zeros(list(s.flat)), dtype=common.data_type(tt, t.dtype),
                            layout=common.layout(tt, t.layout), device=dev,
                            memory_config=common.memory_config(tt, t.memory))
              for t, s in zip(case.inputs, case.in_shapes)]
        stage = "op"
        if case.adapter:
            ad = Adapter("x", "y", 0, case.op, case.inputs[0], case.output, "corpus")
            out = AdapterLayer(ad, be)(xs[0])
        else:
            node = Node("n", case.op, [f"i{i}" for i in range(len(xs))], dict(case.attrs),
                        case.out_shape, precision=case.precision)
            pl = PlannedLayer(node, list(case.inputs), case.output, 0, dict(case.config))
            layer = make_layer(pl, _params(case), be, input_shapes=list(case.in_shapes))
            out = layer(xs if case.op in R.BINARY + ("concat",) else [xs[0]])
            if isinstance(out, tuple):       # split: every output must be what was asked
                out = out[-1]
    except Exception as e:        # ttnn's TT_FATAL / TT_THROW (or a host-side type error)
        msg, loc = split_error(e)
        return TtnnVerdict(False, msg, loc, stage)
    finally:
        tt.graph.end_graph_capture()
    got = str(out.dtype).split(".")[-1].split("::")[-1].lower()
    mem = describe_key(ttnn_memory_key(out.memory_config()))
    if got != case.output.dtype:
        return TtnnVerdict(False, f"output dtype {got}, asked {case.output.dtype}", None, "dtype",
                           mem)
    return TtnnVerdict(True, memory=mem)


@dataclass
class Outcome:
    case: Case
    violations: list[R.Violation]
    ttnn: TtnnVerdict

    @property
    def rules_accept(self) -> bool:
        return not self.violations

    @property
    def agree(self) -> bool:
        return self.rules_accept == self.ttnn.accepted

    def describe(self) -> str:
        r = "accept" if self.rules_accept else ",".join(sorted({v.rule for v in self.violations}))
        t = "accept" if self.ttnn.accepted else f"reject[{self.ttnn.stage}] {self.ttnn.error}" + (
            f" ({self.ttnn.location})" if self.ttnn.location else "")
        return f"{self.case.id}: rules {r} | ttnn {t}"


# Cases on which ttnn 0.81.1 crashes the process (segfault in C++) instead of raising: not run,
# counted as rejected. bilinear upsample of a TILE input on 2 height shards: SIGSEGV in
# sliding_window::generate_halo_kernel_config_tensors (UntilizeWithHaloProgramFactory).
CRASHES = {"upsample/8x8/bilinear/h2/tile/bfloat16": "SIGSEGV in sliding_window::"
           "generate_halo_kernel_config_tensors (UntilizeWithHaloProgramFactory)"}


def run_corpus(tt, dev, selected: list[Case] | None = None, *, progress=None) -> list[Outcome]:
    out = []
    for c in (selected if selected is not None else cases()):
        if progress is not None:
            print(c.id, file=progress, flush=True)
        v = TtnnVerdict(False, CRASHES[c.id], None, "crash") if c.id in CRASHES else \
            ttnn_verdict(c, tt, dev)
        out.append(Outcome(c, c.rule_violations(), v))
    return out


# ---------------------------------------------------------------------------------------------
# the planner tests' graphs, planned with adapters disabled
# ---------------------------------------------------------------------------------------------

def planner_graphs(*, big: bool = False):
    """(id, Graph) for the graphs of tests/test_planner.py and tests/test_plan_sim.py that plan
    with adapters disabled (graphs whose planning raises, e.g. over budget, are left out: there is
    no plan to judge). ``big`` adds the shipped models (minutes, not for CI)."""
    import test_plan_sim as ps
    import test_planner as tp

    from ttmodels.language.graph import Graph, LayoutPolicy
    from ttmodels.language.spec import load_graph

    out = [("field_report", tp.field_report_graph())]
    g = tp.field_report_graph()
    g.nodes[2].inputs = ["gamma", "conv1"]
    out.append(("field_report_swapped", g))
    out.append(("conv_maxpool", Graph("cp", {"x": TensorShape(1, 112, 112, 64)}, [
        tp.conv("c", "x", TensorShape(1, 112, 112, 64), 64, 64, 3),
        Node("mp", "max_pool2d", ["c"], dict(kernel=(3, 3), stride=(2, 2), padding=(1, 1, 1, 1),
                                             dilation=(1, 1), ceil_mode=False),
             TensorShape(1, 56, 56, 64))], {}, ["mp"])))
    out.append(("residual_bf8", tp.residual_graph("bfloat8_b")))
    g = tp.residual_graph("bfloat16")
    g.nodes[0].precision = Precision(activations="bfloat8_b")
    out.append(("residual_a_bf8", g))
    out.append(("residual", tp.residual_graph()))
    for shape, k in (((1, 112, 112, 64, 64), 3), ((1, 56, 56, 64, 256), 1),
                     ((1, 14, 14, 1024, 256), 1), ((1, 7, 7, 2048, 512), 1),
                     ((16, 7, 7, 512, 512), 3), ((1, 28, 28, 512, 512), 3)):
        out.append((f"one_conv_{'x'.join(map(str, shape))}_k{k}", tp.one_conv(*shape, k)))
    out.append(("backbone", tp.backbone()))
    out.append(("big_residual", tp.big_residual()))
    out.append(("big_residual_reader", tp.big_residual(extra_reader="ca")))
    small = tp.big_residual()
    for n in small.nodes:
        n.shape = TensorShape(1, 64, 176, n.shape.c)
    small.inputs["x"] = TensorShape(1, 64, 176, 64)
    out.append(("small_residual", small))
    for key in sorted(ps.SMALL):
        out.append((f"small_{key}", load_graph(ps.SMALL[key], batch_size=2)))
    out.append(("stem_b1", load_graph(ps.STEM, batch_size=1)))
    out.append(("stem_b6", load_graph(ps.STEM, batch_size=6)))
    for cout in (8, 24, 40):
        spec = {"name": "pc", "inputs": {"x": {"channels": 3, "size": [16, 16]}},
                "layers": [{"name": "c1", "op": "conv2d", "out": cout, "kernel": 3, "padding": 1},
                           {"name": "mp", "op": "max_pool2d", "kernel": 2, "stride": 2},
                           {"name": "c2", "op": "conv2d", "out": 16, "kernel": 3, "padding": 1}]}
        out.append((f"pool_c{cout}", load_graph(spec, batch_size=1)))
    if big:
        out.append(("sliced_1024", tp.one_conv(1, 1024, 1024, 256, 256, 3)))
        for name, batch, size in ps.SHIPPED:
            out.append((f"{name}_b{batch}" + (f"_{size[0]}x{size[1]}" if size else ""),
                        load_graph(name, batch_size=batch, input_size=size)))
    _ = LayoutPolicy
    return out


@dataclass
class PlanOutcome:
    id: str
    violations: list[R.Violation]
    accepted: bool
    error: str | None

    @property
    def rules_accept(self) -> bool:
        return not self.violations

    @property
    def agree(self) -> bool:
        return self.rules_accept == self.accepted

    def describe(self) -> str:
        r = "accept" if self.rules_accept else ",".join(sorted({v.rule for v in self.violations}))
        return f"{self.id}: rules {r} | ttnn {'accept' if self.accepted else 'reject ' + str(self.error)}"


def run_planner_graphs(tt, dev, graphs=None, *, progress=None) -> list[PlanOutcome]:
    """Each graph planned with adapters=False; per layer, check_plan's verdict against ttnn's
    acceptance through ``ttmodels.tools.verify`` (and the planned dtype, as for the corpus)."""
    from ttmodels.errors import LayoutError
    from ttmodels.planning.planner import plan_graph
    from ttmodels.planning.plan_checks import check_plan
    from ttmodels.tools.verify import verify

    out = []
    for gid, g in (graphs if graphs is not None else planner_graphs()):
        if progress is not None:
            print(gid, file=progress, flush=True)
        for n in g.nodes:                 # graphs built in code name no weights keys
            if n.op in ("conv2d", "linear") and not n.weights:
                n.weights = n.name
        try:
            plan = plan_graph(g, adapters=False)
        except LayoutError:
            continue                      # nothing to judge (e.g. over budget)
        bad: dict[str, list[R.Violation]] = {}
        for name, v in check_plan(plan):
            bad.setdefault(name, []).append(v)
        # the rules judge validation, not where buffers land: the NO_DISPATCH check (allocation
        # mocked) is that verdict, at half the cost of a real run with its diagnostics
        report = verify(None, plan=plan, device=(tt, dev), adapters=False, real=False)
        for s in report.layers:
            if any(v.rule.startswith("tensor.") and " input " in v.message
                   for v in bad.get(s.name, [])):
                # an input the plan gives cannot exist as a tensor (its producer is rejected
                # for it): verify feeds a DRAM stand-in, so ttnn never sees the planned input
                continue
            ok = s.accepted and (s.ttnn_layout or "").split()[-1:] == s.planned_layout.split()[-1:]
            err = s.error if not s.accepted else (None if ok else
                                                  f"output {s.ttnn_layout}, planned {s.planned_layout}")
            out.append(PlanOutcome(f"plan/{gid}/{s.name}", bad.get(s.name, []), ok, err))
    return out


if __name__ == "__main__":     # python tests/rules_corpus.py [substring]: the agreement table
    import sys
    import time

    from ttmodels.backends import mock_device
    mock_device.prepare("n150")
    t0 = time.time()
    tt, dev = mock_device.open_device("n150", l1_small_size=32768)
    pat = [a for a in sys.argv[1:] if not a.startswith("-")]
    sel = [c for c in cases() if not pat or any(c.id.startswith(p) for p in pat)]
    prog = open("/dev/stderr", "w") if "-v" in sys.argv else None
    try:
        outs = [] if "--plans-only" in sys.argv else run_corpus(tt, dev, sel, progress=prog)
        if "--plans" in sys.argv or "--plans-only" in sys.argv:
            sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
            outs += run_planner_graphs(tt, dev, planner_graphs(big="--big" in sys.argv),
                                       progress=prog)
    finally:
        tt.close_device(dev)
    bad = [o for o in outs if not o.agree]
    for o in (outs if "-a" in sys.argv else bad):
        print("AGREE   " if o.agree else "DISAGREE", o.describe())
    print(f"{len(outs) - len(bad)}/{len(outs)} agree ({100 * (len(outs) - len(bad)) / len(outs):.1f} %)"
          f" in {time.time() - t0:.0f} s")
