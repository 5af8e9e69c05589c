"""linear: [1, 1, rows, in] x weight^T + bias (the classifier head after the global pool)."""
from __future__ import annotations

from .. import activations
from ...backends import common
from ...planning.layout import DRAM_INTERLEAVED
from ...runtime.layers.base import Layer


class Linear(Layer):
    """``weight`` [out, in], optional ``bias`` [out] (float32). Stored once on the device as
    TILE tensors in the precision's weights dtype: weight transposed to [in, out] (ttnn.linear
    computes a @ b), bias as [1, 1, 1, out] (TT's preprocessing of linear parameters)."""
    op = "linear"

    def __init__(self, planned, params, backend, **kw):
        super().__init__(planned, params, backend, **kw)
        a = self.attrs
        n_in, n_out = int(a["in_features"]), int(a["out_features"])
        w = self.param("weight", shape=(n_out, n_in))
        b = self.param("bias", required=False, shape=(n_out,))
        # what the matmul kernels cannot fuse runs standalone after it
        self.activation, self.activation_later = activations.matmul_split(a.get("activation"))
        tt = self.tt
        wdt = common.data_type(tt, self.node.precision.weights)
        dram = common.memory_config(tt, DRAM_INTERLEAVED)
        rep = common.replicated(self.backend)   # one copy per chip on a mesh
        self.weight = tt.from_torch(w.t().contiguous(), dtype=wdt, layout=tt.TILE_LAYOUT,
                                    device=self.device, memory_config=dram, **rep)
        self.bias = None if b is None else tt.from_torch(
            b.reshape(1, 1, 1, -1), dtype=wdt, layout=tt.TILE_LAYOUT, device=self.device,
            memory_config=dram, **rep)
        self.program_config = common.matmul_program_config(tt, self.config.program_config)

    def __call__(self, inputs):
        kwargs = dict(bias=self.bias, dtype=self.dtype(),
                      compute_kernel_config=self.get_compute_config(),
                      memory_config=self.output_memory_config())
        if self.program_config is not None:
            kwargs["program_config"] = self.program_config
        if self.activation:
            # relu as its string (what TT's models pass); others as UnaryWithParam
            kwargs["activation"] = "relu" if self.activation == "relu" else \
                activations.unary_with_param(self.tt, self.activation)
        return self.activation_after(self.tt.linear(inputs[0], self.weight, **kwargs),
                                     self.activation_later)


LAYERS = {"linear": Linear}
