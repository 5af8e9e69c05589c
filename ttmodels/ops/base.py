"""What one op of the spec language is: ``OpDef``, the registry it goes into, and the small
helpers op modules share.

Each op (or family that shares everything: add/multiply/subtract, the unary activations, the
pools) is one module of ``ttmodels.ops`` that builds ``OpDef`` entries and ``register``s them,
the way Ultralytics' ``parse_model`` table or mmengine's ``@register_module`` make an op one
entry. The entry holds every fact the rest of the library needs about the op:

* ``fields``: its spec fields and their types (spec.py validates the keys against them; the docs
  tables are checked against them);
* ``arity`` and ``parse``: how many inputs it takes, the canonical ``Node.attrs`` and the output
  shape (``parse`` gets an ``OpInput`` from the spec compiler and returns ``Parsed``);
* ``params`` / ``prepare`` / ``prepared_shapes`` / ``batch_norms``: the parameter schema (state
  dict keys and shapes), what the layer receives (BN folded), and which BatchNorm prefixes it
  reads;
* ``reference``: its float32 torch reference (``reference.ReferenceModel`` calls it);
* ``plan``: how the planner plans it (``ops/<op>/plan.py``: ``plan(ctx, node)``, found by
  convention); ``rules``: its layout-rule
  check (``rules.check``), ``output``: the layout ttnn gives its output (``rules.output_layout``),
  both functions of its ``ops/<op>/rules.py``;
  ``output_shape``: how rules derive its output [rows, C]; ``rule_op``: the ttnn op whose rules a
  node obeys; ``follows_input``: why its output layout cannot be chosen (planner messages);
* ``config``: its typed, frozen plan config (``plan_config.PlanConfig``: what the planner
  decided, what the layer reads);
* ``layer``: the layer class, ``LAYERS[op]`` of the op package's ``layer.py`` (imported on first
  use, ``OpDef.layer.resolve()``: it needs the backend); ``sim_ops``: the ttnn functions the layer
  calls (the sim backend provides each under the same name; the op package's ``sim.py`` holds the
  op's own, which the sim backend collects from every op package).

The layer class stays lazy (it needs the backend): ``OpDef.layer`` resolves it on first use
(``import ttmodels`` stays light and the
op modules import neither torch nor the planner). ``tests/test_ops_registry.py`` walks the
registry and resolves every reference.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from ..language.graph import ATTRS, Attrs, NoAttrs, Node, TensorShape
from ..planning.plan_config import PlanConfig

if TYPE_CHECKING:  # pragma: no cover
    import torch

#: field types of the spec language (docs/spec.md)
FIELD_TYPES = ("int", "pair", "pad4", "bool", "number", "choice", "act", "name", "bn", "range",
               "tensor", "ints")


@dataclass(frozen=True)
class Field:
    """One spec field of an op: its name and its type (one of FIELD_TYPES)."""
    name: str
    type: str

    def __post_init__(self):
        if self.type not in FIELD_TYPES:
            raise ValueError(f"field {self.name}: unknown type {self.type!r}")


@dataclass(frozen=True)
class Parsed:
    """What an op's ``parse`` gives the spec compiler for one layer."""
    attrs: dict[str, Any]
    shape: TensorShape
    weights: str | None = None      # state-dict key prefix of its parameters
    bn: str | None = None           # key prefix of a BatchNorm folded into it
    # named outputs (split): (name, shape) in order, each the tensor ``<layer>.<name>``, defined
    # at the spec field ``outputs_field``; empty for single-output ops
    outputs: tuple[tuple[str, TensorShape], ...] = ()
    outputs_field: str = "name"


def _no_params(node: Node) -> dict[str, tuple[int, ...]]:
    return {}


def _no_bns(node: Node) -> tuple[str, ...]:
    return ()


def _own_rule_op(node: Node) -> str:
    return node.op


@dataclass(frozen=True)
class OpDef:
    name: str
    family: str                               # ops sharing a module: "binary", "unary", "pool"...
    fields: tuple[Field, ...]                 # besides the common name, op, in, when, ...
    arity: int | str                          # 1, 2 or "2+" inputs
    parse: Callable[["OpInput"], Parsed]      # attrs and shape inference (spec.py)
    reference: Callable                       # (ReferenceModel, node, env) -> NCHW float32
    rules: Callable                           # rules check (inputs, attrs, out, shapes): rules.py
    output: Callable                          # the layout ttnn gives its output (rules.OutputQuery)
    sim_ops: tuple[str, ...]                  # ttnn functions the layer calls
    params: Callable[[Node], dict[str, tuple[int, ...]]] = _no_params   # state-dict schema
    prepare: Callable | None = None           # (node, take, f32, state_dict) -> layer params
    prepared_shapes: Callable | None = None   # (node, expected) -> {param: shape}
    init_random: Callable | None = None       # (node, weights.RandomInit) -> seeded random params
    calibrate: Callable | None = None         # (model, node, env) -> output, setting BN stats
    #                                           on the calibration batch (None: the reference)
    batch_norms: Callable[[Node], tuple[str, ...]] = _no_bns   # BN key prefixes it reads
    rule_op: Callable[[Node], str] = _own_rule_op
    output_shape: str | None = None           # rules' output [rows, C] from the inputs' when attrs
    #                                           lack it: "same", "broadcast", "concat" or None
    follows_input: str | None = None          # why its output layout is its input's
    tile_input: bool = False                  # wants TILE inputs (a pool before it outputs TILE)
    attrs: type[Attrs] = NoAttrs              # its typed, frozen Node.attrs (what parse gives)
    config: type[PlanConfig] = PlanConfig     # its typed, frozen plan config (the planner's output)
    doc: str = ""
    attrs_doc: str = ""                       # its canonical Node.attrs after parse

    @property
    def package(self) -> str:
        """The op's package ``ttmodels.ops.<op>`` (the module its ``parse`` is defined in): its
        planning is ``<package>.plan``, its layer class ``<package>.layer``, its sim functions
        ``<package>.sim``."""
        return self.parse.__module__

    @property
    def plan(self) -> Callable[[Any, Node], Any]:
        """Its planning function ``plan(ctx, node) -> PlannedLayer`` (``plan_context``): ``plan``
        of its package's ``plan`` module, imported on first use (it imports the rules, which
        import this registry; the planner calls it for every op alike)."""
        return importlib.import_module(f"{self.package}.plan").plan

    @property
    def field_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    @property
    def parametric(self) -> bool:
        return self.params is not _no_params

    @property
    def layer(self) -> "OwnLayer":
        """The op's layer class, ``.resolve()``d from its package's ``layer.py`` on first use."""
        return OwnLayer(self)


@dataclass(frozen=True)
class OwnLayer:
    """The layer class of ``op``: ``LAYERS[op.name]`` of ``<op.package>.layer``, imported on first
    use (layer code needs the backend, which ``import ttmodels`` must not import)."""
    op: OpDef

    def resolve(self) -> type:
        return importlib.import_module(f"{self.op.package}.layer").LAYERS[self.op.name]


REGISTRY: dict[str, OpDef] = {}


def register(*defs: OpDef) -> None:
    for d in defs:
        if d.name in REGISTRY:
            raise ValueError(f"op {d.name!r} is registered twice")
        REGISTRY[d.name] = d
        ATTRS[d.name] = d.attrs


def get(op: str) -> OpDef:
    d = REGISTRY.get(op)
    if d is None:
        raise KeyError(op)
    return d


class OpInput:
    """What an op's ``parse`` sees of one layer (implemented by the spec compiler): the fields
    (``f.int("out")``, ``f.pair(...)``, ``f.fail(msg, field)`` ...), the layer's name and input
    tensors, their shapes, the constants."""
    f: Any
    name: str
    ins: list[str]
    op: str

    def shape(self, i: int = 0) -> TensorShape: ...            # shape of input i (not a constant)
    def shape_of(self, t: str) -> TensorShape: ...             # any tensor's shape
    def is_constant(self, t: str) -> bool: ...
    def check_broadcast(self, t: str, x: TensorShape) -> None: ...   # constant t against x
    def tensor(self, k: str) -> tuple[str, TensorShape]: ...  # a tensor named by field k
    def key(self, k: str = "weights", default: str | None = None) -> str | None: ...
    def bn(self, k: str = "bn") -> tuple[str | None, float]: ...  # folded BN: (prefix, eps)


def window_out(n: int, k: int, s: int, p0: int, p1: int, d: int, ceil: bool,
               symmetric: bool = True) -> int:
    """PyTorch's output size of a conv / pool window along one axis."""
    span = n + p0 + p1 - d * (k - 1) - 1
    if span < 0:
        return 0
    o = (-(-span // s) if ceil else span // s) + 1
    # PyTorch: the last window must start inside the input or the left padding. Asymmetric pools
    # are run on an explicitly padded input (pad 0), so the bound is then the padded size.
    if ceil and (o - 1) * s >= (n + p0 if symmetric else n + p0 + p1):
        o -= 1
    return o


def pads(padding) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) from one int, (pad_h, pad_w) or 4 values: the one padding
    normaliser (attrs, the planner, the sim's ttnn-like calls)."""
    if isinstance(padding, int):
        return (padding,) * 4
    p = tuple(int(v) for v in padding)
    if len(p) == 2:
        return (p[0], p[0], p[1], p[1])
    if len(p) != 4:
        from ..errors import Error
        raise Error(f"padding must have 2 or 4 values, got {list(p)}")
    return p


def activation(y: "torch.Tensor", act, node: Node) -> "torch.Tensor":
    """The float32 torch reference of a (fused) activation, errors naming the layer."""
    from . import activations
    from ..errors import Error
    try:
        return activations.torch_apply(act, y)
    except ValueError as e:
        raise Error(f"layer '{node.name}': {e}") from None


def prepare_weight_bias(node: Node, take, f32, state_dict=None) -> dict:
    """``prepare`` of an op whose parameters are ``<weights>.weight`` and an optional
    ``<weights>.bias``, used as they are (float32 copies): linear, conv_transpose2d, and conv2d
    without a BatchNorm to fold."""
    p = node.weights
    w = take(f"{p}.weight")
    b = take(f"{p}.bias") if node.attrs.get("bias") else None
    out = {"weight": f32(w)}
    if b is not None:
        out["bias"] = f32(b)
    return out
