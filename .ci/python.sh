#!/usr/bin/env bash
# The Python client (python/): build confine once, install the package
# into a fresh venv with no index (its build backend is in-tree and
# stdlib-only, so this proves `pip install ./python` needs no network),
# run the README's one-liner against it, type-check it (mypy --strict),
# then its pytest suite (real runs,
# timeouts, cancellation, refusals) with the installed package.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
py=/usr/bin/python3; [ -x "$py" ] || py=python3
start=$SECONDS
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"

CGO_ENABLED=0 go build -o "$tmp/confine" ./cmd/confine
# Debian's pytest comes through --system-site-packages.
if ! "$py" -m venv --system-site-packages "$tmp/venv" >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv
  "$py" -m venv --system-site-packages "$tmp/venv"
fi
"$tmp/venv/bin/python" -c 'import pytest' 2>/dev/null || {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pytest
}
"$tmp/venv/bin/python" -m pip install -q --no-index --no-deps --disable-pip-version-check ./python
where=$("$tmp/venv/bin/python" -c 'import confine, os; print(os.path.dirname(confine.__file__))')
case "$where" in
  "$tmp/venv/"*) ;;
  *) echo "python client: imported from $where, not the venv"; exit 1 ;;
esac
mkdir "$tmp/wd"
# The README's one-liner, with the binary named by CONFINE_BIN (relative,
# as after the README's build) and then found on PATH.
cp "$tmp/confine" "$tmp/wd/confine"
oneliner="import confine; print(confine.run(['echo','hi'], workdir='.').stdout)"
for how in bin path; do
  case "$how" in
    bin) got=$(cd "$tmp/wd" && CONFINE_BIN=./confine "$tmp/venv/bin/python" -c "$oneliner") ;;
    path) got=$(cd "$tmp/wd" && PATH="$tmp:$PATH" "$tmp/venv/bin/python" -c "$oneliner") ;;
  esac
  if [ "$got" != "hi" ]; then
    echo "python client: the one-liner ($how) printed '$got', want 'hi'"; exit 1
  fi
done
rm "$tmp/wd/confine"
# The whole of python/ (the package, its build backend, the tests)
# type-checks strictly (Debian's mypy; the client supports 3.9).
command -v mypy >/dev/null 2>&1 || {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mypy
}
(cd python && mypy --strict --python-version 3.9 --cache-dir "$tmp/mypy-cache" confine _build/confine_build.py tests)
# From the repository root so the tests import the installed package.
CONFINE_BIN="$tmp/confine" "$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider python/tests
echo "python client: $((SECONDS - start)) s"
