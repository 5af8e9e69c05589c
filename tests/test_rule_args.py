"""The rules read typed call arguments (``rules.CallArgs``; each function says which with
``@reads``), built at the boundary from whatever mapping the caller has."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import ttmodels
from ttmodels import ops
from ttmodels.ops.binary.rules import BinaryArgs
from ttmodels.ops.conv2d.rules import ConvArgs
from ttmodels.ops.conv_transpose2d.rules import ConvTransposeArgs
from ttmodels.planning import rules as R
from ttmodels.planning.layout import HEIGHT, INTERLEAVED, ROW_MAJOR, TILE_LAYOUT, MemSpec, TensorLayout

ROOT = Path(ttmodels.__file__).parent


def test_absent_present_and_unread_keys():
    a = ConvArgs.of({"shard_layout": HEIGHT, "output_layout": None, "num_cores": 56})
    assert a.shard_layout == HEIGHT
    assert a.output_layout is None                # present, None: taken as given
    assert ConvArgs.of({}).output_layout == TILE_LAYOUT     # absent: the class default
    assert not hasattr(a, "num_cores")            # a key no conv rule reads is not carried
    assert ConvArgs.of(a) is a


def test_one_books_args_become_anothers():
    """conv_transpose2d's output is conv2d's function: its arguments convert field by field."""
    t = ConvTransposeArgs.of({"kernel": (3, 3), "shard_layout": HEIGHT, "dtype": "bfloat8_b"})
    c = ConvArgs.of(t)
    assert type(c) is ConvArgs and c.shard_layout == HEIGHT and c.dtype == "bfloat8_b"
    assert BinaryArgs.of(c).dtype == "bfloat8_b"


def _functions():
    """Every check, advice and output function the dispatch can reach: fn -> (op, kind)."""
    seen = {}
    for op, d in ops.REGISTRY.items():
        seen[d.rules], seen[d.output] = (op, "check"), (op, "output")
        if R.advise_function(op) is not None:
            seen[R.advise_function(op)] = (op, "advise")
    for op, (chk, out) in R._lowered().items():
        seen[chk], seen[out] = (op, "check"), (op, "output")
    for op in R.ADAPTER_OPS:
        seen[R.check_function(op)], seen[R.output_function(op)] = (op, "check"), (op, "output")
    return seen


def test_every_function_that_reads_arguments_declares_them():
    """A function that reads its call arguments reads fields of the class it names; one that
    names none reads none of them (it would get the caller's mapping)."""
    for fn, (op, kind) in _functions().items():
        src = inspect.getsource(fn)
        if kind == "output":
            used = re.search(r"\bq\.attrs\b", src)
        else:
            arg = list(inspect.signature(fn).parameters)[2 if kind == "advise" else 1]
            lines = src.splitlines()
            body_at = next(i for i, ln in enumerate(lines) if ln.rstrip().endswith(":")
                           and not ln.lstrip().startswith("@")) + 1
            used = re.search(rf"\b{arg}\b", "\n".join(lines[body_at:]))
        cls = getattr(fn, "reads", None)
        assert cls is not None or not used, (op, kind, fn.__qualname__)
        assert cls is None or issubclass(cls, R.CallArgs), (op, fn.__qualname__)


def test_no_rule_reads_a_mapping():
    """The ops' rule books read fields; ``attrs.get("k")`` hid typos as None."""
    for p in sorted((ROOT / "ops").glob("*/rules.py")) + [ROOT / "planning" / "rules.py"]:
        src = p.read_text()
        assert not re.search(r"attrs\.get\(|attrs\[", src), p


@pytest.mark.parametrize("op", sorted({op for op, _ in _functions().values()}))
def test_every_op_checks_and_answers_with_no_arguments(op):
    """Called with an empty mapping (a bare ttnn call), every check and output function runs:
    the arguments it reads are its class's defaults."""
    x = TensorLayout(MemSpec(INTERLEAVED, "l1"), TILE_LAYOUT, "bfloat16")
    n = 2 if op in ("add", "multiply", "subtract", "grid_sample", "concat") else 1
    ins = [x] * n
    if op == "grid_sample":
        ins = [TensorLayout(MemSpec(INTERLEAVED, "l1"), ROW_MAJOR, "bfloat16")] * 2
    shapes = [(1, 1, 64, 32)] * n
    out = MemSpec(HEIGHT, "l1", (2, 1), 2, (32, 32)) if op in R.ADAPTER_OPS else None
    assert isinstance(R.check(op, ins, {}, out, shapes=shapes), list)
    assert isinstance(R.advise(op, ins, {}, out, shapes=shapes), list)
    assert isinstance(R.output_layout(op, ins, {}, out, shapes), TensorLayout)


def test_the_sim_and_the_plans_hand_typed_arguments():
    """The sim's ops and the ops' plans build their op's ``CallArgs`` (a misspelt argument is a
    TypeError there), not a mapping literal that would drop it."""
    call = re.compile(r"\b(_check|_out_layout|R\.check|R\.output_layout|R\.advise)\(")
    for p in sorted((ROOT / "ops").glob("*/sim.py")) + sorted((ROOT / "ops").glob("*/plan.py")) \
            + [ROOT / "planning" / "plan_context.py", ROOT / "backends" / "sim" / "tensor.py"]:
        src = p.read_text()
        for m in call.finditer(src):
            depth, i = 1, m.end()
            while depth:                      # the call's argument text
                depth += {"(": 1, ")": -1}.get(src[i], 0)
                i += 1
            assert '{"' not in src[m.end():i], (p.relative_to(ROOT), src[m.start():i])
    with pytest.raises(TypeError):
        ConvArgs(shard_layuot=HEIGHT)
