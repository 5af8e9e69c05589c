"""`ttmodels import` on modules torch.fx cannot trace symbolically (issue 34 class 5): Python
control flow on a traced value (segmentation_models_pytorch's input-size check, Linknet's
decoder branching on ``skip.shape[1]``) is taken as it goes for the example input; where even
that fails, one line names the module and the source line."""
import pytest
import torch
from torch import nn

from ttmodels.tools import importer


class Checked(nn.Module):
    """Checks its input's size in Python and branches on a skip's channel count."""

    def __init__(self):
        super().__init__()
        self.down = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.proj = nn.Conv2d(8, 16, 1)
        self.other = nn.Conv2d(8, 16, 3, padding=1)

    def forward(self, x):
        h, w = x.shape[-2:]
        if h % 4 or w % 4:
            raise RuntimeError(f"size {h}x{w} is not a multiple of 4")
        y = torch.relu(self.down(x))
        if y.shape[1] == 8 and y.size(1) > 4:       # the branch the example takes
            return self.proj(y)
        return self.other(y)


def test_control_flow_on_shapes_is_taken_for_the_example_input():
    text = importer.import_module(Checked(), torch.randn(1, 3, 16, 16))
    assert "name: proj" in text and "other" not in text.split("layers:")[1]
    assert "test_import_control_flow.py:27" in text      # the proj call's own line
    assert text.pcc >= importer.PCC_MIN


class DataDependent(nn.Module):
    def forward(self, x):
        if x.sum() > 1e9:                 # a value, not a shape: true for no input here
            return x
        return torch.relu(x)


class Broken(nn.Module):
    def forward(self, x):
        for _ in range(x.shape[0]):
            x = torch.relu(x)
        return x.numpy_only_method()     # noqa: the line the error names


def test_what_cannot_be_traced_names_the_module_and_line():
    text = importer.import_module(DataDependent(), torch.randn(1, 3, 8, 8))
    assert "op: relu" in text            # specialised on the example's value, checked after
    with pytest.raises(importer.ImportError_) as e:
        importer.import_module(Broken(), torch.randn(1, 3, 8, 8))
    msg = str(e.value)
    assert "Broken" in msg and "\n" not in msg and "numpy_only_method" in msg
