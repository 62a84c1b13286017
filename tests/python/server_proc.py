"""Process and port handling shared by the test helpers (redis, cluster, sentinel, TLS).

One home for how a test server is picked a port, started, waited for and stopped, so the helpers
cannot drift apart: servers on 127.0.0.1 only, started with stdin/stdout/stderr on /dev/null,
killed with the test (PR_SET_PDEATHSIG) and stopped by their pid, never by name.
"""
from __future__ import annotations

import ctypes
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import time
from typing import Callable, Iterable, List, Optional, Sequence, Tuple, Type

EPHEMERAL_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"


def server_bin() -> Optional[str]:
    """$BG_REDIS_SERVER or the redis-server on PATH (None if neither)."""
    return os.environ.get("BG_REDIS_SERVER") or shutil.which("redis-server")


def server_version() -> Tuple[str, int]:
    """("redis" or "valkey", major version) of server_bin(), from its --version ("Redis server v=7.0.15",
    "Valkey server v=9.1.2"); ("unknown", 0) if it cannot be run. The tests that must say what they expect
    of each server read it."""
    global _version
    if _version is None:
        _version = ("unknown", 0)
        b = server_bin()
        try:
            out = subprocess.run([b, "--version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 timeout=10).stdout.decode(errors="replace") if b else ""
        except (OSError, subprocess.SubprocessError):
            out = ""
        m = re.match(r"(Redis|Valkey) server v=(\d+)", out)
        if m:
            _version = (m.group(1).lower(), int(m.group(2)))
    return _version


_version: Optional[Tuple[str, int]] = None


def cli_bin() -> Optional[str]:
    """$BG_REDIS_CLI or the redis-cli on PATH (None if neither)."""
    return os.environ.get("BG_REDIS_CLI") or shutil.which("redis-cli")


# ---- ports ------------------------------------------------------------------------------------


def free_port() -> int:
    """A port the kernel hands out on 127.0.0.1 now (someone may take it before the server binds)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bind_free(port: int) -> bool:
    """True if port can be bound on 127.0.0.1 with SO_REUSEADDR, as redis-server binds it."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as redis-server does
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def port_hi(lo: int, hi: int, bus_offset: int = 0) -> int:
    """The highest port (whose port + bus_offset too) below the kernel's ephemeral range: other
    tests' free ports and outgoing connections come from there, so a port picked here is not
    taken by a client socket a moment later."""
    try:
        with open(EPHEMERAL_RANGE) as fh:
            elo = int(fh.read().split()[0])
        if lo + 100 <= elo - 1 - bus_offset < hi:
            return elo - 1 - bus_offset
    except (OSError, ValueError, IndexError):
        pass
    return hi


def pick_ports(n: int, lo: int, hi: int, bus_offset: int = 0,
               error: Type[Exception] = RuntimeError) -> List[int]:
    """n distinct random bindable ports in lo..port_hi() (each with port + bus_offset bindable too
    when bus_offset > 0); raises error if 1000 * n tries found none."""
    top, ports = port_hi(lo, hi, bus_offset), []  # type: int, List[int]
    for _ in range(1000 * n):
        p = random.randint(lo, top)
        if p not in ports and bind_free(p) and (bus_offset <= 0 or bind_free(p + bus_offset)):
            ports.append(p)
            if len(ports) == n:
                return ports
    if bus_offset > 0:
        raise error("no free port pairs P, P+%d in %d..%d" % (bus_offset, lo, top))
    raise error("no free ports in %d..%d" % (lo, top))


# ---- processes --------------------------------------------------------------------------------


def die_with_parent() -> None:
    """preexec_fn: the child gets SIGKILL when the test process dies without cleaning up."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def spawn(args: Sequence[str], pdeathsig: bool = True) -> subprocess.Popen:
    """Starts args with stdin, stdout and stderr on /dev/null (the servers log to their logfile).
    pdeathsig: it dies with the thread that started it (not for servers started from threads that
    end before the test does)."""
    return subprocess.Popen(list(args), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=die_with_parent if pdeathsig else None)


def stop_proc(proc: Optional[subprocess.Popen], timeout: float = 5.0) -> None:
    """SIGTERM by pid, then SIGKILL after timeout seconds; reaps it."""
    if proc is None:
        return
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def stop_procs(procs: Iterable[Optional[subprocess.Popen]], timeout: float = 5.0) -> None:
    """stop_proc for many: SIGTERM to all first, so it is one wait, not one per process."""
    live = [p for p in procs if p is not None]
    for p in live:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in live:
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=timeout)


def kill_proc(proc: Optional[subprocess.Popen]) -> None:
    """kill -9 by pid and reap."""
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait(timeout=10)


def wait_ping(proc: subprocess.Popen, port: int, timeout: float) -> bool:
    """True once the server on 127.0.0.1:port answers PING with PONG; False if proc exited or
    timeout seconds passed."""
    from redis_helpers import Resp, RespError  # here: redis_helpers imports this module

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with Resp("127.0.0.1", port, timeout=1) as r:
                if r("PING") == "PONG":
                    return True
        except (OSError, RespError):
            pass
        time.sleep(0.02)
    return False


def log_tail(path: str, chars: int = 1500) -> str:
    """The last chars characters of a server's log, or "(no log)"."""
    try:
        with open(path, errors="replace") as fh:
            return fh.read()[-chars:]
    except OSError:
        return "(no log)"


def empty_dir(path: str) -> None:
    """Removes everything under path (a scratch directory reused by the next start attempt)."""
    for entry in os.listdir(path):
        full = os.path.join(path, entry)
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full, ignore_errors=True)
        else:
            try:
                os.remove(full)
            except OSError:
                pass


def start_retrying(try_start: Callable[[], None], stop: Callable[[], None], scratch: str,
                   error: Type[Exception], attempts: int = 5) -> Optional[str]:
    """Calls try_start until it does not raise error, at most attempts times: a port can be taken
    between the bind test and the server's bind, and the next attempt picks new ports. After each
    failure stop() stops what it started and scratch is emptied. None on success, else the last
    error's message (the caller cleans up and raises)."""
    last = ""
    for _attempt in range(attempts):
        try:
            try_start()
            return None
        except error as e:
            last = str(e)
            stop()
            empty_dir(scratch)
    return last
