"""`ttmodels import` wiring (issue 34 class 4, issue 35 item 14): one activation module called
after two different adds (HRNet's ``fuse_act``) gives two layers, each reading its own add; a
submodule called twice (shared weights) gives a second layer with ``weights:`` naming the first
call's keys, not keys the importer invents."""
import torch
from torch import nn

from ttmodels.tools import importer


class Fuse(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = (nn.Conv2d(8, 8, 1) for _ in range(3))
        self.fuse_act = nn.ReLU()

    def forward(self, x):
        y0 = self.fuse_act(self.a(x) + x)
        y1 = self.fuse_act(self.b(x) + y0)
        return self.c(y1) + y0


def test_an_activation_module_after_two_adds():
    torch.manual_seed(0)
    text = importer.import_module(Fuse().eval(), torch.randn(1, 8, 8, 8))
    body = text.split("layers:")[1]
    assert "{name: fuse_act, op: add, in: [a, input], act: relu}" in body
    assert "{name: fuse_act_1, op: add, in: [b, fuse_act], act: relu}" in body
    assert "{name: add_2, op: add, in: [c, fuse_act]}\noutputs: add_2" in body
    assert text.pcc >= importer.PCC_MIN


def test_a_module_called_twice_shares_its_weights():
    text = importer.import_module(_TwoCalls(), torch.randn(1, 8, 8, 8))
    body = text.split("layers:")[1]
    assert "{name: conv_1, op: conv2d, out: 8, kernel: 3, padding: 1, bias: true, weights: conv}" \
        in body
    assert "weights: bn" in body and "weights: fc" in body
    assert "conv_1.weight" not in text
    assert text.pcc >= importer.PCC_MIN


class _TwoCalls(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(8, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 8)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
        self.eval()

    def forward(self, x):
        x = self.conv(torch.relu(self.conv(x)))
        x = torch.relu(self.bn(x)) + self.bn(torch.sigmoid(x))
        v = self.fc(x.mean((2, 3)))
        return self.fc(torch.relu(v))
