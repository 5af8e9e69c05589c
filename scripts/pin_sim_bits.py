#!/usr/bin/env python
"""Write tests/data/sim_bits.json: the sim's output hashes of tests/sim_pins.py's cases on this
machine's environment (torch version, CPU instruction set), kept next to other environments' pins.

    .venv/bin/python scripts/pin_sim_bits.py [--check]

Run it only on code whose sim results are known good (the pins exist so that optimisations of the
sim cannot change its bits); --check compares instead of writing.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
os.environ.setdefault("TT_METAL_MOCK_CLUSTER_DESC_PATH",
                      str(REPO / "ttmodels" / "data" / "wormhole_n150_mock_cluster.yaml"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the stored pins, write nothing")
    ap.add_argument("--add-variant", action="store_true",
                    help="keep this environment's pins and add this machine's outputs as another "
                         "known-good variant where they differ (another CPU of the same torch "
                         "capability)")
    args = ap.parse_args(argv)
    import sim_pins
    env = sim_pins.environment()
    got = {c.name: sim_pins.run_case(c) for c in sim_pins.CASES}
    pins = sim_pins.load_pins()
    if args.check:
        want = pins.get(env)
        if want is None:
            print(f"no pins for {env}")
            return 2
        bad = [n for n in got if got[n] not in sim_pins.variants(want.get(n, []))]
        print("\n".join(f"differs: {n}" for n in bad) or f"all {len(got)} cases match ({env})")
        return 1 if bad else 0
    if args.add_variant and env in pins:
        for n, out in got.items():
            known = sim_pins.variants(pins[env].get(n, []))
            if out not in known:
                pins[env][n] = known + [out]
    else:
        pins[env] = got
    sim_pins.PINS.parent.mkdir(parents=True, exist_ok=True)
    sim_pins.PINS.write_text(json.dumps(pins, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(got)} cases for {env} to {sim_pins.PINS.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
