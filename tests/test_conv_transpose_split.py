"""Issue 11: conv_transpose2d (ttnn.conv_transpose2d) and split with named outputs.

Each against float32 torch on sim (PCC and "not torch's bits"), the docs' UNet stage and CSP
block built from user files against hand-written torch modules, the sim op's lowering (mirrored
kernel, zero insertion, the prepared weight's format), the rules, and bad input. The mock-device
check of both ops is in tests/test_verify_models.py (spec tests/specs/decoder_csp.yaml)."""
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import ttmodels
import ttmodels.backends.sim as tt
from ttmodels import formats
from ttmodels.planning import rules as R
from ttmodels.errors import LayoutError, SpecError, WeightsError
from ttmodels.planning.layout import MemSpec, TensorLayout
from ttmodels.planning.planner import plan_graph
from ttmodels.weights.reference import ReferenceModel, node_parameters, pcc
from ttmodels.language.spec import load_graph
from ttmodels.weights import load_state_dict, synthetic_images

ROOT = Path(__file__).resolve().parents[1]


def _check(layers, *, c=16, size=(6, 10), batch=2, out=None, seed=0):
    spec = {"name": "op", "inputs": {"x": {"channels": c, "size": list(size)}},
            "layers": layers, **({"outputs": out} if out else {})}
    g = load_graph(spec, batch_size=batch)
    sd = load_state_dict("random", g, seed=seed)
    x = synthetic_images(batch, c, *size, seed=seed + 1)
    ref = ReferenceModel(g, sd).run({"x": x})
    with ttmodels.build(spec, weights=sd, backend="sim", batch_size=batch) as m:
        got = m.run(x)
        plan = m.plan
    for k in ref:
        assert got[k].shape == ref[k].shape, k
        p = pcc(ref[k], got[k])
        assert p >= 0.99, (k, p)
        assert not torch.equal(ref[k], got[k])        # rounded to the formats, not torch's
    return g, plan


# ---- conv_transpose2d ----------------------------------------------------------------------

@pytest.mark.parametrize("fields,hw", [
    ({"kernel": 2, "stride": 2, "bias": True, "act": "relu"}, (12, 20)),       # UNet upsample
    ({"kernel": 3, "stride": 2, "padding": 1, "output_padding": 1}, (12, 20)),
    ({"kernel": 4, "stride": 2, "padding": 1, "groups": 4}, (12, 20)),
    ({"kernel": 3, "stride": 2, "padding": 2, "dilation": 2, "output_padding": 1}, (12, 20)),
    ({"kernel": [3, 2], "stride": [1, 2]}, (8, 20)),
    ({"kernel": 1}, (6, 10)),                                                  # matmul path
])
def test_conv_transpose2d_matches_torch_on_sim(fields, hw):
    g, plan = _check([{"name": "u", "op": "conv_transpose2d", "out": 32, **fields}])
    u = g.node("u")
    assert (u.shape.h, u.shape.w) == hw
    groups = fields.get("groups", 1)
    k = fields["kernel"] if isinstance(fields["kernel"], list) else [fields["kernel"]] * 2
    assert node_parameters(u)["u.weight"] == (16, 32 // groups, *k)     # torch's IOHW
    assert plan.layer("u").output.memory.sharded




def _doc_yaml(tag: str) -> str:
    text = (ROOT / "docs" / "custom_backbones.md").read_text()
    found = re.findall(rf"```yaml {tag}\n(.*?)```", text, re.S)
    assert len(found) == 1, tag
    return found[0]


class TorchUNetStage(torch.nn.Module):
    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.enc1, self.enc1_bn = nn.Conv2d(3, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32)
        self.enc2, self.enc2_bn = nn.Conv2d(32, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64)
        self.up = nn.ConvTranspose2d(64, 32, 2, 2)
        self.dec1, self.dec1_bn = nn.Conv2d(64, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32)

    def forward(self, x):
        e1 = F.relu(self.enc1_bn(self.enc1(x)))
        e2 = F.relu(self.enc2_bn(self.enc2(F.max_pool2d(e1, 2))))
        return F.relu(self.dec1_bn(self.dec1(torch.cat([self.up(e2), e1], 1))))


class TorchCSP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.stem, self.stem_bn = nn.Conv2d(3, 64, 3, 2, 1, bias=False), nn.BatchNorm2d(64)
        self.csp1 = nn.Module()
        self.csp1.m, self.csp1.m_bn = nn.Conv2d(32, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32)
        self.csp1.fuse, self.csp1.fuse_bn = nn.Conv2d(64, 64, 1, bias=False), nn.BatchNorm2d(64)
        self.head, self.head_bn = nn.Conv2d(64, 32, 1, bias=False), nn.BatchNorm2d(32)

    def forward(self, x):
        x = F.silu(self.stem_bn(self.stem(x)))
        a, b = torch.chunk(x, 2, dim=1)
        y = torch.cat([a, F.silu(self.csp1.m_bn(self.csp1.m(b)))], 1)
        y = F.silu(self.csp1.fuse_bn(self.csp1.fuse(y)))
        return self.head_bn(self.head(y))


@pytest.mark.parametrize("tag,module", [("unet", TorchUNetStage), ("csp", TorchCSP)])
def test_docs_example_from_a_user_file_matches_torch(tmp_path, tag, module):
    path = tmp_path / f"{tag}.yaml"
    path.write_text(_doc_yaml(tag))
    g = load_graph(str(path), batch_size=2)
    sd = load_state_dict("random", g, seed=3)
    tm = module().eval()
    tm.load_state_dict(sd)                       # torch's own key names and layouts, as they are
    x = synthetic_images(2, 3, 32, 32, seed=5)
    with torch.no_grad():
        ref = tm(x)
    with ttmodels.build(str(path), weights=sd, backend="sim", batch_size=2) as m:
        out = m(x)
        plan = m.plan
    assert pcc(ref, out) >= 0.99
    assert not torch.equal(ref, out)
    if tag == "csp":
        split = plan.layer("csp1.part")
        assert split.node.op == "split" and set(split.outputs) == {"csp1.part.a", "csp1.part.b"}
        assert [l.name for l in plan.layers].count("csp1.part") == 1    # one layer in the plan
        # the untouched half waits in L1 while the conv on the other half runs
        assert "csp1.part.a" in plan.layer("csp1.m").live_tensors


def test_sim_conv_transpose2d_lowering_and_prepared_weights():
    """The sim's op: the prepared weight is conv2d's matrix of the mirrored, in/out-swapped
    kernel rounded to bfloat8_b, and the output is the correlation of the zero-inserted, padded
    bfloat16 input with it, rounded to bfloat16 -- i.e. torch's conv_transpose2d of the rounded
    operands."""
    torch.manual_seed(0)
    dev = tt.open_device(device_id=0, l1_small_size=24576)
    try:
        x = torch.randn(2, 16, 5, 7)
        w = torch.randn(16, 8, 3, 3) * 0.2               # [Cin, Cout, kh, kw]
        b = torch.randn(8) * 0.1
        xt = tt.from_torch(x.permute(0, 2, 3, 1).reshape(1, 1, -1, 16), dtype=tt.bfloat16,
                           layout=tt.TILE_LAYOUT, device=dev, memory_config=tt.L1_MEMORY_CONFIG)
        kw = dict(device=dev, in_channels=16, out_channels=8, batch_size=2, input_height=5,
                  input_width=7, kernel_size=[3, 3], stride=[2, 2], padding=[1, 1],
                  dilation=[1, 1], groups=1)
        cfg = tt.Conv2dConfig(weights_dtype=tt.bfloat8_b)
        cc = tt.init_device_compute_kernel_config(dev.arch(), math_fidelity=tt.MathFidelity.HiFi4)
        wt = tt.prepare_conv_transpose2d_weights(
            weight_tensor=tt.from_torch(w, dtype=tt.float32), input_memory_config=tt.L1_MEMORY_CONFIG,
            input_layout=tt.TILE_LAYOUT, weights_format="IOHW", has_bias=True,
            input_dtype=tt.bfloat16, conv_config=cfg, compute_config=cc, output_padding=[1, 1], **kw)
        mirrored = w.transpose(0, 1).flip(2, 3)                                   # OIHW
        m = torch.zeros(3, 3, 32, 32)
        m[:, :, :16, :8] = mirrored.permute(2, 3, 1, 0)
        want = formats.quantize(m.reshape(1, 1, 9 * 32, 32), "bfloat8_b")
        assert wt.shape == [1, 1, 9 * 32, 32]
        assert torch.equal(tt.to_torch(wt).float(), want)
        y, (oh, ow) = tt.conv_transpose2d(
            input_tensor=xt, weight_tensor=wt, bias_tensor=tt.from_torch(b.reshape(1, 1, 1, -1),
                                                                         dtype=tt.float32),
            output_padding=[1, 1], conv_config=cfg, compute_config=cc, dtype=tt.bfloat16,
            return_output_dim=True, **kw)
        assert (oh, ow) == (10, 14)
        wq = want.reshape(3, 3, 32, 32)[:, :, :16, :8].permute(2, 3, 0, 1).flip(2, 3)  # IOHW again
        ref = F.conv_transpose2d(formats.quantize(x, "bfloat16"), wq,
                                 formats.quantize(b, "bfloat8_b"), 2, 1, 1)
        got = tt.to_torch(y).float().reshape(2, 10, 14, 8).permute(0, 3, 1, 2)
        # the same products summed in another order, then rounded to bfloat16: a bf16 ulp or so
        assert (got - ref).abs().max() <= 2 ** -7 * ref.abs().max()
        assert torch.equal(formats.quantize(got, "bfloat16"), got)
        # a DRAM input would take ttnn's DRAM-sliced path, which the sim does not model
        xd = tt.from_torch(x.permute(0, 2, 3, 1).reshape(1, 1, -1, 16), dtype=tt.bfloat16,
                           layout=tt.TILE_LAYOUT, device=dev, memory_config=tt.DRAM_MEMORY_CONFIG)
        with pytest.raises(LayoutError) as e:
            tt.conv_transpose2d(input_tensor=xd, weight_tensor=wt, conv_config=cfg,
                                output_padding=[1, 1], **kw)
        assert e.value.rule == "conv_transpose2d.l1_path"
    finally:
        tt.close_device(dev)


def test_rules_of_the_new_ops():
    for rid, op in (("conv_transpose2d.real_padding", "conv_transpose2d"),
                    ("conv_transpose2d.l1_path", "conv_transpose2d"),
                    ("slice.memory", "split"), ("conv2d.shard_scheme", "conv_transpose2d")):
        assert op in R.RULES[rid].op.split("|") and R.RULES[rid].source.startswith("ttnn/")
    sharded = TensorLayout(MemSpec("height_sharded", "l1", (8, 1), 8, (32, 64)), "tile", "bfloat16")
    assert [v.rule for v in R.check("split", [sharded], {})] == ["slice.memory"]
    vs = R.check("conv_transpose2d", [sharded], {"kernel": (3, 3), "padding": (3, 3, 3, 3),
                                                 "dilation": (1, 1)})
    assert [v.rule for v in vs] == ["conv_transpose2d.real_padding"]
    assert R.check("conv_transpose2d", [sharded], {"kernel": (3, 3), "padding": (2, 2, 2, 2),
                                                   "dilation": (1, 1)}) == []
    # the planner refuses it naming the layer (torch would crop; ttnn's pads are unsigned)
    g = load_graph({"inputs": {"x": {"channels": 8, "size": 8}},
                    "layers": [{"name": "u", "op": "conv_transpose2d", "out": 8, "kernel": 3,
                                "stride": 2, "padding": 3}]})
    with pytest.raises(LayoutError, match="exceeds dilation") as e:
        plan_graph(g)
    assert e.value.layer == "u"
    # the planner puts a sharded split input interleaved, and a DRAM conv_transpose2d input in L1
    g = load_graph({"inputs": {"x": {"channels": 8, "size": 8}},
                    "layers": [{"name": "u", "op": "conv_transpose2d", "out": 64, "kernel": 2,
                                "stride": 2},
                               {"name": "s", "op": "split", "channels": {"a": 32, "b": 32}},
                               {"name": "c", "op": "concat", "in": ["s.b", "s.a"]}]})
    plan = plan_graph(g)
    kinds = {(a.dst, a.kind) for a in plan.adapters}
    assert ("u", "to_memory_config") in kinds and ("s", "sharded_to_interleaved") in kinds
    assert all(not t.memory.sharded for t in plan.layer("s").outputs.values())


# ---- bad input ---------------------------------------------------------------------------------

def _spec_error(tmp_path, layers, channels=16):
    lines = ["inputs:", f"  x: {{channels: {channels}, size: 8}}", "layers:"]
    lines += [f"  - {layer}" for layer in layers]
    path = tmp_path / "bad.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(SpecError) as e:
        load_graph(str(path))
    return e.value, str(path)


SPLIT = "{name: csp, op: split, channels: {a: 8, b: 8}}"


@pytest.mark.parametrize("layers,line,msg", [
    ([SPLIT, "{name: c, op: conv2d, in: csp.c, out: 8, kernel: 1}"], 5,
     "split 'csp' has no output 'c'; its outputs: a, b"),
    (["{name: csp, op: split, channels: {a: 8, b: 4}}"], 4,
     "split channels a: 8, b: 4 sum to 12, but the input 'x' has 16 channels"),
    ([SPLIT, "{name: c, op: conv2d, in: csp, out: 8, kernel: 1}"], 5,
     "'csp' is a split with named outputs: use one of csp.a, csp.b"),
    ([SPLIT, "{name: c, op: conv2d, out: 8, kernel: 1}"], 5, "previous layer 'csp' is a split"),
    (["{name: csp, op: split, channels: [8, 8]}"], 4, "must map each output name"),
    (["{name: u, op: conv_transpose2d, out: 8, kernel: 2, stride: 2, output_padding: 2}"], 4,
     "output_padding .* must be smaller than the stride"),
    (["{name: u, op: conv_transpose2d, out: 8, kernel: 3, padding: 5}"], 4,
     "leaves no output"),
    (["{name: u, op: conv_transpose2d, out: 8, kernel: 2, in_channels: 8}"], 4,
     "channel mismatch"),
    (["{name: u, op: conv_transpose2d, out: 8, kernel: 2, bn: bn1}"], 4, "unknown field"),
])
def test_spec_errors_name_the_file_and_line(tmp_path, layers, line, msg):
    e, path = _spec_error(tmp_path, layers)
    assert re.search(msg, str(e)), str(e)
    assert e.file == path and e.line == line


def test_conv_transpose2d_weights_in_conv2d_layout_are_refused_naming_the_key():
    spec = {"inputs": {"x": {"channels": 16, "size": 8}},
            "layers": [{"name": "up", "op": "conv_transpose2d", "out": 8, "kernel": 2,
                        "stride": 2}]}
    bad = {"up.weight": torch.randn(8, 16, 2, 2)}             # conv2d's [out, in, kh, kw]
    with pytest.raises(WeightsError, match=r"up\.weight: expected \[16, 8, 2, 2\]"):
        ttmodels.build(spec, weights=bad, backend="sim")
