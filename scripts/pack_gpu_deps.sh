#!/usr/bin/env bash
# Copies the header-only dependencies (spdlog, fmt, CLI11, nlohmann-json, toml++, and gloo's headers for
# LibTorch's own Gloo), Oniguruma's and utf8proc's headers and shared libraries (they need only libc),
# and GoogleTest's sources from this machine's Debian packages into
# third_party/gpu-deps (ignored by git), for machines that have no system packages:
# scripts/build_gpu.sh builds against them. Needs scripts/setup.sh first.
set -euo pipefail
cd "$(dirname "$0")/.."
out=third_party/gpu-deps
for path in /usr/include/spdlog /usr/include/fmt /usr/include/CLI /usr/include/gloo /usr/include/nlohmann /usr/include/toml++ /usr/src/googletest; do
  [[ -e "$path" ]] || { echo "pack_gpu_deps: $path is missing; run scripts/setup.sh first" >&2; exit 1; }
done
rm -rf "$out.tmp"
mkdir -p "$out.tmp/spdlog/include" "$out.tmp/fmt/include" "$out.tmp/CLI11/include" "$out.tmp/gloo/include" \
  "$out.tmp/nlohmann_json/include" "$out.tmp/tomlplusplus/include"
cp -r /usr/include/spdlog "$out.tmp/spdlog/include/"
cp -r /usr/include/fmt "$out.tmp/fmt/include/"
cp -r /usr/include/CLI "$out.tmp/CLI11/include/"
cp -r /usr/include/gloo "$out.tmp/gloo/include/"
cp -r /usr/include/nlohmann "$out.tmp/nlohmann_json/include/"
cp -r /usr/include/toml++ "$out.tmp/tomlplusplus/include/"
cp -r /usr/src/googletest "$out.tmp/googletest"
for lib in onig:oniguruma.h utf8proc:utf8proc.h; do
  name=${lib%%:*} header=${lib#*:}
  so=$(ls /usr/lib/*/lib$name.so 2>/dev/null | head -1)
  [[ -f /usr/include/$header && -n "$so" ]] || { echo "pack_gpu_deps: lib$name-dev is missing; run scripts/setup.sh first" >&2; exit 1; }
  mkdir -p "$out.tmp/$name/include" "$out.tmp/$name/lib"
  cp /usr/include/$header "$out.tmp/$name/include/"
  # Plain files under the link name and the SONAME the loader asks for (links may not travel).
  soname=$(basename "$(readlink -f "$so")" | sed -E 's/(\.so\.[0-9]+).*/\1/')
  cp -L "$so" "$out.tmp/$name/lib/lib$name.so"
  cp -L "$so" "$out.tmp/$name/lib/$soname"
done
rm -rf "$out" && mv "$out.tmp" "$out"
echo "pack_gpu_deps: $(du -sh "$out" | cut -f1) in $out"
