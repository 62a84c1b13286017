"""Where each language's worker is, and how to start one as a process.

Every worker speaks the same command line (tests/race/README.md) and prints one JSON line of
counts. The commands come from the environment that tests/race/run.sh sets after building them,
with defaults for a build in the usual places:

  BG_RACE_C_WORKER   build/race/bg_race_worker            (tests/race/c/CMakeLists.txt)
  BG_RACE_C1_WORKER  build-hiredis1/race/bg_race_worker   the same C worker built against hiredis 1.x
                     ("c1": its queries read the bits alone under tracking; a reader only)
  BG_RACE_CFAULT_WORKER  build/race/bg_race_worker_fault  the C worker with --fault: the cluster
                     scenarios' negative control (tests/race/c/fault.h), not a language of its own
  BG_RACE_GO_WORKER  build/race/race_worker_go            (tests/race/go)
  BG_RACE_JAVA_CP    tests/race/java/target/classes + target/classpath.txt (tests/race/java)
  BG_RACE_JBG_CP     build/race/jbg (RaceWorkerBg, tests/race/jbg) + the binding's jar
                     (bindings/java/target/bloomguard-*.jar): "jbg", a reader through bloomguard's
                     Java binding
  Python             this interpreter, tests/race/workers/race_worker.py (bloomguard installed)
  BG_RACE_LANGS      the languages to run, default c,c1,python,pyaio,go,java,jbg
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Dict, List

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

#: Languages that rotate and add (the Redisson worker only reads: Redisson knows nothing of a
#: rotation, and its add() would bypass the delta a swap rotation merges).
WRITERS = ("c", "python", "go")
ALL = ("c", "c1", "python", "pyaio", "go", "java", "jbg")


def languages() -> List[str]:
    langs = [s.strip() for s in os.environ.get("BG_RACE_LANGS", ",".join(ALL)).split(",") if s.strip()]
    unknown = [s for s in langs if s not in ALL]
    if unknown:
        raise RuntimeError("BG_RACE_LANGS: unknown language(s) %s (known: %s)" % (unknown, ", ".join(ALL)))
    return langs


def _java_command() -> List[str]:
    cp = os.environ.get("BG_RACE_JAVA_CP")
    if not cp:
        target = HERE / "java" / "target"
        deps = target / "classpath.txt"
        if not deps.is_file():
            raise RuntimeError("the Java worker is not built: %s missing (bash tests/race/run.sh builds it)" % deps)
        cp = "%s:%s" % (target / "classes", deps.read_text().strip())
    # a small heap and quick start: it is one reader among many processes on a small machine
    return ["java", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", cp,
            "io.bloomguard.race.RaceWorker"]


def _jbg_command() -> List[str]:
    cp = os.environ.get("BG_RACE_JBG_CP")
    if not cp:
        classes = ROOT / "build" / "race" / "jbg"
        jars = sorted(p for p in (ROOT / "bindings" / "java" / "target").glob("bloomguard-*.jar")
                      if not p.name.endswith(("-sources.jar", "-javadoc.jar")))
        if not (classes / "io" / "bloomguard" / "race" / "RaceWorkerBg.class").is_file() or not jars:
            raise RuntimeError("the jbg worker is not built: %s or the binding's jar missing "
                               "(bash tests/race/run.sh builds them)" % classes)
        cp = "%s:%s" % (classes, jars[-1])
    return ["java", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", cp,
            "io.bloomguard.race.RaceWorkerBg"]


def commands(langs: List[str]) -> Dict[str, List[str]]:
    """language -> the command that starts its worker (arguments follow). Raises RuntimeError
    naming what is missing: a requested language without its worker fails the suite."""
    out: Dict[str, List[str]] = {}
    for lang in langs:
        if lang == "python":
            out[lang] = [sys.executable, str(HERE / "workers" / "race_worker.py")]
        elif lang == "pyaio":  # the same worker, its queries through bloomguard.aio (a reader only)
            out[lang] = [sys.executable, str(HERE / "workers" / "race_worker.py"), "--aio"]
        elif lang == "java":
            out[lang] = _java_command()
        elif lang == "jbg":
            out[lang] = _jbg_command()
        else:
            env = {"c": "BG_RACE_C_WORKER", "c1": "BG_RACE_C1_WORKER", "go": "BG_RACE_GO_WORKER"}[lang]
            default = {"c": ROOT / "build" / "race" / "bg_race_worker",
                       "c1": ROOT / "build-hiredis1" / "race" / "bg_race_worker",
                       "go": ROOT / "build" / "race" / "race_worker_go"}[lang]
            path = Path(os.environ.get(env) or default)
            if not os.access(path, os.X_OK):
                raise RuntimeError("the %s worker is not built: %s (set %s, or bash tests/race/run.sh)"
                                   % (lang, path, env))
            out[lang] = [str(path)] + (["--lang", "c1"] if lang == "c1" else [])
    return out


def fault_command() -> List[str]:
    """The cluster control's reader: the C worker built with fault injection (c/CMakeLists.txt), as
    language "cfault", following ASK wrongly (a bits-only read on the importing node)."""
    path = Path(os.environ.get("BG_RACE_CFAULT_WORKER") or ROOT / "build" / "race" / "bg_race_worker_fault")
    if not os.access(path, os.X_OK):
        raise RuntimeError("the fault-injecting C worker is not built: %s (set BG_RACE_CFAULT_WORKER, or "
                           "bash tests/race/run.sh)" % path)
    return [str(path), "--lang", "cfault", "--fault", "ask-bits-only"]
