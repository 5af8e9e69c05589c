"""Precision planning (issue 33, deliver 3): ``precision: auto`` in a spec, the resolver
(``tools/precision.py``: local errors from one teacher-forced sim run, the estimate's costs, a
greedy assignment confirmed by a full sim run), ``ttmodels precision``, the importer's default,
and ``compare``'s attributed cause per layer. Sim runs are small (tiny specs, 32x32 inputs)."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from ttmodels.errors import SpecError
from ttmodels.language.spec import load_graph
from ttmodels.weights import load_state_dict, synthetic_images

SMALL = """
name: small
inputs: {image: {channels: 3, size: [32, 32]}}
defaults:
  precision: {activations: bfloat16, auto: true}
layers:
  - {name: c1, op: conv2d, out: 32, kernel: 3, stride: 2, padding: 1, bn: b1, act: relu}
  - {name: c2, op: conv2d, out: 64, kernel: 3, padding: 1, bn: b2, act: relu}
  - {name: c3, op: conv2d, out: 64, kernel: 1, bn: b3}
  - {name: c4, op: conv2d, out: 64, kernel: 3, stride: 2, padding: 1, bn: b4, act: silu}
  - {name: pool, op: global_avg_pool}
  - {name: fc, op: linear, out: 10}
"""


# ---- the spec --------------------------------------------------------------------------------

def _auto(g):
    return {n.name: n.auto for n in g.nodes}


def test_auto_marks_the_matmul_layers_and_runs_them_at_the_most_until_resolved():
    g = load_graph(SMALL)
    auto = _auto(g)
    assert [k for k, a in auto.items() if a is not None] == ["c1", "c2", "c3", "c4", "fc"]
    assert auto["c1"].pcc == 0.99 and not auto["c1"].resolved and auto["c1"].loc.line == 5
    c1 = next(n for n in g.nodes if n.name == "c1")
    assert (c1.precision.math_fidelity, c1.precision.weights) == ("HiFi4", "bfloat16")
    assert c1.precision.activations == "bfloat16"


def test_auto_target_resolved_entries_and_what_cancels_auto():
    text = SMALL.replace("auto: true", "auto: {pcc: 0.995}") + """
profiles:
  fast: {weights: bfloat8_b, math_fidelity: LoFi}
resolved_precision:
  c2: {math_fidelity: LoFi, weights: bfloat8_b, fp32_accum: true}
"""
    text = text.replace("act: silu}", "act: silu, precision: {math_fidelity: HiFi2}}")
    g = load_graph(text)
    by = {n.name: n for n in g.nodes}
    assert by["c2"].auto.resolved and by["c2"].auto.pcc == 0.995
    assert by["c2"].precision == dataclasses.replace(by["c2"].precision, math_fidelity="LoFi",
                                                     weights="bfloat8_b", fp32_accum=True)
    assert by["c4"].auto is None and by["c4"].precision.math_fidelity == "HiFi2"   # later wins
    fast = load_graph(text, profile="fast")          # a profile without auto replaces it
    assert all(n.auto is None for n in fast.nodes)
    assert {n.precision.math_fidelity for n in fast.nodes if n.name != "c4"} == {"LoFi"}


def test_resolved_entries_name_layers_after_the_outputs_renames():
    """``ttmodels precision`` writes the graph's names, so an output renamed by ``outputs:``
    (yolov8n's heads) is found under its new name."""
    g = load_graph(SMALL + "outputs: {logits: fc}\nresolved_precision:\n"
                           "  logits: {math_fidelity: LoFi, weights: bfloat8_b}\n")
    n = g.node("logits")
    assert n.auto.resolved and n.precision.math_fidelity == "LoFi"
    assert not g.node("c1").auto.resolved


def test_the_layers_after_a_float32_choice_follow_it():
    """A resolved float32 activation is not rounded away by the next non-matmul layer: the pool
    after c4 follows it in float32 (with fp32_accum); the matmul layers keep their own."""
    text = SMALL + ("resolved_precision:\n  c4: {math_fidelity: HiFi4, weights: float32, "
                    "activations: float32, fp32_accum: true}\n")
    g = load_graph(text)
    assert g.node("c4").precision.activations == "float32"
    assert g.node("pool").precision == dataclasses.replace(
        load_graph(SMALL).node("pool").precision, activations="float32", fp32_accum=True)
    assert g.node("fc").precision.activations == "bfloat16"
    assert load_graph(SMALL).node("pool").precision.activations == "bfloat16"


@pytest.mark.parametrize("edit, line, words", [
    (("auto: true", "auto: {pcc: 1.5}"), 5, "between 0 and 1"),
    (("auto: true", "auto: {pcc: 0.99, margin: 2}"), 5, "unknown field 'margin'"),
    (("auto: true", "auto: sometimes"), 5, "true, false or {pcc: TARGET}"),
    (("layers:", "resolved_precision:\n  c9: {math_fidelity: LoFi}\nlayers:"), 7, "no layer 'c9'"),
    (("layers:", "resolved_precision:\n  pool: {math_fidelity: LoFi}\nlayers:"), 7, "global_avg_pool"),
    (("layers:", "resolved_precision:\n  c1: {math_fidelity: LoFy}\nlayers:"), 7, "'LoFi'"),
    (("layers:", "resolved_precision:\n  c1: {auto: true}\nlayers:"), 7, "unknown precision field 'auto'"),
    (("layers:", "profiles:\n  auto: {math_fidelity: LoFi}\nlayers:"), 7, "cannot be named 'auto'"),
])
def test_bad_auto_values_are_refused_at_their_line(edit, line, words):
    with pytest.raises(SpecError) as e:
        load_graph(SMALL.replace(*edit))
    assert e.value.line == line and words in str(e.value), str(e.value)


# ---- the resolver ------------------------------------------------------------------------------

def _resolve(spec, size=32, target=None, seed=0):
    from ttmodels.tools.precision import resolve_graph
    g = load_graph(spec, input_size=(size, size))
    sd = load_state_dict("random", g, seed=seed)
    x = synthetic_images(1, 3, size, size, seed=seed)
    return g, sd, x, resolve_graph(g, sd, x, target=target)


def _sim_pcc(text, sd, x, size=32):
    """The lowest output PCC of spec ``text`` on the sim against the float32 reference: an
    independent run of what the resolver wrote."""
    from ttmodels.backends import open_backend
    from ttmodels.planning.planner import plan_graph
    from ttmodels.runtime.executor import Executor, to_torch_nchw
    from ttmodels.weights import prepare_parameters
    from ttmodels.weights.reference import ReferenceModel, pcc
    g = load_graph(text, input_size=(size, size))
    ref = ReferenceModel(g, sd).run({"image": x})
    be = open_backend("sim")
    try:
        got = Executor(plan_graph(g, oracle=False), prepare_parameters(g, sd), be).run({"image": x})
        return g, min(pcc(ref[o], to_torch_nchw(be, got[o], g.shape_of(o))) for o in g.outputs)
    finally:
        be.close()


def test_resnet18_auto_is_cheaper_than_hifi4_everywhere_and_meets_the_target():
    from ttmodels.tools.precision import section_text, write_section
    spec = {"extends": "resnet18", "defaults": {"precision": "auto"}}
    g, sd, x, res = _resolve(spec)
    assert res.met and res.min_pcc >= 0.99
    assert len(res.choices) == 21
    assert res.us < 0.8 * res.us_max, res.summary()           # the estimate says cheaper
    assert sum(p.math_fidelity != "HiFi4" for p in res.choices.values()) >= 10
    # what it writes loads, applies to every auto layer and holds on the sim by itself
    base = "extends: resnet18\ndefaults:\n  precision: auto\n"
    text = write_section(base, section_text(res, "test"))
    assert write_section(text, section_text(res, "test")) == text     # rewriting replaces
    g2, low = _sim_pcc(text, sd, x)
    assert all(n.auto.resolved for n in g2.nodes if n.auto is not None)
    assert {n.name: n.precision for n in g2.nodes if n.auto} == res.choices
    assert low >= 0.99 and abs(low - res.min_pcc) < 1e-6


def test_a_tight_target_raises_precision():
    _, _, _, loose = _resolve(SMALL, target=0.99)
    _, _, _, tight = _resolve(SMALL, target=0.9999)
    assert loose.met and tight.met, (loose.log, tight.log)
    assert tight.min_pcc >= 0.9999
    assert tight.us > loose.us, (loose.summary(), tight.summary())
    rank = ("LoFi", "HiFi2", "HiFi3", "HiFi4")
    assert sum(rank.index(p.math_fidelity) for p in tight.choices.values()) > \
        sum(rank.index(p.math_fidelity) for p in loose.choices.values())


def test_an_unreachable_target_says_so():
    _, _, _, res = _resolve(SMALL, target=0.9999999)
    assert not res.met and "NOT MET" in res.summary()


# ---- attribution -----------------------------------------------------------------------------

def test_compare_names_the_sabotaged_layers_and_their_cause():
    """c2 at LoFi (fidelity) and c3 with bfloat4_b weights (format), every other layer HiFi4 with
    bfloat16 weights: those two are the layers with the lowest local PCC, and the causes named."""
    from ttmodels.tools.compare import compare_layers
    text = SMALL.replace("auto: true", "weights: bfloat16, math_fidelity: HiFi4")
    text = text.replace("bn: b2, act: relu}", "bn: b2, act: relu, precision: {math_fidelity: LoFi}}")
    text = text.replace("bn: b3}", "bn: b3, precision: {weights: bfloat4_b}}")
    rows = {r.name: r for r in compare_layers(text, x=synthetic_images(1, 3, 32, 32, seed=0))}
    assert rows["c2"].reason == "fidelity", rows["c2"]
    assert rows["c3"].reason == "weight format", rows["c3"]
    worst = sorted((r for r in rows.values() if r.op in ("conv2d", "linear")),
                   key=lambda r: r.local_pcc)[:2]
    assert {r.name for r in worst} == {"c2", "c3"}
    assert "fidelity" not in rows["c1"].reason and "weight format" not in rows["c1"].reason
    assert rows["fc"].reason.startswith("inherited")


def test_the_local_errors_see_the_truncation_each_fidelity_drops():
    """The teacher-forced run measures each candidate on the same exact inputs: for one layer
    the error falls from LoFi to HiFi4 and bfloat16 weights beat bfloat8_b at HiFi4."""
    from ttmodels.backends import open_backend
    from ttmodels.planning.planner import plan_graph
    from ttmodels.tools.precision_errors import candidates, local_errors
    from ttmodels.weights import prepare_parameters
    from ttmodels.weights.reference import ReferenceModel
    g = load_graph(SMALL)
    sd = load_state_dict("random", g)
    x = synthetic_images(1, 3, 32, 32, seed=0)
    ref = ReferenceModel(g, sd).run({"image": x}, return_all=True)
    be = open_backend("sim")
    try:
        errs = local_errors(plan_graph(g, oracle=False), prepare_parameters(g, sd), ref, be,
                            variants=candidates)
    finally:
        be.close()
    assert len(errs.by_precision["c2"]) == 18   # fused relu: with and without fp32_accum; and
    c2 = {(p.math_fidelity, p.weights, p.fp32_accum): e      # 2 with float32 activations
          for p, e in errs.by_precision["c2"].items() if p.activations == "bfloat16"}
    assert len(c2) == 16
    f = [c2[(k, "bfloat16", False)] for k in ("LoFi", "HiFi2", "HiFi3", "HiFi4")]
    assert f[0] > f[1] > f[3] and f[1] > f[2], f      # HiFi3 ~ HiFi4: the output rounding rules
    assert c2[("HiFi4", "bfloat8_b", False)] > c2[("HiFi4", "bfloat16", False)]
    assert len(errs.by_precision["c3"]) == 10  # no fused activation: fp32_accum changes nothing
    f32 = {p.weights: e for p, e in errs.by_precision["c3"].items() if p.activations == "float32"}
    assert f32["bfloat16"] < c3_hifi4(errs) and f32["float32"] < f32["bfloat16"], f32


def c3_hifi4(errs):
    return next(e for p, e in errs.by_precision["c3"].items()
                if (p.math_fidelity, p.weights, p.activations) == ("HiFi4", "bfloat16", "bfloat16"))


# SMALL's convs alone: an output of 4096 values (fc's 10 make a noisy PCC at 1e-5)
CONVS = SMALL.replace("  - {name: pool, op: global_avg_pool}\n  - {name: fc, op: linear, out: 10}\n", "")


def test_float32_activations_are_chosen_where_bfloat16_cannot_hold(monkeypatch):
    """At 0.99999 on CONVS, bfloat16 activations cannot hold however precise the math (all HiFi4,
    bfloat16 weights, fp32_accum: 0.99996; their output rounding): the resolver meets it by
    float32 activations (with fp32_accum) where they pay; without that choice it ends NOT MET.
    The written section loads, runs as resolved on the sim, and plans."""
    from ttmodels.planning.planner import plan_graph
    from ttmodels.tools import precision_errors
    from ttmodels.tools.precision import section_text, write_section
    g, sd, x, res = _resolve(CONVS, target=0.99999)
    assert res.met, res.log
    f32 = {n for n, p in res.choices.items() if p.activations == "float32"}
    assert f32 and all(res.choices[n].fp32_accum for n in f32), res.summary()
    text = write_section(CONVS, section_text(res, "test"))
    assert "activations: float32" in text
    g2, low = _sim_pcc(text, sd, x)
    assert low >= 0.99999 and abs(low - res.min_pcc) < 1e-6
    plan_graph(g2, oracle=False)
    monkeypatch.setattr(precision_errors, "float32_candidates", lambda node: [])
    _, _, _, without = _resolve(CONVS, target=0.99999)
    assert not without.met, without.summary()
    assert all(p.activations == "bfloat16" for p in without.choices.values())


# ---- the command -------------------------------------------------------------------------------

def test_precision_command_writes_only_to_o(tmp_path, capsys):
    from ttmodels.tools.cli import main
    spec = tmp_path / "small.yaml"
    spec.write_text(SMALL)
    before = spec.read_bytes()
    out = tmp_path / "out.yaml"
    rc = main(["precision", str(spec), "-o", str(out)])
    assert rc == 0
    assert spec.read_bytes() == before
    text = out.read_text()
    assert text.startswith(SMALL) and "resolved_precision:" in text
    assert "measured fc " in text                                  # the measured PCC, per output
    g = load_graph(str(out))
    assert all(n.auto.resolved for n in g.nodes if n.auto is not None)
    assert "lowest output PCC" in capsys.readouterr().out


def test_precision_command_refuses_a_spec_without_auto(tmp_path, capsys):
    from ttmodels.tools.cli import main
    spec = tmp_path / "plain.yaml"
    spec.write_text(SMALL.replace("auto: true", "math_fidelity: HiFi2"))
    assert main(["precision", str(spec)]) == 2
    assert "precision: auto" in capsys.readouterr().err


# ---- the importer ------------------------------------------------------------------------------

def test_an_imported_timm_model_at_default_precision_holds_099():
    """The importer's default precision is auto, resolved on the module's weights: a timm
    model (random init, BN calibrated) imported so reaches >= 0.99 against torch float32 at the
    written spec's default profile, on another input than the one it was resolved on."""
    timm = pytest.importorskip("timm")
    import ttmodels
    from ttmodels.tools.importer import import_module
    from ttmodels.weights.reference import pcc
    torch.manual_seed(0)
    m = timm.create_model("tinynet_e", pretrained=False)
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.reset_running_stats()
            mod.momentum = None
    m.train()
    with torch.no_grad():
        for i in range(3):
            m(synthetic_images(4, 3, 64, 64, seed=100 + i))
    m.eval()
    spec = import_module(m, synthetic_images(1, 3, 64, 64, seed=0), resolve_precision=True)
    assert "resolved_precision:" in spec and "precision: auto:" in spec.report
    x = synthetic_images(1, 3, 64, 64, seed=5)
    with torch.no_grad():
        want = m(x)
    with ttmodels.build(str(spec), weights=m, backend="sim", input_size=(64, 64),
                        cache=False) as built:
        got = built.run(x)
    p = pcc(want.flatten(), next(iter(got.values())).flatten())
    assert p >= 0.99, (p, spec.report)
    g = load_graph(str(spec), input_size=(64, 64))
    assert any(n.precision.math_fidelity != "HiFi4" for n in g.nodes if n.auto)
