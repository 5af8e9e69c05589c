"""Issue 32: one walk of a plan (``planning/plan_walk.py``). The executor, the L1 sums
(``liveness.step_figures``) and the address model (``plan_alloc.simulate``) all read their order
from it; these tests hold each of them to the walk: the executor by what it really calls and
frees on the sim, the other two by their steps."""
from dataclasses import replace

import pytest
import torch

from ttmodels.language.graph import Graph, LayoutPolicy, Node, TensorShape
from ttmodels.planning import liveness as lv, plan_alloc, plan_walk as pw
from ttmodels.planning.layout import INTERLEAVED, MemSpec
from ttmodels.planning.plans import Adapter, Reallocation
from ttmodels.planning.planner import plan_graph

from test_planner import conv

H, B = LayoutPolicy("height_sharded", "l1"), LayoutPolicy("block_sharded", "l1")


def _shape(c):
    return TensorShape(1, 28, 28, c)


def every_event_plan():
    """A small plan with every kind of event: an adapter chain of two (its first copy freed by
    the second), an original freed after its copy, a reallocation, a spill whose DRAM copy an
    add reads, an in-place add into an adapter copy and one into a tensor (its name dropped)."""
    s = _shape
    g = Graph("walk", {"x": s(64)}, [
        conv("stem", "x", s(64), 64, 64, 3, layout=H),
        conv("c1", "stem", s(64), 64, 64, 3, layout=H),
        conv("c2", "c1", s(64), 64, 64, 1, layout=B),
        Node("sum", "add", ["c2", "stem"], dict(activation="relu"), s(64)),
        conv("head", "sum", s(64), 64, 64, 1, layout=H),
        Node("sum2", "add", ["head", "sum"], {}, s(64)),
    ], {}, ["sum2"])
    plan = plan_graph(g)
    # c1 -> c2 through interleaved L1: a chain of two adapters instead of one reshard
    [a] = [a for a in plan.adapters if a.dst == "c2"]
    mid = replace(a.before, memory=MemSpec(INTERLEAVED, "l1"))
    chain = [Adapter(a.src, a.dst, a.index, "sharded_to_interleaved", a.before, mid, "test"),
             Adapter(a.src, a.dst, a.index, "interleaved_to_sharded", mid, a.after, "test")]
    plan.adapters[plan.adapters.index(a):plan.adapters.index(a) + 1] = chain
    stem = plan.layer("stem").output
    dram = replace(stem, memory=MemSpec(INTERLEAVED, "dram"))
    plan.spills = [lv.Spill("stem", "c2", stem, dram, 0, "sum")]
    plan.layer("sum").inputs[1] = dram
    plan.reallocations = [Reallocation("stem", "c2", stem, 0, "test", "test")]
    for name in ("sum", "sum2"):
        ip = plan_alloc._in_place_candidate(plan, plan.layer(name))
        assert ip is not None, name
        plan.layers[[pl.name for pl in plan.layers].index(name)] = ip
    lv.refresh(plan)
    return plan


def expected_trace(plan) -> list[tuple]:
    """What the executor must do by the walk: each step, then each buffer it frees (by tensor
    name, or a copy by the adapter that made it)."""
    made = {}
    out = []
    for ev in pw.walk(plan):
        if isinstance(ev, pw.Adapt):
            made[ev.copy] = f"copy by {ev.name} #{ev.position}"
        if isinstance(ev, pw.Step):
            out.append((ev.kind, ev.name))
        if isinstance(ev, pw.SpillTensor):
            out.append(("free", ev.tensor))         # the L1 original goes with the move
        elif isinstance(ev, pw.FreeCopy):
            out.append(("free", made[ev.copy]))
        elif isinstance(ev, (pw.FreeOriginal, pw.FreeTensor)):
            out.append(("free", ev.tensor))
    return out


def conv_params(plan):
    torch.manual_seed(0)
    return {n.name: {"weight": torch.randn(64, 64, *n.attrs["kernel"]) * 0.05,
                     "bias": torch.zeros(64)} for n in plan.graph.nodes if n.op == "conv2d"}


def executor_trace(plan) -> list[tuple]:
    """What the executor really does on the sim: each step its hook sees and each
    ``tt.deallocate``, the freed tensor named by the step that made it."""
    from ttmodels.backends import open_backend
    from ttmodels.runtime.executor import Executor
    params = conv_params(plan)
    names, held = {}, []            # id -> name; held keeps every tensor alive (ids stay unique)
    with open_backend("sim") as be:
        ex = Executor(plan, params, be)
        with be.record() as calls:
            def hook(kind, obj, inputs, call):
                if kind == "layer":
                    for src, t in zip(obj.node.inputs, inputs):
                        names.setdefault(id(t), src)
                        held.append(t)
                calls.append(("step", kind, {"adapter": lambda: obj.name,
                                             "layer": lambda: obj.name,
                                             "spill": lambda: f"{obj.tensor} after {obj.after}",
                                             "reallocate": lambda: f"{obj.tensor} before "
                                                                   f"{obj.before}"}[kind]()))
                if kind == "spill" or kind == "reallocate":
                    names.setdefault(id(inputs), obj.tensor)
                    held.append(inputs)
                out = call()
                held.append(out)
                if kind == "adapter":
                    k = sum(1 for c in calls if isinstance(c, tuple) and c[1] == "adapter" and
                            c[2] == obj.name)
                    names[id(out)] = f"copy by {obj.name} #{k - 1}"
                elif kind == "layer":
                    names[id(out)] = obj.name       # an in-place output is its operand's object
                else:
                    names[id(out)] = obj.tensor
                return out
            ex.step_hook = hook
            ex.run({"x": torch.randn(1, 64, 28, 28)})
    return [c[1:] if isinstance(c, tuple) else ("free", names.get(id(c.args[0]), "?"))
            for c in calls if isinstance(c, tuple) or c.name == "deallocate"]


def test_the_plan_has_every_kind_of_event():
    plan = every_event_plan()
    kinds = {type(ev) for ev in pw.walk(plan)}
    assert kinds == {pw.Reallocate, pw.Adapt, pw.FreeCopy, pw.FreeOriginal, pw.Run,
                     pw.WriteInPlace, pw.SpillTensor, pw.FreeTensor, pw.DropName}
    chain = [ev for ev in pw.walk(plan) if isinstance(ev, pw.Adapt) and ev.layer.name == "c2"]
    assert [ev.position for ev in chain] == [0, 1] and chain[1].source == chain[0].copy
    [w1, w2] = [ev for ev in pw.walk(plan) if isinstance(ev, pw.WriteInPlace)]
    assert isinstance(w1.holder, pw.Copy) and w2.holder == "head"


def test_the_executor_runs_and_frees_in_the_walks_order():
    plan = every_event_plan()
    assert executor_trace(plan) == expected_trace(plan)


def test_keeping_every_tensor_runs_the_in_place_adds_out_of_place_with_the_same_result():
    """``run(keep_all=True)`` walks with ``in_place=False``: head survives sum2 (which would
    write into it), and the output is the same."""
    from ttmodels.backends import open_backend
    from ttmodels.runtime.executor import Executor
    plan = every_event_plan()
    assert not any(isinstance(ev, pw.WriteInPlace) for ev in pw.walk(plan, in_place=False))
    x = torch.randn(1, 64, 28, 28)
    with open_backend("sim") as be:
        ex = Executor(plan, conv_params(plan), be)
        y = be.tt.to_torch(ex.run({"x": x})["sum2"])
        outs = ex.run({"x": x}, keep_all=True)
        assert torch.equal(be.tt.to_torch(outs["sum2"]), y)
        assert outs["head"] is not outs["sum2"]
        assert not torch.equal(be.tt.to_torch(outs["head"]), y)


def test_the_sums_and_the_address_model_step_in_the_walks_order():
    plan = every_event_plan()
    walk = [(ev.kind, ev.name) for ev in pw.steps(plan)]
    assert len(walk) == 11 and walk[0] == ("layer", "stem")
    assert [(s.kind, s.name) for s in plan_alloc.simulate(plan)] == walk
    # the sums count no step for a reallocation (it moves a tensor, the bytes stay)
    assert [(s.kind, s.name) for s in lv.step_figures(plan)] == \
        [k for k in walk if k[0] != "reallocate"]


@pytest.mark.parametrize("model,batch,size", [("resnet50", 16, None),
                                              ("bevdet_r50_encoder", 6, (256, 704))])
def test_every_buffer_is_freed_once_and_only_what_nobody_keeps(model, batch, size):
    from ttmodels.language.spec import load_graph
    plan = plan_graph(load_graph(model, batch_size=batch, input_size=size))
    g = plan.graph
    made, gone, freed = set(), set(), []
    for ev in pw.walk(plan):
        if isinstance(ev, pw.Adapt):
            assert ev.copy not in made
            made.add(ev.copy)
        elif isinstance(ev, pw.FreeCopy):
            assert ev.copy in made and ev.copy not in gone
            gone.add(ev.copy)
        elif isinstance(ev, pw.WriteInPlace):
            gone.add(ev.holder)             # the output's buffer now
        elif isinstance(ev, (pw.FreeOriginal, pw.FreeTensor, pw.DropName)):
            freed.append(ev.tensor)
    assert made == {c for c in gone if isinstance(c, pw.Copy)}
    assert len(freed) == len(set(freed))
    tensors = set(g.inputs) | {t for pl in plan.layers for t in pl.node.tensors}
    assert set(freed) == tensors - set(g.outputs)
