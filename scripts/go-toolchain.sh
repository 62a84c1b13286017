#!/usr/bin/env bash
# Prints the directory of a Go (>= 1.24) `go` command, fetching one if needed.
#   PATH="$(bash scripts/go-toolchain.sh):$PATH"
# The `go` on PATH is used when it is recent enough. Otherwise (Debian 12 ships 1.19) the official
# toolchain is fetched once from the Go module proxy - the same zip `go` itself downloads for
# GOTOOLCHAIN - into build-tools/ at the top of the repository (ignored by git).
# GOPROXY_URL: the proxy (default https://proxy.golang.org).
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
WANT=1.24.4
MIN_MINOR=24

if command -v go >/dev/null 2>&1; then
  v=$(go env GOVERSION 2>/dev/null || true)   # e.g. go1.26.8
  minor=$(printf '%s' "$v" | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
  if [ -n "$minor" ] && [ "$minor" -ge "$MIN_MINOR" ]; then
    dirname "$(command -v go)"
    exit 0
  fi
fi

case $(uname -m) in
  x86_64) arch=amd64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) echo "go-toolchain.sh: no Go toolchain for $(uname -m); install Go >= 1.$MIN_MINOR" >&2; exit 1 ;;
esac
dest=$TOP/build-tools/go$WANT
if [ ! -x "$dest/bin/go" ]; then
  mod="v0.0.1-go$WANT.linux-$arch"
  url="${GOPROXY_URL:-https://proxy.golang.org}/golang.org/toolchain/@v/$mod.zip"
  echo "go-toolchain.sh: fetching Go $WANT from $url" >&2
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  curl -fsSL --retry 3 -o "$tmp/go.zip" "$url"
  python3 -m zipfile -e "$tmp/go.zip" "$tmp/x"
  chmod -R u+x "$tmp/x/golang.org/toolchain@$mod/bin" "$tmp/x/golang.org/toolchain@$mod/pkg/tool"
  mkdir -p "$TOP/build-tools"
  rm -rf "$dest"
  mv "$tmp/x/golang.org/toolchain@$mod" "$dest"
fi
echo "$dest/bin"
