#!/usr/bin/env python3
"""Every fenced code block of README.md and docs/**/*.md runs as pasted.

Each ```python, ```go and ```c block is run against a redis-server this script starts on a free
127.0.0.1 port (the snippets' URL, redis://127.0.0.1:6379, is rewritten to that port; the server is
emptied before each block):

- python: executed by the Python that has bloomguard installed (--python, default
  build-python/venv/bin/python, what bindings/python/ci.sh makes);
- go: compiled and run in a Go module outside the tree, laid out as the README's install section
  says (the module in a folder beside the checkout, here a symlink named bloomguard, both in
  $TMPDIR/bg-snippets-go-UID-HASH, kept between runs so that cgo's build cache serves the next),
  after running the README's own `go mod edit -require=... -replace=...` line there; every other
  page's copy of that line must be the same. A block importing the otel module is built in a
  second module that also ran the pages' install line of that module, then `go mod tidy`;
- c: compiled against the library of a CMake build (--build, default build; or --c-lib) and run.

Other languages (sh, console, text, ...) are not run; the summary counts them. A block without a
language tag fails the run.

A block may be marked by an HTML comment on the line before its fence:

    <!-- snippet: fragment (needs: client, f) -->   statements, run inside the glue the names give
    <!-- snippet: skip (why it cannot run) -->     not run; the reason is required

A fragment's names come from GLUE below (per language; an unknown name fails the run), e.g. a
Python `client` (a bloomguard.Client) and `f` (its filter "products", initialised), a Go `ctx`,
`client`, `f`, or Python's `async` (the fragment is the body of an async function run by
asyncio.run). A Go fragment is the body of a func returning error; a C fragment the body of main
(a function defined at its top, at column 0, goes to file scope).

    python3 tests/docs/run_snippets.py [--lang python,go,c] [--root DIR]
    python3 tests/docs/run_snippets.py --self-test   # planted broken blocks must fail, named

Exit status 0: every block ran; 1: a block failed or is untagged (listed); 2: the harness failed.
"""
from __future__ import annotations

import argparse
import collections
import glob
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Tuple

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "tests", "python"))
from redis_helpers import RedisServer, Resp  # noqa: E402

DOC_URL = "redis://127.0.0.1:6379"
RUN_LANGS = ("python", "go", "c")
ALIASES = {"py": "python", "python3": "python", "golang": "go", "shell": "sh"}
TIMEOUT = 120  # seconds per block (build or run)
GO_MODULE = "github.com/bloomguard/bloomguard/bindings/go"
GO_OTEL = GO_MODULE + "/otel"

# ---- the glue a fragment may name --------------------------------------------------------------
# python: name -> prelude lines (run before the fragment, in this order).
PY_GLUE = {
    "async": "",  # the fragment is the body of an async function
    "client": "client = bloomguard.Client(URL)",
    "f": 'f = client.filter("products")\nf.init(1_000_000, 0.01)',
    "skus": 'skus = ["sku-%d" % i for i in range(100)]',
    "db": textwrap.dedent('''\
        class _Database:  # a stand-in for the database the filter guards
            def exists(self, item):
                return item.startswith(b"sku-")
        db = _Database()'''),
    "reader": ("from opentelemetry.sdk.metrics.export import InMemoryMetricReader\n"
               "reader = InMemoryMetricReader()"),
    "storage": textwrap.dedent('''\
        class _Storage:  # a stand-in for a store that checks fencing tokens
            def write(self, rows, fencing_token):
                assert fencing_token > 0
        storage = _Storage()'''),
    "rows": 'rows = ["sku-1", "sku-2"]',
    "products": ("with bloomguard.Client(URL) as _c, _c.filter(\"products\") as _f:  # the filter exists\n"
                 "    _f.init(1_000_000, 0.01)"),
    "all_skus": 'def all_skus():\n    return ["sku-%d" % i for i in range(1000)]',
    "read_source_of_truth": 'def read_source_of_truth():\n    yield ["sku-1", "sku-2"]\n    yield ["sku-3"]',
}
PY_ORDER = ["products", "client", "f", "skus", "db", "reader", "storage", "rows", "all_skus", "read_source_of_truth"]

# go: name -> (parameter type, the lines in main that make a value named like it)
GO_GLUE = {
    "ctx": ("context.Context", "ctx := context.Background()"),
    "url": ("string", "url := URL"),
    "client": ("*bloomguard.Client",
               "client, err := bloomguard.Open(URL)\n\tcheck(err)\n\tdefer client.Close()"),
    "c": ("*bloomguard.Client", "c, err := bloomguard.Open(URL)\n\tcheck(err)\n\tdefer c.Close()"),
    "exporter": ("sdkmetric.Exporter", "exporter := discard{}"),
    "f": ("*bloomguard.Filter",
          'f, err := client.Filter("products")\n\tcheck(err)\n\tdefer f.Close()\n'
          '\t_, err = f.Init(context.Background(), 1_000_000, 0.01)\n\tcheck(err)'),
    "rows": ("[][]byte", 'rows := [][]byte{[]byte("sku-1"), []byte("sku-2")}'),
    "db": ("*database", "db := &database{}"),
    # (None: a declaration at file scope)
    "allSkus": (None, 'func allSkus() []string { return []string{"sku-1", "sku-2", "sku-42"} }'),
}
GO_ORDER = ["ctx", "url", "client", "c", "f", "rows", "db", "exporter", "allSkus"]
GO_DECLS = {  # file-scope declarations a name brings
    "db": ("type database struct{} // a stand-in for the database the filter guards\n\n"
           "func (*database) Exists(ctx context.Context, item []byte) bool { return true }"),
    "exporter": textwrap.dedent("""\
        type discard struct{} // an OpenTelemetry exporter that drops what it is given

        func (discard) Temporality(k sdkmetric.InstrumentKind) metricdata.Temporality {
        \treturn sdkmetric.DefaultTemporalitySelector(k)
        }
        func (discard) Aggregation(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
        \treturn sdkmetric.DefaultAggregationSelector(k)
        }
        func (discard) Export(context.Context, *metricdata.ResourceMetrics) error { return nil }
        func (discard) ForceFlush(context.Context) error                          { return nil }
        func (discard) Shutdown(context.Context) error                            { return nil }"""),
}
GO_STD = {"context": "context", "errors": "errors", "fmt": "fmt", "time": "time", "log": "log",
          "slog": "log/slog", "os": "os", "strings": "strings", "sync": "sync",
          "bloomguard": GO_MODULE, "sdkmetric": "go.opentelemetry.io/otel/sdk/metric",
          "metricdata": "go.opentelemetry.io/otel/sdk/metric/metricdata"}

# c: name -> lines at the top of main, and lines at its end
C_GLUE = {
    "client": ("bg_client *client = NULL;\n  CHECK(bg_client_open(&client, url, NULL));",
               "bg_client_close(client);"),
    "f": ('bg_filter *f = NULL;\n  CHECK(bg_filter_open(&f, client, "products"));\n'
          "  CHECK(bg_filter_init(f, 1000000, 0.01, NULL));", "bg_filter_close(f);"),
    "filter": ('bg_filter *filter = NULL;\n  CHECK(bg_filter_open(&filter, client, "products"));\n'
               "  CHECK(bg_filter_init(filter, 1000000, 0.01, NULL));", "bg_filter_close(filter);"),
    "present": ("int present = 0;", ""),
    "items": ('const void *items[] = {"sku-1", "sku-2"};\n  size_t lens[] = {5, 5}, n = 2;', ""),
    "db": ("void *db = NULL;  /* a stand-in for the database the filter guards */", ""),
    "lock": ('bg_lock *lock = NULL;\n  CHECK(bg_lock_open(&lock, client, "products", NULL));', "bg_lock_close(lock);"),
    "fence": ("uint64_t fence = 0;", ""),
}
C_ORDER = ["client", "f", "filter", "present", "items", "db", "lock", "fence"]
C_NEEDS_CLIENT = {"f", "filter", "lock"}
PY_NEEDS_CLIENT = {"f"}
GO_NEEDS_CLIENT = {"f"}


@dataclass
class Block:
    path: str           # relative to the root
    line: int           # of the opening fence
    lang: str
    code: str
    kind: str = "run"   # run, fragment, skip
    needs: List[str] = field(default_factory=list)
    reason: str = ""

    @property
    def where(self) -> str:
        return "%s:%d" % (self.path, self.line)


MARK = re.compile(r"^\s*<!--\s*snippet:\s*(fragment|skip)\s*(?:\((.*)\))?\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^\s`]*)")


def doc_files(root: str) -> List[str]:
    out = ["README.md"] if os.path.isfile(os.path.join(root, "README.md")) else []
    out += sorted(os.path.relpath(p, root)
                  for p in glob.glob(os.path.join(root, "docs", "**", "*.md"), recursive=True))
    return out


def parse(root: str) -> Tuple[List[Block], List[str]]:
    """The fenced blocks of the pages, and the problems found reading them."""
    blocks, problems = [], []
    for rel in doc_files(root):
        with open(os.path.join(root, rel), encoding="utf-8") as fh:
            lines = fh.read().split("\n")
        i = 0
        while i < len(lines):
            m = FENCE.match(lines[i])
            if not m:
                if MARK.match(lines[i]) and not (i + 1 < len(lines) and FENCE.match(lines[i + 1])):
                    problems.append("%s:%d: a snippet marker not directly before a fence" % (rel, i + 1))
                i += 1
                continue
            indent, fence, lang = m.groups()
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(fence):
                j += 1
            if j == len(lines):
                problems.append("%s:%d: a fence that is never closed" % (rel, i + 1))
                break
            body = [ln[len(indent):] if ln.startswith(indent) else ln.lstrip() for ln in lines[i + 1:j]]
            lang = ALIASES.get(lang.lower(), lang.lower())
            b = Block(rel, i + 1, lang, "\n".join(body) + "\n")
            mk = MARK.match(lines[i - 1]) if i > 0 else None
            if mk:
                b.kind = mk.group(1)
                arg = (mk.group(2) or "").strip()
                if b.kind == "skip":
                    b.reason = arg
                    if not arg:
                        problems.append("%s: a skip marker without its reason" % b.where)
                elif arg:
                    if not arg.startswith("needs:"):
                        problems.append("%s: a fragment marker's parentheses must read (needs: a, b)" % b.where)
                    else:
                        b.needs = [n.strip() for n in arg[len("needs:"):].split(",") if n.strip()]
            if not lang:
                problems.append("%s: a code block without a language tag (```text for plain text)" % b.where)
            blocks.append(b)
            i = j + 1
    return blocks, problems


# ---- the harness -------------------------------------------------------------------------------


class Failure(Exception):
    pass


def run(cmd: List[str], cwd: str, what: str, env: Optional[Dict[str, str]] = None) -> str:
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        raise Failure("%s: no end after %d s" % (what, TIMEOUT))
    except OSError as e:  # no go, no cc
        raise Failure("%s: cannot run %s: %s" % (what, cmd[0], e))
    out = p.stdout.decode("utf-8", "replace")
    if p.returncode != 0:
        raise Failure("%s failed (exit %d):\n%s" % (what, p.returncode, textwrap.indent(out[-3000:], "    ")))
    return out


def check_needs(b: Block, table: Mapping[str, object]) -> None:
    unknown = [n for n in b.needs if n not in table]
    if unknown:
        raise Failure("the fragment needs %s, which the runner's %s glue does not have (it has: %s)"
                      % (", ".join(unknown), b.lang, ", ".join(sorted(table))))


class Runner:
    def __init__(self, args: argparse.Namespace, server: RedisServer, work: str) -> None:
        self.args, self.server, self.work = args, server, work
        self.url = server.url
        self.go_apps: Dict[bool, str] = {}
        self.n = 0

    def show(self, out: str) -> None:
        if self.args.verbose and out.strip():
            print(textwrap.indent(out.rstrip("\n"), "    | "))

    def flush(self) -> None:
        with Resp(self.server.host, self.server.port) as r:
            r("FLUSHALL")

    def source(self, b: Block) -> str:
        return b.code.replace(DOC_URL, self.url)

    # python
    def python(self, b: Block) -> None:
        check_needs(b, PY_GLUE)
        code = self.source(b)
        if b.kind == "fragment":
            names = [n for n in PY_ORDER if n in b.needs or (n == "client" and PY_NEEDS_CLIENT & set(b.needs))]
            pre = ["import asyncio", "import bloomguard", "import bloomguard.aio", "URL = %r" % self.url]
            pre += [PY_GLUE[n] for n in names]
            if "async" in b.needs:
                code = "async def _fragment():\n%s\n\nasyncio.run(_fragment())\n" % textwrap.indent(code, "    ")
            code = "\n".join(pre) + "\n" + code
        self.n += 1
        path = os.path.join(self.work, "snippet%02d.py" % self.n)
        with open(path, "w") as fh:
            fh.write(code)
        self.show(run([self.args.python, path], self.work, "python"))

    # go
    def go_module(self, otel: bool) -> str:
        """The module beside a checkout, set up by the README's own install line (once); for a block
        importing the otel module, a second one that also runs the docs' install line of that module."""
        if otel in self.go_apps:
            return self.go_apps[otel]
        lines = [go_install_line(self.args.root, GO_MODULE, "README.md")]
        if otel:
            lines.append(go_install_line(self.args.root, GO_OTEL, ""))
        # One folder per checkout, the same at every run: cgo's build cache is keyed by the package's
        # directory, so the C library compiles once (about half a minute), not at every run.
        base = os.path.join(tempfile.gettempdir(), "bg-snippets-go-%d-%s"
                            % (os.getuid(), hashlib.sha1(TOP.encode()).hexdigest()[:10]))
        link, app = os.path.join(base, "bloomguard"), os.path.join(base, "app-otel" if otel else "app")
        shutil.rmtree(app, ignore_errors=True)
        os.makedirs(app)
        if not os.path.islink(link) or os.readlink(link) != TOP:
            if os.path.lexists(link):
                os.unlink(link)
            os.symlink(TOP, link)
        run(["go", "mod", "init", "example.com/app"], app, "go mod init")
        for line in lines:
            run(["sh", "-c", line], app, "the docs' Go install line (%s)" % line)
        self.go_apps[otel] = app
        return app

    def go(self, b: Block) -> None:
        check_needs(b, GO_GLUE)
        code = self.source(b)
        otel = GO_OTEL in code
        app = self.go_module(otel)
        if b.kind == "fragment":
            code = go_wrap(code, b.needs, self.url)
        self.n += 1
        pkg = "s%02d" % self.n
        os.makedirs(os.path.join(app, pkg))
        with open(os.path.join(app, pkg, "main.go"), "w") as fh:
            fh.write(code)
        if otel:  # as the page says: go mod tidy fetches the OpenTelemetry SDK and the Prometheus client
            run(["go", "mod", "tidy"], app, "go mod tidy")
        exe = os.path.join(self.work, pkg)
        run(["go", "build", "-o", exe, "./" + pkg], app, "go build")
        self.show(run([exe], self.work, "the Go program"))

    # c
    def c(self, b: Block) -> None:
        check_needs(b, C_GLUE)
        code = self.source(b)
        if b.kind == "fragment":
            code = c_wrap(code, b.needs, self.url)
        self.n += 1
        src = os.path.join(self.work, "snippet%02d.c" % self.n)
        exe = src[:-2]
        with open(src, "w") as fh:
            fh.write(code)
        lib = self.args.c_lib or os.path.join(self.args.build, "libbloomguard.so")
        if not os.path.exists(lib):
            raise Failure("no C library at %s: build it (cmake --build build --target bloomguard) "
                          "or pass --build / --c-lib" % lib)
        cc = os.environ.get("CC", "cc")
        flags = ["-std=c11", "-D_GNU_SOURCE", "-Wall", "-Werror"]
        if b.kind == "fragment":  # a fragment may leave what it declares unused
            flags += ["-Wno-unused-variable", "-Wno-unused-but-set-variable", "-Wno-unused-function"]
        run([cc] + flags + ["-I", os.path.join(TOP, "include"), src, "-o", exe, lib,
                            "-Wl,-rpath," + os.path.dirname(os.path.abspath(lib))], self.work, "cc")
        self.show(run([exe, self.url], self.work, "the C program"))


def go_install_line(root: str, module: str, home: str) -> str:
    """The `go mod edit -require=MODULE@... -replace=MODULE=...` command of the pages (of the page
    home, when given: the README's for the binding); every page's copy of it must be the same."""
    found: Dict[str, List[str]] = collections.OrderedDict()
    blocks, _ = parse(root)
    for b in blocks:
        if b.lang not in ("sh", "bash", "console"):
            continue
        for ln in re.sub(r"\\\n\s*", " ", b.code).split("\n"):
            m = re.search(r"-replace=([^=\s]+)=", ln)
            if "go mod edit" in ln and m and m.group(1) == module:
                cmd = " ".join(shlex.split(ln, comments=True))
                found.setdefault(cmd, []).append(b.where)
    homes = [c for c, w in found.items() if not home or any(x.startswith(home + ":") for x in w)]
    if len(homes) != 1:
        raise Failure("%s must hold one Go install line for %s (go mod edit -require=%s@... -replace=...), "
                      "found %d" % (home or "the pages", module, module, len(homes)))
    others = ["%s: %s" % (", ".join(w), c) for c, w in found.items() if c != homes[0]]
    if others:
        raise Failure("pages give another Go install line for %s than %s (%s):\n    %s"
                      % (module, home or found[homes[0]][0], homes[0], "\n    ".join(others)))
    return homes[0]


def go_wrap(body: str, needs: List[str], url: str) -> str:
    own_imports = ""  # the fragment's own import block goes to the top of the file
    m = re.search(r"^import\s*\((.*?)^\)\s*$", body, re.S | re.M)
    if m:
        own_imports = m.group(1).strip("\n")
        body = body[:m.start()] + body[m.end():]
    names = [n for n in GO_ORDER if n in needs or (n == "client" and GO_NEEDS_CLIENT & set(needs))]
    decls = "".join(GO_GLUE[n][1] + "\n\n" for n in names if GO_GLUE[n][0] is None)
    decls += "".join(GO_DECLS[n] + "\n\n" for n in names if n in GO_DECLS)
    glue = body + decls + " ".join(GO_GLUE[n][0] or "" for n in names)
    own = set(re.findall(r'"([^"]+)"', own_imports))
    used = {(alias, pkg) for alias, pkg in GO_STD.items() if re.search(r"(?<![\w.])%s\." % alias, glue)}
    used |= {("context", "context"), ("fmt", "fmt"), ("os", "os"), ("bloomguard", GO_MODULE)}
    lines = sorted("\t%s%s" % ("" if pkg.rsplit("/", 1)[-1] == alias else alias + " ", '"%s"' % pkg)
                   for alias, pkg in used if pkg not in own)
    names = [n for n in names if GO_GLUE[n][0] is not None]
    passed = [n for n in names if n in needs]
    params = ", ".join("%s %s" % (n, GO_GLUE[n][0]) for n in passed)
    setup = "\n\t".join(GO_GLUE[n][1] for n in names)
    args = ", ".join(passed)
    imports = "\n".join(lines) + "\n" + own_imports
    return (
        "package main\n\nimport (\n" + imports + "\n)\n\n"
        "const URL = \"" + url + "\"\n\nvar _ = context.Background // used or not by the fragment\n\n" + decls +
        "func check(err error) {\n\tif err != nil {\n\t\tfmt.Fprintln(os.Stderr, err)\n\t\tos.Exit(1)\n\t}\n}\n\n"
        "func fragment(" + params + ") error {\n" + textwrap.indent(body, "\t") + "\n\treturn nil\n}\n\n"
        "func main() {\n\tvar err error\n\t_ = err\n\t" + setup + "\n\tcheck(fragment(" + args + "))\n}\n")


def c_wrap(body: str, needs: List[str], url: str) -> str:
    top, rest, lines, i = [], [], body.split("\n"), 0
    while i < len(lines):  # #include lines and functions defined at column 0 go to file scope
        ln = lines[i]
        if ln.startswith("#"):
            top.append(ln)
        elif re.match(r"^[A-Za-z_][\w\s\*]*\b\w+\s*\(.*\)\s*\{\s*$", ln) and not ln.startswith(("if", "for", "while")):
            depth = 0
            while i < len(lines):
                top.append(lines[i])
                depth += lines[i].count("{") - lines[i].count("}")
                if depth == 0:
                    break
                i += 1
        else:
            rest.append(ln)
        i += 1
    names = [n for n in C_ORDER if n in needs or (n == "client" and C_NEEDS_CLIENT & set(needs))]
    setup = "\n  ".join(C_GLUE[n][0] for n in names)
    cleanup = "\n  ".join(C_GLUE[n][1] for n in reversed(names) if C_GLUE[n][1])
    return ("#include <bloomguard.h>\n#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
            "#include <string.h>\n%s\n\n"
            "#define CHECK(x) do { int st_ = (x); if (st_ != BG_OK) { fprintf(stderr, \"%%s: %%s\\n\", #x, "
            "bg_strerror(st_)); exit(1); } } while (0)\n\n"
            "int main(int argc, char **argv) {\n  const char *url = argc > 1 ? argv[1] : \"%s\";\n  (void)url;\n"
            "  %s\n  {\n%s\n  }\n  %s\n  return 0;\n}\n"
            % ("\n".join(top), url, setup, textwrap.indent("\n".join(rest), "    "), cleanup))


# ---- main --------------------------------------------------------------------------------------


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=TOP, help="the tree whose README.md and docs/ are read")
    ap.add_argument("--lang", default=",".join(RUN_LANGS), help="which of python,go,c to run")
    ap.add_argument("--python", default=os.environ.get("BG_SNIPPETS_PYTHON",
                                                     os.path.join(TOP, "build-python", "venv", "bin", "python")))
    ap.add_argument("--build", default=os.path.join(TOP, "build"), help="the CMake build holding libbloomguard.so")
    ap.add_argument("--c-lib", default="", help="the C library to link (default: BUILD/libbloomguard.so)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print what each program printed")
    ap.add_argument("--self-test", action="store_true", help="planted broken blocks must fail, each named")
    args = ap.parse_args(argv)
    args.python, args.build = os.path.abspath(args.python), os.path.abspath(args.build)
    args.c_lib = os.path.abspath(args.c_lib) if args.c_lib else ""
    if args.self_test:
        return self_test(args)
    langs = [x for x in args.lang.split(",") if x]
    bad = [x for x in langs if x not in RUN_LANGS]
    if bad:
        ap.error("--lang: unknown %s" % ", ".join(bad))
    if "python" in langs and not os.access(args.python, os.X_OK):
        print("run_snippets: no Python at %s (bindings/python/ci.sh makes it; or --python / "
              "BG_SNIPPETS_PYTHON)" % args.python, file=sys.stderr)
        return 2

    blocks, problems = parse(args.root)
    counts: Dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    failed = [(p, "") for p in problems]
    started = time.monotonic()
    server = RedisServer().start()
    work = tempfile.mkdtemp(prefix="bg-snippets-")
    try:
        r = Runner(args, server, work)
        for b in blocks:
            if b.lang not in RUN_LANGS or b.lang not in langs:
                if b.lang:
                    counts[b.lang]["not run"] += 1
                continue
            if b.kind == "skip":
                counts[b.lang]["skipped"] += 1
                print("skip      %-28s %s" % (b.where, b.reason))
                continue
            t = time.monotonic()
            try:
                r.flush()
                getattr(r, b.lang)(b)
            except Failure as e:
                counts[b.lang]["failed"] += 1
                failed.append(("%s: %s block: %s" % (b.where, b.lang, e), ""))
                print("FAIL      %-28s %s" % (b.where, b.lang))
                continue
            counts[b.lang]["fragment" if b.kind == "fragment" else "run"] += 1
            print("ok        %-28s %-6s %-8s %.1f s" % (b.where, b.lang, b.kind, time.monotonic() - t))
    finally:
        server.cleanup()
        shutil.rmtree(work, ignore_errors=True)

    print("\nsnippets (%s, %.0f s):" % (os.path.relpath(args.root) if args.root != TOP else "README.md, docs/",
                                        time.monotonic() - started))
    for lang in sorted(counts, key=lambda x: (x not in RUN_LANGS, x)):
        c = counts[lang]
        if lang in RUN_LANGS and lang in langs:
            print("  %-8s run %d, fragment %d, skipped %d, failed %d"
                  % (lang, c["run"], c["fragment"], c["skipped"], c["failed"]))
        else:
            print("  %-8s not run: %d%s" % (lang, c["not run"], " (not in --lang)" if lang in RUN_LANGS else ""))
    for msg, _ in failed:
        print("\nFAILED " + msg, file=sys.stderr)
    return 1 if failed else 0


# The planted page: (language tag, marker, code, whether it must fail).
PLANTED = [
    ("python", "", 'import bloomguard\nwith bloomguard.Client("redis://127.0.0.1:6379") as client, '
                   'client.filter("products") as f:\n    f.init(1000, 0.01)\n', False),
    ("go", "fragment (needs: ctx, f)", 'if _, err := f.AddString(ctx, "sku-1"); err != nil {\n\treturn err\n}\n', False),
    ("c", "fragment (needs: f, present)", 'CHECK(bg_filter_contains(f, "sku-1", 5, &present));\n', False),
    ("python", "", 'with bloomguard.Client("redis://127.0.0.1:6379") as client:   # NameError\n'
                   '    client.filter("products").add("x")\n', True),
    ("go", "fragment (needs: ctx, f)", 'ok, err := f.ContainsString(ctx, "sku-1") // declared and not used: ok\n'
                                       'return err\n', True),
    ("go", "fragment (needs: ctx, f)", 'if _, err := f.Delete(ctx); err != nil {\n\treturn err\n}\n'
                                       '_, err := f.ContainsString(ctx, "sku-1") // not initialized: fails at run time\n'
                                       'return err\n', True),
    ("c", "", 'int main(void) { return bg_no_such_function(); }\n', True),
    ("c", "fragment (needs: f, present)", 'CHECK(bg_filter_delete(f, NULL));\n'
                                          'CHECK(bg_filter_contains(f, "sku-1", 5, &present));  /* fails at run time */\n', True),
    ("", "", "an untagged block\n", True),
]


def self_test(args: argparse.Namespace) -> int:
    """A planted tree (the README's install section, a page of good and broken blocks) must fail
    on each broken block, naming it, and run the good ones."""
    with open(os.path.join(TOP, "README.md"), encoding="utf-8") as fh:
        install = re.search(r"^## Install$.*?(?=^## )", fh.read(), re.S | re.M)
    if not install:
        print("run_snippets --self-test: README.md has no '## Install' section", file=sys.stderr)
        return 2
    page, want = ["# planted", ""], []
    for lang, marker, code, bad in PLANTED:
        if marker:
            page.append("<!-- snippet: %s -->" % marker)
        where = "docs/planted.md:%d" % (len(page) + 1)
        if not lang:
            want.append("FAILED %s: a code block without a language tag" % where)
        else:
            want.append("FAILED %s: %s block" % (where, lang) if bad else "ok        %-28s %s" % (where, lang))
        page += ["```" + lang] + code.rstrip("\n").split("\n") + ["```", ""]
    root = tempfile.mkdtemp(prefix="bg-snippets-planted-")
    try:
        with open(os.path.join(root, "README.md"), "w") as fh:
            fh.write("# planted\n\n" + install.group(0))
        os.makedirs(os.path.join(root, "docs"))
        with open(os.path.join(root, "docs", "planted.md"), "w") as fh:
            fh.write("\n".join(page))
        cmd = [sys.executable, os.path.abspath(__file__), "--root", root, "--python", args.python,
               "--build", args.build] + (["--c-lib", args.c_lib] if args.c_lib else [])
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=10 * TIMEOUT)
        out = p.stdout.decode("utf-8", "replace")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    missing = [w for w in want if w not in out]
    if p.returncode != 1 or missing:
        print(out, file=sys.stderr)
        print("run_snippets --self-test: the planted page gave exit %d (want 1); not in its output: %s"
              % (p.returncode, missing), file=sys.stderr)
        return 2
    print("run_snippets --self-test: the planted broken python, go and c blocks (compile and run-time "
          "errors) and the untagged one failed, each named; the good ones ran")
    return 0


if __name__ == "__main__":
    sys.exit(main())
