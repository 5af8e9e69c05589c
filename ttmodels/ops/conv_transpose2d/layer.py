"""conv_transpose2d: ttnn.conv_transpose2d with torch's ConvTranspose2d weights and the plan's
sharding decisions (the same ``Conv2dConfig`` as conv2d's, ops/conv2d/layer.py)."""
from __future__ import annotations

from ...backends import common
from ...errors import LayoutError
from .. import activations
from ..conv2d.layer import ConvLayer, conv2d_config


class ConvTranspose2d(ConvLayer):
    """``weight`` [Cin, Cout/groups, kh, kw] (torch's ConvTranspose2d, ``weights_format="IOHW"``)
    and optional ``bias`` [Cout], float32. Prepared at construction with
    ``ttnn.prepare_conv_transpose2d_weights`` / ``prepare_conv_transpose2d_bias`` (which mirror
    the kernel and build conv2d's weight matrix), except on the mock device, where the op
    prepares them on its first call inside the step ``ttmodels verify`` captures."""
    op = "conv_transpose2d"

    def __init__(self, planned, params, backend, **kw):
        super().__init__(planned, params, backend, **kw)
        self._read_conv_attrs()
        w = self.param("weight", shape=(self.in_channels, self.out_channels // self.groups,
                                        *self.kernel))
        b = self.param("bias", required=False, shape=(self.out_channels,))
        self.conv_config = conv2d_config(self.tt, planned)
        weight, bias = self._host_tensors(w, b)
        if getattr(backend, "name", None) == "ttnn-mock":
            self.weight, self.bias = weight, bias
        else:
            self._prepare(weight, bias)

    def _prepare(self, weight, bias) -> None:
        tt, x = self.tt, self.planned.inputs[0]
        kw = dict(self._geometry(), input_memory_config=common.memory_config(tt, x.memory),
                  input_layout=common.layout(tt, x.layout),
                  input_dtype=common.data_type(tt, x.dtype), output_dtype=self.dtype(),
                  conv_config=self.conv_config, compute_config=self.get_compute_config())
        self.weight = tt.prepare_conv_transpose2d_weights(
            weight_tensor=weight, weights_format="IOHW", has_bias=bias is not None,
            output_padding=[int(v) for v in self.attrs.output_padding], **kw)
        self.bias = None if bias is None else tt.prepare_conv_transpose2d_bias(bias_tensor=bias,
                                                                                **kw)

    def __call__(self, inputs):
        kwargs = self._call_kwargs(
            inputs, output_padding=[int(v) for v in self.attrs.output_padding])
        out, (oh, ow), (w, b) = self.tt.conv_transpose2d(**kwargs)
        self.weight, self.bias = w, b
        if (int(oh), int(ow)) != (self.out_shape.h, self.out_shape.w):
            raise LayoutError(f"conv_transpose2d produced {oh}x{ow}, the graph expects "
                              f"{self.out_shape.h}x{self.out_shape.w}", layer=self.name)
        # what conv2d_config could not fuse (activations.op_split) runs after it
        return self.activation_after(out, activations.op_split(self.attrs.get("activation"),
                                                               "conv")[1])


LAYERS = {"conv_transpose2d": ConvTranspose2d}
