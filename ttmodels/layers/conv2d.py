"""conv2d: BatchNorm-folded weights, ttnn.conv2d with the plan's sharding decisions."""
from __future__ import annotations

from ..backends import common
from ..errors import LayoutError
from ..plans import PlannedLayer
from .base import Layer


def conv_padding(padding) -> list[int]:
    """ttnn takes [pad_h, pad_w] or [top, bottom, left, right]; use the short form when
    symmetric (the form every TT model uses)."""
    t, b, l, r = (int(p) for p in padding)
    return [t, l] if (t == b and l == r) else [t, b, l, r]


def conv2d_config(tt, planned: PlannedLayer):
    """The ``Conv2dConfig`` for a planned conv: weights dtype from the precision, the plan's shard
    layout / act_block_h / reshard decisions, ReLU fused when the node has it, activations kept
    (the executor frees tensors after their last consumer; conv must not free a shared input)."""
    node, cfg = planned.node, planned.config
    kw = dict(
        weights_dtype=common.data_type(tt, cfg.get("weights_dtype") or node.precision.weights),
        deallocate_activation=False,
        act_block_h_override=int(cfg.get("act_block_h_override") or 0),
        reshard_if_not_optimal=bool(cfg.get("reshard_if_not_optimal", False)),
        override_sharding_config=bool(cfg.get("override_sharding_config", False)),
        output_layout=common.layout(tt, cfg.get("output_layout") or planned.output.layout),
    )
    if node.attrs.get("activation") == "relu":
        kw["activation"] = common.unary_relu(tt)
    elif node.attrs.get("activation") not in (None, "none"):
        raise LayoutError(f"conv2d activation {node.attrs.get('activation')!r} is not supported "
                          "(only relu is fused)", layer=node.name)
    if cfg.get("shard_layout"):
        kw["shard_layout"] = common.tensor_memory_layout(tt, cfg["shard_layout"])
    if kw["override_sharding_config"] and cfg.get("core_grid"):
        kw["core_grid"] = common.core_range_set(tt, tuple(cfg["core_grid"]), cfg.get("num_cores"))
    for opt in ("enable_act_double_buffer", "enable_weights_double_buffer", "full_inner_dim",
                "act_block_w_div", "reallocate_halo_output", "transpose_shards"):
        if opt in cfg:
            kw[opt] = cfg[opt]
    return tt.Conv2dConfig(**kw)


class Conv2d(Layer):
    """``weight`` [O, I/groups, kh, kw] and optional ``bias`` [O], float32 with BN folded.

    Weights go to the backend once as float32 host tensors; the first call lets ttnn.conv2d
    prepare them (``return_weights_and_bias=True``: tilized, ``weights_dtype``, on device) and
    later calls reuse the prepared tensors, as TT's ResNet50 does."""
    op = "conv2d"

    def __init__(self, planned, params, backend, **kw):
        super().__init__(planned, params, backend, **kw)
        a = self.attrs
        self.in_channels, self.out_channels = int(a["in_channels"]), int(a["out_channels"])
        self.groups = int(a.get("groups", 1))
        self.kernel = tuple(int(k) for k in a["kernel"])
        if self.in_channels % self.groups:
            raise LayoutError(f"in_channels {self.in_channels} is not divisible by groups "
                              f"{self.groups}", layer=self.name)
        w = self.param("weight", shape=(self.out_channels, self.in_channels // self.groups,
                                        *self.kernel))
        b = self.param("bias", required=False, shape=(self.out_channels,))
        tt = self.tt
        self.weight = tt.from_torch(w, dtype=tt.float32)
        self.bias = None if b is None else tt.from_torch(b.reshape(1, 1, 1, -1), dtype=tt.float32)
        self.conv_config = conv2d_config(tt, planned)
        self.prepared = False

    def __call__(self, inputs):
        tt = self.tt
        s = self.input_shape(0)
        a = self.attrs
        kwargs = dict(
            input_tensor=inputs[0], weight_tensor=self.weight, bias_tensor=self.bias,
            device=self.device, in_channels=self.in_channels, out_channels=self.out_channels,
            batch_size=s.n, input_height=s.h, input_width=s.w, kernel_size=list(self.kernel),
            stride=[int(v) for v in a.get("stride", (1, 1))],
            padding=conv_padding(a.get("padding", (0, 0, 0, 0))),
            dilation=[int(v) for v in a.get("dilation", (1, 1))], groups=self.groups,
            dtype=self.dtype(), conv_config=self.conv_config,
            compute_config=self.get_compute_config(),
            return_output_dim=True, return_weights_and_bias=True)
        mc = self.requested_memory_config()
        if mc is not None:
            kwargs["memory_config"] = mc
        out, (oh, ow), (w, b) = tt.conv2d(**kwargs)
        self.weight, self.bias, self.prepared = w, b, True
        if (int(oh), int(ow)) != (self.out_shape.h, self.out_shape.w):
            raise LayoutError(f"conv2d produced {oh}x{ow}, the graph expects "
                              f"{self.out_shape.h}x{self.out_shape.w}", layer=self.name)
        return out  # [1, 1, N*OH*OW, O]: ttnn's conv output is already flat
