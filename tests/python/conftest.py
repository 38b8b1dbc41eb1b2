"""pytest setup for tests/python: the megatron_cpp package of the build tree ($MEGATRON_BUILD_DIR,
default build/) comes first on sys.path, ahead of any pip-installed copy."""
import os
import sys

BUILD_DIR = os.environ.get("MEGATRON_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
sys.path.insert(0, os.path.join(BUILD_DIR, "python"))
