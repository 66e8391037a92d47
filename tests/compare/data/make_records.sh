#!/usr/bin/env bash
# How the records in this directory were made, on the project's 2-core CPU machine (2026-12-01),
# each in a fresh process as a CI job makes them, back to back: two profiles of unchanged
# examples/train.py and one of examples/train_naive.py (the same loop with the anti-patterns planted).
# tests/compare/test_compare_gate.py runs the compare gate on them. Run from anywhere; the records
# name the scripts by the absolute paths they were given.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
python3 -m perfkit profile -q -o "$here/train-a.json" "$root/examples/train.py" --iterations 6 > /dev/null
python3 -m perfkit profile -q -o "$here/train-b.json" "$root/examples/train.py" --iterations 6 > /dev/null
python3 -m perfkit profile -q -o "$here/train_naive.json" "$root/examples/train_naive.py" --iterations 6 > /dev/null
