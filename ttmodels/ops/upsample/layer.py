"""upsample: ttnn.upsample works on NHWC [N, H, W, C]; reshape around it.

Bilinear with ``align_corners: true`` (BEVDet's FPN_LSS) has no ttnn.upsample form: ttnn 0.81.1's
upsample samples at half-pixel centres only (no align_corners argument). The plan lowers it to
``ttnn.grid_sample`` (``config.lowering == "grid_sample"``), whose bilinear kernel takes a grid
of sampling points with ``align_corners``: the grid is the output pixel lattice, prepared once on
the host with ``ttnn.prepare_grid_sample_grid`` (corner indices + four bfloat16 weights per
output pixel) and kept on the device.
"""
from __future__ import annotations

from ...errors import LayoutError
from ...runtime.layers.base import Layer


def align_corners_grid(n: int, out_h: int, out_w: int):
    """[n, out_h, out_w, 2] float32 normalized (x, y) sampling points of an align_corners=True
    resize: output pixel j samples the input at j * (in - 1) / (out - 1), i.e. at the normalized
    coordinate -1 + 2j / (out - 1) (torch's upsample_bilinear2d with align_corners; one output
    pixel samples the first input pixel)."""
    import torch

    def axis(m: int):
        if m == 1:
            return torch.full((1,), -1.0)
        return torch.arange(m, dtype=torch.float64).mul(2.0 / (m - 1)).sub(1.0).float()

    ys, xs = axis(out_h), axis(out_w)
    g = torch.stack([xs.view(1, -1).expand(out_h, out_w), ys.view(-1, 1).expand(out_h, out_w)], dim=-1)
    return g.unsqueeze(0).expand(n, out_h, out_w, 2).contiguous()


class Upsample(Layer):
    op = "upsample"

    def __init__(self, planned, params, backend, **kw):
        super().__init__(planned, params, backend, **kw)
        self.scale = [int(v) for v in self.attrs.scale]
        # the plan's mode: a bilinear upsample of a 1x1 map runs as nearest (plan.run_mode)
        self.mode = self.config.mode or self.attrs.get("mode", "nearest")
        if self.mode not in ("nearest", "bilinear"):
            raise LayoutError(f"upsample mode {self.mode!r} (expected nearest or bilinear)",
                              layer=self.name)
        self.lowering = self.config.lowering or "upsample"
        want = "grid_sample" if self.attrs.get("align_corners") else "upsample"
        if self.lowering != want:
            raise LayoutError(f"the plan runs this upsample as {self.lowering}, but align_corners="
                              f"{bool(self.attrs.get('align_corners'))} needs {want}", layer=self.name)
        self.grid = None
        if self.lowering == "grid_sample":
            self._init_grid()

    def _init_grid(self):
        from ...backends import common
        tt = self.tt
        s, o = self.input_shape(0), self.out_shape
        grid = tt.from_torch(align_corners_grid(s.n, o.h, o.w), dtype=tt.float32)
        c = self.config.pad_c or s.c
        pre = tt.prepare_grid_sample_grid(grid, [s.n, s.h, s.w, c], mode="bilinear",
                                          padding_mode="zeros", align_corners=True,
                                          output_dtype=tt.bfloat16)
        self.grid = tt.to_device(pre, self.device,
                                 memory_config=common.memory_config(tt, self.config.grid_memory))

    def __call__(self, inputs):
        tt = self.tt
        s = self.input_shape(0)
        x = tt.reshape(inputs[0], (s.n, s.h, s.w, s.c))
        mc = self.requested_memory_config()
        if self.lowering == "grid_sample":
            pad_c = self.config.pad_c
            if pad_c:       # channels % 32 (plan.plan_grid_sample): pad in DRAM, slice back
                x = tt.pad(x, [(0, 0), (0, 0), (0, 0), (0, pad_c - s.c)], 0.0,
                           memory_config=tt.DRAM_MEMORY_CONFIG)
            y = tt.grid_sample(x, self.grid, mode="bilinear", padding_mode="zeros",
                               align_corners=True, use_precomputed_grid=True,
                               memory_config=self.output_memory_config())
            if pad_c:
                tt.deallocate(x)
                o = self.out_shape
                z = tt.slice(y, [0, 0, 0, 0], [o.n, o.h, o.w, o.c],
                             memory_config=self.output_memory_config())
                tt.deallocate(y)
                y = z
        elif self.config.pad_c:
            # bilinear needs channels % 32 (plan.plan_padded_bilinear): pad in DRAM, upsample
            # (ttnn shards it), slice the channels back into the planned interleaved output
            x = tt.pad(x, [(0, 0), (0, 0), (0, 0), (0, self.config.pad_c - s.c)], 0.0,
                       memory_config=tt.DRAM_MEMORY_CONFIG)
            y = tt.upsample(x, self.scale, mode=self.mode,
                            compute_kernel_config=self.get_compute_config())
            tt.deallocate(x)
            o = self.out_shape
            z = tt.slice(y, [0, 0, 0, 0], [o.n, o.h, o.w, o.c], memory_config=mc)
            tt.deallocate(y)
            y = z
        else:
            kwargs = dict(mode=self.mode)
            if mc is not None:
                kwargs["memory_config"] = mc
            if self.mode == "bilinear":
                kwargs["compute_kernel_config"] = self.get_compute_config()
            y = tt.upsample(x, self.scale, **kwargs)
        o = self.out_shape
        return tt.reshape(y, (1, 1, o.n * o.h * o.w, o.c))


LAYERS = {"upsample": Upsample}
