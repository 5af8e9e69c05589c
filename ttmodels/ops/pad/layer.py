"""pad: spatial zero/constant padding of an NHWC activation."""
from __future__ import annotations
from ...formats import BLOCK_FLOAT_DTYPES

from ...backends import common
from ...planning.layout import TILE_LAYOUT
from ...runtime.layers.base import Layer



class Pad(Layer):
    """Reshape [1,1,N*H*W,C] -> [N,H,W,C], ``ttnn.pad`` H and W, reshape back. ttnn's TILE pad
    cannot front-pad on device, so a TILE input is padded in ROW_MAJOR (bfloat16 when the input
    is block-float, which has no row-major form) and tilized back to its dtype."""
    op = "pad"

    def __call__(self, inputs):
        tt = self.tt
        x = inputs[0]
        s, o = self.input_shape(0), self.out_shape
        t, b, l, r = (int(p) for p in self.attrs.padding)
        value = float(self.attrs.get("value", 0.0))
        src = self.planned.inputs[0]
        tiled = src.layout == TILE_LAYOUT
        rm = x
        if tiled:
            rm = tt.to_layout(x, tt.ROW_MAJOR_LAYOUT,
                              dtype=tt.bfloat16 if src.dtype in BLOCK_FLOAT_DTYPES else None)
        v = tt.reshape(rm, (s.n, s.h, s.w, s.c))
        kwargs = {}
        mc = self.requested_memory_config()
        if mc is not None:
            kwargs["memory_config"] = mc
        p = tt.pad(v, [(0, 0), (t, b), (l, r), (0, 0)], value, **kwargs)
        out = tt.reshape(p, (1, 1, o.n * o.h * o.w, o.c))
        if not tiled:
            return out
        res = tt.to_layout(out, tt.TILE_LAYOUT, dtype=common.data_type(tt, self.planned.output.dtype))
        tt.deallocate(rm)
        tt.deallocate(p)
        return res


LAYERS = {"pad": Pad}
