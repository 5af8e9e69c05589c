"""ttnn in the planning loop (ttmodels/tools/ttnn_oracle.py): the planner asks ttnn about conv
candidates and every step, chooses among the candidates ttnn accepts, caches the answers on disk
(a second plan asks nothing), records contradictions with rules.py, and says which steps ttnn
has not confirmed when it is off."""
import json

import pytest

from ttmodels.errors import LayoutError
from ttmodels.tools import ttnn_oracle as O
from ttmodels.planning.layout import HEIGHT
from ttmodels.planning.planner import plan_graph
from ttmodels.language.spec import load_graph

SMALL = {"name": "small", "inputs": {"x": {"channels": 16, "size": [32, 32]}},
         "layers": [{"name": "c1", "op": "conv2d", "out": 32, "kernel": 3, "padding": 1,
                     "act": "relu"},
                    {"name": "mp", "op": "max_pool2d", "kernel": 2, "stride": 2},
                    {"name": "c2", "op": "conv2d", "out": 64, "kernel": 1},
                    {"name": "add", "op": "add", "in": ["c2", "c2"]}]}


class Scripted(O.Oracle):
    """An oracle whose 'ttnn' is a function of the step (no device): the planner's use of the
    answers, the cache and the contradiction records, tested without ttnn's cost."""

    def __init__(self, root, judge):
        super().__init__(root)
        self.judge = judge
        self.seen: list[O.Step] = []

    def _run_batch(self, batch):
        self.seen += batch
        return [self.judge(s) for s in batch]


def _accept_as_planned(step):
    from ttmodels.tools.verify import describe_key, planned_memory_key
    out = step.output
    return O.Answer(True, memory=describe_key(planned_memory_key(out.memory)),
                    layout=f"{out.layout} {out.dtype}", memory_match=True, layout_match=True,
                    op_l1=1000)


def test_oracle_off_marks_every_step_unconfirmed(monkeypatch):
    monkeypatch.setenv(O.ENV, "0")
    plan = plan_graph(load_graph(SMALL))
    rec = plan.ttnn
    assert rec.oracle == "off (TTMODELS_TTNN_ORACLE=0)"
    steps = len(plan.layers) + len(plan.adapters) + len(plan.spills)
    assert len(rec.steps) == steps and len(rec.unconfirmed) == steps
    d = json.loads(plan.to_json())["ttnn"]
    assert d["confirmed"] == 0 and len(d["not_confirmed"]) == steps == d["total"]
    assert {s["status"] for s in d["steps"]} == {"unconfirmed"}
    table = str(plan)
    assert "ttnn: off (TTMODELS_TTNN_ORACLE=0); 0/" in table
    header = table.splitlines()[1]
    assert "ttnn" in header.split()


def test_planner_chooses_a_conv_candidate_ttnn_accepts(tmp_path):
    """ttnn refusing the table's first choice for c1 (height shards) makes the planner take
    the next candidate, and the plan says which candidate ttnn refused and why."""
    def judge(step):
        if step.kind == "layer" and step.op == "conv2d" and step.attrs["kernel"] == (3, 3) and \
                step.config.shard_layout == HEIGHT:
            return O.Answer(False, "Scripted refusal of height shards", "x.cpp:1")
        return _accept_as_planned(step)

    base = plan_graph(load_graph(SMALL), oracle=False)
    assert base.layer("c1").config.shard_layout == HEIGHT        # the table's own choice
    o = Scripted(tmp_path, judge)
    plan = plan_graph(load_graph(SMALL), oracle=o)
    assert plan.layer("c1").config.shard_layout != HEIGHT
    assert plan.ttnn.oracle.startswith("on")
    assert not plan.ttnn.unconfirmed
    assert any(r.startswith("c1: height_sharded") and "Scripted refusal" in r
               for r in plan.ttnn.candidates_rejected)
    assert "conv candidates ttnn refused" in str(plan)


def test_answers_are_cached_on_disk_and_a_second_plan_asks_nothing(tmp_path):
    o1 = Scripted(tmp_path, _accept_as_planned)
    p1 = plan_graph(load_graph(SMALL), oracle=o1)
    assert o1.queries == len(o1.seen) > 0 and p1.ttnn.asked == o1.queries
    files = list(tmp_path.glob("answers/*/*.json"))
    assert len(files) == o1.queries
    # a new process' oracle (nothing in memory) on the same cache directory
    o2 = Scripted(tmp_path, lambda s: pytest.fail(f"asked ttnn about {s.name}"))
    p2 = plan_graph(load_graph(SMALL), oracle=o2)
    assert o2.queries == 0 and p2.ttnn.asked == 0 and p2.ttnn.cached == len(p2.ttnn.steps)
    assert not p2.ttnn.unconfirmed
    # another batch size is another signature: asked again
    o3 = Scripted(tmp_path, _accept_as_planned)
    plan_graph(load_graph(SMALL, batch_size=2), oracle=o3)
    assert o3.queries > 0
    # a corrupt entry is dropped and asked again, never trusted
    files[0].write_text("{not json")
    o4 = Scripted(tmp_path, _accept_as_planned)
    plan_graph(load_graph(SMALL), oracle=o4)
    assert o4.queries == 1


def test_contradictions_are_recorded_in_the_plan_and_the_cache(tmp_path, capsys, monkeypatch):
    def judge(step):
        if step.kind == "layer" and step.op == "max_pool2d":
            return O.Answer(False, "Scripted: pool refused", "pool_op.cpp:9")
        if step.kind == "layer" and step.op == "add":
            return O.Answer(True, memory="interleaved/l1", layout="tile bfloat16",
                            memory_match=False, layout_match=True)
        return _accept_as_planned(step)

    o = Scripted(tmp_path / "ttnn-oracle" / "ttnn-x", judge)
    # planning with it refuses the layer ttnn rejects (issue 33: never a plan with a step ttnn
    # rejected), naming ttnn's reason
    with pytest.raises(LayoutError) as e:
        plan_graph(load_graph(SMALL), oracle=o)
    assert e.value.layer == "mp" and "Scripted: pool refused" in str(e.value)
    # confirming a plan made without it records what ttnn says, contradictions included
    plan = plan_graph(load_graph(SMALL), oracle=False)
    O.confirm(plan, o)
    rec = plan.ttnn
    assert {s.name: s.status for s in rec.steps if s.kind == "layer"} == {
        "c1": "confirmed", "mp": "rejected", "c2": "confirmed", "add": "differs"}
    assert any("mp (max_pool2d): rules accept, ttnn rejects: Scripted: pool refused" in c
               for c in rec.contradictions)
    assert any("add (add): output: the table says" in c for c in rec.contradictions)
    found = O.list_contradictions(tmp_path / "ttnn-oracle")
    assert sorted(c["step"] for c in found) == ["add", "mp"]
    table = str(plan)
    assert "ttnn contradicts the rule table (2)" in table and "REJECTED" in table
    # the command lists them
    from ttmodels.tools.cli import main
    monkeypatch.setenv("TTMODELS_CACHE_DIR", str(tmp_path))
    assert main(["oracle", "contradictions"]) == 0
    out = capsys.readouterr().out
    assert "rules accept, ttnn rejects: Scripted: pool refused" in out
    assert "2 contradiction(s)" in out
    assert main(["oracle", "clear"]) == 0
    assert O.list_contradictions(tmp_path / "ttnn-oracle") == []


def test_plan_asks_the_real_ttnn_once_then_reads_its_cache(tmp_path):
    """The installed ttnn on the mock n150, through the worker process: every step of a small
    plan confirmed with ttnn's own L1 figures; a second plan (a fresh oracle, as in a new
    process) asks nothing."""
    o1 = O.Oracle(tmp_path)
    try:
        p1 = plan_graph(load_graph(SMALL), oracle=o1)
    finally:
        o1.close()
    rec = p1.ttnn
    assert o1.failure is None, o1.failure
    assert rec.asked == o1.queries > 0
    assert not rec.unconfirmed, [s for s in rec.unconfirmed]
    c1 = next(s for s in rec.steps if s.name == "c1")
    assert c1.ttnn_l1 and c1.ttnn_l1 > 0
    o2 = O.Oracle(tmp_path)
    p2 = plan_graph(load_graph(SMALL), oracle=o2)
    assert o2.queries == 0 and o2._proc is None          # no worker was even started
    assert p2.ttnn.asked == 0 and not p2.ttnn.unconfirmed
    assert [(s.name, s.status, s.ttnn_l1) for s in p2.ttnn.steps] == \
        [(s.name, s.status, s.ttnn_l1) for s in rec.steps]
