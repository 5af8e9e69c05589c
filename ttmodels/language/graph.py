"""The validated model graph: what the spec says, with every tensor's shape known.

A Graph is produced by ``ttmodels.language.spec.load_graph`` (parse + block expansion + validation + shape
inference) and consumed by the planner. It is plain data: no torch, no ttnn.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

TILE = 32


def round_up(x: int, m: int) -> int:
    return -(-x // m) * m


class _Unset:
    """The value of an attrs field that was not given: not a key of the mapping view."""
    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Any = _Unset()


def op_attrs(cls):
    """Make ``cls`` (an ``Attrs`` subclass with annotated fields) a frozen dataclass whose every
    field defaults to ``UNSET``: parse gives the canonical fields (conv2d's ``bn_eps`` only
    with a BN), and a node built by hand with a partial mapping keeps a partial view."""
    for name in cls.__dict__.get("__annotations__", {}):
        if name not in cls.__dict__:
            setattr(cls, name, UNSET)
    return dataclass(frozen=True, eq=False)(cls)


@dataclass(frozen=True, eq=False)
class Attrs(Mapping):
    """An op's canonical attributes (``Node.attrs``): a frozen dataclass of typed fields, one
    class per op (its registry entry's ``attrs``, declared beside its ``parse``).

    It is also a read-only mapping of its fields (a field left ``UNSET`` is not a key),
    so ``attrs["kernel"]``, ``attrs.get("bn_eps", d)``, ``dict(attrs)`` and comparing with a dict
    read as they did when attrs were dicts; new code reads the fields (``attrs.kernel``)."""

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> "Attrs":
        """The attrs of ``values`` (a mapping of field names), checked against the fields."""
        if isinstance(values, cls):
            return values
        names = {f.name for f in fields(cls)}
        unknown = [k for k in values if k not in names]
        if unknown:
            raise ValueError(f"{cls.__name__} has no field {', '.join(map(repr, unknown))} "
                             f"(fields: {', '.join(sorted(names)) or 'none'})")
        return cls(**values)

    def _unset(self, name: str) -> bool:
        return getattr(self, name) is UNSET

    def __getitem__(self, key: str) -> Any:
        if key not in self.__dataclass_fields__ or self._unset(key):
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self):
        return (k for k in self.__dataclass_fields__ if not self._unset(k))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.items())})"


@op_attrs
class NoAttrs(Attrs):
    """The attrs of an op without any (concat, softmax, global_avg_pool, ...)."""


#: op name -> its attrs class, filled by the op registry (``ops.register``): a Node built with
#: a plain mapping (tests, the oracle's replayed steps) gets its op's typed attrs
ATTRS: dict[str, type[Attrs]] = {}


@dataclass(frozen=True)
class SourceLoc:
    file: str          # path as the user gave it, or "<string>" / "<dict>"
    line: int | None   # 1-based line of the layer's mapping in the YAML, None for dicts

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line is not None else self.file


@dataclass(frozen=True)
class TensorShape:
    """Logical NHWC shape of an activation. Vectors (after global pool / linear) have h = w = 1."""
    n: int
    h: int
    w: int
    c: int

    @property
    def nhwc(self) -> tuple[int, int, int, int]:
        return (self.n, self.h, self.w, self.c)

    @property
    def nchw(self) -> tuple[int, int, int, int]:
        return (self.n, self.c, self.h, self.w)

    @property
    def flat(self) -> tuple[int, int, int, int]:
        """TTNN's activation convention for CNNs: [1, 1, N*H*W, C]."""
        return (1, 1, self.n * self.h * self.w, self.c)

    @property
    def rows(self) -> int:
        return self.n * self.h * self.w

    def __str__(self) -> str:
        return f"[{self.n}, {self.h}, {self.w}, {self.c}]"


DTYPES = ("bfloat16", "bfloat8_b", "bfloat4_b", "float32")
MATH_FIDELITIES = ("LoFi", "HiFi2", "HiFi3", "HiFi4")
LAYOUT_KINDS = ("auto", "interleaved", "height_sharded", "width_sharded", "block_sharded")
BUFFERS = ("dram", "l1")


@dataclass(frozen=True)
class Precision:
    weights: str = "bfloat8_b"        # one of DTYPES
    activations: str = "bfloat16"     # one of DTYPES
    math_fidelity: str = "HiFi2"      # one of MATH_FIDELITIES
    fp32_accum: bool = False          # fp32_dest_acc_en in the compute kernel config


# ``precision: auto`` (docs/spec.md "Precision planning"): the ops whose precision the resolver
# picks (the matmul ops: their math fidelity and weights dtype are what the FPU multiplies), and
# the PCC target of the model's outputs when the spec gives none.
AUTO_OPS = ("conv2d", "linear", "conv_transpose2d")
AUTO_PCC = 0.99


def float32_followers(nodes) -> dict[str, "Precision"]:
    """The non-matmul nodes (split, concat, add, upsample, pool, ...) that carry on the float32
    activations ``precision: auto`` chose for a matmul layer: those fed (directly or through
    other followers) by an auto layer with float32 activations, that would otherwise round to
    bfloat16 right away. Name -> its precision with float32 activations and fp32_accum (a 16-bit
    Dest holds bfloat16). ``nodes`` in topological order."""
    import dataclasses
    f32: set[str] = set()           # tensors in float32 by an auto choice or a follower
    out: dict[str, Precision] = {}
    for n in nodes:
        if n.op in AUTO_OPS:
            if n.auto is not None and n.precision.activations == "float32":
                f32.update(n.tensors)
            continue
        if n.precision.activations == "bfloat16" and any(i in f32 for i in n.inputs):
            out[n.name] = dataclasses.replace(n.precision, activations="float32", fp32_accum=True)
            f32.update(n.tensors)
    return out


@dataclass(frozen=True)
class AutoPrecision:
    """A layer under ``precision: auto``: the outputs' PCC target, where the auto was declared,
    and whether the spec's ``resolved_precision:`` gave this layer its precision (unresolved, it
    runs at HiFi4 with bfloat16 weights: the most any auto choice could give)."""
    pcc: float = AUTO_PCC
    loc: "SourceLoc | None" = None
    resolved: bool = False


@dataclass(frozen=True)
class LayoutPolicy:
    """What the spec asks for a layer's output memory: a kind, a buffer, and optionally a grid."""
    kind: str = "auto"                       # one of LAYOUT_KINDS
    buffer: str | None = None                # "dram" | "l1" | None (planner decides)
    grid: tuple[int, int] | None = None      # (x, y) cores, None = planner decides


@dataclass
class Node:
    """One layer of the expanded graph.

    ``op`` is one of ``ttmodels.ops.OPS``. ``inputs`` are names of graph inputs, earlier nodes
    or constants, in the op's operand order. ``attrs`` hold the op's canonical attributes (see
    below). ``weights`` is
    the key prefix of the layer's parameters in a state dict ("layer1.0.conv1" -> weight/bias keys),
    ``bn`` the prefix of a BatchNorm folded into a conv, both None for parameter-free ops.
    """
    name: str
    op: str
    inputs: list[str]
    attrs: Mapping[str, Any]       # its op's ``Attrs`` (a dict given here is made into them)
    shape: TensorShape
    layout: LayoutPolicy = field(default_factory=LayoutPolicy)
    precision: Precision = field(default_factory=Precision)
    loc: SourceLoc | None = None
    weights: str | None = None
    bn: str | None = None
    block: str | None = None      # name of the block instance this node came from, if any
    # Named outputs (``split``): full tensor name (``csp1.a``) -> its shape, in order. Empty for
    # single-output ops, whose one tensor is the node's name; ``shape`` is then the whole input.
    outputs: dict[str, TensorShape] = field(default_factory=dict)
    # ``precision: auto`` on this layer (a matmul op under an auto scope), else None
    auto: AutoPrecision | None = None

    def __post_init__(self):
        typed = ATTRS.get(self.op)
        if typed is not None and not isinstance(self.attrs, typed):
            self.attrs = typed.of(self.attrs)

    @property
    def tensors(self) -> tuple[str, ...]:
        """The names of the tensors this node produces (its name, or its named outputs)."""
        return tuple(self.outputs) if self.outputs else (self.name,)


# Each op's canonical attributes (all tuples fully expanded) are built by its module's ``parse``
# and listed in its entry's ``attrs_doc`` (ttmodels/ops/<op>/).


@dataclass
class Constant:
    """A named constant tensor (e.g. a per-channel scale of shape [C])."""
    name: str
    shape: tuple[int, ...]
    value: Any = None            # scalar fill, nested list, or None when it comes from weights
    weights: str | None = None   # state-dict key when the value is loaded with the weights
    dtype: str = "bfloat16"
    loc: SourceLoc | None = None


@dataclass
class Graph:
    name: str
    inputs: dict[str, TensorShape]   # graph input name -> NHWC shape (batch applied)
    nodes: list[Node]                # topological order
    constants: dict[str, Constant]
    outputs: list[str]               # names of nodes (or inputs) that are model outputs
    source: str = "<string>"
    input_precision: Precision = field(default_factory=Precision)
    # key prefixes checkpoints carry that no layer reads (spec ``ignore_weights:``)
    ignore_weights: tuple[str, ...] = ()
    # the batch the spec's explicit layouts were written for (spec ``batch:``, its default
    # batch), or None
    batch: int | None = None

    # Name -> node and name -> consumers indexes, built on first use so planning stays linear
    # in the number of layers (a linear scan per lookup made it quadratic). Rebuilt when the
    # node list changes length (graphs built node by node in tests append to ``nodes``).
    _by_name: dict[str, Node] = field(default_factory=dict, init=False, repr=False, compare=False)
    _readers: dict[str, list[Node]] = field(default_factory=dict, init=False, repr=False,
                                            compare=False)
    _indexed: int = field(default=-1, init=False, repr=False, compare=False)
    _producer: dict[str, Node] = field(default_factory=dict, init=False, repr=False, compare=False)

    def _index(self) -> None:
        if self._indexed == len(self.nodes):
            return
        self._by_name, self._producer, self._readers = {}, {}, {}
        for n in self.nodes:            # one walk (planning stays linear in depth)
            self._by_name[n.name] = n
            for t in n.tensors:
                self._producer[t] = n
            for src in dict.fromkeys(n.inputs):
                self._readers.setdefault(src, []).append(n)
        self._indexed = len(self.nodes)

    def node(self, name: str) -> Node:
        self._index()
        n = self._by_name.get(name)
        if n is None or n.name != name:
            raise KeyError(name)
        return n

    def shape_of(self, name: str) -> TensorShape:
        if name in self.inputs:
            return self.inputs[name]
        self._index()
        n = self._producer.get(name)
        if n is not None and n.outputs:
            return n.outputs[name]
        return self.node(name).shape

    def producer(self, tensor: str) -> Node:
        """The node that produces ``tensor`` (a node name, or a named output like ``csp1.a``)."""
        self._index()
        n = self._producer.get(tensor)
        if n is None:
            raise KeyError(tensor)
        return n

    def consumers(self, name: str) -> list[Node]:
        self._index()
        return list(self._readers.get(name, ()))


def moved(graph: Graph, name: str, index: int) -> Graph:
    """A copy of ``graph`` with node ``name`` run at position ``index`` (still topological: the
    planner only moves a node to right after its inputs). The caller's graph is not modified."""
    nodes = [n for n in graph.nodes if n.name != name]
    nodes.insert(index, graph.node(name))
    return replace(graph, nodes=nodes)


def const_flat(shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    """A constant's shape as the 4-D tensor the device holds (leading ones added)."""
    s = (1, 1, 1, 1) + tuple(int(v) for v in shape)
    return tuple(s[-4:])  # type: ignore[return-value]
