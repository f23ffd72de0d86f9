"""Our engine against Knossos itself on the shared cas-register histories.

    KNOSSOS_JAR=/path/to/knossos-standalone.jar .venv/bin/python bench/knossos_second_opinion.py [--limit N]

Knossos is not on PyPI, Debian or npm, so this comparison cannot run on a
machine without a jar you built (`lein uberjar` in a Knossos checkout): it is a
bench, not a test. Prints one line per disagreement and a summary line
`N histories, M agree`; exits 1 on any disagreement.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = ROOT.parent / "shared" / "testdata" / "knossos" / "cas-register"


def main() -> int:
    from checkers.knossos import analysis, knossos_jar, load_history

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=20, help="histories to compare (default 20)")
    args = parser.parse_args()
    if not knossos_jar.available():
        print("KNOSSOS_JAR must name a Knossos standalone jar", file=sys.stderr)
        return 2
    paths = sorted(DATA.glob("*/*.edn"))[:args.limit]
    agree = 0
    for path in paths:
        history = load_history(path)
        ours = analysis("cas-register", history, init=0, nil_reads="unknown")["valid"]
        theirs = analysis("cas-register", history, init=0, engine="knossos")["valid"]
        agree += ours == theirs
        if ours != theirs:
            print(f"{path}: ours {ours}, knossos {theirs}")
    print(f"{len(paths)} histories, {agree} agree")
    return 0 if agree == len(paths) else 1


if __name__ == "__main__":
    sys.exit(main())
