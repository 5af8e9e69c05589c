"""The tiny, safe expression language of ``${...}`` in specs.

Allowed: literals (numbers, strings, booleans, None, lists), names of block parameters, arithmetic
(+ - * / // % **), comparisons (== != < <= > >= in, not in), and/or/not, ``a if c else b``.
Nothing else: no attribute access, calls, subscripts, comprehensions or lambdas. Evaluation walks a
whitelisted ``ast`` tree; sizes of numbers and exponents are bounded.
"""
from __future__ import annotations

import ast
import operator
from typing import Any, Mapping

MAX_LEN = 500
MAX_INT = 1 << 62


class ExprError(ValueError):
    """An expression that is not allowed or cannot be evaluated (message says why)."""


_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
        ast.Pow: operator.pow}
_CMP = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
        ast.Gt: operator.gt, ast.GtE: operator.ge,
        ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_SYMBOL = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
           ast.Mod: "%", ast.Pow: "**"}


def _is_num(v) -> bool:
    return isinstance(v, (int, float))


def evaluate(text: str, names: Mapping[str, Any]) -> Any:
    """Evaluate ``text`` with ``names`` as the only variables."""
    if not isinstance(text, str) or not text.strip():
        raise ExprError("empty expression")
    if len(text) > MAX_LEN:
        raise ExprError(f"expression longer than {MAX_LEN} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise ExprError(f"invalid expression '{text}': {e.msg}") from None
    except (RecursionError, MemoryError, ValueError):
        raise ExprError(f"invalid expression '{text}'") from None
    try:
        return _ev(tree.body, names, 0)
    except RecursionError:
        raise ExprError("expression nested too deeply") from None


def _ev(node: ast.AST, names: Mapping[str, Any], depth: int) -> Any:
    if depth > 50:
        raise ExprError("expression nested too deeply")
    d = depth + 1
    if isinstance(node, ast.Constant):
        if node.value is None or isinstance(node.value, (bool, int, float, str)):
            return node.value
        raise ExprError(f"literal {node.value!r} is not allowed")
    if isinstance(node, ast.Name):
        if node.id in names:
            return names[node.id]
        known = ", ".join(sorted(names)) or "none"
        raise ExprError(f"unknown name '{node.id}' (parameters: {known})")
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_ev(e, names, d) for e in node.elts]
    if isinstance(node, ast.UnaryOp):
        v = _ev(node.operand, names, d)
        if isinstance(node.op, ast.Not):
            return not v
        if isinstance(node.op, (ast.USub, ast.UAdd)) and _is_num(v):
            return -v if isinstance(node.op, ast.USub) else +v
        raise ExprError(f"unary operator not allowed on {v!r}")
    if isinstance(node, ast.BinOp):
        if type(node.op) not in _BIN:
            raise ExprError("operator not allowed")
        a, b = _ev(node.left, names, d), _ev(node.right, names, d)
        sym = _SYMBOL[type(node.op)]
        ok = (_is_num(a) and _is_num(b)) or (isinstance(node.op, ast.Add) and (
            (isinstance(a, str) and isinstance(b, str)) or (isinstance(a, list) and isinstance(b, list))))
        if not ok:
            raise ExprError(f"cannot compute {a!r} {sym} {b!r}")
        if isinstance(node.op, ast.Pow) and (abs(b) > 64 or abs(a) > (1 << 32)):
            raise ExprError(f"power {a!r} ** {b!r} is too large")
        try:
            r = _BIN[type(node.op)](a, b)
        except ZeroDivisionError:
            raise ExprError(f"division by zero in {a!r} {sym} {b!r}") from None
        except (OverflowError, ValueError, TypeError) as e:
            raise ExprError(f"cannot compute {a!r} {sym} {b!r}: {e}") from None
        if isinstance(r, complex) or (_is_num(r) and abs(r) > MAX_INT):
            raise ExprError(f"result of {a!r} {sym} {b!r} is out of range")
        return r
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            v = True
            for e in node.values:
                v = _ev(e, names, d)
                if not v:
                    return v
            return v
        v = False
        for e in node.values:
            v = _ev(e, names, d)
            if v:
                return v
        return v
    if isinstance(node, ast.Compare):
        left = _ev(node.left, names, d)
        for op, right_node in zip(node.ops, node.comparators):
            if type(op) not in _CMP:
                raise ExprError("comparison operator not allowed")
            right = _ev(right_node, names, d)
            try:
                ok = _CMP[type(op)](left, right)
            except TypeError:
                raise ExprError(f"cannot compare {left!r} and {right!r}") from None
            if not ok:
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return _ev(node.body, names, d) if _ev(node.test, names, d) else _ev(node.orelse, names, d)
    raise ExprError(f"{type(node).__name__} is not allowed in expressions (only literals, "
                    "parameter names, arithmetic, comparisons, and/or/not and 'a if c else b')")


def find_placeholders(s: str) -> list[tuple[int, int, str]]:
    """``(start, end, expression)`` of each ``${...}`` in ``s`` (quotes inside are respected)."""
    out, i = [], 0
    while True:
        start = s.find("${", i)
        if start < 0:
            return out
        j, quote = start + 2, None
        while j < len(s):
            c = s[j]
            if quote:
                if c == quote:
                    quote = None
            elif c in "'\"":
                quote = c
            elif c == "}":
                break
            j += 1
        if j >= len(s):
            raise ExprError(f"unterminated '${{' in '{s}'")
        out.append((start, j + 1, s[start + 2:j]))
        i = j + 1


def substitute(s: str, names: Mapping[str, Any]) -> Any:
    """A string with ``${...}``: a lone placeholder keeps the value's type, otherwise each value is
    formatted into the string."""
    spans = find_placeholders(s)
    if not spans:
        return s
    if len(spans) == 1 and spans[0][0] == 0 and spans[0][1] == len(s):
        return evaluate(spans[0][2], names)
    parts, i = [], 0
    for a, b, e in spans:
        parts.append(s[i:a])
        v = evaluate(e, names)
        parts.append(str(v).lower() if isinstance(v, bool) else str(v))
        i = b
    parts.append(s[i:])
    return "".join(parts)
