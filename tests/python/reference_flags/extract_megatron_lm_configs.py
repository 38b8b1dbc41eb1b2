"""Writes megatron_lm_functional_tests.json.gz: the command line each of Megatron-LM's
functional-test configs (tests/functional_tests/test_cases/*/*/model_config.yaml, MODEL_ARGS)
gives pretrain_gpt, as its CI turns a config into flags: `true` is the bare flag, a list is its
items, anything else is one value. Shell variables become placeholder paths (/data/NAME).

    python extract_megatron_lm_configs.py MEGATRON_LM_CHECKOUT [COMMIT]
"""
import gzip
import json
import os
import re
import subprocess
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")


def words(model_args):
    out = []
    for flag, value in model_args.items():
        if value is True:
            out.append(flag)
        elif value is False or value is None or value == "":
            continue  # the CI passes nothing for these
        elif isinstance(value, list):
            out += [flag] + [str(v) for v in value]
        else:
            out += [flag, VARIABLE.sub(lambda m: "/data/" + (m.group(1) or m.group(2)), str(value))]
    return out


def main(checkout, commit=None):
    commit = commit or subprocess.run(["git", "-C", checkout, "rev-parse", "HEAD"], capture_output=True, text=True,
                                      check=True).stdout.strip()
    root = os.path.join(checkout, "tests", "functional_tests", "test_cases")
    configs = {}
    for dirpath, _, files in sorted(os.walk(root)):
        if "model_config.yaml" in files:
            with open(os.path.join(dirpath, "model_config.yaml")) as f:
                config = yaml.safe_load(f) or {}
            configs[os.path.relpath(dirpath, root)] = words(config.get("MODEL_ARGS") or {})
    payload = json.dumps({"repository": "NVIDIA/Megatron-LM", "commit": commit, "configs": configs}, indent=0,
                         sort_keys=True)
    with gzip.GzipFile(os.path.join(HERE, "megatron_lm_functional_tests.json.gz"), "wb", mtime=0) as f:
        f.write(payload.encode())
    print(f"{len(configs)} configs from {commit}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
