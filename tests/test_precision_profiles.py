"""`float32` means float32 (issue 33): a profile with float32 activations needs ``fp32_accum``, as a
16-bit Dest holds bfloat16; every shipped and imported float32 profile sets it, and a spec that
does not gets a warning naming the precision it really has."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
import yaml

from ttmodels.language import registry
from ttmodels.language.graph import Precision
from ttmodels.language.spec import load_graph
from ttmodels.language.spec.precision_notes import effective_activations, float32_without_accum

PKG = Path(registry.__file__).parents[1]
SPECS = sorted((PKG / "configs").glob("*.yaml")) + sorted((PKG / "blocks").glob("*.yaml"))


def _precisions(doc) -> list[tuple[str, dict]]:
    """Every precision mapping in a parsed YAML document: (where, mapping)."""
    out = []

    def walk(v, where):
        if isinstance(v, dict):
            for k, x in v.items():
                if k == "precision" and isinstance(x, dict):
                    out.append((f"{where}.precision", x))
                elif k == "profiles" and isinstance(x, dict):
                    out.extend((f"{where}.profiles.{p}", m) for p, m in x.items() if isinstance(m, dict))
                walk(x, f"{where}.{k}")
        elif isinstance(v, list):
            for i, x in enumerate(v):
                walk(x, f"{where}[{i}]")
    walk(doc, "")
    return out


@pytest.mark.parametrize("path", SPECS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shipped_float32_precisions_set_fp32_accum(path):
    found = _precisions(yaml.safe_load(path.read_text()))
    for where, m in found:
        if m.get("activations") == "float32" or where.endswith(".float32"):
            assert m.get("fp32_accum") is True, f"{path.name} {where}: {m}"


def test_shipped_float32_profiles_load_at_float32():
    with_f32 = [p.stem for p in sorted((PKG / "configs").glob("*.yaml"))
                if "float32" in (yaml.safe_load(p.read_text()).get("profiles") or {})]
    assert len(with_f32) >= 9
    for name in with_f32:
        g = load_graph(name, profile="float32")
        assert {effective_activations(n.precision) for n in g.nodes} == {"float32"}, name


def test_effective_precision():
    assert effective_activations(Precision("float32", "float32", "HiFi4", False)) == "bfloat16"
    assert effective_activations(Precision("float32", "float32", "HiFi4", True)) == "float32"
    assert effective_activations(Precision("bfloat8_b", "bfloat16", "HiFi2", False)) == "bfloat16"


SPEC = """
inputs: {x: {channels: 8, size: [8, 8]}}
defaults: {precision: {activations: float32, weights: float32, math_fidelity: HiFi4%s}}
layers:
  - {name: c1, op: conv2d, out: 8, kernel: 3, padding: 1}
  - {name: c2, op: conv2d, out: 8, kernel: 1, precision: {fp32_accum: true}}
"""


def test_float32_without_fp32_accum_warns_naming_bfloat16(caplog):
    with caplog.at_level(logging.WARNING, logger="ttmodels"):
        g = load_graph(SPEC % "")
    assert float32_without_accum(g) == ["c1"]
    msgs = [r.getMessage() for r in caplog.records if "fp32_accum" in r.getMessage()]
    assert len(msgs) == 1
    assert "c1" in msgs[0] and "bfloat16 precision" in msgs[0] and "c2" not in msgs[0]


def test_float32_with_fp32_accum_does_not_warn(caplog):
    with caplog.at_level(logging.WARNING, logger="ttmodels"):
        g = load_graph(SPEC % ", fp32_accum: true")
    assert float32_without_accum(g) == []
    assert not [r for r in caplog.records if "fp32_accum" in r.getMessage()]


def test_imported_float32_profile_sets_fp32_accum():
    from ttmodels.tools import importer
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU()).eval()
    x = torch.randn(1, 3, 16, 16)
    text = importer.emit_spec(importer.trace(net, x), net, name="net")
    prof = yaml.safe_load(text)["profiles"]["float32"]
    assert prof["activations"] == "float32" and prof["fp32_accum"] is True
