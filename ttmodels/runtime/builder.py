"""spec -> graph -> plan -> prepared weights -> layers on a backend -> Model."""
from __future__ import annotations

import time


def make_plan(spec, *, batch_size=1, input_size=None, profile=None, arch=None, mesh=None,
              adapters=True, oracle=None, device=None):
    """Graph and plan for one chip's share of ``batch_size`` on the system ``device`` or
    ``mesh`` (None: one chip; ``mesh.resolve_target``), for that system's arch."""
    from .mesh import per_chip_batch, resolve_target
    from ..planning.planner import plan_graph
    from ..language.spec import load_graph

    target = resolve_target(device, mesh, arch)      # an unknown name fails before any work
    m = target.mesh
    chip_batch = batch_size if m is None else per_chip_batch(batch_size, m)
    graph = load_graph(spec, batch_size=chip_batch, input_size=input_size, profile=profile)
    plan = plan_graph(graph, arch=target.arch, adapters=adapters, oracle=oracle)
    plan.mesh = m
    plan.system = target.system.name
    return plan


def build(spec, *, weights=None, backend="auto", batch_size=1, input_size=None, profile=None,
          key_map=None, ignore=None, cache=True, mesh=None, keep_params=False, device=None):
    from ..backends import open_backend
    from .model import Model
    from .executor import Executor
    from ..backends.sim import prequantize
    from ..weights.cache import prepared_parameters

    # build_seconds: spec to layers with prepared weights (weights are prepared here, not on the
    # first call), imports excluded
    t0 = time.perf_counter()
    plan = make_plan(spec, batch_size=batch_size, input_size=input_size, profile=profile, mesh=mesh,
                     device=device)
    graph = plan.graph
    formats = _sim_weight_formats(plan, backend, keep_params)
    extra = {} if not formats else dict(postprocess=prequantize.postprocess(formats),
                                        postprocess_tag=prequantize.tag(formats),
                                        postprocess_keeps_shapes=True)
    params, info = prepared_parameters(graph, "random" if weights is None else weights,
                                       key_map=key_map, ignore=ignore, cache=cache, **extra)
    if formats:
        prequantize.mark(params, formats)
    be = open_backend(backend, mesh=plan.mesh, system=plan.system)
    if be.name == "ttnn-mock":
        # Model.run builds the layers per run on the mock device and frees them after it, so
        # that each run starts from an empty allocator (what verify and the planner model)
        return Model(plan, None, be, weights_info=info, build_seconds=time.perf_counter() - t0,
                     params=params)
    params.consumable = True        # ours alone: the executor frees each layer's host copy
    try:
        executor = Executor(plan, params, be, keep_params=keep_params)
    except BaseException:
        be.close()
        raise
    return Model(plan, executor, be, weights_info=info, build_seconds=time.perf_counter() - t0)


def _sim_weight_formats(plan, backend: str, keep_params: bool) -> dict:
    """The convs whose weights the build caches already rounded (``backends/sim/prequantize.py``):
    on the sim only, and not when the caller keeps the layers' host parameters (those stay the
    BN-folded float32 weights)."""
    from ..backends.select import resolve
    from ..backends.sim import prequantize
    from ..errors import Error
    if keep_params:
        return {}
    try:
        name = resolve(backend)
    except Error:
        return {}                       # open_backend raises it, as before
    return prequantize.conv_weight_formats(plan) if name == "sim" else {}
