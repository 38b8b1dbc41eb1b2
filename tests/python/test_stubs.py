"""The package's type stubs are generated, never written by hand: the checked-in
python/megatron_cpp/**/*.pyi equal what scripts/generate_python_stubs.sh makes from the built
module, so a binding changed without regenerating them fails here."""
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD_DIR = os.environ.get("MEGATRON_BUILD_DIR", str(ROOT / "build"))


def test_checked_in_stubs_are_the_generated_ones(tmp_path):
    subprocess.run(["bash", str(ROOT / "scripts" / "generate_python_stubs.sh"), str(tmp_path)], check=True,
                   env={**os.environ, "MEGATRON_BUILD_DIR": BUILD_DIR})
    def stubs(package):
        return {str(p.relative_to(package)): p.read_text() for p in package.rglob("*.pyi")}
    generated = stubs(tmp_path / "megatron_cpp")
    checked_in = stubs(ROOT / "python" / "megatron_cpp")
    assert {"__init__.pyi", "_C.pyi", "training/__init__.pyi", "core/parallel_state.pyi"} <= set(generated)
    assert set(checked_in) == set(generated), "stub files differ: run scripts/generate_python_stubs.sh"
    stale = [name for name in generated if generated[name] != checked_in[name]]
    assert not stale, f"{stale} are out of date: run scripts/generate_python_stubs.sh"


def test_stubs_name_every_argument_field():
    import megatron_cpp
    stub = (ROOT / "python" / "megatron_cpp" / "_C.pyi").read_text()
    body = stub[stub.index("class Arguments:"):]
    body = body[:body.index("\nclass ")]
    for field in megatron_cpp.Arguments().to_dict():
        assert f"def {field}(self)" in body, field
