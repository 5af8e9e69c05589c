"""The flatten of a 1x1 map (the classifier head after a global pool) is one ttnn.reshape to the
shape it already has: ttnn returns the input's own tensor (a view when only the padding
changes), and the executor frees the input after the step, as the plan says. The layer's output
must be a buffer of its own (issue 33: convnext_tiny at batch 32 failed its real run at
``logits``, "device != nullptr"; at 16 rows the linear's output landed on the freed buffer)."""

# convnext_tiny's head (ttmodels/configs/convnext_tiny.yaml) on its 7x7x768 map
HEAD = {"name": "cnx_head", "inputs": {"x": {"channels": 768, "size": [7, 7]}},
        "defaults": {"precision": {"activations": "bfloat16", "weights": "bfloat8_b",
                                   "math_fidelity": "HiFi2"}},
        "layers": [{"name": "avgpool", "op": "global_avg_pool"},
                   {"name": "norm", "op": "layer_norm", "eps": 1e-6},
                   {"name": "flat", "op": "flatten"},
                   {"name": "fc", "op": "linear", "out": 1000}],
        "outputs": {"logits": "fc"}}


def test_the_head_runs_for_real_at_one_tile_of_rows(real_run):
    """Batch 32: [1, 1, 32, 768] is a whole tile of rows, where ttnn's reshape hands back the
    input tensor itself; the linear after the flatten then found its operand freed."""
    plan, report = real_run(HEAD, batch_size=32)
    assert plan.layer("flat").node.shape.flat == plan.layer("norm").node.shape.flat
    bad = [(s.name, s.error) for s in report.steps if not s.ok]
    assert report.real and report.completed and not bad, bad
    assert len(report.steps) == report.planned_steps
