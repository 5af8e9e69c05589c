"""group_norm over the channels of each sample: ``ttnn.group_norm`` on ``[N, 1, H*W, C]``, its
weight, bias and mask prepared by ttnn's own helpers for the core grid ttnn picks."""
from __future__ import annotations

from ...backends import common
from ...runtime.layers.base import Layer
from .columns import virtual_columns


class GroupNorm(Layer):
    """group_norm of [1, 1, N*H*W, C]: reshaped to ttnn's [N, 1, H*W, C] (a view at batch 1),
    ``ttnn.group_norm`` with ``inplace=False`` (refused for TILE inputs) and the input's memory
    config (its default output is DRAM), reshaped back. The weight and bias are ROW_MAJOR
    ``[1, 1, rows, 32]`` (``create_group_norm_weight_bias_rm``) and the mask TILE
    (``create_group_norm_input_mask``), for the column split of the core grid
    ``determine_expected_group_norm_dram_grid_size`` picks; the call passes that grid."""
    op = "group_norm"

    def __init__(self, planned, params, backend, **kw):
        super().__init__(planned, params, backend, **kw)
        s, tt = self.out_shape, self.tt
        c, g = int(s.c), int(self.attrs.groups)
        self.grid = tt.determine_expected_group_norm_dram_grid_size(
            device=self.device, num_channels=c, num_groups=g, input_nhw=s.n * s.h * s.w,
            num_batches=s.n)
        cols = virtual_columns(self.grid.x, c, g)
        mem = common.memory_config(tt, planned.config.constant_memory)
        dt = common.data_type(tt, planned.config.constant_dtype)
        rep = common.replicated(self.backend)
        mask = tt.to_torch(tt.create_group_norm_input_mask(c, g, cols, dt))
        self.mask = tt.from_torch(mask, dtype=dt, layout=tt.TILE_LAYOUT, device=self.device,
                                  memory_config=mem, **rep)
        self.weight = self.bias = None
        if self.attrs.get("affine", True):
            self.weight, self.bias = (
                tt.from_torch(tt.create_group_norm_weight_bias_rm(self.param(k, shape=(c,)), c, cols),
                              dtype=dt, layout=tt.ROW_MAJOR_LAYOUT, device=self.device,
                              memory_config=mem, **rep)
                for k in ("weight", "bias"))

    def __call__(self, inputs):
        s, tt = self.out_shape, self.tt
        x = inputs[0]
        batched = s.n > 1
        if batched:
            x = tt.reshape(x, (s.n, 1, s.h * s.w, s.c))
        y = tt.group_norm(x, num_groups=int(self.attrs.groups), epsilon=float(self.attrs.eps),
                          input_mask=self.mask, weight=self.weight, bias=self.bias,
                          memory_config=self.requested_memory_config(), core_grid=self.grid,
                          inplace=False, compute_kernel_config=self.get_compute_config())
        return tt.reshape(y, (1, 1, s.n * s.h * s.w, s.c)) if batched else y


LAYERS = {"group_norm": GroupNorm}
