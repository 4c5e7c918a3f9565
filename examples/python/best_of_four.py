#!/usr/bin/env python3
"""Best of four: fork four attempts from one Commit, run a command in each attempt's mount in
parallel, commit each, keep the attempt with the best score and delete the rest.

    best_of_four.py STORE [--from REF] [-- COMMAND...]

COMMAND runs with its working directory in the attempt's Workspace and $ATTEMPT set to 0..3; the
last line it prints is its score (higher is better). The default command is a toy solver: it
writes a solution file whose quality depends on the attempt. Prints one JSON line: the kept
branch, its Commit and every attempt's score.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor

from layerfs import Store

DEFAULT = ("seq 1 $(( (ATTEMPT * 3 + 1) % 4 * 100 + 50 )) > solution.txt; "
           "echo attempt $ATTEMPT > who.txt; wc -l < solution.txt")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store")
    ap.add_argument("--from", dest="base", default="main", help="the Commit to start from (default main)")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND... (default: a toy solver)")
    opts = ap.parse_args()
    command = opts.command[1:] if opts.command[:1] == ["--"] else opts.command

    with Store.open(opts.store) as store:
        base = store.log(opts.base, max_count=1)[0].id
        names = [f"attempt-{base[:8]}-{i}" for i in range(4)]
        for name in names:
            store.fork(name, base)

        def attempt(i: int) -> tuple[str, float, str]:
            # exec mounts the branch, runs the command in it, commits what it left, unmounts.
            r = store.exec(names[i], command or DEFAULT, commit=f"attempt {i}", capture_output=True,
                           env={**os.environ, "ATTEMPT": str(i)})
            out = (r.stdout or b"").decode().strip().splitlines()
            score = float(out[-1]) if r.exit_code == 0 and out else float("-inf")
            assert r.commit is not None
            return names[i], score, r.commit

        with ThreadPoolExecutor(max_workers=4) as pool:
            results = list(pool.map(attempt, range(4)))

        best = max(results, key=lambda x: x[1])
        for name, _, _ in results:
            if name != best[0]:
                store.branch_delete(name)
        print(json.dumps({"kept": best[0], "commit": best[2], "score": best[1],
                          "scores": {n: s for n, s, _ in results}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
