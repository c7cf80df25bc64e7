#!/usr/bin/env bash
# Installs a CUDA 13.0 build toolchain for cuzk's `cuda` feature where no CUDA toolkit exists
# (CI runners, GPU-less dev machines), and prints the environment exports to use it:
#
#   source <(bash scripts/install-cuda.sh)
#   cargo test --release --features cuda --no-run
#
# What it installs into $CUZK_CUDA_PREFIX (default ~/.local/cuda-13.0), once:
#   1. nvcc, its NVVM back end, the CUDA headers and the runtime headers, from NVIDIA's PyPI
#      wheels (nvidia-cuda-nvcc, nvidia-nvvm, nvidia-cuda-crt, nvidia-cuda-runtime,
#      nvidia-cuda-cccl; CUDA 13.0 matches driver 580 and newer);
#   2. a link-only stub libcuda.so (SONAME libcuda.so.1) in lib64/stubs, with one symbol per
#      driver API function of cuda.h, so binaries that use the driver API can be linked. It is
#      never loaded at run time: on a GPU machine the driver's libcuda.so.1 is found instead;
#      on a machine without a driver the binaries do not start (expected: build-only).
# If nvcc is already on PATH (or in $CUDA_PATH) and is new enough, nothing is installed and the
# exports point to it.
#
# Needs: python3 with pip, a C compiler (cc/gcc), a C++ host compiler for nvcc (g++), network
# access to PyPI. Only progress messages go to stderr; stdout carries the exports.
set -euo pipefail

VER_NVCC=13.0.88
VER_RT=13.0.96
VER_CCCL=13.0.85
PREFIX=${CUZK_CUDA_PREFIX:-$HOME/.local/cuda-13.0}

log() { echo "install-cuda: $*" >&2; }

# An existing toolkit (>= 11.8) is used as is.
existing=""
if [ -n "${CUDA_PATH:-}" ] && [ -x "$CUDA_PATH/bin/nvcc" ]; then
  existing=$CUDA_PATH
elif command -v nvcc >/dev/null 2>&1; then
  existing=$(dirname "$(dirname "$(command -v nvcc)")")
fi
if [ -n "$existing" ]; then
  rel=$("$existing/bin/nvcc" --version | sed -n 's/.*release \([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
  read -r maj min <<<"$rel"
  if [ -n "${maj:-}" ] && { [ "$maj" -gt 11 ] || { [ "$maj" -eq 11 ] && [ "$min" -ge 8 ]; }; }; then
    log "using the CUDA $maj.$min toolkit at $existing"
    PREFIX=$existing
  else
    log "ignoring the CUDA toolkit at $existing (release '${rel}', need >= 11.8)"
    existing=""
  fi
fi

if [ -z "$existing" ] && [ ! -x "$PREFIX/bin/nvcc" ]; then
  command -v python3 >/dev/null || { log "python3 is required"; exit 1; }
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  log "installing nvcc $VER_NVCC from PyPI wheels into $PREFIX"
  python3 -m pip install -q --disable-pip-version-check --no-cache-dir --target "$tmp" \
    "nvidia-cuda-nvcc==$VER_NVCC" "nvidia-nvvm==$VER_NVCC" "nvidia-cuda-crt==$VER_NVCC" \
    "nvidia-cuda-runtime==$VER_RT" "nvidia-cuda-cccl==$VER_CCCL" >&2
  mkdir -p "$PREFIX"
  cp -a "$tmp/nvidia/cu13/." "$PREFIX/"
  # nvcc looks for its libraries in lib64; the wheels ship lib/
  [ -e "$PREFIX/lib64" ] || ln -s lib "$PREFIX/lib64"
fi

# Link-only driver stub, unless a real libcuda.so (or the toolkit's own stub) is present.
libdir=$PREFIX/lib64
if [ ! -e "$libdir/stubs/libcuda.so" ] && [ ! -e "$libdir/libcuda.so" ]; then
  header=$PREFIX/include/cuda.h
  [ -f "$header" ] || header=$PREFIX/targets/x86_64-linux/include/cuda.h
  [ -f "$header" ] || { log "cuda.h not found under $PREFIX"; exit 1; }
  log "building a link-only libcuda.so stub in $libdir/stubs"
  mkdir -p "$libdir/stubs"
  src=$(mktemp --suffix=.c)
  # every cuXxx( in cuda.h, plus the _v2/_v3 names its #defines map to; each returns
  # CUDA_ERROR_UNKNOWN (999) -- never called, since the stub is not loaded at run time
  grep -oE '\bcu[A-Z][A-Za-z0-9_]*[[:space:]]*\(' "$header" | tr -d '( \t' | sort -u |
    awk '{print $1; print $1"_v2"; print $1"_v3"}' | sort -u |
    awk '{print "int "$1"(void){return 999;}"}' >"$src"
  cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$libdir/stubs/libcuda.so" "$src"
  rm -f "$src"
fi

echo "export CUDA_PATH=$PREFIX"
echo "export CUDA_LIBRARY_PATH=$PREFIX"
echo "export PATH=$PREFIX/bin:\$PATH"
