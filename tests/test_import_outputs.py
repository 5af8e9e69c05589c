"""`ttmodels import`'s outputs and self-check reports (issue 34 class 7, issue 35 item 13): a
forward returning a dict or a tuple gives named outputs; ``x.view(x.size(0), -1)`` of a map is a
flatten; a spec whose float32 profile does not plan is still written, saying which profile and
why, at the module's path and source line (never ``<string>:N``)."""
import torch
from torch import nn

from ttmodels.tools import importer


class Heads(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 4 * 4, 10)

    def forward(self, x):
        y = self.conv(x)
        return {"logits": self.fc(y.view(y.size(0), -1)), "feat": y}


class Twice(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 4, 1)

    def forward(self, x):
        y = self.conv(x)
        return y, y


def test_dict_and_tuple_outputs_and_a_view_flatten():
    torch.manual_seed(0)
    text = importer.import_module(Heads().eval(), torch.randn(2, 8, 4, 4))
    assert "{name: view, op: flatten}" in text
    assert text.rstrip().endswith("outputs: {logits: fc, feat: conv}")
    assert text.pcc >= importer.PCC_MIN
    text = importer.import_module(Twice().eval(), torch.randn(1, 8, 4, 4))
    assert text.rstrip().endswith("outputs: {out0: conv}")
    assert text.pcc >= importer.PCC_MIN


class BigMap1x1(nn.Module):
    """A 1x1 conv on a 256x256 map. Its float32 profile plans now (the matmul runs out of DRAM
    when no L1 form fits), so the test below makes that profile's plan fail itself."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(256, 256, 1)

    def forward(self, x):
        return self.conv(x)


def _float32_does_not_plan(monkeypatch):
    """The float32 profile's plan fails at layer ``conv`` (as the planner says it), the default
    profile's plans: what a model the planner cannot place in float32 gives the import."""
    from ttmodels.errors import LayoutError
    from ttmodels.tools.importer import entry

    def refuse(text, *a, **k):
        raise LayoutError("conv2d needs 2,424,832 B of L1 per core, over the bank",
                          layer="conv").at("<string>", 9)
    monkeypatch.setattr(entry, "check_spec", refuse)


def test_a_float32_profile_that_does_not_plan_still_writes_the_spec(tmp_path, capsys,
                                                                  monkeypatch):
    _float32_does_not_plan(monkeypatch)
    text = importer.import_module(BigMap1x1().eval(), torch.randn(1, 256, 256, 256))
    assert "op: conv2d" in text and text.pcc is None
    why = text.check_failed
    assert why.startswith("the float32 profile does not plan")
    import inspect
    call = inspect.getsourcelines(BigMap1x1.forward)[1] + 1      # `return self.conv(x)`
    assert "<string>" not in why and \
        f"[module conv: Conv2d, tests/test_import_outputs.py:{call}]" in why
    f = tmp_path / "wide.py"
    f.write_text("import torch\n"
                 "def build():\n"
                 "    return torch.nn.Sequential(torch.nn.Conv2d(256, 256, 1))\n")
    from ttmodels.tools.cli import main
    out = tmp_path / "wide.yaml"
    rc = main(["import", f"{f}:build", "-o", str(out), "--input-size", "256", "256",
               "--channels", "256"])
    said = capsys.readouterr()
    err = said.err
    assert rc == 0 and out.exists()
    assert "warning:" in err and "float32 profile does not plan" in err and "Traceback" not in err
    # said once (stderr), not again in the report on stdout
    assert (said.out + err).count("float32 profile does not plan") == 1, said


def _import_small(tmp_path, *flags):
    """``ttmodels import`` of a one-conv module with ``flags``: (exit code, the spec written)."""
    f = tmp_path / "small.py"
    f.write_text("import torch\n"
                 "def build():\n"
                 "    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1))\n")
    from ttmodels.tools.cli import main
    out = tmp_path / "small.yaml"
    return main(["import", f"{f}:build", "-o", str(out), "--input-size", "32", "32", *flags]), out


def test_an_unresolved_precision_warning_names_the_written_spec(tmp_path, monkeypatch, caplog):
    from ttmodels.language.spec import precision_notes
    monkeypatch.setattr(precision_notes, "_WARNED", set())   # said once per process: say it here
    # `--no-precision` leaves `precision: auto` unresolved; the load's warning points at a line
    # of the spec: the file the user got, not the text it was written from (`<string>:N`)
    rc, out = _import_small(tmp_path, "--no-precision")
    said = [r.getMessage() for r in caplog.records if "not resolved" in r.getMessage()]
    assert rc == 0 and out.exists()
    assert said and all("<string>" not in m for m in said), said
    line = int(said[0].split(f"{out}:", 1)[1].split(":", 1)[0])
    assert "auto" in out.read_text().splitlines()[line - 1]


def test_an_import_that_resolves_precision_does_not_warn_it_is_unresolved(tmp_path, monkeypatch,
                                                                           caplog):
    from ttmodels.language.spec import precision_notes
    monkeypatch.setattr(precision_notes, "_WARNED", set())
    rc, out = _import_small(tmp_path)
    assert rc == 0 and "resolved_precision:" in out.read_text()
    assert not [r for r in caplog.records if "not resolved" in r.getMessage()]
