"""`ttmodels import` on bad input (issue 34 class 3, issue 35 items 8, 12, 15): one clear line
naming the module reference, the module or its source line, never a traceback; the spec never
overwrites the module's source or an existing file without --force; and the tracer takes a size
read off another tensor (``F.interpolate(y, size=x.shape[-2:])``, the segmentation heads)."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ttmodels.tools import importer
from ttmodels.tools.cli import main

NETS = """import torch
def ok():
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU())
def needs_arg(width):
    return torch.nn.Conv2d(3, width, 3)
def raises():
    raise ValueError("no such config")
"""


def _cli(capsys, *argv):
    rc = main(["import", *argv, "--input-size", "16", "16"])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


@pytest.mark.parametrize("src, call, what", [
    ("def f(:\n", "f", r"bad\.py:1: syntax error"),
    ("import torch\nraise RuntimeError('boom at import')\n", "f",
     r"raised RuntimeError: boom at import \(at .*bad\.py:2\)"),
    (NETS, "needs_arg", r"calling needs_arg\(\) raised TypeError: .*width"),
    (NETS, "raises", r"calling raises\(\) raised ValueError: no such config \(at .*bad\.py:7\)"),
])
def test_module_refs_that_fail_give_one_line(tmp_path, capsys, src, call, what):
    import re
    f = tmp_path / "bad.py"
    f.write_text(src)
    rc, out, err = _cli(capsys, f"{f}:{call}", "-o", str(tmp_path / "o.yaml"))
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert re.search(what, err), err
    assert not (tmp_path / "o.yaml").exists()


def test_a_builtin_that_is_no_module(tmp_path, capsys):
    rc, out, err = _cli(capsys, "math:sqrt", "-o", str(tmp_path / "o.yaml"))
    assert rc == 2 and "Traceback" not in err and "math:sqrt" in err and "sqrt()" in err


def test_output_never_overwrites_the_source_or_an_existing_file(tmp_path, capsys):
    f = tmp_path / "nets.py"
    f.write_text(NETS)
    rc, _, err = _cli(capsys, f"{f}:ok", "-o", str(f), "--force")
    assert rc == 2 and "module's own source" in err and f.read_text() == NETS
    out = tmp_path / "net.yaml"
    out.write_text("mine\n")
    rc, _, err = _cli(capsys, f"{f}:ok", "-o", str(out))
    assert rc == 2 and "exists: give --force" in err and out.read_text() == "mine\n"
    rc, stdout, _ = _cli(capsys, f"{f}:ok", "-o", str(out), "--force")
    assert rc == 0 and "wrote" in stdout and "op: conv2d" in out.read_text()


class TwoInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)

    def forward(self, x, y):
        return self.conv(x) + y


@pytest.mark.parametrize("module, x, what", [
    (TwoInputs(), torch.randn(1, 3, 8, 8), r"forward takes 2 inputs \(x, y\)"),
    (nn.Conv2d(3, 4, 1), torch.randn(1, 5, 8, 8),
     r"does not run on the example input \(1x5x8x8 float32\): RuntimeError: .*channels"),
    (nn.Conv2d(3, 4, 1), torch.randn(1, 3, 8, 8, dtype=torch.float64), r"torch.float64 tensor"),
    (nn.Conv2d(3, 4, 1), torch.ones(1, 3, 8, 8, dtype=torch.int32), r"torch.int32 tensor"),
    (nn.Conv2d(3, 4, 1), torch.randn(1, 3, 8, 8).half(), r"torch.float16 tensor"),
    (nn.Conv2d(3, 4, 1), torch.randn(0, 3, 8, 8), r"empty dimension"),
])
def test_example_inputs_the_module_cannot_take(module, x, what):
    with pytest.raises(importer.ImportError_, match=what) as e:
        importer.import_module(module, x)
    assert "\n" not in str(e.value)


class SegHead(nn.Module):
    """A segmentation head's resize back to the input's size, as torchvision's FCN does it."""

    def __init__(self):
        super().__init__()
        self.down = nn.Conv2d(3, 8, 3, stride=4, padding=1)
        self.cls = nn.Conv2d(8, 5, 1)

    def forward(self, x):
        y = self.cls(torch.relu(self.down(x)))
        return F.interpolate(y, size=x.shape[-2:], mode="bilinear", align_corners=False)


def test_interpolate_to_a_size_read_off_the_input():
    text = importer.import_module(SegHead(), torch.randn(1, 3, 32, 32))
    assert "op: upsample, scale: 4, mode: bilinear" in text
    assert text.pcc >= importer.PCC_MIN


def _scripted():
    return torch.jit.script(nn.Sequential(nn.Conv2d(3, 4, 1), nn.ReLU()))


def _on_meta():
    return nn.Sequential(nn.Conv2d(3, 4, 1)).to("meta")


@pytest.mark.parametrize("make, what", [
    (_scripted, r"TorchScript module .* import the nn.Module it was made from"),
    (lambda: nn.Conv2d(3, 4, 1), r"a single Conv2d itself; .* nn.Sequential\(module\)"),
    (_on_meta, r"weights are on the meta device \(0.weight: no values\)"),
])
def test_modules_the_tracer_cannot_take(make, what):
    """Before: TorchScript failed inside torch.fx (an AssertionError about `traced_func_name`),
    a bare Conv2d was "conv2d on parameters weight, bias" at "(top level) ?", and meta weights
    wrote a spec (exit 0) whose self-check said the float32 profile "does not plan"."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = make()
    with pytest.raises(importer.ImportError_, match=what) as e:
        importer.import_module(module, torch.randn(1, 3, 8, 8))
    assert "\n" not in str(e.value)


def test_a_file_reference_names_its_classes_after_the_file(tmp_path, capsys):
    f = tmp_path / "mynets.py"
    f.write_text("import torch\nclass Net(torch.nn.Module):\n"
                 "    def forward(self, x):\n        raise ValueError('nope')\n")
    rc, _, err = _cli(capsys, f"{f}:Net", "-o", str(tmp_path / "o.yaml"))
    assert rc == 2 and "mynets.Net does not run" in err and "_ttmodels_import_" not in err


class ECA(nn.Module):
    """ECA attention (timm's EcaModule) but for its Conv1d's bias: ECA's own imports
    (tests/test_import_eca.py), a Conv1d that is not ECA's is refused by what it is."""

    def __init__(self):
        super().__init__()
        self.conv0 = nn.Conv2d(3, 8, 1)
        self.conv = nn.Conv1d(1, 1, kernel_size=3, padding=1, bias=True)

    def forward(self, x):
        x = self.conv0(x)
        y = self.conv(x.mean((2, 3)).view(x.shape[0], 1, -1))
        return x * torch.sigmoid(y.view(x.shape[0], -1, 1, 1))


def test_a_conv1d_is_refused_by_what_it_is():
    with pytest.raises(importer.UnsupportedError) as e:
        importer.import_module(ECA().eval(), torch.randn(1, 3, 8, 8))
    msg = str(e.value)
    assert "Conv1d (kernel 3, 1 -> 1 channels, a bias) on a [1, 1, 8] tensor: the spec has no " \
        "1-D convolution" in msg
    assert "    conv  " in msg                       # the module's path


class NestedOutputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 1)

    def forward(self, x):
        return [self.c(x), {"a": x}]


def test_a_nested_output_is_refused_not_dropped():
    """Before: the spec's outputs were {out0: c}, the dict silently gone (exit 0)."""
    with pytest.raises(importer.UnsupportedError, match=r"an output that is a dict \(only a map"):
        importer.import_module(NestedOutputs().eval(), torch.randn(1, 3, 8, 8))


def test_unreadable_arguments_name_the_reference(tmp_path, capsys):
    f = tmp_path / "nets.py"
    f.write_text(NETS)
    rc, _, err = _cli(capsys, f"{f}:ok(1+)", "-o", str(tmp_path / "o.yaml"))
    assert rc == 2 and f"module reference '{f}:ok(1+)': cannot read the arguments (1+)" in err
