"""ReferenceModel against torch modules built the usual way (nn.Conv2d + nn.BatchNorm2d ...).

Graphs are built by hand here (``GraphBuilder``) so these tests do not depend on the spec parser;
``resnet_graph`` mirrors torchvision's ResNet structure with its exact state-dict key names.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from ttmodels.errors import Error, WeightsError
from ttmodels.language.graph import Constant, Graph, Node, TensorShape
from ttmodels.weights.reference import ReferenceModel, compare, expected_parameters, optional_keys, pcc


def _out(size, k, s, pad_lo, pad_hi, d=1, ceil=False):
    span = size + pad_lo + pad_hi - d * (k - 1) - 1
    o = (-(-span // s) if ceil else span // s) + 1
    if ceil and (o - 1) * s >= size + pad_lo:
        o -= 1
    return o


class GraphBuilder:
    """Appends Nodes with canonical attrs and inferred shapes (NHWC)."""

    def __init__(self, name="g", n=1, h=32, w=32, c=3, input_name="image"):
        self.g = Graph(name=name, inputs={input_name: TensorShape(n, h, w, c)}, nodes=[],
                       constants={}, outputs=[])
        self.input = input_name

    def shape(self, x):
        return self.g.shape_of(x)

    def _add(self, name, op, inputs, attrs, shape, **kw):
        self.g.nodes.append(Node(name=name, op=op, inputs=list(inputs), attrs=attrs, shape=shape, **kw))
        return name

    def conv(self, name, x, out, k, s=1, p=None, *, bias=False, bn=True, act="relu", groups=1,
             dilation=1, weights=None, bn_prefix=None):
        si = self.shape(x)
        p = (k // 2,) * 4 if p is None else ((p,) * 4 if isinstance(p, int) else tuple(p))
        ho = _out(si.h, k, s, p[0], p[1], dilation)
        wo = _out(si.w, k, s, p[2], p[3], dilation)
        attrs = dict(in_channels=si.c, out_channels=out, kernel=(k, k), stride=(s, s), padding=p,
                     dilation=(dilation, dilation), groups=groups, bias=bias, activation=act,
                     lowering="auto")
        return self._add(name, "conv2d", [x], attrs, TensorShape(si.n, ho, wo, out),
                         weights=weights or name, bn=(bn_prefix or f"{name}_bn") if bn else None)

    def binary(self, name, op, a, b, act=None):
        s = self.shape(a) if a not in self.g.constants else self.shape(b)
        return self._add(name, op, [a, b], {"activation": act}, s)

    def relu(self, name, x):
        return self._add(name, "relu", [x], {}, self.shape(x))

    def pool(self, name, op, x, k, s, p=0, ceil=False, include=True, dilation=1):
        si = self.shape(x)
        p = (p,) * 4 if isinstance(p, int) else tuple(p)
        ho = _out(si.h, k, s, p[0], p[1], dilation, ceil)
        wo = _out(si.w, k, s, p[2], p[3], dilation, ceil)
        attrs = dict(kernel=(k, k), stride=(s, s), padding=p, ceil_mode=ceil)
        if op == "max_pool2d":
            attrs["dilation"] = (dilation, dilation)
        else:
            attrs["count_include_pad"] = include
        return self._add(name, op, [x], attrs, TensorShape(si.n, ho, wo, si.c))

    def gap(self, name, x):
        si = self.shape(x)
        return self._add(name, "global_avg_pool", [x], {}, TensorShape(si.n, 1, 1, si.c))

    def linear(self, name, x, out, bias=True, weights=None):
        si = self.shape(x)
        return self._add(name, "linear", [x], dict(in_features=si.c, out_features=out, bias=bias,
                                                    activation=None),
                         TensorShape(si.n, 1, 1, out), weights=weights or name)

    def upsample(self, name, x, scale, mode="nearest"):
        si = self.shape(x)
        return self._add(name, "upsample", [x], dict(scale=(scale, scale), mode=mode),
                         TensorShape(si.n, si.h * scale, si.w * scale, si.c))

    def concat(self, name, *xs):
        s = [self.shape(x) for x in xs]
        return self._add(name, "concat", xs, {}, TensorShape(s[0].n, s[0].h, s[0].w, sum(t.c for t in s)))

    def pad(self, name, x, p, value=0.0):
        si = self.shape(x)
        return self._add(name, "pad", [x], dict(padding=tuple(p), value=value),
                         TensorShape(si.n, si.h + p[0] + p[1], si.w + p[2] + p[3], si.c))

    def const(self, name, shape, value=None, weights=None):
        self.g.constants[name] = Constant(name=name, shape=tuple(shape), value=value, weights=weights)
        return name

    def done(self, *outputs):
        self.g.outputs = list(outputs)
        return self.g


def resnet_graph(depth=50, *, n=1, size=64, num_classes=1000, name=None) -> Graph:
    """torchvision's resnet{18,34,50,101,152} as a Graph with torchvision's key names."""
    cfg = {18: ("basic", [2, 2, 2, 2]), 34: ("basic", [3, 4, 6, 3]),
           50: ("bottleneck", [3, 4, 6, 3]), 101: ("bottleneck", [3, 4, 23, 3])}[depth]
    kind, layers = cfg
    b = GraphBuilder(name or f"resnet{depth}", n=n, h=size, w=size, c=3)
    x = b.conv("conv1", b.input, 64, 7, 2, 3, bn_prefix="bn1")
    x = b.pool("maxpool", "max_pool2d", x, 3, 2, 1)
    width = 64
    for li, nblocks in enumerate(layers, start=1):
        planes = 64 * 2 ** (li - 1)
        for bi in range(nblocks):
            s = 2 if (bi == 0 and li > 1) else 1
            pre = f"layer{li}.{bi}"
            if kind == "basic":
                out_c = planes
                y = b.conv(f"{pre}.conv1", x, planes, 3, s, 1, bn_prefix=f"{pre}.bn1")
                y = b.conv(f"{pre}.conv2", y, planes, 3, 1, 1, act=None, bn_prefix=f"{pre}.bn2")
            else:
                out_c = planes * 4
                y = b.conv(f"{pre}.conv1", x, planes, 1, 1, 0, bn_prefix=f"{pre}.bn1")
                y = b.conv(f"{pre}.conv2", y, planes, 3, s, 1, bn_prefix=f"{pre}.bn2")
                y = b.conv(f"{pre}.conv3", y, out_c, 1, 1, 0, act=None, bn_prefix=f"{pre}.bn3")
            if bi == 0 and (s != 1 or width != out_c):
                sc = b.conv(f"{pre}.downsample.0", x, out_c, 1, s, 0, act=None,
                            bn_prefix=f"{pre}.downsample.1")
            else:
                sc = x
            x = b.binary(f"{pre}.add", "add", y, sc, act="relu")
            width = out_c
    x = b.gap("avgpool", x)
    x = b.linear("fc", x, num_classes)
    return b.done(x)


# ---------------------------------------------------------------------------------------------

def _rand_bn(bn: nn.BatchNorm2d, g):
    c = bn.num_features
    with torch.no_grad():
        bn.weight.copy_(0.5 + torch.rand(c, generator=g))
        bn.bias.copy_(0.1 * torch.randn(c, generator=g))
        bn.running_mean.copy_(0.2 * torch.randn(c, generator=g))
        bn.running_var.copy_(0.5 + torch.rand(c, generator=g))


class SmallNet(nn.Module):
    """conv-bn-relu-maxpool, one BasicBlock with projection shortcut, avgpool, fc."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.b_conv1 = nn.Conv2d(8, 16, 3, 2, 1, bias=False)
        self.b_bn1 = nn.BatchNorm2d(16)
        self.b_conv2 = nn.Conv2d(16, 16, 3, 1, 1, bias=False)
        self.b_bn2 = nn.BatchNorm2d(16)
        self.down = nn.Conv2d(8, 16, 1, 2, 0, bias=False)
        self.down_bn = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        y = F.relu(self.b_bn1(self.b_conv1(x)))
        y = self.b_bn2(self.b_conv2(y))
        x = F.relu(y + self.down_bn(self.down(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def small_graph(n=2, size=32) -> Graph:
    b = GraphBuilder("small", n=n, h=size, w=size, c=3)
    x = b.conv("conv1", b.input, 8, 7, 2, 3, bn_prefix="bn1")
    x = b.pool("maxpool", "max_pool2d", x, 3, 2, 1)
    y = b.conv("b_conv1", x, 16, 3, 2, 1, bn_prefix="b_bn1")
    y = b.conv("b_conv2", y, 16, 3, 1, 1, act=None, bn_prefix="b_bn2")
    sc = b.conv("down", x, 16, 1, 2, 0, act=None, bn_prefix="down_bn")
    x = b.binary("add", "add", y, sc, act="relu")
    x = b.gap("gap", x)
    x = b.linear("fc", x, 10)
    return b.done(x)


def small_net(seed=0) -> SmallNet:
    torch.manual_seed(seed)
    net = SmallNet().eval()
    g = torch.Generator().manual_seed(seed + 1)
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            _rand_bn(m, g)
    return net


def test_small_net_matches_torch_module():
    net, graph = small_net(), small_graph()
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(3))
    ref = ReferenceModel(graph, net.state_dict())
    out = ref.run({"image": x})["fc"]
    assert out.shape == (2, 10, 1, 1)
    with torch.no_grad():
        want = net(x)
    assert (out.flatten(1) - want).abs().max().item() < 1e-4
    # Single-tensor input and return_all give every node's output.
    every = ref(x, return_all=True)
    assert set(every) == {"image"} | {n.name for n in graph.nodes}
    assert torch.equal(every["fc"], out)


def test_resnet18_matches_torchvision():
    import torchvision
    torch.manual_seed(0)
    net = torchvision.models.resnet18(num_classes=20).eval()
    g = torch.Generator().manual_seed(1)
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            _rand_bn(m, g)
    graph = resnet_graph(18, n=2, size=64, num_classes=20)
    sd = net.state_dict()
    assert set(expected_parameters(graph)) | optional_keys(graph) == set(sd)
    x = torch.randn(2, 3, 64, 64, generator=g)
    out = ReferenceModel(graph, sd).run({"image": x})["fc"].flatten(1)
    with torch.no_grad():
        want = net(x)
    assert (out - want).abs().max().item() < 1e-4


def test_resnet50_keys_and_shapes_are_torchvision():
    import torchvision
    sd = torchvision.models.resnet50().state_dict()
    graph = resnet_graph(50)
    exp = expected_parameters(graph)
    assert set(exp) | optional_keys(graph) == set(sd)
    assert all(tuple(sd[k].shape) == s for k, s in exp.items())


def _ops_graph():
    b = GraphBuilder("ops", n=2, h=9, w=11, c=4)
    a = b.conv("c_asym", b.input, 6, 3, 2, (0, 1, 1, 0), bias=True, bn=False, act=None)
    m = b.pool("mp_asym", "max_pool2d", a, 2, 1, (1, 0, 0, 1))
    ap = b.pool("ap_ceil", "avg_pool2d", m, 3, 2, 1, ceil=True, include=False)
    ap2 = b.pool("ap_asym", "avg_pool2d", m, 2, 2, (0, 1, 1, 0), include=False)
    sc = b.const("scale", (6,), value=[0.5, 1, 2, -1, 3, 0.25])
    sh = b.const("shift", (6,), weights="extra.shift")
    y = b.binary("mul", "multiply", ap, sc)
    y = b.binary("addc", "add", sh, y, act="relu")
    u = b.upsample("up", y, 2, "bilinear")
    un = b.upsample("upn", y, 2, "nearest")
    cat = b.concat("cat", u, un)
    p = b.pad("pad", cat, (1, 0, 2, 1), value=0.5)
    r = b.relu("relu", p)
    mpd = b.pool("mp_dil", "max_pool2d", r, 2, 1, 0, dilation=2)
    return b.done(mpd, ap2), a


def test_other_ops_match_torch_functional():
    graph, _ = _ops_graph()
    g = torch.Generator().manual_seed(5)
    sd = {"c_asym.weight": torch.randn(6, 4, 3, 3, generator=g), "c_asym.bias": torch.randn(6, generator=g),
          "extra.shift": torch.randn(6, generator=g)}
    x = torch.randn(2, 4, 9, 11, generator=g)
    got = ReferenceModel(graph, sd).run({"image": x}, return_all=True)

    a = F.conv2d(F.pad(x, (1, 0, 0, 1)), sd["c_asym.weight"], sd["c_asym.bias"], stride=2)
    m = F.max_pool2d(F.pad(a, (0, 1, 1, 0), value=-math.inf), 2, 1)
    ap = F.avg_pool2d(m, 3, 2, 1, ceil_mode=True, count_include_pad=False)
    # Asymmetric avg pool without padding in the count, spelled out cell by cell.
    mp = F.pad(m, (1, 0, 0, 1))
    valid = F.pad(torch.ones_like(m), (1, 0, 0, 1))
    ap2 = F.avg_pool2d(mp, 2, 2, divisor_override=1) / F.avg_pool2d(valid, 2, 2, divisor_override=1)
    y = torch.relu(sd["extra.shift"].view(1, -1, 1, 1) +
                   ap * torch.tensor([0.5, 1, 2, -1, 3, 0.25]).view(1, -1, 1, 1))
    cat = torch.cat([F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False),
                     F.interpolate(y, scale_factor=2, mode="nearest")], 1)
    r = torch.relu(F.pad(cat, (2, 1, 1, 0), value=0.5))
    mpd = F.max_pool2d(r, 2, 1, dilation=2)
    for name, want in (("c_asym", a), ("mp_asym", m), ("ap_ceil", ap), ("ap_asym", ap2),
                       ("addc", y), ("cat", cat), ("relu", r), ("mp_dil", mpd)):
        assert got[name].shape == want.shape, name
        assert (got[name] - want).abs().max().item() < 1e-5, name
    res = compare({"cat": cat}, got)
    assert res["cat"][0] > 0.99999 and res["cat"][1] < 1e-5


def test_errors_name_the_problem():
    graph = small_graph()
    sd = small_net().state_dict()
    del sd["b_bn1.running_var"]
    with pytest.raises(WeightsError, match="b_bn1.running_var"):
        ReferenceModel(graph, sd)
    ref = ReferenceModel(graph, small_net().state_dict())
    with pytest.raises(Error, match=r"input 'image' must be NCHW \[N, 3, 32, 32\]"):
        ref.run({"image": torch.zeros(1, 3, 16, 16)})
    with pytest.raises(Error, match="not given"):
        ref.run({"img": torch.zeros(1, 3, 32, 32)})
    graph.nodes[0].shape = TensorShape(2, 15, 16, 8)
    with pytest.raises(Error, match="layer 'conv1'"):
        ref.run(torch.zeros(1, 3, 32, 32))


def test_state_dict_not_modified_and_pcc():
    sd = small_net().state_dict()
    before = {k: v.clone() for k, v in sd.items()}
    ref = ReferenceModel(small_graph(), sd)
    ref.params["conv1.weight"].mul_(2)
    ref.run(torch.randn(1, 3, 32, 32))
    assert all(torch.equal(sd[k], before[k]) for k in sd)
    a = torch.randn(100)
    assert pcc(a, a) == 1.0
    assert pcc(a, 2 * a + 1) == pytest.approx(1.0)
    assert pcc(a, -a) == pytest.approx(-1.0)


def test_ceil_mode_window_starting_in_explicit_padding_is_dropped():
    # torch drops a ceil_mode window that would start in the (right/bottom) padding; with
    # asymmetric padding applied explicitly the reference must drop it too.
    b = GraphBuilder("ceil", n=1, h=4, w=4, c=2)
    m = b.pool("mp", "max_pool2d", b.input, 3, 2, (0, 2, 0, 2), ceil=True)
    a = b.pool("ap", "avg_pool2d", b.input, 3, 2, (0, 2, 0, 2), ceil=True, include=True)
    graph = b.done(m, a)
    assert graph.node("mp").shape.h == 2
    x = torch.randn(1, 2, 4, 4)
    got = ReferenceModel(graph, {}).run(x)
    want = F.max_pool2d(F.pad(x, (0, 2, 0, 2), value=-math.inf), 3, 2, ceil_mode=True)[:, :, :2, :2]
    assert torch.equal(got["mp"], want)
    assert torch.allclose(got["ap"], F.avg_pool2d(F.pad(x, (0, 2, 0, 2)), 3, 2)[:, :, :2, :2])
