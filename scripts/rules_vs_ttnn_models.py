"""The rule table against ttnn at every step of every shipped model and every test spec.

    python scripts/rules_vs_ttnn_models.py [--shipped|--specs] [--adapters-only|
        --no-adapters-only] [-v] [SUBSTRING...]

Plans each (tests/rules_models.py) with the planner's ttnn oracle on, with adapters and without
(each op at ttnn's defaults, so the rules reject steps too), and prints, per plan, how many
steps the rule table and ttnn judge alike, every disagreement, and the total.
Answers are cached (TTMODELS_CACHE_DIR/ttnn-oracle): a second run asks ttnn nothing. The
contradictions are also listed by ``ttmodels oracle contradictions``. Exit 1 on any
disagreement not listed in tests/rules_models.py KNOWN.
"""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import rules_models as M  # noqa: E402


def main(argv: list[str]) -> int:
    pats = [a for a in argv if not a.startswith("-")]
    models = ([] if "--specs" in argv else M.shipped()) + \
        ([] if "--shipped" in argv else M.test_specs())
    models = [m for m in models if not pats or any(p in m[0] for p in pats)]
    t0 = time.time()
    prog = sys.stderr if "-v" in argv else None
    outs = []
    if "--no-adapters-only" not in argv:
        outs += M.run(models, progress=prog)
    if "--adapters-only" not in argv:
        outs += M.run(models, adapters=False, progress=prog)
    from ttmodels.tools import ttnn_oracle
    o = ttnn_oracle.get(True)
    print(M.summary(outs))
    print(f"{time.time() - t0:.0f} s; ttnn asked {o.queries} step(s), {o.hits} from the cache, "
          f"{o.seconds:.0f} s in the worker")
    return 1 if any(x.disagreements for x in outs) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
