"""The docs say what the code does: module tables, limits, shell commands and quoted messages."""
from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PKG = REPO / "ttmodels"


def _doc(name: str) -> str:
    return (REPO / "docs" / name).read_text()


def test_architecture_table_names_every_module_and_only_existing_ones():
    text = _doc("architecture.md")
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    named = set()
    for row in rows:
        named.update(re.findall(r"`([\w/]+(?:\.py|/))`", row.split("|")[1]))
    for name in sorted(named):
        assert (PKG / name.rstrip("/")).exists(), f"architecture.md names {name}, which does not exist"
    for f in sorted(PKG.iterdir()):
        if f.name.startswith(".") or f.name == "__pycache__":
            continue
        entry = f.name + ("/" if f.is_dir() else "")
        assert entry in named, f"ttmodels/{entry} is missing from architecture.md's table"
    # every module mentioned anywhere in the text exists (the diagram included)
    for name in set(re.findall(r"\b([\w/]+\.py)\b", text)):
        assert list(PKG.rglob(name)) or (REPO / name).is_file(), \
            f"architecture.md mentions {name}, which does not exist"


def test_spec_limits_table_matches_the_code():
    from ttmodels.language import _yaml, expr, spec
    text = _doc("spec.md")
    table = dict(re.findall(r"^\| ([^|]+?) \| ([^|]+?) \|$", text.split("## Limits", 1)[1],
                            re.M))

    def num(s: str) -> int:
        return int(re.findall(r"[\d,]+", s)[-1].replace(",", ""))
    assert num(table["spec text"]) == _yaml.MAX_TEXT
    assert num(table["YAML nodes, aliases expanded"]) == _yaml.MAX_NODES
    assert num(table["YAML nesting"]) == _yaml.MAX_DEPTH
    assert num(table["block nesting (instances inside instances)"]) == spec.MAX_BLOCK_DEPTH
    assert num(table["`repeat`"]) == spec.MAX_REPEAT
    assert num(table["layers of the expanded graph"]) == spec.MAX_GRAPH_NODES
    assert num(table["any size, channel count or batch"]) == spec.MAX_DIM
    assert num(table["a `${...}` expression"]) == expr.MAX_LEN
    assert num(table["grid `[x, y]`"]) == spec.MAX_GRID


def _sh_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", text, re.S)


def test_custom_backbones_cli_commands_run_as_documented(tmp_path, monkeypatch, capsys):
    """Every `ttmodels validate|plan` line of the page runs in a copy of the example (as the page
    says: outside the repository) and exits 0; a `# ...` output comment is what it prints."""
    from ttmodels.tools.cli import main
    shutil.copytree(REPO / "examples" / "my_backbone", tmp_path / "my_backbone")
    monkeypatch.chdir(tmp_path)
    ran = 0
    for block in _sh_blocks(_doc("custom_backbones.md")):
        lines = block.splitlines()
        for i, line in enumerate(lines):
            cmd = line.split("  #")[0].strip()
            if not re.match(r"ttmodels (validate|plan) ", cmd):
                continue
            out_file = None
            if ">" in cmd:
                cmd, out_file = (s.strip() for s in cmd.split(">", 1))
            rc = main(shlex.split(cmd)[1:])
            out = capsys.readouterr().out
            assert rc == 0, cmd
            if out_file:
                Path(out_file).write_text(out)
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            if nxt.startswith("# "):
                assert out.strip() == nxt[2:].strip(), cmd
            ran += 1
    assert ran >= 5
    assert '"layers"' in Path("plan.json").read_text()


def test_custom_backbones_quoted_weights_error_is_the_real_message():
    """The page quotes the WeightsError of a key_map that forgot the fpn.layer_blocks entries."""
    import sys
    text = _doc("custom_backbones.md")
    quoted = re.search(r"```\n(weights from MyBackbone module do not fit 'my_backbone' "
                       r"\(108 keys expected\): 4 missing\n.*?)```", text, re.S).group(1)
    sys.path.insert(0, str(REPO / "examples" / "my_backbone"))
    try:
        from torch_model import KEY_MAP, my_backbone
    finally:
        sys.path.pop(0)
    import ttmodels
    km = {k: v for k, v in KEY_MAP.items() if "layer_blocks" not in k}
    with pytest.raises(ttmodels.WeightsError) as e:
        ttmodels.build(str(REPO / "examples/my_backbone/backbone.yaml"), weights=my_backbone(),
                       key_map=km, backend="sim", input_size=(128, 128))
    assert str(e.value) == quoted.strip()
