#!/usr/bin/env bash
# The documentation: checks that no page cites an internal reference (tests/docs/check_docs.py,
# with its planted control), then builds the site with `mkdocs build --strict` (mkdocs.yml: a
# broken link or anchor fails), mkdocs installed with pip into a venv of its own, build-docs/venv.
#   bash scripts/docs.sh           # check and build into build-docs/site
#   bash scripts/docs.sh serve     # the same, then serve it on http://127.0.0.1:8000
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
cd "$TOP"
# mkdocstrings renders docs/reference/python-api.md from the package's source (signatures, types,
# docstrings; it reads bindings/python without importing the compiled module)
PACKAGES=("mkdocs==1.6.1" "mkdocstrings==1.0.8" "mkdocstrings-python==2.0.11" "griffelib==2.4.1")
VENV=build-docs/venv

python3 tests/docs/check_docs.py
if [ "$(cat "$VENV/.packages" 2>/dev/null)" != "${PACKAGES[*]}" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "${PACKAGES[@]}"
  echo "${PACKAGES[*]}" > "$VENV/.packages"
fi
out=$("$VENV/bin/mkdocs" build --strict 2>&1) || { printf '%s\n' "$out" >&2; echo "docs: mkdocs build --strict failed" >&2; exit 1; }
echo "docs: built build-docs/site ($(find build-docs/site -name index.html | wc -l) pages)"

# The negative control: the same site with one broken link and one broken anchor planted must fail.
ctl=$(mktemp -d "${TMPDIR:-/tmp}/bg-docs.XXXXXX")
trap 'rm -rf "$ctl"' EXIT
cp -rL mkdocs.yml docs "$ctl/"; mkdir -p "$ctl/bindings"; cp -r bindings/python "$ctl/bindings/"
printf '\n[planted](no-such-page.md) [planted](rotation.md#no-such-anchor)\n' >> "$ctl/docs/index.md"
if out=$("$VENV/bin/mkdocs" build --strict -f "$ctl/mkdocs.yml" --site-dir "$ctl/site" 2>&1); then
  echo "docs: the negative control passed: a broken link did not fail mkdocs build --strict" >&2
  exit 1
fi
for want in no-such-page.md no-such-anchor; do
  grep -q "$want" <<< "$out" || { echo "docs: the negative control's $want was not reported" >&2; exit 1; }
done
echo "docs: the planted broken link and anchor failed the strict build, as they must"
if [ "${1:-}" = serve ]; then
  exec "$VENV/bin/mkdocs" serve --strict
fi
