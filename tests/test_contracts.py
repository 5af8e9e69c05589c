"""The layers' ttnn calls and config objects against the real ttnn 0.81.1 API (no card needed).

(a) Every ``tt.*`` call the layers make while running a multi-layer graph binds to the real ttnn
    op's signature (``__nb_signature__`` overloads for nanobind ops/classes, ``inspect.signature``
    for Python-level functions): every keyword exists, every required argument is given.
(b) Every config object the ttnn backend would build (MemoryConfig, ShardSpec, CoreRangeSet,
    Conv2dConfig, WormholeComputeKernelConfig, matmul program configs) is constructed from the
    real ttnn classes: the layers run on ``RealTypes`` = the real ttnn module with its *ops*
    replaced by stubs that check their arguments against the real signatures.
"""
from __future__ import annotations

import ast
import inspect
import re

import pytest
import torch

import ttnn  # noqa: E402  (a pinned dependency: a broken import must fail, not skip)

from ttmodels.ops.activations import ACTIVATIONS  # noqa: E402
from ttmodels.backends import Backend, Call, common  # noqa: E402
from ttmodels.language.graph import Constant, Graph, Node, Precision, TensorShape  # noqa: E402
from ttmodels.runtime.layers import AdapterLayer, conv2d_config, make_layer  # noqa: E402
from ttmodels.planning.layout import (BLOCK, DRAM_INTERLEAVED, HEIGHT, L1_INTERLEAVED, WIDTH,  # noqa: E402
                             MemSpec, TensorLayout)
from ttmodels.planning.plans import Adapter, PlannedLayer  # noqa: E402
from ttmodels.runtime.executor import Executor  # noqa: E402

S = TensorShape


# ================================================================================================
# Real signatures
# ================================================================================================

def _parse_nb(text: str) -> inspect.Signature:
    """An inspect.Signature from one nanobind signature string ('def f(a: T, *, b: U = \\0)')."""
    s = re.sub(r"\\(\d+)", "None", text)
    s = s.replace("\\*", "*")
    if ") -> " in s:
        s = s.rsplit(") -> ", 1)[0] + ")"
    fn = ast.parse(s + ":\n    pass").body[0]
    a = fn.args
    P = inspect.Parameter
    params = []
    pos = [(x, P.POSITIONAL_ONLY) for x in a.posonlyargs] + [(x, P.POSITIONAL_OR_KEYWORD)
                                                              for x in a.args]
    defaults = [None] * (len(pos) - len(a.defaults)) + list(a.defaults)
    for (arg, kind), d in zip(pos, defaults):
        params.append(P(arg.arg, kind, default=P.empty if d is None else "<default>"))
    if a.vararg:
        params.append(P(a.vararg.arg, P.VAR_POSITIONAL))
    for arg, d in zip(a.kwonlyargs, a.kw_defaults):
        params.append(P(arg.arg, P.KEYWORD_ONLY, default=P.empty if d is None else "<default>"))
    if a.kwarg:
        params.append(P(a.kwarg.arg, P.VAR_KEYWORD))
    if params and params[0].name == "self":
        params = params[1:]
    return inspect.Signature(params)


# Python-level ttnn functions that only forward (*args, **kwargs) to a nanobind function.
_FORWARDED = {"prepare_grid_sample_grid": lambda: ttnn._ttnn.operations.pool.prepare_grid_sample_grid,
              "prepare_conv_transpose2d_weights":
                  lambda: ttnn._ttnn.operations.conv.prepare_conv_transpose2d_weights,
              "prepare_conv_transpose2d_bias":
                  lambda: ttnn._ttnn.operations.conv.prepare_conv_transpose2d_bias}


def real_signatures(name: str) -> list[inspect.Signature]:
    obj = _FORWARDED[name]() if name in _FORWARDED else getattr(ttnn, name)
    if isinstance(obj, type):
        return [_parse_nb(o[0]) for o in obj.__init__.__nb_signature__]
    target = getattr(obj, "function", obj)
    nb = getattr(target, "__nb_signature__", None) or \
        getattr(type(target).__call__, "__nb_signature__", None)
    if nb:
        return [_parse_nb(o[0]) for o in nb]
    return [inspect.signature(target)]


def bind_error(name: str, args: tuple, kwargs: dict) -> str | None:
    """None when (args, kwargs) binds to some overload of real ``ttnn.<name>``, else why not."""
    if not hasattr(ttnn, name):
        return f"ttnn has no attribute {name!r}"
    errors = []
    for sig in real_signatures(name):
        try:
            sig.bind(*args, **kwargs)
            return None
        except TypeError as e:
            errors.append(f"{sig}: {e}")
    return f"ttnn.{name}({len(args)} positional, kwargs {sorted(kwargs)}) binds to no overload: " \
        + " | ".join(errors)


def test_signature_parser_reads_real_ops():
    conv = real_signatures("conv2d")[0]
    assert conv.parameters["input_tensor"].kind is inspect.Parameter.KEYWORD_ONLY
    assert conv.parameters["input_tensor"].default is inspect.Parameter.empty
    assert conv.parameters["return_weights_and_bias"].default != inspect.Parameter.empty
    assert len(real_signatures("add")) == 3
    assert "sharded_memory_config" in real_signatures("interleaved_to_sharded")[1].parameters
    assert "dtype" in real_signatures("global_avg_pool2d")[0].parameters   # Python-level function
    # A wrong keyword and a missing required argument are both caught.
    assert bind_error("relu", (object(),), {"dtype": 1}) is not None
    assert bind_error("max_pool2d", (), {"input_tensor": object()}) is not None
    assert bind_error("relu", (object(),), {"memory_config": None}) is None
    assert bind_error("MemoryConfig", (1, 2, 3), {}) is None
    assert bind_error("UnaryWithParam", (), {"arg": 1}) is not None   # positional only


# ================================================================================================
# RealTypes: real ttnn classes/enums/config builders, stubbed ops
# ================================================================================================

class FakeTensor:
    def __init__(self, shape=None, what=""):
        self.shape, self.what = shape, what

    def __repr__(self):
        return f"FakeTensor({self.what})"


class FakeDevice:
    def arch(self):
        return ttnn.device.Arch.WORMHOLE_B0

    def compute_with_storage_grid_size(self):
        return ttnn.CoreCoord(8, 8)


_OPS = {"conv2d", "max_pool2d", "avg_pool2d", "global_avg_pool2d", "add", "multiply", "relu",
        "linear", "matmul", "upsample", "concat", "pad", "to_memory_config",
        "sharded_to_interleaved", "interleaved_to_sharded", "reshard", "to_layout", "typecast",
        "deallocate", "from_torch", "to_torch", "reshape", "to_device", "from_device",
        "open_device", "close_device", "synchronize_device", "copy_host_to_device_tensor",
        "begin_trace_capture", "end_trace_capture", "execute_trace", "release_trace",
        "prepare_conv_weights", "prepare_conv_bias", "subtract", "relu6", "leaky_relu", "sigmoid",
        "hardsigmoid", "hardswish", "silu", "gelu", "tanh", "identity", "slice",
        "adaptive_avg_pool2d", "grid_sample", "prepare_grid_sample_grid", "conv_transpose2d",
        "prepare_conv_transpose2d_weights", "prepare_conv_transpose2d_bias", "layer_norm",
        "softmax", "permute"}
# every row of the activation table enrols its standalone op
_OPS |= {d.ttnn_function for d in ACTIVATIONS.values()}
# Host-side builders that run for real (they need no device).
_REAL_FUNCTIONS = {"init_device_compute_kernel_config", "num_cores_to_corerangeset",
                   "create_sharded_memory_config"}


class RealTypes:
    """``tt`` for the layers: attribute access gives the real ttnn object, except that ops are
    stubs which check their arguments against the real signature, record the call and return
    FakeTensors."""

    def __init__(self):
        self.calls: list[Call] = []

    def __getattr__(self, name):
        obj = getattr(ttnn, name)
        if name in _OPS:
            return lambda *a, **k: self._op(name, a, k)
        if callable(obj) and not isinstance(obj, type) and name not in _REAL_FUNCTIONS:
            raise AssertionError(f"layers called ttnn.{name}, which RealTypes does not model")
        return obj

    def _op(self, name, args, kwargs):
        self.calls.append(Call(name, args, kwargs))
        err = bind_error(name, args, kwargs)
        assert err is None, err
        if name == "conv2d":
            k = kwargs
            (kh, kw), (sh, sw) = k["kernel_size"], k.get("stride", (1, 1))
            p = list(k.get("padding", (0, 0)))
            pt, pb, pl, pr = (p[0], p[0], p[1], p[1]) if len(p) == 2 else p
            dh, dw = k.get("dilation", (1, 1))
            oh = (k["input_height"] + pt + pb - dh * (kh - 1) - 1) // sh + 1
            ow = (k["input_width"] + pl + pr - dw * (kw - 1) - 1) // sw + 1
            out = FakeTensor(what="conv out")
            w, b = FakeTensor(what="prepared weight"), FakeTensor(what="prepared bias")
            if k.get("return_output_dim") and k.get("return_weights_and_bias"):
                return out, (oh, ow), (w, b)
            return out
        if name == "conv_transpose2d":
            k = kwargs
            (kh, kw), (sh, sw), (ph, pw) = k["kernel_size"], k["stride"], k["padding"][:2]
            oph, opw = k.get("output_padding", (0, 0))
            dh, dw = k.get("dilation", (1, 1))
            oh = (k["input_height"] - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
            ow = (k["input_width"] - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
            return FakeTensor(what="conv_transpose out"), (oh, ow), (FakeTensor(), FakeTensor())
        if name in ("deallocate", "close_device", "synchronize_device"):
            return None
        if name in ("max_pool2d", "avg_pool2d", "adaptive_avg_pool2d"):
            # the pool layers read the result's rank (a DRAM-sliced pool returns [N, OH, OW, C])
            return FakeTensor(shape=(1, 1, 1, 1), what=name)
        return FakeTensor(what=name)


def realtypes_backend() -> Backend:
    return Backend("ttnn-contract", RealTypes(), FakeDevice())


def recorded(backend) -> list[Call]:
    return backend.tt.calls


# ================================================================================================
# A graph with every op family and several adapter kinds
# ================================================================================================

def all_ops_graph(precision: Precision = Precision()) -> tuple[Graph, dict]:
    P = precision

    def conv(name, inp, cin, cout, k, s, p, hw, act="relu"):
        return Node(name, "conv2d", [inp], dict(
            in_channels=cin, out_channels=cout, kernel=(k, k), stride=(s, s),
            padding=(p, p, p, p), dilation=(1, 1), groups=1, bias=True, activation=act,
            lowering="auto"), S(1, hw, hw, cout), precision=P, weights=name)

    nodes = [
        conv("c1", "x", 8, 32, 3, 1, 1, 16),
        Node("r", "relu", ["c1"], {}, S(1, 16, 16, 32), precision=P),
        Node("mp", "max_pool2d", ["r"], dict(kernel=(2, 2), stride=(2, 2), padding=(0, 0, 0, 0),
                                             dilation=(1, 1), ceil_mode=False),
             S(1, 8, 8, 32), precision=P),
        Node("ap", "avg_pool2d", ["mp"], dict(kernel=(3, 3), stride=(1, 1), padding=(1, 1, 1, 1),
                                              ceil_mode=False, count_include_pad=True),
             S(1, 8, 8, 32), precision=P),
        Node("mul", "multiply", ["ap", "scale"], dict(activation=None), S(1, 8, 8, 32),
             precision=P),
        Node("cat", "concat", ["mul", "mp"], {}, S(1, 8, 8, 64), precision=P),
        Node("up", "upsample", ["cat"], dict(scale=(2, 2), mode="nearest"), S(1, 16, 16, 64),
             precision=P),
        Node("pd", "pad", ["cat"], dict(padding=(1, 1, 1, 1), value=0.0), S(1, 10, 10, 64),
             precision=P),
        conv("c2", "pd", 64, 32, 3, 1, 0, 8, act=None),
        Node("add", "add", ["c2", "ap"], dict(activation="relu"), S(1, 8, 8, 32), precision=P),
        Node("gap", "global_avg_pool", ["add"], {}, S(1, 1, 1, 32), precision=P),
        Node("fc", "linear", ["gap"], dict(in_features=32, out_features=10, bias=True,
                                           activation=None), S(1, 1, 1, 10), precision=P,
             weights="fc"),
    ]
    g = Graph("all_ops", {"x": S(1, 16, 16, 8)}, nodes, {"scale": Constant("scale", (32,))},
              ["fc", "up"], input_precision=P)
    gen = torch.Generator().manual_seed(0)
    params = {"c1": {"weight": torch.randn(32, 8, 3, 3, generator=gen) * 0.3,
                     "bias": torch.randn(32, generator=gen) * 0.1},
              "c2": {"weight": torch.randn(32, 64, 3, 3, generator=gen) * 0.1,
                     "bias": torch.randn(32, generator=gen) * 0.1},
              "fc": {"weight": torch.randn(10, 32, generator=gen) * 0.2,
                     "bias": torch.randn(10, generator=gen) * 0.1},
              "scale": {"value": torch.rand(32, generator=gen) + 0.5}}
    return g, params


def _plan(graph):
    from ttmodels.planning import planner
    return planner.plan_graph(graph)


def _assert_all_bind(calls: list[Call]):
    bad = [e for c in calls if (e := bind_error(c.name, c.args, c.kwargs)) is not None]
    assert not bad, "\n".join(bad)


def test_sim_run_calls_bind_to_real_ttnn():
    """(a) on the sim backend: the whole graph runs; every recorded call binds."""
    from ttmodels.backends import sim
    graph, params = all_ops_graph()
    plan = _plan(graph)
    assert plan.adapters, "the graph should exercise adapters"
    from ttmodels.backends import open_backend
    with open_backend("sim") as be:
        assert be.tt is sim
        with be.record() as calls:
            ex = Executor(plan, params, be)
            ex.run({"x": torch.randn(1, 8, 16, 16)})
    names = {c.name for c in calls}
    ops = {"conv2d", "relu", "max_pool2d", "avg_pool2d", "multiply", "concat", "upsample", "pad",
           "add", "linear", "from_torch", "deallocate", "reshape"}
    assert ops <= names, ops - names
    assert names & {a.kind for a in plan.adapters}     # adapter calls are checked too
    _assert_all_bind(calls)


def test_realtypes_run_calls_bind_and_build_real_configs():
    """(a)+(b) on RealTypes: the same graph, every op call checked as it is made, every config
    object a real ttnn one."""
    graph, params = all_ops_graph()
    plan = _plan(graph)
    be = realtypes_backend()
    ex = Executor(plan, params, be)
    out = ex.run({"x": torch.randn(1, 8, 16, 16)})
    assert set(out) == {"fc", "up"}
    calls = recorded(be)
    assert {"conv2d", "linear", "concat", "pad", "upsample"} <= {c.name for c in calls}
    _assert_all_bind(calls)
    for c in calls:
        for key, v in c.kwargs.items():
            if key in ("memory_config", "sharded_memory_config", "output_memory_config"):
                assert isinstance(v, ttnn.MemoryConfig), (c, key, v)
            if key == "conv_config":
                assert isinstance(v, ttnn.Conv2dConfig)
            if key in ("compute_config", "compute_kernel_config"):
                assert isinstance(v, ttnn.WormholeComputeKernelConfig)
            if key in ("dtype", "output_dtype") and v is not None:
                assert isinstance(v, ttnn.DataType)
            if key in ("layout", "output_layout"):
                assert isinstance(v, ttnn.Layout)
            if key == "activations":
                assert all(isinstance(x, ttnn.UnaryWithParam) for x in v)


# ================================================================================================
# (b) representative layers: height / block / width sharded, interleaved
# ================================================================================================

def planned(node, inputs, output, **config) -> PlannedLayer:
    return PlannedLayer(node, inputs, output, 0, dict(config))


def conv_node(name="conv", cin=64, cout=64, k=3, s=1, p=1, hw=28, n=1, act="relu",
              precision=Precision()):
    o = (hw + 2 * p - k) // s + 1
    return Node(name, "conv2d", ["x"], dict(
        in_channels=cin, out_channels=cout, kernel=(k, k), stride=(s, s), padding=(p, p, p, p),
        dilation=(1, 1), groups=1, bias=True, activation=act, lowering="auto"),
        S(n, o, o, cout), precision=precision, weights=name), S(n, hw, hw, cin)


def conv_params(node):
    a = node.attrs
    return {"weight": torch.randn(a["out_channels"], a["in_channels"], *a["kernel"]),
            "bias": torch.randn(a["out_channels"])}


def _tile(mem, dtype="bfloat16"):
    return TensorLayout(mem, "tile", dtype)


@pytest.mark.parametrize("kind,mem", [
    (HEIGHT, MemSpec(HEIGHT, "l1", (8, 3), 20, (64, 64))),
    (BLOCK, MemSpec(BLOCK, "l1", (2, 7), 14, (128, 32))),
    (WIDTH, MemSpec(WIDTH, "l1", (2, 1), 2, (800, 32))),
])
def test_conv_layer_builds_real_configs(kind, mem):
    node, in_shape = conv_node(precision=Precision("bfloat8_b", "bfloat16", "LoFi", True))
    pl = planned(node, [_tile(mem)], _tile(mem), shard_layout=kind, act_block_h_override=64,
                 reshard_if_not_optimal=False, override_sharding_config=False,
                 output_layout="tile", weights_dtype="bfloat8_b", memory_config=mem)
    be = realtypes_backend()
    layer = make_layer(pl, conv_params(node), be, input_shapes=[in_shape])
    x = FakeTensor()
    layer([x])
    layer([x])
    convs = [c for c in recorded(be) if c.name == "conv2d"]
    assert len(convs) == 2
    k = convs[0].kwargs
    cfg = k["conv_config"]
    assert isinstance(cfg, ttnn.Conv2dConfig)
    assert cfg.shard_layout == common.tensor_memory_layout(ttnn, kind)
    assert cfg.weights_dtype == ttnn.bfloat8_b
    assert cfg.act_block_h_override == 64
    assert cfg.activation.op_type == ttnn.UnaryOpType.RELU
    assert cfg.deallocate_activation is False and cfg.output_layout == ttnn.TILE_LAYOUT
    cc = k["compute_config"]
    assert isinstance(cc, ttnn.WormholeComputeKernelConfig)
    assert cc.math_fidelity == ttnn.MathFidelity.LoFi and cc.fp32_dest_acc_en is True
    assert k["dtype"] == ttnn.bfloat16 and k["input_tensor"] is x
    assert (k["batch_size"], k["input_height"], k["input_width"]) == (1, 28, 28)
    assert k["padding"] == [1, 1] and k["return_weights_and_bias"] is True
    mc = k["memory_config"]
    assert isinstance(mc, ttnn.MemoryConfig)
    assert mc.memory_layout == common.tensor_memory_layout(ttnn, kind)
    assert mc.buffer_type == ttnn.BufferType.L1
    assert list(mc.shard_spec.shape) == list(mem.shard_shape)
    assert mc.shard_spec.orientation == ttnn.ShardOrientation.ROW_MAJOR
    assert mc.shard_spec.grid.num_cores() == mem.num_cores
    # Weights are prepared at build time (prepare_conv_weights/prepare_conv_bias, bound against
    # the real signatures) with the conv's own geometry and the plan's input layout; every call
    # passes the prepared tensors, and later calls what conv2d handed back.
    calls = recorded(be)
    pw = next(c for c in calls if c.name == "prepare_conv_weights").kwargs
    pb = next(c for c in calls if c.name == "prepare_conv_bias").kwargs
    assert calls.index(next(c for c in calls if c.name == "prepare_conv_weights")) < \
        calls.index(convs[0])
    assert pw["weight_tensor"].what == "from_torch" and pb["bias_tensor"].what == "from_torch"
    assert pw["weights_format"] == "OIHW" and pw["has_bias"] is True
    for key in ("in_channels", "out_channels", "batch_size", "input_height", "input_width",
                "kernel_size", "stride", "padding", "dilation", "groups"):
        assert pw[key] == k[key] and pb[key] == k[key], key
    assert pw["conv_config"] is cfg and pw["input_memory_config"].memory_layout == \
        common.tensor_memory_layout(ttnn, kind)
    assert convs[0].kwargs["weight_tensor"].what == "prepare_conv_weights"
    assert convs[0].kwargs["bias_tensor"].what == "prepare_conv_bias"
    assert convs[1].kwargs["weight_tensor"].what == "prepared weight"
    assert convs[1].kwargs["bias_tensor"].what == "prepared bias"
    ft = [c for c in recorded(be) if c.name == "from_torch"]
    assert ft[0].kwargs["dtype"] == ttnn.float32 and tuple(ft[0].args[0].shape) == (64, 64, 3, 3)
    assert tuple(ft[1].args[0].shape) == (1, 1, 1, 64)


def test_conv_config_core_grid_and_options_real():
    node, _ = conv_node()
    pl = planned(node, [_tile(L1_INTERLEAVED)], _tile(L1_INTERLEAVED), shard_layout=BLOCK,
                 override_sharding_config=True, core_grid=(4, 2), num_cores=8,
                 enable_act_double_buffer=True, output_layout="row_major")
    cfg = conv2d_config(ttnn, pl)
    assert isinstance(cfg.core_grid, ttnn.CoreRangeSet) and cfg.core_grid.num_cores() == 8
    assert cfg.override_sharding_config is True and cfg.enable_act_double_buffer is True
    assert cfg.output_layout == ttnn.ROW_MAJOR_LAYOUT
    assert cfg.shard_layout == ttnn.TensorMemoryLayout.BLOCK_SHARDED


def test_memory_configs_are_real_and_match_ttnn_helpers():
    assert common.memory_config(ttnn, DRAM_INTERLEAVED) == ttnn.DRAM_MEMORY_CONFIG
    assert common.memory_config(ttnn, L1_INTERLEAVED) == ttnn.L1_MEMORY_CONFIG
    # height sharding over a partial last row: the same CoreRangeSet tt-metal builds
    for n in (1, 5, 8, 20, 63, 64):
        mc = common.memory_config(ttnn, MemSpec(HEIGHT, "l1", (8, -(-n // 8)), n, (32, 64)))
        assert mc.shard_spec.grid == ttnn.num_cores_to_corerangeset(n, ttnn.CoreCoord(8, 8),
                                                                    row_wise=True), n
    blk = common.memory_config(ttnn, MemSpec(BLOCK, "l1", (8, 7), 56, (128, 64), "col_major"))
    assert blk.memory_layout == ttnn.TensorMemoryLayout.BLOCK_SHARDED
    assert blk.shard_spec.grid.num_cores() == 56
    assert blk.shard_spec.orientation == ttnn.ShardOrientation.COL_MAJOR
    want = ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(7, 6))])
    assert blk.shard_spec.grid == want


def test_memory_config_errors_are_clear():
    from ttmodels.errors import LayoutError
    with pytest.raises(LayoutError, match="grid and a shard shape"):
        common.memory_config(ttnn, MemSpec(HEIGHT, "l1"))
    with pytest.raises(LayoutError, match="do not fit"):
        common.memory_config(ttnn, MemSpec(HEIGHT, "l1", (8, 8), 65, (32, 32)))
    with pytest.raises(LayoutError, match="unknown dtype"):
        common.data_type(ttnn, "int8")


def test_names_map_to_real_enums():
    assert common.data_type(ttnn, "bfloat8_b") == ttnn.bfloat8_b
    assert common.data_type(ttnn, "bfloat4_b") == ttnn.bfloat4_b
    assert common.layout(ttnn, "row_major") == ttnn.ROW_MAJOR_LAYOUT
    assert common.math_fidelity(ttnn, "HiFi4") == ttnn.MathFidelity.HiFi4
    cc = common.compute_config(ttnn, None, Precision(math_fidelity="HiFi3"))
    assert isinstance(cc, ttnn.WormholeComputeKernelConfig)
    assert cc.math_fidelity == ttnn.MathFidelity.HiFi3


@pytest.mark.parametrize("spec,cls", [
    (dict(kind="1d", grid=(8, 4), in0_block_w=2, per_core_M=1, per_core_N=1),
     "MatmulMultiCoreReuseMultiCast1DProgramConfig"),
    (dict(kind="2d", grid=(8, 8), in0_block_w=4, out_subblock_w=2, per_core_M=2, per_core_N=4,
          fused_activation="relu"), "MatmulMultiCoreReuseMultiCastProgramConfig"),
])
def test_linear_layer_program_configs_real(spec, cls):
    node = Node("fc", "linear", ["x"], dict(in_features=2048, out_features=1000, bias=True,
                                             activation="relu"), S(16, 1, 1, 1000), weights="fc")
    out = TensorLayout(MemSpec(WIDTH, "l1", (8, 4), 32, (32, 32)), "tile", "bfloat16")
    pl = planned(node, [_tile(L1_INTERLEAVED)], out, program_config=spec,
                 memory_config=out.memory)
    be = realtypes_backend()
    layer = make_layer(pl, {"weight": torch.randn(1000, 2048), "bias": torch.randn(1000)}, be,
                       input_shapes=[S(16, 1, 1, 2048)])
    layer([FakeTensor()])
    (lin,) = [c for c in recorded(be) if c.name == "linear"]
    pc = lin.kwargs["program_config"]
    assert type(pc).__name__ == cls and isinstance(pc, getattr(ttnn, cls))
    assert pc.in0_block_w == spec["in0_block_w"] and pc.per_core_N == spec["per_core_N"]
    assert lin.kwargs["activation"] == "relu"
    assert lin.kwargs["memory_config"].memory_layout == ttnn.TensorMemoryLayout.WIDTH_SHARDED
    wt = [c for c in recorded(be) if c.name == "from_torch"]
    assert tuple(wt[0].args[0].shape) == (2048, 1000)       # transposed: ttnn computes a @ b
    assert wt[0].kwargs["dtype"] == ttnn.bfloat8_b and wt[0].kwargs["layout"] == ttnn.TILE_LAYOUT
    assert tuple(wt[1].args[0].shape) == (1, 1, 1, 1000)


@pytest.mark.parametrize("kind,before,after", [
    ("sharded_to_interleaved", _tile(MemSpec(HEIGHT, "l1", (8, 1), 8, (32, 64))),
     _tile(L1_INTERLEAVED, "bfloat8_b")),
    ("interleaved_to_sharded", _tile(DRAM_INTERLEAVED), _tile(MemSpec(BLOCK, "l1", (2, 2), 4,
                                                                      (128, 32)))),
    ("reshard", _tile(MemSpec(HEIGHT, "l1", (8, 1), 8, (32, 64))),
     _tile(MemSpec(WIDTH, "l1", (2, 1), 2, (256, 32)))),
    ("to_memory_config", _tile(L1_INTERLEAVED), _tile(DRAM_INTERLEAVED, "bfloat8_b")),
    ("to_layout", _tile(MemSpec(HEIGHT, "l1", (8, 1), 8, (32, 64))),
     TensorLayout(MemSpec(HEIGHT, "l1", (8, 1), 8, (32, 64)), "row_major", "bfloat16")),
    ("typecast", _tile(L1_INTERLEAVED), _tile(L1_INTERLEAVED, "bfloat8_b")),
])
def test_adapter_calls_bind_and_use_real_configs(kind, before, after):
    be = realtypes_backend()
    AdapterLayer(Adapter("a", "b", 0, kind, before, after, "test"), be)(FakeTensor())
    (call,) = recorded(be)
    assert call.name == kind
    assert bind_error(call.name, call.args, call.kwargs) is None
    mcs = [v for v in list(call.args) + list(call.kwargs.values())
           if isinstance(v, ttnn.MemoryConfig)]
    if kind not in ("to_layout", "typecast"):
        assert mcs and mcs[0] == common.memory_config(ttnn, after.memory)
    if before.dtype != after.dtype:
        assert ttnn.bfloat8_b in list(call.args) + list(call.kwargs.values())


def test_pool_layers_real_enums():
    P = Precision()
    mem = MemSpec(HEIGHT, "l1", (8, 7), 56, (32, 64))
    mp = Node("mp", "max_pool2d", ["x"], dict(kernel=(3, 3), stride=(2, 2), padding=(1, 1, 1, 1),
                                              dilation=(1, 1), ceil_mode=False),
              S(2, 56, 56, 64), precision=P)
    pl = planned(mp, [_tile(DRAM_INTERLEAVED)], TensorLayout(mem, "tile", "bfloat8_b"),
                 applied_shard_scheme=HEIGHT, output_layout="tile", dtype="bfloat8_b")
    be = realtypes_backend()
    make_layer(pl, {}, be, input_shapes=[S(2, 112, 112, 64)])([FakeTensor()])
    gp = Node("gap", "global_avg_pool", ["x"], {}, S(2, 1, 1, 2048), precision=P)
    pl2 = planned(gp, [_tile(mem)], _tile(mem), output_layout="tile")
    make_layer(pl2, {}, be, input_shapes=[S(2, 7, 7, 2048)])([FakeTensor()])
    c1, c2 = [c for c in recorded(be) if c.name in ("max_pool2d", "avg_pool2d")]
    assert c1.kwargs["applied_shard_scheme"] == ttnn.TensorMemoryLayout.HEIGHT_SHARDED
    assert c1.kwargs["dtype"] == ttnn.bfloat8_b and c1.kwargs["output_layout"] == ttnn.TILE_LAYOUT
    assert c1.kwargs["padding"] == [1, 1] and c1.kwargs["batch_size"] == 2
    assert c2.kwargs["kernel_size"] == [7, 7] and c2.kwargs["input_h"] == 7
    assert isinstance(c2.kwargs["compute_kernel_config"], ttnn.WormholeComputeKernelConfig)


# ================================================================================================
# issue 11: the new ops' calls bind to the real signatures, their configs are real ttnn objects
# ================================================================================================

def test_new_ops_calls_bind_to_real_ttnn():
    from ttmodels.ops import activations as A
    from ttmodels.language.spec import load_graph
    layers = [{"name": "c", "op": "conv2d", "out": 32, "kernel": 3, "padding": 1, "act": "silu"},
              {"name": "dw", "op": "conv2d", "out": 32, "kernel": 3, "padding": 1, "groups": 32,
               "act": "relu6"},
              {"name": "p", "op": "global_avg_pool"},
              {"name": "f", "op": "conv2d", "out": 32, "kernel": 1, "bias": True, "act": "sigmoid"},
              {"name": "m", "op": "multiply", "in": ["dw", "f"], "act": "hardsigmoid"},
              {"name": "s", "op": "subtract", "in": ["m", "c"]},
              {"name": "bn", "op": "batch_norm", "act": "gelu"},
              {"name": "sl", "op": "slice", "channels": [0, 16]},
              {"name": "i", "op": "identity"},
              {"name": "ap", "op": "adaptive_avg_pool2d", "size": 2}]
    layers += [{"name": f"u_{n}", "op": n, "in": "c"} for n in A.NAMES]
    g = load_graph({"inputs": {"x": {"channels": 8, "size": 8}}, "layers": layers,
                    "outputs": ["ap"] + [f"u_{n}" for n in A.NAMES]}, batch_size=2)
    from ttmodels.weights import prepare_parameters, random_state_dict
    params = prepare_parameters(g, random_state_dict(g, calibrate=False))
    plan = _plan(g)
    be = realtypes_backend()
    Executor(plan, params, be).run({"x": torch.randn(2, 8, 8, 8)})
    calls = recorded(be)
    names = {c.name for c in calls}
    assert {"subtract", "multiply", "slice", "identity", "adaptive_avg_pool2d", "reshape"} <= names
    assert {A.ACTIVATIONS[n].ttnn_function for n in A.NAMES} <= names
    _assert_all_bind(calls)
    conv = [c for c in calls if c.name == "conv2d"]
    assert {c.kwargs["conv_config"].activation.op_type for c in conv} >= {
        ttnn.UnaryOpType.SILU, ttnn.UnaryOpType.RELU6, ttnn.UnaryOpType.SIGMOID}
    for c in calls:
        for v in c.kwargs.get("activations", []):
            assert isinstance(v, ttnn.UnaryWithParam)


def test_align_corners_upsample_calls_bind_to_real_ttnn():
    """The grid_sample lowering of an align_corners upsample (BEVDet's FPN_LSS): the host grid
    preparation, its move to the device and grid_sample itself bind to the real signatures, and
    the memory configs are real ttnn objects."""
    from ttmodels.language.spec import load_graph
    graph = load_graph({"inputs": {"x": {"channels": 64, "size": [8, 8]}},
                        "layers": [{"name": "c", "op": "conv2d", "out": 64, "kernel": 3, "padding": 1},
                                   {"name": "up", "op": "upsample", "scale": 4, "mode": "bilinear",
                                    "align_corners": True}]}, batch_size=2)
    plan = _plan(graph)
    params = {"c": {"weight": torch.randn(64, 64, 3, 3) * 0.05}}
    be = realtypes_backend()
    Executor(plan, params, be).run({"x": torch.randn(2, 64, 8, 8)})
    calls = recorded(be)
    by = {c.name: c for c in calls}
    assert {"prepare_grid_sample_grid", "grid_sample", "to_device"} <= set(by)
    _assert_all_bind(calls)
    gs = by["grid_sample"].kwargs
    assert gs["use_precomputed_grid"] is True and gs["align_corners"] is True
    assert isinstance(gs["memory_config"], ttnn.MemoryConfig)
    prep = by["prepare_grid_sample_grid"]
    assert prep.args[1] == [2, 8, 8, 64] and prep.kwargs["output_dtype"] == ttnn.bfloat16


def test_conv_transpose2d_and_split_calls_bind_to_real_ttnn():
    """conv_transpose2d (weights prepared with prepare_conv_transpose2d_weights/bias, IOHW) and a
    split (one ttnn.slice per output): every call binds to ttnn 0.81.1's signatures and every
    config is a real ttnn one."""
    from ttmodels.language.spec import load_graph
    from ttmodels.weights import prepare_parameters, random_state_dict
    g = load_graph({"inputs": {"x": {"channels": 16, "size": 8}}, "layers": [
        {"name": "up", "op": "conv_transpose2d", "out": 64, "kernel": 2, "stride": 2,
         "bias": True, "act": "relu"},
        {"name": "s", "op": "split", "channels": {"a": 32, "b": 32}},
        {"name": "u3", "op": "conv_transpose2d", "in": "s.b", "out": 32, "kernel": 3,
         "stride": 2, "padding": 1, "output_padding": 1, "groups": 2},
        {"name": "d", "op": "max_pool2d", "kernel": 2},
        {"name": "cat", "op": "concat", "in": ["s.a", "d"]}]}, batch_size=2)
    params = prepare_parameters(g, random_state_dict(g, calibrate=False))
    be = realtypes_backend()
    Executor(_plan(g), params, be).run({"x": torch.randn(2, 16, 8, 8)})
    calls = recorded(be)
    names = [c.name for c in calls]
    assert {"conv_transpose2d", "prepare_conv_transpose2d_weights",
            "prepare_conv_transpose2d_bias"} <= set(names)
    assert names.count("slice") == 2
    _assert_all_bind(calls)
    ct = [c for c in calls if c.name == "conv_transpose2d"]
    assert all(isinstance(c.kwargs["conv_config"], ttnn.Conv2dConfig) for c in ct)
    assert [c.kwargs["output_padding"] for c in ct] == [[0, 0], [1, 1]]
    prep = [c for c in calls if c.name == "prepare_conv_transpose2d_weights"]
    assert {c.kwargs["weights_format"] for c in prep} == {"IOHW"}


def test_issue23_ops_calls_bind_to_real_ttnn():
    """layer_norm (weight/bias as [1, 1, 1, C] TILE tensors), the per-pixel linear, layer_scale,
    softmax and the reshape/permute lowerings of flatten, reshape, permute and channel_shuffle:
    every call binds to ttnn 0.81.1's signatures with real configs."""
    from ttmodels.language.spec import load_graph
    from ttmodels.weights import prepare_parameters, random_state_dict
    g = load_graph({"inputs": {"x": {"channels": 8, "size": 8}}, "layers": [
        {"name": "c", "op": "conv2d", "out": 32, "kernel": 3, "padding": 1},
        {"name": "ln", "op": "layer_norm", "eps": 1e-6},
        {"name": "pw", "op": "linear", "out": 64, "act": "gelu"},
        {"name": "ls", "op": "layer_scale"},
        {"name": "sh", "op": "channel_shuffle", "groups": 2},
        {"name": "pm", "op": "permute", "dims": [0, 2, 1, 3]},
        {"name": "rs", "op": "reshape", "shape": [16, 16, 16]},
        {"name": "sm", "op": "softmax"},
        {"name": "fl", "op": "flatten"}]}, batch_size=2)
    params = prepare_parameters(g, random_state_dict(g, calibrate=False))
    be = realtypes_backend()
    Executor(_plan(g), params, be).run({"x": torch.randn(2, 8, 8, 8)})
    calls = recorded(be)
    names = [c.name for c in calls]
    assert {"layer_norm", "softmax", "permute", "reshape", "linear", "multiply"} <= set(names)
    _assert_all_bind(calls)
    (ln,) = [c for c in calls if c.name == "layer_norm"]
    assert ln.kwargs["epsilon"] == 1e-6
    assert isinstance(ln.kwargs["compute_kernel_config"], ttnn.WormholeComputeKernelConfig)
    (sm,) = [c for c in calls if c.name == "softmax"]
    assert sm.args[1] == -1
    perms = [c.args[1] for c in calls if c.name == "permute"]
    assert [0, 1, 3, 2] in perms and [0, 3, 1, 2] in perms      # shuffle; flatten's NHWC->NCHW
    assert all(isinstance(c.kwargs["memory_config"], ttnn.MemoryConfig)
               for c in calls if c.name == "permute")
