"""ttmodels: CNNs described as YAML specs, planned for TTNN memory layouts, run on Tenstorrent
cards (``ttnn`` backend) or on the host (``sim`` backend).

    import ttmodels
    plan = ttmodels.plan("resnet50", batch_size=2)
    model = ttmodels.build("resnet50", weights="random", backend="sim")
    logits = model(images_nchw)

Importing this package is cheap: torch, torchvision and ttnn are imported only when needed.
"""
from __future__ import annotations

from .errors import DeviceError, Error, LayoutError, SpecError, WeightsError
from .tools import ttnn_oracle as _ttnn_oracle  # noqa: F401  (gives the planner its ttnn oracle)

__version__ = "0.1.0"
__all__ = ["plan", "build", "register", "list_models", "load_graph", "import_module", "Error",
           "SpecError",
           "LayoutError", "WeightsError", "DeviceError", "formats", "__version__"]


def load_graph(spec, *, batch_size: int | None = None, input_size=None, profile: str | None = None):
    """Parse and validate a spec into a shape-inferred Graph (see ``ttmodels.language.spec``)."""
    from .language.spec import load_graph as _load
    return _load(spec, batch_size=batch_size, input_size=input_size, profile=profile)


def plan(spec, *, batch_size: int = 1, input_size=None, profile: str | None = None,
         arch: str | None = None, mesh=None, oracle=None, device: str | None = None):
    """Plan a spec: every tensor's memory layout resolved, adapters inserted where needed.

    ``spec`` is a registered or shipped config name, a path, YAML text or a dict. ``device``: the
    system, in one word: "n150" (the default), "n300", "t3000", "galaxy" (32 Wormhole chips),
    "p150" (Blackhole), "p150x4"; the plan is for its arch (``plan.system``, ``plan.arch``).
    A multi-chip system, or ``mesh`` (None, "n300", "t3000", "galaxy" or (rows, cols) of
    Wormhole chips), plans data parallel: the plan is for each chip's ``batch_size / chips``
    (which must divide) and shows the mesh. ``oracle``: ask the
    installed ttnn on a mock device (True / False; None: unless ``TTMODELS_TTNN_ORACLE=0``),
    docs/layouts.md "ttnn in the planning loop"; ``plan.ttnn`` says what it confirmed."""
    from .runtime.builder import make_plan
    return make_plan(spec, batch_size=batch_size, input_size=input_size, profile=profile,
                     arch=arch, mesh=mesh, oracle=oracle, device=device)


def build(spec, *, weights=None, backend: str = "auto", batch_size: int = 1, input_size=None,
          profile: str | None = None, key_map=None, ignore=None, cache: bool | str = True,
          mesh=None, keep_params: bool = False, device: str | None = None):
    """Build a runnable Model: spec -> plan -> prepared weights -> layers on a backend.

    ``weights``: None or "random" (seeded, BatchNorm calibrated), "pretrained", a state dict, an
    ``nn.Module``, or a path to ``.safetensors`` / ``.pth``. ``key_map`` renames, reshapes or drops
    the weights' keys (a dict or a callable, see ``ttmodels.weights``); ``ignore`` (a key prefix
    or a list of them, e.g. ``["aux_head."]``) drops the keys under those (a spec's own
    ``ignore_weights:`` prefixes are always dropped). ``cache``: True (the default
    directory), False, or a directory for prepared weights; one that cannot be used means no
    cache, with a warning. ``backend``: "auto", "sim" or "ttnn".
    ``device``: the system by name (as ``plan``'s: "n150", "p150", "galaxy", ...); ``mesh``: None
    (one chip), "n150", "n300", "t3000", "galaxy" or (rows, cols): one replica per chip, the
    batch split over the chips; ``model(x)`` still takes and returns the whole batch.
    Weights are prepared for the backend during the build; the BN-folded float32 host copies
    are then dropped unless ``keep_params`` (layers' ``params``).
    """
    from .runtime.builder import build as _build
    return _build(spec, weights=weights, backend=backend, batch_size=batch_size,
                  input_size=input_size, profile=profile, key_map=key_map, ignore=ignore, cache=cache, mesh=mesh,
                  keep_params=keep_params, device=device)


def import_module(module, example_input, *, name: str | None = None, partial: bool = False,
                  check: bool = True):
    """The spec (YAML text) a person would write for a PyTorch ``module``, traced with torch.fx
    on ``example_input`` (NCHW): layer names are the module's state-dict prefixes, repeated
    structures blocks, BatchNorm and activations fused. Checks itself in the float32 profile
    against the module (``ttmodels.tools.importer``; docs/import.md)."""
    from .tools.importer import import_module as _import
    return _import(module, example_input, name=name, partial=partial, check=check)


def register(name: str, spec) -> None:
    """Register a spec (path, YAML text or dict) under ``name`` for build/plan/list_models."""
    from .language.registry import register as _register
    _register(name, spec)


def list_models() -> list[str]:
    """Names of the shipped configs and of every registered spec."""
    from .language.registry import list_models as _list
    return _list()


def __getattr__(name):
    # Submodules that pull in torch are loaded on first use.
    if name == "formats":
        import importlib
        return importlib.import_module(".formats", __name__)
    raise AttributeError(f"module 'ttmodels' has no attribute {name!r}")
