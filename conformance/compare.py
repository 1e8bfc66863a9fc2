#!/usr/bin/env python3
"""Compares the reports of several conformance runners vector by vector.

    python3 conformance/compare.py rust.jsonl node.jsonl python.jsonl

Each report has one JSON line per vector: its id, whether it passed, and every
step's actual answer. The runners agree on a vector when all of them ran it and
their answers are the same JSON values.
"""

import json
import os
import sys


def load(path):
    with open(path, encoding="utf-8") as f:
        return {r["id"]: r for r in map(json.loads, filter(str.strip, f))}


def canonical(value):
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def main(paths):
    names = [os.path.basename(p).split(".")[0] for p in paths]
    reports = [load(p) for p in paths]
    ids = sorted(set().union(*reports))
    differ = []
    for vid in ids:
        answers = {canonical(r[vid]["actual"]) if vid in r else None for r in reports}
        if len(answers) != 1 or None in answers:
            differ.append(vid)
    for vid in differ[:20]:
        print(f"DIFFER {vid}: " + "; ".join(
            f"{n}: {'missing' if vid not in r else canonical(r[vid]['actual'])[:200]}" for n, r in zip(names, reports)))
    if differ:
        print(f"{', '.join(names)} differ on {len(differ)} of {len(ids)} vectors")
        return 1
    print(f"{', '.join(names)} agree on all {len(ids)} vectors")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
