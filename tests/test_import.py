"""`ttmodels import` (issue 24): the tracer's table, the emitter's blocks and repeats, the
unsupported report, --partial, the self-check, module references and the command line.

Small hand-written modules, so each property is seen in isolation; the torchvision models are in
tests/test_import_models.py (a CI subset) and scripts/import_coverage.py (all of them)."""
import re

import pytest
import torch
from torch import nn

import ttmodels
from ttmodels.tools import importer
from ttmodels.tools.importer.entry import _parse_args
from ttmodels.tools.importer.selfcheck import _same_graph
from ttmodels.language.spec import load_graph
from ttmodels.weights import load_state_dict


class ConvBNAct(nn.Sequential):
    def __init__(self, cin, cout, stride=1, act=nn.ReLU, eps=1e-5):
        super().__init__(nn.Conv2d(cin, cout, 3, stride, 1, bias=False),
                         nn.BatchNorm2d(cout, eps=eps), act())


class Res(nn.Module):
    """A residual block; the first of a stage has a projection (a layer the others lack)."""

    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout, eps=1e-3)
        self.relu = nn.ReLU(inplace=True)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        idt = x if self.down is None else self.down(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + idt)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = ConvBNAct(3, 16, 2)
        self.stage = nn.Sequential(Res(16, 32, 2), Res(32, 32), Res(32, 32))
        self.head = nn.Sequential(nn.Conv2d(32, 48, 1), nn.Hardswish())
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Sequential(nn.Dropout(0.2), nn.Linear(48, 10))

    def forward(self, x):
        x = self.head(self.stage(self.stem(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


def _net():
    torch.manual_seed(0)
    m = Net().eval()
    with torch.no_grad():                     # non-trivial BN statistics
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 2.0)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
    return m


X = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(1))


@pytest.fixture(scope="module")
def net_spec():
    m = _net()
    return m, ttmodels.import_module(m, X, name="net")


def _layers(text):
    return {n.name: n for n in load_graph(text).nodes}


def test_names_are_state_dict_prefixes_and_bn_act_are_fused(net_spec):
    m, text = net_spec
    g = load_graph(text)
    nodes = {n.name: n for n in g.nodes}
    # conv + BN (its eps) + ReLU: one layer, named and weighted as the module
    stem = nodes["stem.0"]
    assert (stem.op, stem.bn, stem.attrs["activation"]) == ("conv2d", "stem.1", "relu")
    assert nodes["stage.0.conv2"].attrs["bn_eps"] == pytest.approx(1e-3)
    # the residual add takes the ReLU module's name (what torchvision's blocks call it)
    assert nodes["stage.1.relu"].op == "add" and nodes["stage.1.relu"].attrs["activation"] == "relu"
    # hardswish fuses nowhere in ttnn 0.81.1 (activations table): a layer of its own
    assert nodes["head.0"].attrs["activation"] is None and nodes["head.1"].op == "hardswish"
    # Dropout and flatten vanish; every key of the module's state dict loads as it is
    assert nodes["fc.1"].op == "linear" and nodes["fc.1"].inputs == ["pool"]
    sd = load_state_dict(m, g)
    assert set(sd) == {k for k in m.state_dict() if not k.endswith("num_batches_tracked")}


def test_repeated_blocks_become_a_block_with_repeat_and_first(net_spec):
    _, text = net_spec
    assert "blocks:\n  # " in text and "\n  res:\n" in text
    line = next(l for l in text.splitlines() if "name: stage," in l)
    assert "block: res" in line and "repeat: 3" in line
    inst = text[text.index("name: stage,"):].split("\n  # ")[0]
    assert "first:" in inst                  # the projection only the first block has
    assert re.search(r"name: down\.0, when: \"\$\{has_down_0\}\"", text)
    # the blocked spec expands to exactly the traced layers
    flat = importer.emit_spec(importer.trace(_net(), X), _net(), name="net", flat=True)
    assert _same_graph(text, flat, 1, (32, 32)) is None
    assert "block:" not in flat


def test_every_layer_has_a_comment_with_module_and_source_line(net_spec):
    _, text = net_spec
    lines = text.splitlines()
    body = lines[lines.index("layers:") + 1:]
    for i, l in enumerate(body):
        if l.startswith("  - {"):
            assert body[i - 1].startswith("  # "), l
    assert re.search(r"# Conv2d \+ BatchNorm2d stem\.1 \+ ReLU stem\.2 .*test_import\.py:\d+", text)
    assert "layout: auto" in text


def test_the_users_module_is_left_as_it_was():
    m = _net().train()
    before = {k: v.clone() for k, v in m.state_dict().items()}
    ttmodels.import_module(m, X)
    assert m.training and all(mod.training for mod in m.modules())
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())


def test_self_check_passes_and_reports(net_spec):
    _, text = net_spec
    assert text.pcc >= importer.PCC_MIN and text.max_abs < 1e-3
    assert "PCC" in text.report


def test_self_check_names_the_first_layer_that_differs(monkeypatch):
    # a wrong table row (ReLU6 read as ReLU): the check must catch it and name that layer
    class Six(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.act = nn.ReLU6()
            self.conv2 = nn.Conv2d(8, 8, 1)

        def forward(self, x):
            return self.conv2(self.act(self.conv(x) * 1.0 if False else self.conv(x)))

    m = Six().eval()
    with torch.no_grad():
        m.conv.weight.mul_(20)                 # well beyond 6
    ttmodels.import_module(m, X)               # the real row is right
    monkeypatch.setitem(importer.MODULE_OPS, "ReLU6",
                        lambda cx, node, mod, x: cx.activation(node, "relu", x))
    with pytest.raises(importer.ImportError_, match=r"first layer below 0.9999: 'conv'"):
        ttmodels.import_module(m, X)


class Unsup(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.LayerNorm(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, padding_mode="reflect")
        self.conv3 = nn.Conv2d(8, 8, 3, padding=1, padding_mode="reflect")

    def forward(self, x):
        x = torch.relu(self.conv(x))
        # W-last (not channels-last): the layer norm is over W, no spec op
        y = self.norm(x.permute(0, 3, 2, 1)).permute(0, 3, 2, 1)
        return self.conv3(self.conv2(x)) + y


def test_unsupported_nodes_are_reported_all_at_once_grouped_by_kind():
    with pytest.raises(importer.UnsupportedError) as ei:
        ttmodels.import_module(Unsup().eval(), X)
    msg = str(ei.value)
    kinds = {u.kind for u in ei.value.unsupported}
    assert {"method Tensor.permute", "module LayerNorm", "module Conv2d"} <= kinds
    # each with its module path and source line; two reflect-padded convs in one group
    assert re.search(r"module Conv2d \(2\): padding_mode='reflect'", msg)
    assert re.search(r"conv2  .*test_import\.py:\d+", msg) and "conv3" in msg
    assert re.search(r"norm  .*test_import\.py:\d+", msg)


def test_partial_stops_before_the_first_unsupported_node():
    text = ttmodels.import_module(Unsup().eval(), X, partial=True)
    g = load_graph(text)
    assert [n.name for n in g.nodes] == ["conv"] and g.outputs == ["conv"]
    assert "PARTIAL: stops before method Tensor.permute" in text
    assert text.pcc >= importer.PCC_MIN        # checked against the module's value there


def test_split_concat_and_se_multiply():
    class Csp(nn.Module):
        def __init__(self):
            super().__init__()
            self.cv = nn.Conv2d(3, 16, 1)
            self.m = nn.Conv2d(8, 8, 3, padding=1)
            self.fc = nn.Conv2d(16, 16, 1)

        def forward(self, x):
            a, b = self.cv(x).chunk(2, 1)
            y = torch.cat([a, torch.nn.functional.silu(self.m(b))], dim=1)
            s = torch.sigmoid(self.fc(y.mean((2, 3), keepdim=True)))
            return y * s

    text = ttmodels.import_module(Csp().eval(), X)
    ops = {n.name: n.op for n in load_graph(text).nodes}
    assert list(ops.values()) == ["conv2d", "split", "conv2d", "concat", "global_avg_pool",
                                  "conv2d", "multiply"]
    assert load_graph(text).node("m").attrs["activation"] == "silu"


def test_module_references(tmp_path):
    f = tmp_path / "mine.py"
    f.write_text("import torch\n"
                 "def build(width=4):\n"
                 "    return torch.nn.Sequential(torch.nn.Conv2d(3, width, 3), torch.nn.ReLU())\n")
    m, name = importer.resolve_module_ref(f"{f}:build")
    assert isinstance(m, nn.Module) and name == "build"
    m, _ = importer.resolve_module_ref(f"{f}:build(width=6)")
    assert m[0].out_channels == 6
    assert _parse_args("resnet50d, pretrained=False") == (["resnet50d"],
                                                                   {"pretrained": False})
    for bad, what in [("nocolon", "use package.module:callable"),
                      (f"{tmp_path}/none.py:build", "no file"),
                      (f"{f}:nothere", "has no nothere"),
                      ("no_such_pkg_xyz:f", "No module named")]:
        with pytest.raises(importer.ImportError_, match=what):
            importer.resolve_module_ref(bad)


def test_cli_writes_the_spec_or_nothing(tmp_path, capsys):
    from ttmodels.tools.cli import main
    f = tmp_path / "nets.py"
    f.write_text("import torch\n"
                 "def ok():\n"
                 "    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1),\n"
                 "                               torch.nn.BatchNorm2d(8), torch.nn.ReLU())\n"
                 "def bad():\n"
                 "    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.InstanceNorm2d(8))\n")
    out = tmp_path / "ok.yaml"
    assert main(["import", f"{f}:ok", "-o", str(out), "--input-size", "16", "16"]) == 0
    assert "wrote" in capsys.readouterr().out
    g = load_graph(out)
    assert [(n.name, n.bn) for n in g.nodes] == [("0", "1")]
    bad = tmp_path / "bad.yaml"
    assert main(["import", f"{f}:bad", "-o", str(bad), "--input-size", "16", "16"]) == 2
    err = capsys.readouterr().err
    assert "module InstanceNorm2d (1)" in err and "nets.py" not in err or "1  " in err
    assert not bad.exists()
    assert main(["import", f"{f}:bad", "-o", str(bad), "--input-size", "16", "16",
                 "--partial"]) == 0
    assert bad.exists()


def test_import_ttmodels_stays_light():
    import subprocess
    import sys
    code = "import ttmodels, sys; print('torch' in sys.modules, 'torch.fx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    assert out.split() == ["False", "False"]


class _Newer(nn.Module):
    """A Hardtanh that is not relu6, Mish (fuses nowhere), LeakyReLU and a flatten of a map
    into a classifier (VGG's head): the rows enrolled after issue 23's ops landed."""
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, padding=1)
        self.a1 = nn.Hardtanh(-2.0, 2.0)
        self.c2 = nn.Conv2d(16, 16, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        self.m = nn.Mish()
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        x = self.m(self.bn(self.c2(self.a1(self.c1(x)))))
        return self.fc(torch.flatten(self.pool(x), 1))


def test_hardtanh_mish_and_a_flattened_map():
    torch.manual_seed(0)
    text = ttmodels.import_module(_Newer().eval(), torch.randn(1, 3, 8, 8))
    g = load_graph(text)
    by = {n.name: n for n in g.nodes}
    assert by["c1"].attrs["activation"] == "hardtanh(-2.0, 2.0)"     # fused: it fuses in conv2d
    assert by["m"].op == "mish" and by["c2"].attrs.get("activation") is None
    assert by["flatten"].op == "flatten" and by["fc"].inputs == ["flatten"]
    assert text.pcc >= importer.PCC_MIN


def _shuffle(x, groups):
    """torchvision's channel_shuffle, as written there (view, transpose, contiguous, view)."""
    b, c, h, w = x.size()
    x = x.view(b, groups, c // groups, h, w)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(b, c, h, w)


class _Shuffle(nn.Module):
    """A ShuffleNetV2 unit: chunk, a branch, cat, the shuffle; and nn.ChannelShuffle."""
    def __init__(self, how):
        super().__init__()
        self.how = how
        self.cv = nn.Conv2d(3, 16, 1)
        self.b = nn.Conv2d(8, 8, 3, padding=1)
        self.cs = nn.ChannelShuffle(4)
        self.out = nn.Conv2d(16, 8, 1)

    def forward(self, x):
        a, b = self.cv(x).chunk(2, dim=1)
        y = torch.cat((a, torch.relu(self.b(b))), dim=1)
        if self.how == "torchvision":
            from torchvision.models.shufflenetv2 import channel_shuffle
            y = channel_shuffle(y, 2)
        elif self.how == "module":
            y = self.cs(y)
        else:
            y = _shuffle(y, 4)
        return self.out(y)


@pytest.mark.parametrize("how,groups", [("code", 4), ("torchvision", 2), ("module", 4)])
def test_channel_shuffle_view_transpose_view_is_one_layer(how, groups):
    if how == "torchvision":
        pytest.importorskip("torchvision")
    torch.manual_seed(0)
    text = ttmodels.import_module(_Shuffle(how).eval(), torch.randn(1, 3, 8, 8))
    g = load_graph(text)
    assert [n.op for n in g.nodes] == ["conv2d", "split", "conv2d", "concat", "channel_shuffle",
                                       "conv2d"]
    sh = g.nodes[4]
    assert sh.attrs["groups"] == groups and sh.inputs == ["cat"] and g.node("out").inputs == [
        sh.name]
    assert text.pcc >= 0.99999


class _NotShuffle(nn.Module):
    def __init__(self):
        super().__init__()
        self.cv = nn.Conv2d(3, 8, 1)

    def forward(self, x):
        y = self.cv(x)
        b, c, h, w = y.size()
        y = y.view(b, 2, c // 2, h, w).transpose(3, 4).contiguous()     # not the shuffle
        return y.view(b, c, h, w)


def test_a_view_transpose_that_is_not_a_shuffle_is_reported():
    with pytest.raises(importer.UnsupportedError, match=r"transpose of dims 3, 4"):
        ttmodels.import_module(_NotShuffle().eval(), X)


class _CN(nn.Module):
    """A ConvNeXt block as torchvision writes it: depthwise conv, permute to channels-last,
    LayerNorm, Linear, GELU, Linear, permute back, times a [C, 1, 1] parameter, plus the input;
    torchvision's LayerNorm2d before it."""
    def __init__(self):
        super().__init__()
        from torchvision.models.convnext import LayerNorm2d
        self.stem = nn.Conv2d(3, 16, 2, stride=2)
        self.norm = LayerNorm2d(16, eps=1e-6)
        self.dw = nn.Conv2d(16, 16, 7, padding=3, groups=16)
        self.ln = nn.LayerNorm(16, eps=1e-6)
        self.fc1 = nn.Linear(16, 64)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(64, 16)
        self.layer_scale = nn.Parameter(torch.rand(16, 1, 1) + 0.5)

    def forward(self, x):
        x = self.norm(self.stem(x))
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.fc2(self.act(self.fc1(self.ln(y)))).permute(0, 3, 1, 2)
        y = self.layer_scale * y
        y += x
        return y


def test_convnext_block_channels_last_layer_norm_linear_and_layer_scale():
    pytest.importorskip("torchvision")
    torch.manual_seed(0)
    m = _CN().eval()
    with torch.no_grad():
        for p in list(m.norm.parameters()) + list(m.ln.parameters()):
            p.add_(torch.rand_like(p) * 0.5)
    text = ttmodels.import_module(m, torch.randn(1, 3, 16, 16))
    g = load_graph(text)
    assert [(n.name, n.op) for n in g.nodes] == [
        ("stem", "conv2d"), ("norm", "layer_norm"), ("dw", "conv2d"), ("ln", "layer_norm"),
        ("fc1", "linear"), ("fc2", "linear"), ("layer_scale", "layer_scale"), ("add", "add")]
    assert g.node("fc1").attrs["activation"] == "gelu" and g.node("ln").attrs["eps"] == 1e-6
    assert g.node("layer_scale").attrs["param_shape"] == "chw"
    assert set(load_state_dict(m, g)) == set(m.state_dict())
    assert text.pcc >= 0.99999
