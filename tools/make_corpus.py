#!/usr/bin/env python3
"""Builds the default training corpus without downloads: the docstrings of the Python standard
library installed on this machine (Python Software Foundation License): one JSONL document
{"text": ...} per module, class or function docstring longer than 20 characters.

    python3 tools/make_corpus.py --output data/corpus/python_docs.jsonl [--stdlib DIR]
"""
import argparse
import ast
import json
import os
import sys
import sysconfig


def docstrings(path):
    try:
        tree = ast.parse(open(path, encoding="utf-8").read())
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc and len(doc) > 20:
                out.append(doc)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True)
    parser.add_argument("--stdlib", default=sysconfig.get_paths()["stdlib"])
    args = parser.parse_args()
    files = []
    for root, dirs, names in os.walk(args.stdlib):
        dirs[:] = sorted(d for d in dirs if d not in ("site-packages", "dist-packages", "__pycache__"))
        files.extend(os.path.join(root, n) for n in sorted(names) if n.endswith(".py"))
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    tmp = args.output + ".tmp"
    docs = 0
    size = 0
    with open(tmp, "w", encoding="utf-8") as out:
        for path in sorted(files):
            for text in docstrings(path):
                line = json.dumps({"text": text}, ensure_ascii=False)
                out.write(line + "\n")
                docs += 1
                size += len(line)
    os.replace(tmp, args.output)
    print(f"[make_corpus] {docs} documents, {size / 1e6:.1f} MB from {args.stdlib} -> {args.output}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
