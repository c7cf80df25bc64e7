#!/bin/bash
# Packs the binaries scripts/device-run.sh runs into $F (default .dev/final), stripped and gzipped,
# from a build made here (see the header of device-run.sh for the cargo commands). Each test and
# bench binary is the newest target/release/deps/<name>-<hash> executable.
set -euo pipefail
cd "$(dirname "$0")/.."
F=${F:-.dev/final}
rm -rf "$F"; mkdir -p "$F"
newest() { ls -t target/release/deps/"$1"-* 2>/dev/null | grep -v '\.d$' | head -1; }
pack() { local src=$1 name=$2; [ -x "$src" ] || { echo "missing $name ($src)" >&2; exit 1; }
  strip -o "$F/$name" "$src"; gzip -f "$F/$name"; }
for t in gpu_field gpu_ntt gpu_curve gpu_msm gpu_prove gpu_post gpu_snap gpu_alloc gpu_spmv gpu_fixed_base compiled_circuit; do
  pack "$(newest $t)" $t
done
pack "$(newest ntt)" bench_ntt
pack "$(newest msm)" msm
pack "$(newest synthesis)" synthesis
pack "$(newest params_load)" params_load
for e in batch prove make_fixture synth_scaling witness_check; do pack target/release/examples/$e $e; done
pack target/release/cuzk cuzk
pack target/release/examples/bench_client bench_client
# The SupraSeal anchor (bench-anchors/supraseal, built into this target dir), when built.
[ -x target/release/supraseal-anchor ] && pack target/release/supraseal-anchor supraseal-anchor
[ -x target/release/supraseal-synth ] && pack target/release/supraseal-synth supraseal-synth
du -sh "$F"; ls -la "$F"
