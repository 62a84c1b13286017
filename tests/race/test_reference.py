"""The final-bitmap check of the race can fail: the reference differs from a filter that lacks one
item (or holds one more), and equals the filter that holds exactly the items."""
from __future__ import annotations

import bloomguard

from reference import reference_bitmap


def live_bitmap(redis_server, name: str) -> bytes:
    with redis_server.resp() as r:
        return (r("GET", name) or b"").rstrip(b"\0")


def test_reference_bitmap_catches_a_missing_and_an_extra_item(redis_server) -> None:
    items = [b"ref-%d" % i for i in range(500)]
    size, k = bloomguard.optimal_params(1000, 0.01)
    want = reference_bitmap(items, size, k)
    with bloomguard.Client(redis_server.url) as client, client.filter("race:reference-control") as f:
        try:
            f.init(1000, 0.01)
            f.add_many(items[:-1])
            assert live_bitmap(redis_server, f.name) != want, "one item missing went unnoticed"
            f.add(items[-1])
            assert live_bitmap(redis_server, f.name) == want
            f.add(b"one-more")
            assert live_bitmap(redis_server, f.name) != want, "one extra item went unnoticed"
        finally:
            f.delete()
