"""max_pool2d, avg_pool2d and the global average pool (avg_pool2d over the whole map)."""
from __future__ import annotations

from ...backends import common
from ...runtime.layers.base import Layer
from ..conv2d.layer import conv_padding
from . import exact_global
from . import exact_window


class _Pool(Layer):
    def common_kwargs(self) -> dict:
        """The pool's keywords besides its geometry: built once (the plan is static), a fresh
        dict per call."""
        return dict(self._once("common_kwargs", self._common_kwargs))

    def _common_kwargs(self) -> dict:
        tt = self.tt
        cfg = self.config
        kw = dict(dtype=self.dtype(),
                  output_layout=common.layout(tt, cfg.output_layout or
                                              self.planned.output.layout),
                  deallocate_input=False)
        scheme = cfg.applied_shard_scheme
        if scheme:
            kw["applied_shard_scheme"] = common.tensor_memory_layout(tt, scheme)
        mc = self.requested_memory_config()
        if mc is not None:
            kw["memory_config"] = mc
        sl = cfg.slice
        if sl:
            # DRAM-sliced pool (ops/pool/plan.py plan_pool_sliced): the same Op2DSliceConfig as conv2d
            from ..conv2d.layer import slice_config
            kw["dram_slice_config"] = slice_config(tt, self.planned)
        return kw

    def flat(self, y):
        """ttnn's DRAM-sliced pool returns [N, OH, OW, C]; layers pass [1, 1, N*OH*OW, C]."""
        if not self.config.slice:
            return y        # the L1 path returns [1, 1, N*OH*OW, C] already
        s = self.out_shape
        shape = getattr(y, "shape", None)      # None on the signature-contract backend
        if shape is not None and len(shape) == 4 and int(shape[0]) * int(shape[1]) != 1:
            return self.tt.reshape(y, [1, 1, s.rows, int(y.shape[-1])])
        return y


    def exact(self, x):
        """The exact float32 lowering (ops/pool/exact_window.py) the plan chose."""
        g = exact_window.window(self.attrs, self.op, self.input_shape(0), self.out_shape)
        include = bool(self.attrs.get("count_include_pad", True))
        tt = self.tt

        def divisor():
            host = exact_window.reciprocal_map(g, include)
            if host is None:
                return None
            return tt.from_torch(host, dtype=tt.float32, layout=tt.ROW_MAJOR_LAYOUT,
                                 device=self.device, memory_config=self.output_memory_config(),
                                 **common.replicated(self.backend))
        return exact_window.run(
            tt, x, g, self.op, tiled_in=self.planned.inputs[0].layout == "tile",
            tiled_out=self.planned.output.layout == "tile",
            memory_config=self.output_memory_config(), count_include_pad=include,
            divisor_tensor=self._once("divisor", divisor) if self.op == "avg_pool2d" else None)


class MaxPool2d(_Pool):
    op = "max_pool2d"

    def __call__(self, inputs):
        if self.config.exact:
            return self.exact(inputs[0])
        s, a = self.input_shape(0), self.attrs
        return self.flat(self.tt.max_pool2d(
            input_tensor=inputs[0], batch_size=s.n, input_h=s.h, input_w=s.w, channels=s.c,
            kernel_size=[int(k) for k in a["kernel"]],
            stride=[int(v) for v in a.get("stride", a["kernel"])],
            padding=conv_padding(a.get("padding", (0, 0, 0, 0))),
            dilation=[int(v) for v in a.get("dilation", (1, 1))],
            ceil_mode=bool(a.get("ceil_mode", False)), **self.common_kwargs()))


class AvgPool2d(_Pool):
    op = "avg_pool2d"

    def __call__(self, inputs):
        if self.config.exact:
            return self.exact(inputs[0])
        s, a = self.input_shape(0), self.attrs
        return self.flat(self.tt.avg_pool2d(
            input_tensor=inputs[0], batch_size=s.n, input_h=s.h, input_w=s.w, channels=s.c,
            kernel_size=[int(k) for k in a["kernel"]],
            stride=[int(v) for v in a.get("stride", a["kernel"])],
            padding=conv_padding(a.get("padding", (0, 0, 0, 0))),
            ceil_mode=bool(a.get("ceil_mode", False)),
            count_include_pad=bool(a.get("count_include_pad", True)),
            compute_kernel_config=self.get_compute_config(), **self.common_kwargs()))


class GlobalAvgPool(_Pool):
    """avg_pool2d with the kernel covering the map, on the flat tensor: [1,1,N*H*W,C] ->
    [1,1,N,C]. This is what TT's ResNet50 head does (ttnn.global_avg_pool2d wants NHWC and
    reshapes around the same avg_pool2d)."""
    op = "global_avg_pool"

    def __call__(self, inputs):
        if self.config.lowering == exact_global.LOWERING:
            return exact_global.run(self, inputs[0])
        s = self.input_shape(0)
        return self.tt.avg_pool2d(
            input_tensor=inputs[0], batch_size=s.n, input_h=s.h, input_w=s.w, channels=s.c,
            kernel_size=[s.h, s.w], stride=[1, 1], padding=[0, 0],
            compute_kernel_config=self.get_compute_config(), **self.common_kwargs())


class AdaptiveAvgPool2d(_Pool):
    """ttnn.adaptive_avg_pool2d to ``size``: it has no dtype / output_layout arguments (nanobind
    signature of 0.81.1), so its output is bfloat16 ROW_MAJOR and the planner adapts consumers."""
    op = "adaptive_avg_pool2d"

    def __call__(self, inputs):
        if self.config.lowering == exact_global.LOWERING:
            return exact_global.run(self, inputs[0])
        s = self.input_shape(0)
        kw = {}
        scheme = self.config.applied_shard_scheme
        if scheme:
            kw["applied_shard_scheme"] = common.tensor_memory_layout(self.tt, scheme)
        mc = self.requested_memory_config()
        if mc is not None:
            kw["memory_config"] = mc
        return self.tt.adaptive_avg_pool2d(
            inputs[0], s.n, s.h, s.w, s.c, [int(v) for v in self.attrs.size],
            compute_kernel_config=self.get_compute_config(), **kw)


LAYERS = {"max_pool2d": MaxPool2d, "avg_pool2d": AvgPool2d, "global_avg_pool": GlobalAvgPool,
          "adaptive_avg_pool2d": AdaptiveAvgPool2d}
