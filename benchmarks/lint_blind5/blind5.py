"""The fifth blind held-out sample of perfkit lint: 3 RL codebases no earlier sample (lint_real, lint_heldout, lint_fresh, lint_blind4) uses.

    python benchmarks/lint_blind5/blind5.py fetch     # PyPI wheels -> the shared cache of benchmarks/lint_real
    python benchmarks/lint_blind5/blind5.py lint      # -> benchmarks/lint_blind5/out/findings.json (ignored by git)
    python benchmarks/lint_blind5/blind5.py sample    # 10 findings a codebase by sha1 of the key -> out/sample.json
    python benchmarks/lint_real/run.py heldout benchmarks/lint_blind5   # lint + score (precision, per-step recall)

It is ``benchmarks/lint_heldout/heldout.py`` pointed at this folder (same fetch, lint, test-suite exclusion and
sample draw), with 10 findings a codebase.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lint_heldout"))
import heldout  # noqa: E402

heldout.HERE = HERE
heldout.OUT = os.path.join(HERE, "out")
heldout.PER_CODEBASE = 10

if __name__ == "__main__":
    argv = sys.argv[1:]
    if argv[:1] == ["sample"] and "--per-codebase" not in argv:
        argv += ["--per-codebase", "10"]
    heldout.main(argv)
