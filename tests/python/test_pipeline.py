"""Multiplexed connections (pipeline=True, the default): threads hammering one client, each with
items whose answers it knows (a batch length of its own, so an answer meant for another thread
shows), while another client changes the filter's config and connections are killed."""
from __future__ import annotations

import threading

import pytest

import bloomguard

THREADS = 8
ROUNDS = 60


@pytest.mark.parametrize("pipeline,conns", [(True, 2), (True, 1), (False, 2)])
def test_threads_get_their_own_answers(url, raw, fname, pipeline, conns):
    present = ["p-%d" % i for i in range(300)]
    absent = ["a-%d" % i for i in range(300)]
    with bloomguard.Client(url, pipeline=pipeline, pipeline_conns=conns, command_timeout=5) as c, \
            bloomguard.Client(url) as other:
        f = c.filter(fname)
        f.init(20000, 1e-9)
        f.add_many(present)
        assert not any(f.contains_many(absent))
        g = other.filter(fname)
        wrong, errors = [], []
        stop = threading.Event()

        def hammer(tid):
            batch = 2 + tid
            for r in range(ROUNDS):
                if stop.is_set():
                    return
                items = [(present if (r + k) % 2 else absent)[(tid * 31 + r * 7 + k) % 300] for k in range(batch)]
                want = [(r + k) % 2 == 1 for k in range(batch)]
                try:
                    got = f.contains_many(items)
                    if got != want:
                        wrong.append((tid, r, got, want))
                    mine = "added-%d-%d" % (tid, r)
                    f.add(mine)
                    if not f.contains(mine):
                        wrong.append((tid, r, mine))
                except bloomguard.BloomGuardError as e:  # a killed connection's call whose retries all failed
                    errors.append(e)

        ts = [threading.Thread(target=hammer, args=(i,)) for i in range(THREADS)]
        for t in ts:
            t.start()
        # another client's writes to the config hash (the tracked key) and killed connections
        for step in range(6):
            if step % 2:
                raw("CLIENT", "KILL", "TYPE", "normal")
            else:
                raw("HSET", "{%s}:config" % fname, "other-field", str(step))
        for t in ts:
            t.join(60)
            assert not t.is_alive(), "a thread hangs"
        stop.set()
        assert wrong == []
        print("%d errors: %s" % (len(errors), [str(e) for e in errors[:3]]))
        assert len(errors) <= 3 * THREADS, errors[:3]
        g.close()
        f.delete()
        f.close()
