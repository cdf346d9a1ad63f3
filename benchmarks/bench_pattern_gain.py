"""How close the decomposed-Mish finding's predicted gain comes to the gain ``compare`` measures
against the LeakyReLU twin (torch CPU), on an idle and on a saturated machine.

    python benchmarks/bench_pattern_gain.py [--rounds 3] [--corunner both]

Each round profiles the Mish and the LeakyReLU CNN of tests/analysis/torch_models.py (interleaved),
reads ``predicted_gain_us_per_iteration`` of the top finding and the median device-time gain of
``compare``, and prints predicted / measured (the target: within 1.5x on an idle machine; this
was a test assertion until issue 24 moved timing-bound checks out of the suite), with the wall
and process-tree CPU of the round and the load average.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.corunner import CoRunner, corunner_modes, loadavg, measured, summary


def one_round(root: Path) -> tuple[float, float]:
    """(predicted, measured) µs per iteration."""
    from tests.analysis.torch_models import profile_cnn

    from openmsprof.analysis import advisor
    from openmsprof.analysis.compare import DEVICE_TIME, OVERALL, compare_jobs

    mish = profile_cnn("mish", root / "mish")
    leaky = profile_cnn("leakyrelu", root / "leakyrelu")
    top = advisor.analyze(mish)[0]
    assert top.evidence["pattern"] == "decomposed_mish", top.evidence
    dev = compare_jobs(mish, leaky).row(OVERALL, DEVICE_TIME).test
    return float(top.evidence["predicted_gain_us_per_iteration"]), (dev.median_base - dev.median_new) / 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--corunner", choices=("off", "on", "both"), default="both")
    a = ap.parse_args()
    modes = corunner_modes(a.corunner)
    ratios: dict[bool, list[float]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(prefix="bench_gain_") as tmp:
        for r in range(a.rounds):
            for busy in modes:  # conditions interleaved round by round
                root = Path(tmp) / f"r{r}_{int(busy)}"
                with CoRunner(enabled=busy), measured() as m:
                    predicted, gain = one_round(root)
                ratio = predicted / gain if gain > 0 else float("inf")
                ratios[busy].append(ratio)
                print(f"round {r} corunner={'on' if busy else 'off'}: predicted {predicted:.1f} us, "
                      f"measured {gain:.1f} us, ratio {ratio:.2f}; wall {m['wall_s']:.1f} s, "
                      f"tree CPU {m['cpu_s']:.1f} s, load {m['load']:.1f}", flush=True)
    for busy in modes:
        print(f"predicted/measured, corunner {'on' if busy else 'off'}: {summary(ratios[busy])} "
              f"(target 0.667-1.5 idle; load now {loadavg():.1f})")


if __name__ == "__main__":
    main()
