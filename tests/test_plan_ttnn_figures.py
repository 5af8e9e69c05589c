"""ttnn's own L1 figures in planning (issue 33 / issue 35 item 3): a step ttnn sizes over the
bank is never "confirmed", and the planner plans the op again against less L1 (more DRAM
slices, another conv candidate) until ttnn's figure fits. ttnn is scripted here (no device):
its figure is a function of the planned step, as the mock device's is."""
from ttmodels.language.spec import load_graph
from ttmodels.tools import ttnn_oracle as O
from ttmodels.planning.layout import HEIGHT
from ttmodels.planning.planner import plan_graph

BANK = 1_360_544

# a max pool too big for L1: planned DRAM-sliced (resnet18's maxpool at 4096x4096 in small)
POOL = {"name": "bigpool", "inputs": {"x": {"channels": 64, "size": [1024, 1024]}},
        "layers": [{"name": "mp", "op": "max_pool2d", "kernel": 3, "stride": 2, "padding": 1},
                   {"name": "c", "op": "conv2d", "out": 64, "kernel": 1, "stride": 8}]}

SMALL = {"name": "small", "inputs": {"x": {"channels": 16, "size": [32, 32]}},
         "layers": [{"name": "c1", "op": "conv2d", "out": 32, "kernel": 3, "padding": 1,
                     "act": "relu"},
                    {"name": "c2", "op": "conv2d", "out": 64, "kernel": 1}]}


class Scripted(O.Oracle):
    def __init__(self, root, op_l1):
        super().__init__(root)
        self.op_l1 = op_l1

    def _run_batch(self, batch):
        from ttmodels.tools.verify import describe_key, planned_memory_key
        return [O.Answer(True, memory=describe_key(planned_memory_key(s.output.memory)),
                         layout=f"{s.output.layout} {s.output.dtype}", memory_match=True,
                         layout_match=True, op_l1=self.op_l1(s)) for s in batch]


def _estimate(step) -> int:
    return sum(step.config.l1_parts.values())


def _pool_half_over(step) -> int:
    """ttnn's pool figure 50 % over the estimate (resnet18 at 4096: 1,939,344 B against the
    planner's 1,317,301), every other step at the estimate."""
    if step.kind == "layer":
        est = _estimate(step)
        return est * 3 // 2 if step.op == "max_pool2d" else est
    return 1000


def test_a_step_ttnn_sizes_over_the_bank_is_not_confirmed(tmp_path):
    plan = plan_graph(load_graph(POOL), oracle=False)
    o = Scripted(tmp_path, _pool_half_over)
    O.confirm(plan, o)
    st = {s.name: s for s in plan.ttnn.steps if s.kind == "layer"}
    assert st["mp"].ttnn_l1 > BANK
    assert st["mp"].status == "over the bank" and st["c"].status == "confirmed"
    assert [s.name for s in plan.ttnn.unconfirmed] == ["mp"]
    assert "OVER BANK" in str(plan) and f"over the {BANK:,} B bank" in str(plan)


def test_the_planner_slices_a_pool_finer_until_ttnns_figure_fits(tmp_path):
    base = plan_graph(load_graph(POOL), oracle=False).layer("mp").config.slice
    o = Scripted(tmp_path, _pool_half_over)
    plan = plan_graph(load_graph(POOL), oracle=o)
    mp = plan.layer("mp")
    assert mp.config.slice.num_slices > base.num_slices
    st = {s.name: s for s in plan.ttnn.steps if s.kind == "layer"}
    assert st["mp"].ttnn_l1 <= BANK and not plan.ttnn.unconfirmed


def test_a_conv_candidate_ttnn_sizes_over_the_bank_is_passed_over(tmp_path):
    """The DeepLabV3 ASPP case: ttnn accepts the table's first conv candidate but sizes it
    over the bank; the planner takes the next one, which ttnn sizes within."""
    def op_l1(step):
        if step.kind == "layer" and step.op == "conv2d" and step.attrs["kernel"] == (3, 3) \
                and step.config.shard_layout == HEIGHT:
            return BANK + 1
        return _estimate(step) if step.kind == "layer" else 1000

    assert plan_graph(load_graph(SMALL), oracle=False).layer("c1").config.shard_layout == HEIGHT
    o = Scripted(tmp_path, op_l1)
    plan = plan_graph(load_graph(SMALL), oracle=o)
    assert plan.layer("c1").config.shard_layout != HEIGHT
    assert not plan.ttnn.unconfirmed
    assert any(r.startswith("c1: height_sharded") and "over the" in r
               for r in plan.ttnn.candidates_rejected)


def test_the_plan_counts_ttnns_larger_figure_as_the_ops_cbs(tmp_path):
    """ttnn sizes c1 20 % over the estimate, within the bank: the plan's figure for c1 is
    ttnn's, and the difference is CBs (what liveness carries and the address model places)."""
    from ttmodels.planning import liveness as lv

    def op_l1(step):
        if step.kind != "layer":
            return 1000
        return _estimate(step) * 6 // 5 if step.name == "c1" else _estimate(step)

    base = plan_graph(load_graph(SMALL), oracle=False).layer("c1")
    plan = plan_graph(load_graph(SMALL), oracle=Scripted(tmp_path, op_l1))
    c1 = plan.layer("c1")
    assert c1.l1_bytes_per_core == base.l1_bytes_per_core * 6 // 5
    assert lv.layer_cbs(c1) - lv.layer_cbs(base) == c1.l1_bytes_per_core - base.l1_bytes_per_core
    assert not plan.ttnn.unconfirmed


# DeepLabV3's ASPP head (issue 33): dilation 6, 12 and 18 convs over one 512-channel map
ASPP = {"name": "aspp", "inputs": {"x": {"channels": 512, "size": [64, 64]}},
        "layers": [{"name": "a1", "op": "conv2d", "in": "x", "out": 256, "kernel": 1,
                    "act": "relu"}] +
                  [{"name": f"a{i}", "op": "conv2d", "in": "x", "out": 256, "kernel": 3,
                    "padding": d, "dilation": d, "act": "relu"}
                   for i, d in ((2, 6), (3, 12), (4, 18))] +
                  [{"name": "cat", "op": "concat", "in": ["a1", "a2", "a3", "a4"]},
                   {"name": "proj", "op": "conv2d", "out": 256, "kernel": 1, "act": "relu"}]}


def test_a_dilated_convs_halo_spans_the_dilated_window():
    """ttnn's per-op figures at batch 4 (the oracle, mock n150) and the halo buffer of a3 in the
    real run (630,784 B per bank); the estimate without the dilation was 591,616 / 642,304 /
    692,992 B, and the real run ran out of memory at a3."""
    plan = plan_graph(load_graph(ASPP, batch_size=4), oracle=False)
    ttnn = {"a2": 691_248, "a3": 894_080, "a4": 1_133_760}
    for name, want in ttnn.items():
        got = plan.layer(name).l1_bytes_per_core
        assert abs(got - want) <= 0.005 * want, (name, got, want)
    assert plan.layer("a3").config.l1_parts["halo"] == 630_784
