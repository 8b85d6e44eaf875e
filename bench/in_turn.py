"""Engines timed in turn, for comparisons on a shared machine whose load drifts within minutes.

Every engine runs once per repeat, the order rotated between repeats so that none is always first
(or always right after another); a comparison is the median over repeats of the ratio within a
repeat, where both engines ran within the same minute. Each engine warms itself up at full width
before it is timed (a run's first pass of a shape touches its buffers' pages).
"""
from __future__ import annotations

import os
import statistics
from typing import Callable, Dict, List

# A run gets the repeat's index and returns its figures, "seconds" among them.
Run = Callable[[int], Dict]


def run_in_turn(runs: Dict[str, Run], repeats: int, label: str = "") -> List[Dict]:
    """Per repeat: the order the runs went in and each run's figures, with the machine's load average (1 minute)
    just before it started: other users' work on this machine shows there."""
    names = list(runs)
    raw = []
    for repeat in range(repeats):
        order = names[repeat % len(names):] + names[:repeat % len(names)]
        figures = {}
        for name in order:
            load = os.getloadavg()[0]
            figures[name] = {**runs[name](repeat), "load_1min_before": load}
            print(f"{label}repeat {repeat + 1}: {name:<52} {figures[name]['seconds']:8.2f} s (load {load:.1f})",
                  flush=True)
        raw.append({"order": order, "runs": figures})
    return raw


def paired_median(raw: List[Dict], ratio: Callable[[Dict[str, Dict]], float]) -> float:
    """The median over repeats of ratio(the repeat's figures by run name)."""
    return statistics.median(ratio(repeat["runs"]) for repeat in raw)


def speed_ratio(raw: List[Dict], engine: str, reference: str) -> float:
    """How many times faster engine ran than reference on the same work: paired median of their seconds."""
    return paired_median(raw, lambda runs: runs[reference]["seconds"] / runs[engine]["seconds"])


def median_of(raw: List[Dict], engine: str, key: str = "seconds") -> float:
    return statistics.median(repeat["runs"][engine][key] for repeat in raw)
