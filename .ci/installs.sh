#!/usr/bin/env bash
# Every install of trialkit on its own: the core (`pip install trialkit`) and each extra
# (`pip install 'trialkit[view]'`, ...), each in a fresh virtual environment that holds only
# that install and pytest, runs the tests of what it promises: tests/installs/test_NAME.py and
# tests/installs/test_every_install.py, with TRIALKIT_TEST_INSTALL=NAME (elsewhere they skip).
# trialkit is installed from a wheel built here, as a user installs it; pip's cache is reused.
# Needs pip >= 22.3 (`pip --python`).
#
#   .ci/installs.sh              # all of them
#   .ci/installs.sh core view    # some
#
# The postgres install needs TRIALKIT_TEST_POSTGRES_URL (.ci/postgres.sh prints one). Prints
# the seconds each install and its tests took; exits 1 when any install's tests did not all
# pass (pytest's exit 5, no test collected, is a failure too).
set -euo pipefail
cd "$(dirname "$0")/.."

ALL=(core view openai anthropic postgres otel mcp stats ray hf langfuse)
if [ "$#" -gt 0 ]; then
  chosen=("$@")
else
  chosen=("${ALL[@]}")
fi
for name in "${chosen[@]}"; do
  if [ ! -f "tests/installs/test_$name.py" ]; then
    echo "installs.sh: no tests for '$name' (tests/installs/test_$name.py)" >&2
    exit 2
  fi
done

work="$(mktemp -d -t trialkit-installs.XXXXXX)"
trap 'rm -rf "$work"' EXIT
began=$SECONDS
python3 -m pip wheel --quiet --quiet --no-deps --wheel-dir "$work/wheel" .
wheel="$(echo "$work"/wheel/trialkit-*.whl)"
echo "installs: built $(basename "$wheel") in $((SECONDS - began)) s"

failed=()
for name in "${chosen[@]}"; do
  spec="trialkit"
  if [ "$name" != core ]; then
    spec="trialkit[$name]"
  fi
  started=$SECONDS
  # This pip installs into the new environment (--python), so none is put in it, and it
  # compiles nothing ahead (Python compiles what a test imports): a third of the time.
  python3 -m venv --without-pip "$work/$name"
  python3 -m pip --python "$work/$name/bin/python" install --quiet --quiet --no-compile \
    "$spec @ file://$wheel" pytest
  installed=$((SECONDS - started))
  set +e
  TRIALKIT_TEST_INSTALL="$name" "$work/$name/bin/python" -m pytest -p no:cacheprovider -q \
    "tests/installs/test_$name.py" tests/installs/test_every_install.py
  status=$?
  set -e
  echo "installs: $spec: installed in $installed s, tested in $((SECONDS - started - installed)) s, pytest exit $status"
  if [ "$status" -ne 0 ]; then
    failed+=("$spec (pytest exit $status)")
  fi
  rm -rf "${work:?}/$name"
done

echo "installs: ${#chosen[@]} installs, each alone, in $((SECONDS - began)) s"
if [ "${#failed[@]}" -gt 0 ]; then
  printf 'installs: failed: %s\n' "${failed[@]}" >&2
  exit 1
fi
