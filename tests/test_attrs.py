"""Typed attrs (issue 22): ``Node.attrs`` is its op's frozen dataclass (``OpDef.attrs``, declared
beside its ``parse``), which also reads as the mapping attrs used to be."""
from __future__ import annotations

import dataclasses

import pytest

from ttmodels import ops
from ttmodels.language.graph import UNSET, Attrs, Node, TensorShape
from ttmodels.language.spec import load_graph
from ttmodels.language.registry import list_models

#: fields parse sets only sometimes (the rest are set on every node the compiler makes)
SOMETIMES = {("conv2d", "bn_eps"), ("upsample", "align_corners"), ("linear", "band")}


@pytest.mark.parametrize("model", list_models())
def test_every_node_of_a_shipped_model_has_its_ops_typed_attrs(model):
    for n in load_graph(model).nodes:
        cls = ops.get(n.op).attrs
        assert type(n.attrs) is cls and issubclass(cls, Attrs), (n.name, type(n.attrs))
        for f in dataclasses.fields(cls):
            if (n.op, f.name) not in SOMETIMES:
                assert getattr(n.attrs, f.name) is not UNSET, (n.name, f.name)
        assert dict(n.attrs) == {k: getattr(n.attrs, k) for k in n.attrs}


def test_attrs_are_frozen_typed_fields_and_a_mapping_view():
    g = load_graph({"name": "t", "inputs": {"x": {"channels": 8, "size": 8}},
                    "layers": [{"name": "c", "op": "conv2d", "out": 16, "kernel": 3,
                                "padding": 1, "act": "relu"},
                               {"name": "p", "op": "max_pool2d", "kernel": 2}]})
    c = g.node("c").attrs
    assert (c.kernel, c.stride, c.padding, c.activation) == ((3, 3), (1, 1), (1, 1, 1, 1), "relu")
    assert c["kernel"] == c.kernel and "bn_eps" not in c and c.get("bn_eps", 1e-5) == 1e-5
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.kernel = (1, 1)
    assert dataclasses.replace(c, lowering="linear").lowering == "linear"
    assert c == dict(c)                      # compares as the dict it reads as
    assert g.node("p").attrs.ceil_mode is False


def test_a_mapping_given_to_a_node_becomes_its_ops_attrs_and_unknown_keys_are_named():
    s = TensorShape(1, 4, 4, 8)
    n = Node("p", "max_pool2d", ["x"], {"kernel": (2, 2), "stride": (2, 2)}, s)
    assert type(n.attrs).__name__ == "MaxPool2dAttrs"
    assert dict(n.attrs) == {"kernel": (2, 2), "stride": (2, 2)}      # a partial view stays partial
    assert n.attrs.get("ceil_mode", False) is False and n.attrs.dilation is UNSET
    with pytest.raises(ValueError, match=r"MaxPool2dAttrs has no field 'kernal'"):
        Node("p", "max_pool2d", ["x"], {"kernal": (2, 2)}, s)
