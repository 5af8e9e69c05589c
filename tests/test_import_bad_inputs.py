"""No input to `ttmodels import` gives a traceback (issue 34's done-when): bad module references,
factories that raise or return no module, forwards the tracer cannot take, outputs that are no
map, bad sizes. Each gives exit 2 and one ``error:`` line (the unsupported-node list: a header
and its entries), never a traceback, and writes no spec."""
import pytest

from ttmodels.tools.cli import main

NETS = """import sys
import torch
from torch import nn
class Two(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3)
    def forward(self, x, y=None):
        return self.c(x) if y is None else self.c(x) + y
class NoneOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3)
    def forward(self, x):
        self.c(x)
        return None
class StrOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3)
    def forward(self, x):
        return "hello"
def two(): return Two()
def none_out(): return NoneOut()
def str_out(): return StrOut()
def small(): return nn.Sequential(nn.Conv2d(3, 8, 7, stride=4))
def exits(): sys.exit(3)
def recursion(): return recursion()
def gen(): yield nn.Conv2d(3, 3, 1)
def number(): return 42
"""


@pytest.mark.parametrize("call, size, what", [
    # an optional second forward argument: torch.fx makes it an input, ShapeProp printed its
    # traceback and a message holding the node's whole stack
    ("two", (16, 16), r"cannot trace nets\.Two: TypeError: unsupported operand.* \(at nets\.py:9\)"
                      r"; forward's argument\(s\) y are traced as inputs"),
    # forward returns None: was "the imported spec does not plan: : 'outputs' is empty"
    ("none_out", (16, 16), r"an output that is None"),
    ("str_out", (16, 16), r"an output that is a str"),
    ("small", (2, 2), r"does not run on the example input \(1x3x2x2 float32\)"),
    ("small", (0, 5), r"--input-size .* must be positive"),
    ("exits", (16, 16), r"calling exits\(\) raised SystemExit: 3"),
    ("recursion", (16, 16), r"raised RecursionError"),
    ("gen", (16, 16), r"gave a generator, not a torch\.nn\.Module"),
    ("number", (16, 16), r"gave a int, not a torch\.nn\.Module"),
    ("missing", (16, 16), r"has no missing"),
])
def test_bad_inputs_give_an_error_not_a_traceback(tmp_path, capsys, call, size, what):
    import re
    f = tmp_path / "nets.py"
    f.write_text(NETS)
    out = tmp_path / "o.yaml"
    rc = main(["import", f"{f}:{call}", "-o", str(out), "--no-precision",
               "--input-size", *map(str, size)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err and err.startswith("error: "), err
    assert re.search(what, err), err
    assert not out.exists()


def test_a_module_path_that_does_not_exist(tmp_path, capsys):
    rc = main(["import", "no_such_package.models:net", "-o", str(tmp_path / "o.yaml")])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and "No module named 'no_such_package'" in err
