"""How late this machine wakes a sleeping thread, for bounds on elapsed time in tests.

A probe thread naps 2 ms at a time and records how late each nap ended. A test's bound is the
operation's own (its deadline plus a fixed slack) plus the worst lateness seen meanwhile: on a
loaded machine, beside a second copy of the suite, or under a slow interpreter every thread is
woken late, the operation's too. Never a number hoped for.

    with Lateness() as late:
        t0 = time.monotonic()
        ...
        assert elapsed <= 0.2 + 0.05 + late.worst_since(t0)
"""
from __future__ import annotations

import threading
import time
from typing import Any, List, Tuple

NAP = 0.002


class Lateness:
    def __init__(self) -> None:
        self._samples: List[Tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lateness-probe", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            time.sleep(NAP)
            t1 = time.monotonic()
            self._samples.append((t1, max(0.0, t1 - t0 - NAP)))

    def __enter__(self) -> "Lateness":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    def worst_since(self, t: float) -> float:
        """The worst lateness (s) of a nap that ended after t - 50 ms."""
        return max((late for at, late in list(self._samples) if at >= t - 0.05), default=0.0)
