#!/bin/bash
# The H200 run behind BENCHMARKS.md (one call). Binaries are built on a machine with cargo:
#   source <(bash scripts/install-cuda.sh); export CUZK_CUDA_ARCHS=sm_90
#   cargo test --release --features cuda --no-run        # gpu_field gpu_ntt gpu_curve gpu_msm gpu_prove
#   cargo bench --features cuda --no-run                 # ntt msm
#   cargo build --release --features cuda --examples     # batch prove make_fixture
# then copied (stripped, gzipped) into $F (default .dev/final) under the names used below.
F=${F:-.dev/final}; OUT=${OUT:-/tmp/cuzk-out}; mkdir -p "$OUT"; S=$OUT/summary.txt
(cd "$F" && for z in *.gz; do [ -e "$z" ] && gunzip -f "$z"; done; chmod +x ./*)
export RUST_BACKTRACE=1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$OUT/smi.txt"
t(){ local n=$1; shift; local t0; t0=$(date +%s); "$@" > "$OUT/$n.log" 2>&1; echo "$n rc=$? $(( $(date +%s)-t0 ))s" | tee -a "$S"; }
t gpu_field timeout 40 $F/gpu_field --test-threads=1
t gpu_ntt timeout 90 $F/gpu_ntt --test-threads=1
t gpu_curve timeout 30 $F/gpu_curve
t gpu_msm timeout 90 $F/gpu_msm --test-threads=3
CUZK_BENCH_NTT_TUNE_LOGS= CUZK_BENCH_NTT_LOGS=27 t bench_ntt timeout 45 $F/bench_ntt --bench 'ntt_forward/2\^27'
CUZK_BENCH_MSM_G1=24,26,27 CUZK_BENCH_MSM_G2=22,24 CUZK_BENCH_MSM_POREP=27 t bench_msm timeout 110 $F/msm --bench
t check timeout 60 $F/batch --log2 20 --check \
  --phase name=check-resident,vram=resident,w=2,c=2,j=2,p=2 \
  --phase name=check-partial,vram=partial,w=2,c=2,j=2,p=2 \
  --phase name=check-streaming,vram=streaming,w=2,c=2,j=2,p=2
t b27 timeout 200 $F/batch --log2 27 \
  --phase name=cap16-w2,vram=16GiB,w=2,c=5,j=3,p=1 \
  --phase name=resident-w1,vram=none,w=1,c=2,j=2,p=2 \
  --phase name=resident-w2,vram=none,w=2,c=2,j=2,p=2
# The real 2 KiB sector (fixture generated there, ~2.4 min on 16 cores):
if [ -x $F/make_fixture ]; then
  export CUZK_FIXTURE_DIR=/tmp/fx
  t fixture $F/make_fixture
  t prove $F/prove --backend gpu --repeat 3
  CUZK_TEST_PROOFS=100 t gpu_prove timeout 240 $F/gpu_prove --nocapture
fi
cat "$S"
