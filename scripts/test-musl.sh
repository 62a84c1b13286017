#!/usr/bin/env bash
# The musllinux wheels, checked on this glibc machine (no musl CPython can be had here, so the
# extension is not imported): each wheel's extension and bloomguard command are musl ELF files for
# its CPU that need nothing but musl's libc (DT_NEEDED libc.musl-ARCH.so.1, or nothing), and the
# command - the whole C library, hiredis and OpenSSL, as that wheel's build compiled them - runs the
# CLI test suite (tests/cli/run.sh) against a real redis-server: natively for x86_64 (a dynamic
# command runs through Debian's musl loader, package musl), under qemu-user for aarch64.
#   bash scripts/test-musl.sh [WHEEL...]      default: dist/*musllinux*.whl (scripts/release.sh)
# scripts/test.sh runs it on the x86_64 musllinux wheel (CI builds no aarch64 wheel).
set -euo pipefail
cd "$(dirname "$0")/.."
TOP=$PWD

wheels=("$@")
if [ ${#wheels[@]} -eq 0 ]; then
  mapfile -t wheels < <(ls dist/bloomguard-*-musllinux_*.whl 2>/dev/null)
  [ ${#wheels[@]} -gt 0 ] || { echo "test-musl.sh: no musllinux wheel in dist/ (bash scripts/release.sh --only x86_64-musl,aarch64-musl)" >&2; exit 1; }
fi
command -v redis-server >/dev/null || { echo "test-musl.sh: needs redis-server" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/bg-musl.XXXXXX")
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" \
  --logfile "$WORK/redis.log" --daemonize no &
server_pid=$!
for _ in $(seq 1 100); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  sleep 0.05
done
URL=redis://127.0.0.1:$port

failed=0
for whl in "${wheels[@]}"; do
  name=$(basename "$whl")
  case $name in
    *musllinux_1_2_x86_64*) arch=x86_64 machine="X86-64" ;;
    *musllinux_1_2_aarch64*) arch=aarch64 machine="AArch64" ;;
    *) echo "test-musl.sh: $name is no musllinux_1_2 wheel" >&2; exit 1 ;;
  esac
  echo "=== $name"
  dir=$WORK/$arch
  mkdir -p "$dir"
  python3 -m zipfile -e "$whl" "$dir"
  so=$dir/bloomguard/_bloomguard_cffi.abi3.so
  cli=$(ls "$dir"/*.data/scripts/bloomguard)
  chmod +x "$cli"
  for f in "$so" "$cli"; do
    hdr=$(readelf -h "$f")
    grep -q "Machine:.*$machine" <<<"$hdr" || { echo "FAIL: $(basename "$f") is not an $arch ELF file" >&2; failed=1; }
    needed=$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
    interp=$(readelf -l "$f" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
    echo "$(basename "$f"): NEEDED [${needed% }]${interp:+ interpreter $interp}"
    for n in $needed; do
      [ "$n" = "libc.musl-$arch.so.1" ] || { echo "FAIL: $(basename "$f") needs $n (only musl's libc.musl-$arch.so.1 may be needed)" >&2; failed=1; }
    done
    if [ -n "$interp" ] && [ "$interp" != "/lib/ld-musl-$arch.so.1" ]; then
      echo "FAIL: $(basename "$f") asks for the loader $interp, not musl's /lib/ld-musl-$arch.so.1" >&2; failed=1
    fi
  done
  # the extension exports its module init function, nothing of the library or OpenSSL
  exported=$(readelf --dyn-syms -W "$so" | awk '$5 == "GLOBAL" && $7 != "UND" {print $8}' | tr '\n' ' ')
  [ "$exported" = "PyInit__bloomguard_cffi " ] || { echo "FAIL: the extension exports [$exported], not only PyInit__bloomguard_cffi" >&2; failed=1; }
  run=("$cli")
  if [ "$arch" != "$(uname -m)" ]; then
    if [ -n "$(readelf -l "$cli" | grep 'program interpreter' || true)" ]; then
      echo "SKIP: the $arch command is dynamically linked and no $arch musl loader is here: not run"
      continue
    fi
  elif [ -n "$(readelf -l "$cli" | grep 'program interpreter' || true)" ] && [ ! -e "/lib/ld-musl-$arch.so.1" ]; then
    echo "test-musl.sh: /lib/ld-musl-$arch.so.1 is missing (Debian: apt-get install musl)" >&2; exit 1
  fi
  "${run[@]}" --version --verbose | head -3
  if ! bash tests/cli/run.sh "$cli" "$URL" >"$WORK/cli-$arch.log" 2>&1; then
    failed=1
  fi
  grep -E '^FAIL' "$WORK/cli-$arch.log" || true
  echo "$arch CLI suite: $(tail -1 "$WORK/cli-$arch.log")"
done
exit $failed
