#!/usr/bin/env python3
"""The layering docs/architecture.md states, checked on the tree: the include graph between the
library's areas (src/<area>, include/megatron/<area>) has no cycle; only the GPT callbacks name
GPTModel under src/training; no file under src/training is over 350 lines; optimizer.h includes
no distributed header. Prints each violation and exits 1 if there is one."""
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Root-level files by the layer docs/architecture.md puts them in (program.h knows comm::CollectiveError).
ROOT_FILES = {"parallel_state": "comm", "program": "comm"}


def area(path):
    """src/<area>/... or include/megatron/<area>/...; a root-level file's layer."""
    parts = path.split("/")
    rest = parts[1:] if parts[0] == "src" else parts[2:]
    if len(rest) > 1:
        return rest[0]
    return ROOT_FILES.get(os.path.splitext(rest[0])[0], "base")


def sources():
    for top in ("src", "include/megatron"):
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith((".h", ".cpp", ".cu", ".cuh")):
                    yield os.path.relpath(os.path.join(folder, f), ROOT)


def main():
    problems = []
    edges = defaultdict(dict)  # area -> {area it includes: one file that does}
    for path in sources():
        text = open(os.path.join(ROOT, path), encoding="utf-8").read()
        for inc in re.findall(r'#include "((?:megatron|training)/[^"]+)"', text):
            target = area("include/" + inc) if inc.startswith("megatron/") else "training"
            if target != area(path):
                edges[area(path)].setdefault(target, path + " includes " + inc)
        if path.startswith("src/training/"):
            lines = text.count("\n")
            if lines > 350:
                problems.append(f"{path}: {lines} lines (at most 350 under src/training)")
            if path != "src/training/loop/gpt_callbacks.cpp" and re.search(r"models::gpt::|gpt/gpt_model\.h", text):
                problems.append(f"{path}: names GPTModel; only src/training/loop/gpt_callbacks.cpp may")
    optimizer_h = open(os.path.join(ROOT, "include/megatron/optimizer/optimizer.h"), encoding="utf-8").read()
    for inc in re.findall(r'#include "(megatron/distributed/[^"]+)"', optimizer_h):
        problems.append(f"include/megatron/optimizer/optimizer.h includes {inc}")

    state, stack = {}, []

    def visit(a):  # depth-first; returns a cycle through the stack, or None
        state[a] = "open"
        stack.append(a)
        for b in sorted(edges.get(a, {})):
            if state.get(b) == "open":
                return stack[stack.index(b):] + [b]
            if b not in state and (cycle := visit(b)):
                return cycle
        state[a] = "done"
        stack.pop()
        return None

    for a in sorted(edges):
        if a not in state and (cycle := visit(a)):
            steps = [edges[x][y] for x, y in zip(cycle, cycle[1:])]
            problems.append("include cycle " + " -> ".join(cycle) + ": " + "; ".join(steps))
            break
    for p in problems:
        print("architecture_rules:", p)
    if not problems:
        print("architecture_rules: the include graph of", len(edges), "areas has no cycle; the other rules hold")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
