#!/usr/bin/env bash
# The test suite (the README's test command). Runs on a machine with no GPU:
#   1. cargo test --release --workspace --features cuzk/test-hooks
#                                      — unit tests (cuzk and the dev crate cuzk-dev), the real
#                                        2 KiB proof on the CPU (fixture made on first use, ~15 min
#                                        on 2 cores, then cached), WindowPoSt and WinningPoSt on the
#                                        2 KiB PoSt fixture (~80 s to make on 2 cores, then cached;
#                                        library, C ABI and daemon), SnapDeals on the 2 KiB
#                                        SnapDeals fixture (~2 min to make on 2 cores, then cached;
#                                        library, C ABI and daemon), the C ABI and its C program
#                                        (the panic test needs the test hooks), header drift, the
#                                        compiled circuit vs the reference synthesis, the dev crate
#                                        (real-shape C1, PoSt and SnapDeals generators) and the cuzk CLI (with
#                                        gen-params --kind + gen-post → CPU PoSt proofs at 2 KiB and
#                                        8 MiB, ~2 min on 2 cores; gen-snap → prove-snap at 2 KiB);
#   2. go test in examples/go          — the cgo example against the static library, built as
#                                        released (no features); go test in daemon/go — a Go
#                                        gRPC client of `cuzk serve` (the 2 KiB fixture proved
#                                        through the daemon and verified, WindowPoSt partitions and
#                                        WinningPoSt in Curio's shapes checked by `cuzk
#                                        verify-post`, SnapDeals by `cuzk verify-snap`,
#                                        priority, cancel, bad input, shutdown;
#                                        Debian's Go grpc packages, offline);
#   3. cargo test --release --features cuda,test-hooks --no-run
#                                      — compiles all GPU code and every GPU test, those of the
#                                        test kernels too (nvcc from scripts/install-cuda.sh when
#                                        no CUDA toolkit is present), and the released library's
#                                        cuda build (`cargo check --lib --features cuda`); then runs the cuda build's
#                                        unit tests of the GPU modules that need no device
#                                        (`--lib -- gpu::`, against the driver stub here);
#   4. cargo doc --no-deps -p cuzk --features cuda,test-hooks with RUSTDOCFLAGS=-D warnings
#                                      — the API docs build, every intra-doc link resolves.
# Installs what is missing (nvcc from PyPI wheels, Go from Debian's golang-go) when run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}

echo "== 1/4 cargo test --release --workspace --features cuzk/test-hooks"
log=$(mktemp)
cargo test --release --workspace --features cuzk/test-hooks 2>&1 | tee "$log"
passed=$(grep -oE "test result: ok\. [0-9]+ passed" "$log" | awk '{s+=$4} END {print s+0}')

echo "== 2/4 Go example (go test)"
if ! command -v go >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq golang-go >/dev/null
  else
    echo "Go is not installed: install Debian's golang-go (or Go >= 1.19) and rerun" >&2
    exit 1
  fi
fi
cargo build --release --lib
(cd examples/go && go test -count=1 ./...)
echo "== 2/4 Go client of the proving daemon (cuzk serve, daemon/go)"
# grpc 1.33 with the APIv1 shim over google.golang.org/protobuf (protobuf-1-5; the 1-3 package
# it replaces cannot marshal the generated APIv2 messages).
go_pkgs="golang-google-grpc-dev golang-google-protobuf-dev golang-github-golang-protobuf-1-5-dev"
if ! dpkg -s $go_pkgs >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq $go_pkgs >/dev/null
  else
    echo "Debian's $go_pkgs are needed" >&2
    exit 1
  fi
fi
cargo build --release -p cuzk-cli
cuzk_bin="${CARGO_TARGET_DIR:-$PWD/target}/release/cuzk"
(cd daemon/go && GO111MODULE=off GOPATH=/usr/share/gocode GOFLAGS= GOPROXY=off \
  CUZK_BIN="$cuzk_bin" go test -count=1 .)
echo "== 3/4 GPU code compiles (cargo test --release --features cuda,test-hooks --no-run)"
if ! command -v nvcc >/dev/null 2>&1; then
  # shellcheck disable=SC1090
  source <(bash scripts/install-cuda.sh)
fi
export CUZK_CUDA_ARCHS=${CUZK_CUDA_ARCHS:-sm_90}
cargo test --release --features cuda,test-hooks --no-run
# The released library's own cuda build (no `internals`, no test hooks) compiles too.
cargo check --lib --features cuda
echo "== 3/4 host-only unit tests of the GPU modules (cargo test --lib -- gpu::, cuda build)"
# The cuda build's unit tests of src/gpu/ and src/prover/gpu.rs that need no device (window
# choice, planning, pinned ranges, host pools ...). Without an NVIDIA driver the test binary is
# started against the link stub of install-cuda.sh (every driver call answers an error, so
# cuzk sees no device); with a driver, against the driver.
run_env=()
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
  stub_dir=""
  for d in "${CUDA_PATH:-}/lib64/stubs" "$(dirname "$(dirname "$(command -v nvcc)")")/lib64/stubs"; do
    if [ -e "$d/libcuda.so" ]; then stub_dir=$d; break; fi
  done
  [ -n "$stub_dir" ] || { echo "no libcuda.so stub found next to nvcc" >&2; exit 1; }
  run_dir=$(mktemp -d)
  ln -s "$stub_dir/libcuda.so" "$run_dir/libcuda.so.1"
  run_env=(env "LD_LIBRARY_PATH=$run_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
fi
log3=$(mktemp)
"${run_env[@]}" cargo test --release --features cuda,test-hooks --lib -- gpu:: 2>&1 | tee "$log3"
gpu_host=$(grep -oE "test result: ok\. [0-9]+ passed" "$log3" | awk '{s+=$4} END {print s+0}')
passed=$((passed + gpu_host))
echo "== 4/4 API docs (cargo doc, warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -p cuzk --features cuda,test-hooks

echo "== all tests passed (cargo test: $passed; Go, the GPU build and the docs: ok)"
echo "$passed passed, 0 failed"
