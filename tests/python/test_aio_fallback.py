"""bloomguard.aio's fallback callback under load: 500 tasks asking about items whose answers they
know (single and batch queries) while the server is paused again and again, so that many answers
come from the policy - the fallback (the source of truth, rate-limited by its token bucket), or,
past its rate or with the breaker open, assume_present. Every answer is right for its source: 0
false negatives, every callback answer the truth; the callback runs on the loop's thread only,
inside the poll or the submit; answers come from Redis and from the callback both.

The negative control runs the same harness with a fallback that answers "absent" for everything:
the harness must count its false negatives.
"""
from __future__ import annotations

import asyncio
import random
import threading
import time
from typing import Any, Dict, List

import bloomguard
import bloomguard.aio as aio

PRESENT = ["fb-in-%d" % i for i in range(500)]
ABSENT = ["fb-out-%d" % i for i in range(500)]
TRUTH = {s.encode() for s in PRESENT}


def _load(url: str, fname: str, raw: Any, lying: bool) -> Dict[str, Any]:
    calls: Dict[str, Any] = {"n": 0, "items": 0, "threads": set()}

    def fallback(items: List[bytes]) -> List[bool]:
        calls["n"] += 1
        calls["items"] += len(items)
        calls["threads"].add(threading.get_ident())
        return [False] * len(items) if lying else [bytes(it) in TRUTH for it in items]

    policy = bloomguard.Policy(on_timeout=["callback", "assume_present"], on_connection=["callback", "assume_present"],
                               fallback=fallback, callback_rate=2000, callback_burst=200, breaker_threshold=50,
                               breaker_cooldown=0.1)
    tally = {"answers": 0, "false_neg": 0, "callback_wrong": 0, "errors": 0, "first_error": "",
             "by_source": {}}

    async def main() -> int:
        async with await aio.connect(url, command_timeout=0.1) as c:
            f = c.filter(fname, policy=policy)
            await f.delete()
            await f.init(20000, 1e-9)
            await f.add_many(PRESENT)
            stop = asyncio.Event()

            def judge(item: str, present: bool, source: str) -> None:
                want = item in PRESENT_SET
                tally["answers"] += 1
                tally["by_source"][source] = tally["by_source"].get(source, 0) + 1
                if want and not present:
                    tally["false_neg"] += 1
                if source == "callback" and present != want:
                    tally["callback_wrong"] += 1

            async def task(seed: int) -> None:
                rnd = random.Random(seed)
                while not stop.is_set():
                    batch = [rnd.choice(PRESENT) if rnd.random() < 0.5 else rnd.choice(ABSENT)
                             for _ in range(rnd.choice((1, 1, 4, 16)))]
                    try:
                        if len(batch) == 1:
                            a = await f.query(batch[0])
                            judge(batch[0], a.present, a.source)
                        else:
                            answers = await f.query_many(batch)
                            for item, present in zip(batch, answers.present):
                                judge(item, present, answers.source)
                    except bloomguard.BloomGuardError as e:
                        tally["errors"] += 1
                        tally["first_error"] = tally["first_error"] or repr(e)

            tasks = [asyncio.ensure_future(task(i)) for i in range(500)]
            for _ in range(4):  # the server paused again and again under the load
                await asyncio.sleep(0.3)
                raw("CLIENT", "PAUSE", "300", "ALL")
                await asyncio.sleep(0.3)
            await asyncio.sleep(0.3)
            stop.set()
            await asyncio.gather(*tasks)
            return threading.get_ident()

    loop_thread = asyncio.run(main())
    tally["calls"] = calls["n"]
    tally["callback_items"] = calls["items"]
    tally["threads_ok"] = calls["threads"] <= {loop_thread}
    return tally


PRESENT_SET = set(PRESENT)


def test_the_fallback_under_load_gives_known_answers(url, fname, raw):
    t0 = time.monotonic()
    got = _load(url, fname, raw, lying=False)
    print("fallback under load (%.1f s): %r" % (time.monotonic() - t0, got))
    assert got["false_neg"] == 0, got
    assert got["callback_wrong"] == 0, got
    assert got["errors"] == 0, got
    assert got["threads_ok"], "the fallback ran on a thread other than the loop's"
    assert got["by_source"].get("redis", 0) > 1000 and got["by_source"].get("callback", 0) > 100, got
    assert got["calls"] > 0


def test_negative_control_a_lying_fallback_is_caught(url, fname, raw):
    got = _load(url, fname, raw, lying=True)
    assert got["false_neg"] > 0 and got["callback_wrong"] > 0, got
