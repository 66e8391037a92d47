"""perfkit lint on real RL codebases: fetch pinned releases, lint them, score against hand labels.

Not a test (it needs the network once); the data it scores against is committed next to it:

* ``codebases.json``  — the pinned PyPI releases (name, version);
* ``labels.json``     — findings read by hand: ``true`` (the line makes the GPU wait / allocates / loops per env
  on every step or every training iteration), ``harmless`` (it does, but off the per-step path or on host data
  of negligible cost), ``wrong`` (it does not do what the message says), each with the reason;
* ``known_syncs.json`` — per-step syncs found by reading the per-step code (rollout loops, env steps, buffers'
  ``add``, loggers' per-step methods, ``PPO.update``'s minibatch reads...), to measure recall.

Labels and known syncs are matched by codebase, path inside the package, and the stripped source line
text (labels also by rule), not by line number.

    python benchmarks/lint_real/run.py fetch      # pip download the wheels, unpack (cache: ~/.cache/perfkit-lint-real)
    python benchmarks/lint_real/run.py lint       # -> benchmarks/lint_real/out/findings.json
    python benchmarks/lint_real/run.py score      # precision per codebase and overall, recall on known syncs
    python benchmarks/lint_real/run.py unlabelled # findings without a label, with their code around them
    python benchmarks/lint_speed.py --real        # speed against flake8 --select=TOR on the same files
"""

from __future__ import annotations

import argparse
import collections
import glob
import hashlib
import json
import os
import subprocess
import sys
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CACHE = os.environ.get("PERFKIT_LINT_REAL_CACHE", os.path.expanduser("~/.cache/perfkit-lint-real"))
OUT = os.path.join(HERE, "out")
# test suites and mocks are not training code: excluded as a team would in [tool.perfkit.lint] exclude
TEST_CODE = ["tests", "test", "testing", "test_*.py", "*_test.py", "conftest.py"]


def load_codebases(path: str | None = None) -> list:
    with open(path or os.path.join(HERE, "codebases.json")) as fh:
        return json.load(fh)


def source_dir(cb: dict) -> str:
    return os.path.join(CACHE, "src", f"{cb['name']}-{cb['version']}")


def lint_root(cb: dict) -> str:
    """The folder linted as one project: the unpacked release, or its ``subdir`` (cleanrl's ``cleanrl/``)."""
    return os.path.join(source_dir(cb), cb.get("subdir", ""))


def fetch(_args):
    dl = os.path.join(CACHE, "dl")
    os.makedirs(dl, exist_ok=True)
    for cb in load_codebases():
        dest = source_dir(cb)
        if os.path.isdir(dest):
            print(f"{cb['name']} {cb['version']}: already unpacked in {dest}")
            continue
        norm = cb["name"].replace("-", "_")
        wheels = [w for w in glob.glob(os.path.join(dl, "*.whl"))
                  if os.path.basename(w).lower().startswith(f"{norm.lower()}-{cb['version']}-")]
        if not wheels:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", dl, f"{cb['name']}=={cb['version']}"]
            print(" ".join(cmd), flush=True)
            subprocess.run(cmd, check=True)
            wheels = [w for w in glob.glob(os.path.join(dl, "*.whl"))
                      if os.path.basename(w).lower().startswith(f"{norm.lower()}-{cb['version']}-")]
        if not wheels:
            raise SystemExit(f"no wheel of {cb['name']}=={cb['version']} in {dl}")
        with zipfile.ZipFile(wheels[0]) as z:
            z.extractall(dest)
        print(f"{cb['name']} {cb['version']}: {wheels[0]} -> {dest}")


def lint(args):
    sys.path.insert(0, ROOT)
    from perfkit.lint import lint_paths

    rows, stats = [], []
    for cb in load_codebases(getattr(args, "codebases", None)):
        src = lint_root(cb)
        if not os.path.isdir(src):
            raise SystemExit(f"{src} missing: run `python benchmarks/lint_real/run.py fetch` first")
        t0 = time.perf_counter()
        result = lint_paths([src], exclude=cb.get("exclude", TEST_CODE), root=src)
        dt = time.perf_counter() - t0
        for v in result.violations:
            rows.append({"codebase": cb["name"], "path": os.path.relpath(os.path.abspath(v.path), src),
                         "line": v.line, "rule": v.rule, "confidence": v.confidence, "severity": v.severity,
                         "source": v.source, "message": v.message})
        stats.append({"codebase": cb["name"], "version": cb["version"], "files": result.files, "lines": result.lines,
                      "findings": len(result.violations), "errors": len(result.errors), "seconds": round(dt, 2)})
        print(f"{cb['name']:18s} {cb['version']:8s} {result.files:5d} files {result.lines:7d} lines "
              f"{len(result.violations):4d} findings {len(result.errors)} unlintable  {dt:.2f} s", flush=True)
    out = getattr(args, "findings", None) or os.path.join(OUT, "findings.json")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as fh:
        json.dump({"codebases": stats, "findings": rows}, fh, indent=1)
    print(f"{len(rows)} findings -> {out}")


def _findings(path: str | None = None) -> list:
    path = path or os.path.join(OUT, "findings.json")
    if not os.path.exists(path):
        raise SystemExit(f"{path} missing: run `python benchmarks/lint_real/run.py lint` first")
    with open(path) as fh:
        return json.load(fh)["findings"]


def _labels(path: str | None = None) -> list:
    with open(path or os.path.join(HERE, "labels.json")) as fh:
        return json.load(fh)["labels"]


def _known(path: str | None = None) -> list:
    with open(path or os.path.join(HERE, "known_syncs.json")) as fh:
        return json.load(fh)["syncs"]


def label_key(d: dict) -> tuple:
    return (d["codebase"], d["path"], d["rule"], d["source"].strip())


LEVELS = {"all": ("high", "medium", "low"), "high": ("high",), "medium": ("medium",)}


def measure(found: list, labels: list, known: list, level: str = "all") -> dict:
    """Precision and recall of the findings at one confidence level (``all``: every finding; ``high``: what
    ``--min-confidence high`` reports; ``medium``: the medium ones alone) against hand labels (``true`` /
    ``harmless`` / ``wrong``, matched by codebase, path, rule and source line) and known per-step sync sites
    (matched by codebase, path and source line). Returns per-codebase label counts, the overall counts, the
    precision TRUE/(TRUE+WRONG), and the known sites with whether each was reported."""
    found = [f for f in found if f["confidence"] in LEVELS[level]]
    by_key = {label_key(lb): lb for lb in labels}
    per = collections.defaultdict(collections.Counter)
    matched = set()
    for f in found:
        lb = by_key.get(label_key(f))
        if lb is None:
            per[f["codebase"]]["unlabelled"] += 1
            continue
        matched.add(label_key(f))
        per[f["codebase"]][lb["label"]] += 1
    total = collections.Counter()
    for c in per.values():
        total.update(c)
    sites = {(f["codebase"], f["path"], f["source"].strip()) for f in found}
    hits = [((k["codebase"], k["path"], k["source"].strip()) in sites, k) for k in known]
    t, w = total["true"], total["wrong"]
    return {"level": level, "per_codebase": per, "total": total, "precision": t / (t + w) if t + w else float("nan"),
            "known": hits, "recall": sum(ok for ok, _ in hits) / max(1, len(hits)),
            "stale": sorted(set(by_key) - matched)}


def score(args):
    found = _findings(args.findings)
    labels, known = _labels(args.labels), _known(args.known)
    names = [cb["name"] for cb in load_codebases(args.codebases)]
    m = measure(found, labels, known, args.min_confidence)
    print(f"{'codebase':18s} {'found':>5s} {'label':>5s} {'true':>4s} {'harm':>4s} {'wrong':>5s}  "
          f"{'t/(t+w)':>7s}  {'(t+h)/all':>9s}")
    for name in names + sorted(set(m["per_codebase"]) - set(names)):
        _row(name, m["per_codebase"][name])
    _row("overall", m["total"])
    for ok, k in m["known"]:
        if not ok or args.verbose:
            print(f"  {'reported' if ok else 'MISSED  '} {k['codebase']} {k['path']}: {k['source']}")
    hit = sum(ok for ok, _ in m["known"])
    print(f"recall on known per-step syncs: {hit}/{len(m['known'])} = {m['recall']:.3f}")
    print("by confidence level:")
    for level in LEVELS:
        lm = measure(found, labels, known, level)
        c = lm["total"]
        print(f"  {level:6s} TRUE {c['true']:3d}  harmless {c['harmless']:3d}  WRONG {c['wrong']:3d}  "
              f"precision {lm['precision']:.3f}  per-step recall {lm['recall']:.3f} "
              f"({sum(ok for ok, _ in lm['known'])}/{len(lm['known'])})")
    if m["stale"] and args.verbose:
        print(f"{len(m['stale'])} labels match no finding now (code no longer reported):")
        for s in m["stale"]:
            print("  ", s)


def _row(name, c):
    t, h, w, u = c["true"], c["harmless"], c["wrong"], c["unlabelled"]
    n = t + h + w
    p1 = t / (t + w) if t + w else float("nan")
    p2 = (t + h) / n if n else float("nan")
    print(f"{name:18s} {n + u:5d} {n:5d} {t:4d} {h:4d} {w:5d}  {p1:7.3f}  {p2:9.3f}" + (f"  ({u} unlabelled)" if u else ""))


def sample_keys(found, per_codebase: int) -> set:
    """A deterministic random sample (by a hash of each finding's key) of ``per_codebase`` findings a codebase:
    the findings to label, chosen without looking at them."""
    by = collections.defaultdict(list)
    for f in found:
        k = label_key(f)
        by[f["codebase"]].append((hashlib.sha1(json.dumps(k).encode()).hexdigest(), k))
    out = set()
    for rows in by.values():
        out |= {k for _, k in sorted(rows)[:per_codebase]}
    return out


def unlabelled(args):
    found = _findings()
    labels = {label_key(lb) for lb in _labels()}
    if args.sample:
        keep = sample_keys(found, args.sample)
        found = [f for f in found if label_key(f) in keep]
    cbs = {cb["name"]: cb for cb in load_codebases()}
    n = 0
    for f in found:
        if label_key(f) in labels or (args.codebase and f["codebase"] != args.codebase):
            continue
        if args.rule and not f["rule"].startswith(args.rule):
            continue
        n += 1
        if n > args.limit:
            break
        path = os.path.join(source_dir(cbs[f["codebase"]]), f["path"])
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
        a, b = max(0, f["line"] - 1 - args.context), min(len(lines), f["line"] + args.context)
        print(f"=== {f['codebase']} {f['path']}:{f['line']} {f['rule']} [{f['confidence']}] {f['message'][:90]}")
        print(json.dumps({"codebase": f["codebase"], "path": f["path"], "rule": f["rule"], "source": f["source"]}))
        for i in range(a, b):
            print(f"{'>>' if i == f['line'] - 1 else '  '}{i + 1:5d} {lines[i]}")


def heldout(args):
    """Lint and score a held-out set made like this one (a folder with codebases.json, labels.json and
    known_syncs.json in this folder's formats), with this file's lint and scoring code."""
    d = os.path.abspath(args.dir)
    ns = argparse.Namespace(codebases=os.path.join(d, "codebases.json"),
                            findings=os.path.join(OUT, f"findings-{os.path.basename(d)}.json"),
                            labels=os.path.join(d, "labels.json"), known=os.path.join(d, "known_syncs.json"),
                            min_confidence="all", verbose=args.verbose)
    if not args.no_lint:
        lint(ns)
    score(ns)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch").set_defaults(fn=fetch)
    lp = sub.add_parser("lint")
    lp.add_argument("--codebases", help="codebases file (default: codebases.json here)")
    lp.add_argument("--findings", help="where to write the findings (default: out/findings.json)")
    lp.set_defaults(fn=lint)
    sp = sub.add_parser("score")
    sp.add_argument("-v", "--verbose", action="store_true")
    sp.add_argument("--min-confidence", choices=tuple(LEVELS), default="all",
                    help="score only the findings of this confidence level (default all)")
    sp.add_argument("--findings", help="findings.json to score (default: out/findings.json)")
    sp.add_argument("--labels", help="labels file (default: labels.json here)")
    sp.add_argument("--known", help="known per-step sync sites (default: known_syncs.json here)")
    sp.add_argument("--codebases", help="codebases file (default: codebases.json here)")
    sp.set_defaults(fn=score)
    hp = sub.add_parser("heldout", help="lint and score a held-out set (its own codebases, labels, known syncs)")
    hp.add_argument("dir", help="the held-out set's folder, e.g. benchmarks/lint_heldout")
    hp.add_argument("--no-lint", action="store_true", help="score the findings already written")
    hp.add_argument("-v", "--verbose", action="store_true")
    hp.set_defaults(fn=heldout)
    up = sub.add_parser("unlabelled")
    up.add_argument("--codebase")
    up.add_argument("--rule")
    up.add_argument("--limit", type=int, default=40)
    up.add_argument("--context", type=int, default=6)
    up.add_argument("--sample", type=int, default=0, help="only the deterministic sample of N findings a codebase")
    up.set_defaults(fn=unlabelled)
    args = ap.parse_args(argv)
    args.fn(args)


if __name__ == "__main__":
    main()
