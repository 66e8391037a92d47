"""The held-out benchmark of perfkit lint: 12 real RL codebases, a sample of findings drawn without looking at them,
labelled by a second labeller who did not read the rules' code, and per-step syncs found by reading training loops.

    python benchmarks/lint_heldout/heldout.py fetch [--git cleanrl=PATH]   # wheels from PyPI; cleanrl from a git clone
    python benchmarks/lint_heldout/heldout.py lint      # -> benchmarks/lint_heldout/out/findings.json (ignored by git)
    python benchmarks/lint_heldout/heldout.py sample    # the sample to label -> out/sample.json, printed with context
    python benchmarks/lint_heldout/heldout.py --dir benchmarks/lint_blind5 fetch|lint|sample   # another sample's folder
                                                        # (its codebases.json, out/; 10 findings a codebase)

The PyPI codebases (lint_real's 8 and 3 new ones) share ``benchmarks/lint_real``'s cache
(``~/.cache/perfkit-lint-real`` or ``$PERFKIT_LINT_REAL_CACHE``) and its fetch and lint code; a codebase pinned to a repository and commit
(``"repo"``, ``"version"`` = the commit) is exported with ``git archive`` from a clone you point at with
``--git NAME=PATH`` (any clone that has the commit, a bare one too), since a wheel of it is not published; only the
Python files of its ``subdir`` (what is linted) are exported.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lint_real"))
import run as lint_real  # noqa: E402  (benchmarks/lint_real/run.py: fetch, lint, keys)

unpacked_dir = lint_real.source_dir  # where a pinned release is unpacked in the shared cache

OUT = os.path.join(HERE, "out")
# the findings to label per codebase: 15 x 11 codebases with findings (mujoco-warp has none at a9a8ae5)
PER_CODEBASE = 15


def load_codebases(path: str | None = None) -> list:
    """This sample's codebases (``path``: another codebases.json, as lint_real's run.py may pass)."""
    with open(path or os.path.join(HERE, "codebases.json")) as fh:
        return json.load(fh)


def lint_root(cb: dict) -> str:
    """The directory linted as one project (paths in findings and labels are relative to it)."""
    return os.path.join(unpacked_dir(cb), cb.get("subdir", ""))


def fetch(args):
    clones = dict(kv.split("=", 1) for kv in args.git)
    wheels = [cb for cb in load_codebases() if "repo" not in cb]
    lint_real.load_codebases = lambda path=None: wheels
    lint_real.fetch(args)
    for cb in load_codebases():
        if "repo" not in cb:
            continue
        dest = unpacked_dir(cb)
        if os.path.isdir(dest):
            print(f"{cb['name']} {cb['version'][:12]}: already unpacked in {dest}")
            continue
        if cb["name"] not in clones:
            raise SystemExit(f"{cb['name']} is pinned to {cb['repo']}@{cb['version']}: clone it and pass "
                             f"--git {cb['name']}=PATH_TO_CLONE")
        # only the linted folder's Python files: a snapshot mirror may lack the blobs of large assets (meshes)
        linted = f":(glob){cb['subdir']}/**/*.py" if cb.get("subdir") else ":(glob)**/*.py"
        tar = subprocess.run(["git", "-C", clones[cb["name"]], "archive", "--format=tar", cb["version"], "--", linted],
                             check=True, capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(tar)) as t:
            t.extractall(dest, filter="data")
        print(f"{cb['name']} {cb['version'][:12]}: {clones[cb['name']]} -> {dest}")


def lint(args):
    """Lint each codebase as one project, test suites excluded, with benchmarks/lint_real's own lint step."""
    lint_real.load_codebases = load_codebases  # run.py's lint_root already adds a codebase's subdir
    lint_real.OUT = OUT
    lint_real.lint(args)


def sample_key(f: dict) -> str:
    """sha1 of the finding's stable key: codebase, path inside the package, rule, stripped source line."""
    key = [f["codebase"], f["path"], f["rule"], f["source"].strip()]
    return hashlib.sha1(json.dumps(key).encode()).hexdigest()


def draw(findings: list, per_codebase: int) -> list:
    """Per codebase, the ``per_codebase`` distinct keys with the lowest sha1 (a finding whose key repeats in one
    file counts once): chosen without looking at the findings."""
    by = collections.defaultdict(dict)
    for f in findings:
        by[f["codebase"]].setdefault(sample_key(f), f)
    out = []
    for cb in sorted(by):
        out += [by[cb][h] for h in sorted(by[cb])[:per_codebase]]
    return out


def sample(args):
    with open(os.path.join(OUT, "findings.json")) as fh:
        findings = json.load(fh)["findings"]
    picked = draw(findings, PER_CODEBASE if args.per_codebase is None else args.per_codebase)
    with open(os.path.join(OUT, "sample.json"), "w") as fh:
        json.dump(picked, fh, indent=1)
    roots = {cb["name"]: lint_root(cb) for cb in load_codebases()}
    for f in picked:
        with open(os.path.join(roots[f["codebase"]], f["path"]), encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
        a, b = max(0, f["line"] - 1 - args.context), min(len(lines), f["line"] + args.context)
        print(f"=== {f['codebase']} {f['path']}:{f['line']} {f['rule']} [{f['confidence']}] {f['message']}")
        for i in range(a, b):
            print(f"{'>>' if i == f['line'] - 1 else '  '}{i + 1:5d} {lines[i]}")
    print(f"{len(picked)} findings -> {os.path.join(OUT, 'sample.json')}", file=sys.stderr)


def use_dir(folder: str) -> None:
    """Point the fetch, lint and draw at another held-out sample's folder (lint_fresh, lint_blind4, ...):
    its codebases.json and out/, 10 findings a codebase."""
    global HERE, OUT, PER_CODEBASE
    HERE = os.path.abspath(folder)
    OUT = os.path.join(HERE, "out")
    PER_CODEBASE = 10


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=None, help="another held-out sample's folder (default: this one)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    fp = sub.add_parser("fetch")
    fp.add_argument("--git", action="append", default=[], metavar="NAME=PATH",
                    help="a clone of a codebase pinned to a repository commit")
    fp.set_defaults(fn=fetch)
    sub.add_parser("lint").set_defaults(fn=lint)
    sp = sub.add_parser("sample")
    sp.add_argument("--per-codebase", type=int, default=None, help=f"default {PER_CODEBASE}; 10 with --dir")
    sp.add_argument("--context", type=int, default=8)
    sp.set_defaults(fn=sample)
    args = ap.parse_args(argv)
    if args.dir:
        use_dir(args.dir)
    args.fn(args)


if __name__ == "__main__":
    main()
