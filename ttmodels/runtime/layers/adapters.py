"""Adapters: the layout conversions the planner inserts on an edge (plan.Adapter)."""
from __future__ import annotations

from ...backends import common
from ...errors import LayoutError
from ...planning.plans import Adapter

KINDS = ("to_memory_config", "sharded_to_interleaved", "interleaved_to_sharded", "reshard",
         "to_layout", "typecast")


class AdapterLayer:
    """``AdapterLayer(adapter, backend)(tensor) -> tensor`` with ``adapter.after``'s layout."""

    def __init__(self, adapter: Adapter, backend):
        if adapter.kind not in KINDS:
            raise LayoutError(f"unknown adapter kind {adapter.kind!r} on edge {adapter.edge}; "
                              f"expected one of {list(KINDS)}", layer=adapter.dst)
        self.adapter, self.backend = adapter, backend
        self._args = None   # (memory config, dtype, layout): built once, the plan is static

    def _configs(self):
        if self._args is None:
            tt, after = self.tt, self.adapter.after
            self._args = (common.memory_config(tt, after.memory), common.data_type(tt, after.dtype),
                          common.layout(tt, after.layout))
        return self._args

    @property
    def name(self) -> str:
        return self.adapter.edge

    @property
    def tt(self):
        return self.backend.tt

    def __call__(self, x):
        tt, a = self.tt, self.adapter
        before, after = a.before, a.after
        mc, dt, lay = self._configs()
        new_dtype = after.dtype != before.dtype
        moved = after.memory != before.memory
        if a.kind == "to_memory_config":
            kw = {"dtype": dt} if new_dtype else {}
            return tt.to_memory_config(x, mc, **kw)
        if a.kind == "sharded_to_interleaved":
            kw = {"output_dtype": dt} if new_dtype else {}
            return tt.sharded_to_interleaved(x, mc, **kw)
        if a.kind == "interleaved_to_sharded":
            kw = {"output_dtype": dt} if new_dtype else {}
            return tt.interleaved_to_sharded(x, mc, **kw)
        if a.kind == "reshard":
            return tt.reshard(x, mc)
        if a.kind == "to_layout":
            kw = {}
            if new_dtype:
                kw["dtype"] = dt
            if moved:
                kw["memory_config"] = mc
            return tt.to_layout(x, lay, **kw)
        # typecast
        kw = {"memory_config": mc} if moved else {}
        return tt.typecast(x, dt, **kw)

    def __repr__(self) -> str:
        return f"AdapterLayer({self.adapter.kind}: {self.adapter.edge})"
