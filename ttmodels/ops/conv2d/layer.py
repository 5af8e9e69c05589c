"""conv2d: BatchNorm-folded weights, ttnn.conv2d with the plan's sharding decisions, or
ttnn.linear with the solver's program config for 1x1 stride-1 convs the plan lowers to a matmul
(``config.lowering == "linear"``, docs/lowering.md)."""
from __future__ import annotations

from types import SimpleNamespace

from .. import activations
from ...backends import common
from ...errors import LayoutError
from ...planning.layout import DRAM_INTERLEAVED
from ...planning.plans import PlannedLayer
from ...runtime.layers.base import Layer


def conv_padding(padding) -> list[int]:
    """ttnn takes [pad_h, pad_w] or [top, bottom, left, right]; use the short form when
    symmetric (the form every TT model uses)."""
    t, b, l, r = (int(p) for p in padding)
    return [t, l] if (t == b and l == r) else [t, b, l, r]


def conv2d_config(tt, planned: PlannedLayer):
    """The ``Conv2dConfig`` for a planned conv: weights dtype from the precision, the plan's shard
    layout / act_block_h / reshard decisions, the node's activation fused (activation table); the
    input is kept (the executor frees tensors after their last consumer) unless the plan has the
    conv free it itself (``deallocate_activation``: it is the input's last reader)."""
    node, cfg = planned.node, planned.config
    kw = dict(
        weights_dtype=common.data_type(tt, cfg.weights_dtype or node.precision.weights),
        deallocate_activation=bool(cfg.deallocate_activation),
        act_block_h_override=int(cfg.act_block_h_override or 0),
        reshard_if_not_optimal=bool(cfg.reshard_if_not_optimal),
        override_sharding_config=bool(cfg.override_sharding_config),
        output_layout=common.layout(tt, cfg.output_layout or planned.output.layout),
    )
    # a 1x1 conv runs as a matmul, which fuses fewer activations; what the op cannot fuse
    # (hardswish is dropped silently by conv2d) Conv2d.__call__ runs after it
    act = activations.op_split(node.attrs.get("activation"),
                               "matmul" if cfg.is_mm_conv else "conv")[0]
    if act is not None:
        kw["activation"] = activations.unary_with_param(tt, act)
    if cfg.shard_layout:
        kw["shard_layout"] = common.tensor_memory_layout(tt, cfg.shard_layout)
    if kw["override_sharding_config"] and cfg.core_grid:
        kw["core_grid"] = common.core_range_set(tt, tuple(cfg.core_grid), cfg.num_cores)
    for opt in cfg.CONV2D_CONFIG_OPTIONS:
        if getattr(cfg, opt) is not None:
            kw[opt] = getattr(cfg, opt)
    return tt.Conv2dConfig(**kw)


def slice_config(tt, planned: PlannedLayer):
    """``Op2DSliceConfig`` for a conv the plan runs DRAM-sliced (``config.slice``); L1_FULL for
    an unsliced conv reading a DRAM input; else None.

    ttnn 0.81.1: ``ttnn.Op2DSliceConfig(*, slice_type, num_slices)`` with ``slice_type`` one of
    ``ttnn.Op2DDRAMSliceHeight`` / ``ttnn.Op2DDRAMSliceWidth`` (aliases of
    ``Op2DSliceConfig.SliceTypeEnum.DRAMSliceHeight/DRAMSliceWidth``)."""
    sl = planned.config.slice
    if not sl:
        # ttnn 0.81 sends a conv whose input is in DRAM down its DRAM path (auto-sliced, output in
        # DRAM: conv2d.cpp determine_conv2d_execution_path) unless told L1_FULL; the plan has such
        # convs read their input into L1 shards and write L1 shards, so say so.
        if (planned.inputs and planned.inputs[0].memory.buffer == "dram"
                and hasattr(tt, "Op2DL1FullSliceConfig")):
            return tt.Op2DL1FullSliceConfig
        return None
    kind = {"height": "Op2DDRAMSliceHeight", "width": "Op2DDRAMSliceWidth"}.get(sl.type)
    if kind is None:
        raise LayoutError(f"slice type {sl.type!r} must be 'height' or 'width'",
                          layer=planned.name)
    if not hasattr(tt, "Op2DSliceConfig") or not hasattr(tt, kind):
        raise LayoutError(f"the plan slices this conv in DRAM ({sl.num_slices} {sl.type} "
                          f"slices) but the backend has no {kind}/Op2DSliceConfig",
                          layer=planned.name)
    return tt.Op2DSliceConfig(slice_type=getattr(tt, kind), num_slices=int(sl.num_slices))


class ConvLayer(Layer):
    """What the conv2d and conv_transpose2d layers share: channels, groups and kernel from the
    attrs, the weights sent once as float32 host tensors (one copy per chip on a mesh), and the
    geometry keywords of the op and its weight/bias preparation."""

    def _read_conv_attrs(self) -> None:
        a = self.attrs
        self.in_channels, self.out_channels = int(a["in_channels"]), int(a["out_channels"])
        self.groups = int(a.get("groups", 1))
        self.kernel = tuple(int(k) for k in a["kernel"])

    def _host_tensors(self, w, b):
        tt, rep = self.tt, common.replicated(self.backend)
        weight = tt.from_torch(w, dtype=tt.float32, **rep)
        bias = None if b is None else tt.from_torch(b.reshape(1, 1, 1, -1), dtype=tt.float32,
                                                    **rep)
        return weight, bias

    def _call_kwargs(self, inputs, **extra) -> dict:
        """The op's keyword arguments for one call: the prepared weights, the geometry, the
        plan's configs and its requested output memory config."""
        kwargs = dict(
            input_tensor=inputs[0], weight_tensor=self.weight, bias_tensor=self.bias,
            **self._once("geometry", self._geometry), **extra,
            dtype=self.dtype(), conv_config=self.conv_config,
            compute_config=self.get_compute_config(),
            return_output_dim=True, return_weights_and_bias=True)
        mc = self.requested_memory_config()
        if mc is not None:
            kwargs["memory_config"] = mc
        return kwargs

    def _geometry(self) -> dict:
        """The conv's keyword arguments shared by the op and the weight/bias preparation."""
        s, a = self.input_shape(0), self.attrs
        return dict(device=self.device, in_channels=self.in_channels, out_channels=self.out_channels,
                    batch_size=s.n, input_height=s.h, input_width=s.w, kernel_size=list(self.kernel),
                    stride=[int(v) for v in a.get("stride", (1, 1))],
                    padding=conv_padding(a.get("padding", (0, 0, 0, 0))),
                    dilation=[int(v) for v in a.get("dilation", (1, 1))], groups=self.groups)


class Conv2d(ConvLayer):
    """``weight`` [O, I/groups, kh, kw] and optional ``bias`` [O], float32 with BN folded.

    Weights go to the backend once as float32 host tensors and are prepared at construction with
    ``ttnn.prepare_conv_weights`` / ``prepare_conv_bias`` (tilized, ``weights_dtype``, on device);
    every call passes the prepared tensors (conv2d hands them back unchanged,
    ``return_weights_and_bias=True``)."""
    op = "conv2d"

    def __init__(self, planned, params, backend, **kw):
        super().__init__(planned, params, backend, **kw)
        self._read_conv_attrs()
        if self.in_channels % self.groups:
            raise LayoutError(f"in_channels {self.in_channels} is not divisible by groups "
                              f"{self.groups}", layer=self.name)
        w = self.param("weight", shape=(self.out_channels, self.in_channels // self.groups,
                                        *self.kernel))
        b = self.param("bias", required=False, shape=(self.out_channels,))
        tt = self.tt
        self.lowering = self.config.lowering or "conv2d"
        if self.lowering == "linear":
            self._init_linear(w, b)
            return
        self.conv_config = conv2d_config(tt, planned)
        self.slice_config = slice_config(tt, planned)
        weight, bias = self._host_tensors(w, b)
        common.mark_prequantized(tt, weight, self.params,
                                 self.config.weights_dtype or self.node.precision.weights)
        if getattr(backend, "name", None) == "ttnn-mock":
            # ttmodels.tools.verify captures each step's ttnn calls (and errors) on the mock device:
            # there conv2d prepares its weights itself on the first call, inside its step
            self.weight, self.bias, self.prepared = weight, bias, False
        else:
            self._prepare(weight, bias)

    def _prepare(self, weight, bias) -> None:
        """Prepare the weights at build time with ttnn.prepare_conv_weights / prepare_conv_bias
        (the calls conv2d would make on its first run, with the plan's input layout), so that
        the first call costs what every call costs and the float32 host copies can go."""
        tt, x = self.tt, self.planned.inputs[0]
        kw = dict(self._geometry(), input_memory_config=common.memory_config(tt, x.memory),
                  input_layout=common.layout(tt, x.layout), input_dtype=common.data_type(tt, x.dtype),
                  output_dtype=self.dtype(), conv_config=self.conv_config,
                  compute_config=self.get_compute_config())
        if self.slice_config is not None:
            kw["slice_config"] = self.slice_config
        self.weight = tt.prepare_conv_weights(weight_tensor=weight, weights_format="OIHW",
                                              has_bias=bias is not None, **kw)
        self.bias = None if bias is None else tt.prepare_conv_bias(bias_tensor=bias, **kw)
        self.prepared = True

    def _init_linear(self, w, b):
        """Weights for ``ttnn.linear``: the [K, N] = [Cin, Cout] matrix (ttnn.linear computes
        a @ b) and the bias as [1, 1, 1, Cout], TILE, in the weights dtype, in DRAM (in1 of the 1D
        and 2D multicast programs must be interleaved). This is the matrix conv2d prepares for a
        1x1 kernel ([kh*kw*Cin, Cout], prepare_conv2d_weights.cpp), so block-float exponents are
        shared along output channels in both lowerings, and conv2d also converts its bias to the
        weights dtype. TT's models prepare linear weights the same way
        (ttnn.model_preprocessing preprocess_linear_weight/bias: ``weight.T``, TILE)."""
        from ...planning.matmul_solver import to_ttnn
        tt = self.tt
        a, cfg = self.attrs, self.config
        if self.groups != 1 or self.kernel != (1, 1):
            raise LayoutError("lowering: linear needs a 1x1 ungrouped conv", layer=self.name)
        mm = cfg.matmul
        if not mm:
            raise LayoutError("the plan lowers this conv to linear but records no matmul config",
                              layer=self.name)
        act = activations.matmul_split(a.get("activation"))[0]
        if (mm.get("fused_activation") or None) != act:
            raise LayoutError(f"matmul config fuses {mm.get('fused_activation')!r} but the conv's "
                              f"activation is {act!r}", layer=self.name)
        wdt = common.data_type(tt, cfg.weights_dtype or self.node.precision.weights)
        dram = common.memory_config(tt, DRAM_INTERLEAVED)
        cin, cout = self.in_channels, self.out_channels
        rep = common.replicated(self.backend)
        self.weight = tt.from_torch(w.reshape(cout, cin).t().contiguous(), dtype=wdt,
                                    layout=tt.TILE_LAYOUT, device=self.device, memory_config=dram,
                                    **rep)
        self.bias = None if b is None else tt.from_torch(
            b.reshape(1, 1, 1, cout), dtype=wdt, layout=tt.TILE_LAYOUT, device=self.device,
            memory_config=dram, **rep)
        # The activation rides on the program config (fused in the matmul kernel); passing activation= as
        # well would make ttnn.linear run a separate relu op after it (matmul.cpp bound_matmul).
        self.program_config = to_ttnn(tt, SimpleNamespace(**mm))
        self.conv_config, self.slice_config, self.prepared = None, None, True

    def _call_linear(self, x):
        return self.tt.linear(x, self.weight, bias=self.bias, program_config=self.program_config,
                              memory_config=self.output_memory_config(), dtype=self.dtype(),
                              compute_kernel_config=self.get_compute_config())

    def unfused_activation(self) -> str | None:
        """The activation the conv (or the matmul it runs as) cannot fuse (run after it), or
        None."""
        where = "matmul" if self.lowering == "linear" or self.config.is_mm_conv else "conv"
        return activations.op_split(self.attrs.get("activation"), where)[1]

    def __call__(self, inputs):
        return self.activation_after(self._conv(inputs), self.unfused_activation())

    def _conv(self, inputs):
        if self.lowering == "linear":
            return self._call_linear(inputs[0])
        tt = self.tt
        kwargs = self._call_kwargs(inputs)
        if self.slice_config is not None:
            if self.config.slice:
                # conv2d_DRAM: the output is always DRAM interleaved; a memory_config is ignored
                kwargs.pop("memory_config", None)
            kwargs["slice_config"] = self.slice_config
        out, (oh, ow), (w, b) = tt.conv2d(**kwargs)
        self.weight, self.bias, self.prepared = w, b, True
        if (int(oh), int(ow)) != (self.out_shape.h, self.out_shape.w):
            raise LayoutError(f"conv2d produced {oh}x{ow}, the graph expects "
                              f"{self.out_shape.h}x{self.out_shape.w}", layer=self.name)
        return out  # [1, 1, N*OH*OW, O]: ttnn's conv output is already flat


LAYERS = {"conv2d": Conv2d}
