#!/usr/bin/env bash
# What a newcomer does, from scratch, checked end to end (scripts/test.sh runs it):
#   Python  fresh virtualenvs, no pip cache, default build isolation: `pip install CHECKOUT`, and
#           `python -m build` (sdist + wheel) with the wheel installed; each then queries a real
#           redis-server (contains after add = true), and `bloomguard --version` and a CLI query
#           run from the venv's bin/.
#   Go      a module in a temp folder outside the tree that requires the binding (require +
#           replace to a copy of bindings/go alone: the module's own tree, as its zip would be),
#           fresh GOMODCACHE and GOCACHE, no CGO_*/PKG_CONFIG_PATH/LD_LIBRARY_PATH: plain
#           `go build`, the binary run from another folder; the same with -tags bloomguard_static
#           (ldd: static); CGO_ENABLED=0 fails with one message naming cgo.
#   C       README.md's C line run as written (`cmake -S bloomguard ... && cmake --install build
#           --prefix "$HOME/.local"`, HOME a scratch folder, no sudo), then a program built against
#           that prefix as the README says (find_package with CMAKE_PREFIX_PATH, pkg-config with
#           PKG_CONFIG_PATH) queries the server; no test, benchmark, example or demo was built.
# The checkout is copied first (the files git tracks or would track: no build directories), so
# nothing built before is reused. Starts its own redis-server on a free loopback port.
#   bash scripts/newcomer-check.sh
# BG_NEWCOMER_PARTS: which of "python go c" to run (default all three).
# Needs python3 with venv, Go >= 1.24 on PATH, gcc/g++, libssl-dev, redis-server.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bg-newcomer.XXXXXX")
START=$SECONDS
redis_pid=
cleanup() {
  if [ -n "$redis_pid" ]; then kill "$redis_pid" 2>/dev/null || true; wait "$redis_pid" 2>/dev/null || true; fi
  chmod -R u+w "$WORK" 2>/dev/null || true  # Go's module cache is read-only
  rm -rf "$WORK"
}
trap cleanup EXIT
say() { printf 'newcomer [%3ds]: %s\n' "$((SECONDS - START))" "$*"; }
die() { echo "newcomer-check: FAILED: $*" >&2; exit 1; }

# ---- the checkout as a clone has it -------------------------------------------------------
SRC=$WORK/bloomguard
mkdir -p "$SRC"
(cd "$TOP" && git ls-files -z --cached --others --exclude-standard) |
  (cd "$TOP" && python3 -c '
import os, shutil, sys
dst = sys.argv[1]
for rel in sys.stdin.buffer.read().decode().split("\0"):
    if rel and os.path.isfile(rel):
        os.makedirs(os.path.join(dst, os.path.dirname(rel)), exist_ok=True)
        shutil.copy2(rel, os.path.join(dst, rel))
' "$SRC")

# ---- a redis-server of its own ----------------------------------------------------------
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" \
  --logfile "$WORK/redis.log" --daemonize no &
redis_pid=$!
for _ in $(seq 1 200); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  sleep 0.05
done
redis-cli -p "$port" ping >/dev/null 2>&1 || die "redis-server did not start (see $WORK/redis.log)"
URL="redis://127.0.0.1:$port"

# A clean environment for the installs: no pip cache, no cgo/pkg-config/loader settings.
CLEAN=(env -u PYTHONPATH -u LD_LIBRARY_PATH -u LD_PRELOAD -u PKG_CONFIG_PATH -u CGO_CFLAGS -u CGO_CPPFLAGS
       -u CGO_LDFLAGS -u CGO_ENABLED -u GOFLAGS -u CMAKE_ARGS -u BLOOMGUARD_CMAKE_ARGS PIP_NO_CACHE_DIR=1
       PIP_DISABLE_PIP_VERSION_CHECK=1)

PY_QUERY='
import sys, bloomguard
name = sys.argv[2]
with bloomguard.Client(sys.argv[1]) as c, c.filter(name) as f:
    f.init(1000, 0.01)
    f.add("py-item")
    ok = f.contains("py-item")
    f.delete()
print("contains=%s" % ok)
sys.exit(0 if ok else 1)
'
# py_check VENV WHAT: the library and the command from that venv, run from another folder
py_check() {
  local venv=$1 what=$2 out
  out=$(cd / && "${CLEAN[@]}" "$venv/bin/python" -c "$PY_QUERY" "$URL" "newcomer:$what:py") ||
    die "$what: the Python query failed: $out"
  [ "$out" = "contains=True" ] || die "$what: Python printed '$out'"
  [ -x "$venv/bin/bloomguard" ] || die "$what: no bloomguard command in $venv/bin"
  out=$(cd / && "${CLEAN[@]}" "$venv/bin/bloomguard" --version) || die "$what: bloomguard --version failed"
  case $out in "bloomguard "[0-9]*) ;; *) die "$what: bloomguard --version printed '$out'" ;; esac
  local cli=("${CLEAN[@]}" "$venv/bin/bloomguard" --url "$URL")
  (cd / && "${cli[@]}" init "newcomer:$what:cli" --expected 1000 --fpp 0.01 >/dev/null &&
     "${cli[@]}" add "newcomer:$what:cli" cli-item >/dev/null &&
     "${cli[@]}" contains "newcomer:$what:cli" cli-item >/dev/null &&
     "${cli[@]}" delete "newcomer:$what:cli" >/dev/null) || die "$what: the CLI query failed (contains after add)"
  say "$what: Python query and the venv's bloomguard ($out) work"
}

PARTS=" ${BG_NEWCOMER_PARTS:-python go c} "

# ---- C: README.md's line, as written --------------------------------------------------------
if [[ $PARTS == *" c "* ]]; then
  line=$(grep -m1 '^cmake -S bloomguard -B build ' "$SRC/README.md") || die "README.md has no C line (cmake -S bloomguard ...)"
  case $line in *sudo*) die "README.md's C line uses sudo: $line" ;; esac
  say "C: README.md's line: $line"
  mkdir -p "$WORK/home"
  t0=$SECONDS
  (cd "$WORK" && "${CLEAN[@]}" HOME="$WORK/home" bash -euo pipefail -c "$line") >"$WORK/c.log" 2>&1 ||
    { tail -30 "$WORK/c.log" >&2; die "README.md's C line failed"; }
  PREFIX=$WORK/home/.local
  [ -f "$PREFIX/include/bloomguard.h" ] && [ -x "$PREFIX/bin/bloomguard" ] || die "README.md's C line installed nothing into $PREFIX"
  built=$(find "$WORK/build" -maxdepth 3 -type f -perm -u+x \( -name 'test_*' -o -name 'bench_*' -o -name 'bloomguard-demo' -o -name event_loop \) | head -3)
  [ -z "$built" ] || die "README.md's C line built the project's own tests, benchmarks, examples or demo: $built"
  say "C: built and installed into \$HOME/.local in $((SECONDS - t0)) s (libraries and the command only)"
  cat >"$WORK/cquery.c" <<'EOF_C'
#include <bloomguard.h>
#include <stdio.h>
int main(int argc, char **argv) {
  bg_client *c = NULL;
  bg_filter *f = NULL;
  int present = 0, st = argc == 3 ? bg_client_open(&c, argv[1], NULL) : BG_EINVAL;
  if (st == BG_OK) st = bg_filter_open(&f, c, argv[2]);
  if (st == BG_OK) st = bg_filter_init(f, 1000, 0.01, NULL);
  if (st == BG_OK) st = bg_filter_add(f, "c-item", 6, NULL);
  if (st == BG_OK) st = bg_filter_contains(f, "c-item", 6, &present);
  if (st == BG_OK) st = bg_filter_delete(f, NULL);
  bg_filter_close(f);
  bg_client_close(c);
  if (st != BG_OK) { printf("%s\n", bg_strerror(st)); return 1; }
  printf("contains=%d\n", present);
  return present ? 0 : 1;
}
EOF_C
  # pkg-config as the README says (the shared library, found through LD_LIBRARY_PATH)
  # shellcheck disable=SC2046
  cc "$WORK/cquery.c" -o "$WORK/cquery-pc" $(PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig" pkg-config --cflags --libs bloomguard) ||
    die "C: a program built with pkg-config against \$HOME/.local"
  out=$(cd / && "${CLEAN[@]}" LD_LIBRARY_PATH="$PREFIX/lib" "$WORK/cquery-pc" "$URL" newcomer:c-pc) || die "C (pkg-config) program failed: $out"
  # find_package with CMAKE_PREFIX_PATH, the static library (nothing needed at run time)
  mkdir -p "$WORK/capp"
  cp "$WORK/cquery.c" "$WORK/capp/"
  printf '%s\n' 'cmake_minimum_required(VERSION 3.18)' 'project(capp C)' 'find_package(bloomguard REQUIRED)' \
    'add_executable(cquery cquery.c)' 'target_link_libraries(cquery PRIVATE bloomguard::bloomguard_static)' >"$WORK/capp/CMakeLists.txt"
  ("${CLEAN[@]}" cmake -S "$WORK/capp" -B "$WORK/capp/build" -DCMAKE_PREFIX_PATH="$PREFIX" &&
     "${CLEAN[@]}" cmake --build "$WORK/capp/build") >>"$WORK/c.log" 2>&1 ||
    { tail -20 "$WORK/c.log" >&2; die "C: find_package(bloomguard) with CMAKE_PREFIX_PATH=\$HOME/.local"; }
  out=$(cd / && "${CLEAN[@]}" "$WORK/capp/build/cquery" "$URL" newcomer:c-cmake) || die "C (find_package) program failed: $out"
  say "C: programs built with pkg-config and find_package against \$HOME/.local answer contains=1"
fi

# ---- Python: pip install CHECKOUT ---------------------------------------------------------
if [[ $PARTS == *" python "* ]]; then
python3 -m venv "$WORK/venv-pip"
say "pip install of the checkout (default build isolation, no cache)"
"${CLEAN[@]}" "$WORK/venv-pip/bin/python" -m pip install --quiet "$SRC" >"$WORK/pip.log" 2>&1 ||
  { tail -40 "$WORK/pip.log" >&2; die "pip install $SRC"; }
py_check "$WORK/venv-pip" "pip install"

# ---- Python: python -m build (sdist, and the wheel built from it) -------------------------
python3 -m venv "$WORK/venv-build"
say "python -m build (sdist + wheel)"
"${CLEAN[@]}" "$WORK/venv-build/bin/python" -m pip install --quiet build >"$WORK/build.log" 2>&1 ||
  { tail -20 "$WORK/build.log" >&2; die "pip install build"; }
"${CLEAN[@]}" "$WORK/venv-build/bin/python" -m build -o "$WORK/dist" "$SRC" >>"$WORK/build.log" 2>&1 ||
  { tail -40 "$WORK/build.log" >&2; die "python -m build"; }
ls "$WORK/dist"/bloomguard-*.tar.gz >/dev/null 2>&1 || die "python -m build made no sdist"
wheel=$(ls "$WORK/dist"/bloomguard-*-cp39-abi3-*.whl 2>/dev/null) || die "python -m build made no cp39-abi3 wheel: $(ls "$WORK/dist")"
# LICENSE, NOTICE and the third-party notices in both (scripts/notices.py, with its control)
python3 "$SRC/scripts/notices.py" sdist "$WORK/dist"/bloomguard-*.tar.gz >/dev/null || die "the sdist lacks notices"
python3 "$SRC/scripts/notices.py" wheel "$wheel" >/dev/null || die "the wheel lacks notices"
"${CLEAN[@]}" "$WORK/venv-build/bin/python" -m pip install --quiet "$wheel" >>"$WORK/build.log" 2>&1 ||
  { tail -20 "$WORK/build.log" >&2; die "pip install $wheel"; }
py_check "$WORK/venv-build" "python -m build"
fi

# ---- Go: a module outside the tree --------------------------------------------------------
if [[ $PARTS == *" go "* ]]; then
command -v go >/dev/null 2>&1 || die "no go on PATH (Go >= 1.24)"
cp -r "$SRC/bindings/go" "$WORK/binding"   # the module's own tree, nothing around it
APP=$WORK/app
mkdir -p "$APP"
cat >"$APP/go.mod" <<EOF
module example.com/newcomer

go 1.24

require github.com/bloomguard/bloomguard/bindings/go v0.0.0

replace github.com/bloomguard/bloomguard/bindings/go => $WORK/binding
EOF
cat >"$APP/main.go" <<'EOF'
package main

import (
	"context"
	"fmt"
	"os"

	bloomguard "github.com/bloomguard/bloomguard/bindings/go"
)

func main() {
	ctx := context.Background()
	client, err := bloomguard.Open(os.Args[1])
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	defer client.Close()
	f, err := client.Filter(os.Args[2])
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	defer f.Close()
	if _, err = f.Init(ctx, 1000, 0.01); err == nil {
		_, err = f.AddString(ctx, "go-item")
	}
	present := false
	if err == nil {
		present, err = f.ContainsString(ctx, "go-item")
	}
	if err == nil {
		_, err = f.Delete(ctx)
	}
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Printf("contains=%v\n", present)
}
EOF
GOENV=("${CLEAN[@]}" GOMODCACHE="$WORK/gomodcache" GOCACHE="$WORK/gocache" GOTOOLCHAIN=local GOPROXY=off)
go_check() {  # go_check WHAT [go build flags...]: build (linker warnings go to a log), run from /
  local what=$1 t0=$SECONDS out
  shift
  (cd "$APP" && "${GOENV[@]}" go build "$@" -o "$WORK/newcomer-$what" .) >"$WORK/go-$what.log" 2>&1 ||
    { cat "$WORK/go-$what.log" >&2; die "go build $* in a module outside the tree"; }
  say "go build${*:+ $*}: $((SECONDS - t0)) s"
  out=$(cd / && "${CLEAN[@]}" "$WORK/newcomer-$what" "$URL" "newcomer:go-$what") || die "the Go program ($what) failed: $out"
  [ "$out" = "contains=true" ] || die "the Go program ($what) printed '$out'"
}
go_check dynamic   # the first build: empty module and build caches
go_check static -tags bloomguard_static   # (the C objects come from the cache of the first)
out=$(ldd "$WORK/newcomer-static" 2>&1 || true)
case $out in *"not a dynamic executable"*) ;; *) die "-tags bloomguard_static: ldd says $out" ;; esac
say "go: dynamic and static binaries answer contains=true from another folder; ldd: the static one is static"

# CGO_ENABLED=0: one error, naming cgo
if out=$(cd "$APP" && "${GOENV[@]}" CGO_ENABLED=0 go build -o /dev/null . 2>&1); then
  die "CGO_ENABLED=0 go build succeeded"
fi
errors=$(printf '%s\n' "$out" | grep -c ': undefined: \|: error' || true)
[ "$errors" -eq 1 ] && printf '%s\n' "$out" | grep -q 'needs_cgo' ||
  die "CGO_ENABLED=0 should fail with one message naming cgo, got: $out"
say "CGO_ENABLED=0 fails with: $(printf '%s\n' "$out" | grep needs_cgo)"
fi

say "all newcomer checks passed"
