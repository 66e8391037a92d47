"""``python -m perfkit.probes [--quick] [NAME...]``: run the probes and print their numbers as one JSON object."""

from __future__ import annotations

import argparse
import json
import sys

import perfkit.probes as probes
from perfkit.probes._bench import rounded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perfkit.probes", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="few iterations (CI mode)")
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"probes to run (default: all of {', '.join(probes.PROBES)})")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in probes.PROBES]
    if unknown:
        parser.error(f"unknown probe {', '.join(map(repr, unknown))}; known: {', '.join(probes.PROBES)}")
    results = probes.run_all(quick=args.quick, only=args.names or None,
                             progress=lambda n: print(f"probing {n}", file=sys.stderr))
    json.dump(rounded(results), sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 1 if any(r.get("status") == "error" for r in results.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
