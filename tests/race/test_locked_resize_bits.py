"""Adds made while a rotation rewrites the live bitmap leave exactly the reference bitmap. The race
found LOCKED to other (n, p) keeping such adds' bits at the OLD parameters' positions in the new
generation (fixed: during the rewrite an add goes to the delta only). Adds are made from the
rotation's progress callback after each rewritten chunk (4 KiB chunks), so they land inside the
rewrite every time.
"""
from __future__ import annotations

import bloomguard
import pytest

from reference import bit_differences, reference_bitmap

BASE = [b"base-%d" % i for i in range(3000)]


@pytest.mark.parametrize("strategy, expected", [
    ("swap", 30000), ("swap", 10000), ("locked", 20000), ("locked", 30000), ("locked", 10000),
])
def test_adds_during_the_rewrite_leave_exactly_the_reference(redis_server, strategy: str, expected: int) -> None:
    name = "race:rewrite-adds:%s:%d" % (strategy, expected)
    with bloomguard.Client(redis_server.url) as c1, bloomguard.Client(redis_server.url) as c2:
        f, adder = c1.filter(name), c2.filter(name)
        try:
            f.init(20000, 0.01)
            f.add_many(BASE)
            added = []

            def add_during_upload(phase: str, items: int, done: int, total: int) -> None:
                if phase == "uploading" and len(added) < 50:
                    for _ in range(10):
                        item = b"during-%d" % len(added)
                        adder.add(item)  # another client: adds are never blocked by the write lock
                        added.append(item)

            with f.rotate(expected, 0.01, strategy, progress=add_during_upload, chunk_bytes=4096) as rot:
                rot.add_many(BASE)
            assert added, "no add landed during the upload: the reproduction proves nothing"
            info = f.info()
            assert (info.size, info.hash_iterations) == bloomguard.optimal_params(expected, 0.01)
            assert all(f.contains_many(BASE + added)), "an item was lost"
            with redis_server.resp() as r:
                live = (r("GET", name) or b"").rstrip(b"\0")
            want = reference_bitmap(BASE + added, info.size, info.hash_iterations)
            extra, lost = bit_differences(live, want)
            assert lost == 0
            assert (extra, len(live)) == (0, len(want)), "%d extra bits; %d bytes, reference %d" % (
                extra, len(live), len(want))
        finally:
            f.delete()
