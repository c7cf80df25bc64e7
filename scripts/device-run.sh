#!/bin/bash
# The H200 runs behind BENCHMARKS.md. Usage: scripts/device-run.sh BLOCK...
# Each block is named by what it checks; BENCHMARKS.md names the block behind every figure. Logs
# go to $OUT/<step>.log, one line per step (name, exit status, seconds) to $OUT/summary.txt.
#   core          the GPU unit tests (gpu_field, gpu_curve, gpu_ntt, gpu_msm, gpu_fixed_base), then
#                 (unless CORE_BENCH=0) the NTT bench at 2^24 / 2^27 and the MSM bench (G1 2^22 …
#                 2^27, G2 2^21 … 2^24, the PoRep mix at 2^27; stages profiled)
#   check         GPU == CPU of all five MSMs on synthetic 2^20 partitions on the resident, partial
#                 and streaming tiers, with the defaults, then with batch-affine forced on every
#                 MSM (CUZK_MSM_AFFINE_MIN_LIST=0)
#   fixtures-gpu  both real fixtures (2 KiB, 8 MiB) into /tmp/fx2, /tmp/fx8 in seconds: their
#                 Groth16 parameters from `cuzk gen-params --device gpu` with the fixtures' seed
#                 (bellperson's generator gives the same files), then make_fixture seals the sector
#   paths         the H side on every path against the CPU: h_step on two buffers (gpu_ntt), the
#                 streamed SpMV and blockwise check (gpu_spmv), 2 KiB proofs on every SpMV path
#                 (gpu_prove, with the 2 KiB fixture of fixtures-gpu), then `check`'s tier check
#   sanitize      the 2 KiB and 8 MiB fixtures (fixtures-gpu first when missing) proved under
#                 compute-sanitizer memcheck ($SANITIZER, default ./compute-sanitizer/compute-sanitizer;
#                 NVIDIA's nvidia-cuda-sanitizer-api wheel unpacked): one pass and every partition split
#                 (CUZK_H_AHEAD=always), two workers; any out-of-bounds access is named with its kernel
#                 (SAN_SIZES, SAN_AHEAD pick the sizes and modes)
#   post          the 2 KiB PoSt fixture (made on the first run, CUZK_POST_FIXTURE_DIR or the cache):
#                 WinningPoSt and WindowPoSt GPU proofs == CPU proofs, each verified (gpu_post)
#   snap          the 2 KiB SnapDeals fixture (made on the first run, ~2 min; CUZK_SNAP_FIXTURE_DIR
#                 or the cache): the SnapDeals GPU proof == CPU proof, each verified (gpu_snap)
#   real          the real fixtures (fixtures-gpu first when missing): GPU proof == CPU proof,
#                 verify_seal and device memory back at baseline (gpu_prove: $PROOFS_2K / $PROOFS_8M
#                 proofs from 8 threads, default 8 / 4), GPU SpMV == CPU SpMV (gpu_spmv), then
#                 `prove --repeat 2` on both with every partition split (CUZK_H_AHEAD=always)
#   scale         32 GiB-shaped partitions (2^27, parameters resident): 1 worker (3 partitions) then
#                 2 workers (4) in one process; then 1 worker under a 16 GiB cap (partial tier, 2)
#   scale-two-workers  the two-worker scenario under a 16 GiB cap: 5 proofs of 10 partitions at
#                 concurrency 3 (no out-of-memory error, no error 712; ~5.5 min)
#   alloc         the allocator: gpu_alloc (MSM workspaces within their planned arena, 2^27), then a
#                 2^27 partition on every tier and under a 16 GiB cap (batch exits 4 if an arena's
#                 high-water mark exceeds its plan or the driver's use exceeds the cap)
#   anchors       SupraSeal beside cuzk: `scripts/e2e.sh anchors` (real-shape 2 KiB and 8 MiB,
#                 GPU-generated parameters, `cuzk prove --repeat 4` and `supraseal-anchor --repeat 4`),
#                 then a synthetic 2^26 partition (supraseal-synth, then batch --log2 26 --reuse)
#   e2e           scripts/e2e.sh $E2E_STEPS (default "32GiB:5") started detached (setsid) from copies
#                 of the binaries and the script in /tmp/e2e-bin, so that it runs on across calls,
#                 then waits as e2e-wait does;
#   e2e-wait      waits until it has ended or $E2E_WAIT seconds (default 560) have passed, and copies
#                 /tmp/e2e's summary, logs, each size's timeline.txt and whole prove.log (gzipped;
#                 with E2E_COLD, each extra cold proof's log and timeline too) into $OUT (issue the next e2e-wait call at once: the
#                 machine goes back soon after a call; e2e-wait returns early when no driver runs).
#                 The full run (~24 device-minutes): `E2E_STEPS="32GiB:4 64GiB:3"
#                 scripts/device-run.sh e2e`, then `scripts/device-run.sh e2e-wait` until it says
#                 "e2e ended". LOAD_BENCH=1: the warm rate of each size's parameter file too (params_load).
#                 PoSt (issue 41's targets): `E2E_STEPS="32GiB:3 post-32GiB:5"` (WinningPoSt,
#                 WinningPoSt under two PoRep proofs, then WindowPoSt; see e2e.sh). SnapDeals
#                 (issue 42's target): `E2E_STEPS="snap-32GiB:4"`.
#   params        Groth16 test parameters on the GPU: gpu_fixed_base (GPU == blstrs), then
#                 `cuzk gen-params --device gpu` for 2 KiB with the fixture's seed == the fixture
#                 made there by bellperson (cmp), then (PARAMS_32G=1) 32 GiB (time, peak RSS; files
#                 in /tmp/p32, 44 GiB: one size at a time on the device's 64 GiB disk)
#   synth         the compiled circuit vs the reference synthesis on both fixtures (run `real` or
#                 fixtures-gpu in the same warm lease first): compiled == reference (a, b, c,
#                 witness, densities, proof bytes), GPU proof == CPU proof, `prove --backend gpu
#                 --repeat 4` with CUZK_SYNTHESIS=reference, compiled, and compiled with
#                 CUZK_GPU_SPMV=0, and the synthesis bench (SYNTH_SIZES="2KiB" for one size)
#   synth-32g     the witness of a real-shape 32 GiB partition on 16 and 1 threads (cuzk gen-c1,
#                 then synth_scaling on its partition 0; no parameter file needed)
#   witness       the native witness of a real-shape 32 GiB C1 (cuzk_dev::c1gen, no parameter file):
#                 all 10 partitions on all cores, each == the gadget witness value for value, then
#                 partition 0 on one thread (its core-seconds) (`witness_check`)
#   daemon        `cuzk serve --jobs 2` fed by 3 gRPC clients (bench_client) on e2e's 32 GiB C1 and
#                 parameters (run `e2e` first in the same warm lease), its steady state against
#                 e2e's `cuzk prove --jobs 2` ($PROVE_STEADY s per proof; daemon/bench.sh)
#   profile       ncu of the kernels named in $PROFILE (default "affine"): affine (one batch-affine
#                 accumulation launch at G1 2^26), sort (the bucketing kernels at G1 2^26), ntt (three
#                 NTT passes at 2^27)
# The session-named blocks these replaced (kernels-a … kernels-z4, final-y, …) and the runs they
# made are in git: `git show 751c2d4:scripts/device-run.sh`, docs/history/.
#
# Binaries are built on a machine with cargo (no cargo on the device machine), then packed by
# scripts/pack-device.sh (stripped, gzipped) into $F (default .dev/final) under the names used below:
#   source <(bash scripts/install-cuda.sh); export CUZK_CUDA_ARCHS=sm_90
#   cargo test --release --features cuda,test-hooks --no-run   # gpu_* tests, compiled_circuit
#                                                    # (test-hooks: the test kernels of gpu_field, bench_ntt)
#   cargo bench --features cuda,test-hooks --no-run    # ntt (packed as bench_ntt), msm, synthesis, params_load
#   cargo build --release --features cuda,test-hooks --examples   # batch prove make_fixture synth_scaling
#   cargo build --release -p cuzk-cli --features cuda  # cuzk
#   (cd bench-anchors/supraseal && CARGO_TARGET_DIR=../../target cargo build --release)  # the
#                                                    # SupraSeal anchor of `anchors` (optional)
F=${F:-.dev/final}; OUT=${OUT:-/tmp/cuzk-out}; mkdir -p "$OUT"; S=$OUT/summary.txt
(cd "$F" && for z in *.gz; do [ -e "$z" ] && gunzip -f "$z"; done; chmod +x ./*)
export RUST_BACKTRACE=1
# GPU tests fail (instead of skipping) when no device is visible.
export CUZK_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$OUT/smi.txt"
t(){ local n=$1; shift; local t0; t0=$(date +%s); "$@" > "$OUT/$n.log" 2>&1; echo "$n rc=$? $(( $(date +%s)-t0 ))s" | tee -a "$S"; }
# GPU == CPU of all five MSMs on synthetic 2^20 partitions, resident / partial / streaming
# (timeout $1 seconds, logged as $2, default check).
check_tiers(){ t "${2:-check}" timeout "$1" $F/batch --log2 20 --check \
    --phase name=check-resident,vram=resident,w=2,c=2,j=2,p=2 \
    --phase name=check-partial,vram=partial,w=2,c=2,j=2,p=2 \
    --phase name=check-streaming,vram=streaming,w=2,c=2,j=2,p=2; }
# gpu_prove (GPU proof bytes == CPU proof bytes, verify_seal) on the fixtures in /tmp/fx2, /tmp/fx8.
# $PROOFS_2K / $PROOFS_8M proofs (default 8 / 4) from 8 threads, device memory back at its baseline.
gpu_prove_both(){
  CUZK_FIXTURE_DIR=/tmp/fx2 CUZK_TEST_SECTOR_SIZE=2KiB CUZK_TEST_PROOFS=${PROOFS_2K:-8} t gpu_prove2 timeout 240 $F/gpu_prove --nocapture
  CUZK_FIXTURE_DIR=/tmp/fx8 CUZK_TEST_SECTOR_SIZE=8MiB CUZK_TEST_PROOFS=${PROOFS_8M:-4} t gpu_prove8 timeout 240 $F/gpu_prove --nocapture; }
for block in "$@"; do case $block in
core)
  t gpu_field timeout 90 $F/gpu_field --test-threads=1
  t gpu_curve timeout 60 $F/gpu_curve
  t gpu_ntt timeout 150 $F/gpu_ntt --test-threads=1
  t gpu_msm timeout 300 $F/gpu_msm --test-threads=3
  t gpu_fixed_base timeout 120 $F/gpu_fixed_base
  [ "${CORE_BENCH:-1}" = 0 ] && continue
  (export CUZK_BENCH_NTT_TUNE_LOGS= CUZK_BENCH_NTT_LOGS=24,27; t bench_ntt timeout 120 $F/bench_ntt --bench zzz)
  (export CUZK_BENCH_MSM_G1=22,23,24,26,27 CUZK_BENCH_MSM_G2=21,22,24 CUZK_BENCH_MSM_POREP=27 \
     CUZK_BENCH_MSM_PROFILE=1; t bench_msm timeout 300 $F/msm --bench zzz)
  ;;
check)
  check_tiers 200
  (export CUZK_MSM_AFFINE_MIN_LIST=0; check_tiers 200 check_affine)
  ;;
fixtures-gpu)
  SEEDFX=63757a6b20324b694220666978747572652067726f7468313620706172616d73  # fixture PARAMS_RNG_SEED
  for sz in ${SIZES:-2KiB 8MiB}; do
    d=/tmp/fx${sz:0:1}; mkdir -p $d/params
    [ -e $d/fixture.json ] || t genparams_$sz timeout 240 $F/cuzk gen-params --sector-size $sz \
      --seed $SEEDFX --device gpu $d/params
    CUZK_FIXTURE_DIR=$d t fixture_$sz timeout 240 $F/make_fixture --sector-size $sz
  done
  ;;
paths)
  # The H side on every path, against the CPU: the H step on three and two domain buffers
  # (gpu_ntt), the SpMV with resident and streamed matrices and the blockwise R1CS check
  # (gpu_spmv), real 2 KiB proofs on every SpMV path (gpu_prove), then the tier check.
  [ -e /tmp/fx2/fixture.json ] || SIZES=2KiB "$0" fixtures-gpu
  CUZK_TEST_H_MAX_LOG=22 t gpu_ntt timeout 200 $F/gpu_ntt --test-threads=1 h_step bad_lengths
  CUZK_FIXTURE_DIR=/tmp/fx2 t gpu_spmv timeout 300 $F/gpu_spmv --test-threads=1 --nocapture
  CUZK_FIXTURE_DIR=/tmp/fx2 CUZK_TEST_SECTOR_SIZE=2KiB CUZK_TEST_PROOFS=${PROOFS_2K:-8} t gpu_prove2 \
    timeout 300 $F/gpu_prove --nocapture
  check_tiers 200
  ;;
sanitize)
  [ -e /tmp/fx2/fixture.json ] && [ -e /tmp/fx8/fixture.json ] || "$0" fixtures-gpu
  CS=${SANITIZER:-./compute-sanitizer/compute-sanitizer}; chmod +x "$CS"
  for sz in ${SAN_SIZES:-2KiB 8MiB}; do for ahead in ${SAN_AHEAD:-off always}; do
    CUZK_FIXTURE_DIR=/tmp/fx${sz:0:1} CUZK_H_AHEAD=$ahead RUST_LOG=info t san_${sz}_$ahead timeout ${SAN_TIMEOUT:-240} \
      $CS --tool memcheck --print-limit 10 --error-exitcode 99 $F/prove --sector-size $sz --backend gpu --repeat 2
  done; done
  ;;
post)
  RUST_LOG=info t gpu_post timeout 500 $F/gpu_post --nocapture
  ;;
snap)
  RUST_LOG=info t gpu_snap timeout 500 $F/gpu_snap --nocapture
  ;;
real)
  [ -e /tmp/fx2/fixture.json ] && [ -e /tmp/fx8/fixture.json ] || "$0" fixtures-gpu
  gpu_prove_both
  CUZK_FIXTURE_DIR=/tmp/fx2 RUST_LOG=info t gpu_spmv timeout 420 $F/gpu_spmv --test-threads=1 --nocapture
  # Every partition split (H side, then L, A, B section by section; cold, then warm): the
  # proofs verify (verify_seal) as the one-pass ones do.
  for sz in 2KiB 8MiB; do
    CUZK_FIXTURE_DIR=/tmp/fx${sz:0:1} CUZK_H_AHEAD=always RUST_LOG=info t prove_split_$sz timeout 150 \
      $F/prove --sector-size $sz --backend gpu --repeat 2
  done
  ;;
scale)
  RUST_LOG=warn,cuzk::prover::gpu=debug t b27_res timeout 240 $F/batch --log2 27 --reuse \
    --phase name=resident-w1,vram=none,w=1,c=1,j=1,p=3 \
    --phase name=resident-w2,vram=none,w=2,c=2,j=2,p=4
  t b27_cap timeout 150 $F/batch --log2 27 --reuse --phase name=cap16-w1,vram=16GiB,w=1,c=1,j=1,p=2
  ;;
scale-two-workers)
  RUST_LOG=warn,cuzk::prover::gpu=debug t b27_cap_w2 timeout 560 $F/batch --log2 27 --reuse \
    --phase name=cap16-w2,vram=16GiB,w=2,c=5,j=3,p=10
  ;;
alloc)
  CUZK_TEST_ALLOC_LOG2=27 t gpu_alloc timeout 120 $F/gpu_alloc --nocapture
  RUST_LOG=warn,cuzk::prover::gpu=info t alloc27 timeout 560 $F/batch --log2 27 \
    --phase name=alloc-resident,vram=resident,w=1,c=1,j=1,p=2 \
    --phase name=alloc-full,vram=full-staging,w=1,c=1,j=1,p=2 \
    --phase name=alloc-partial,vram=partial,w=1,c=1,j=1,p=2 \
    --phase name=alloc-streaming,vram=streaming,w=1,c=1,j=1,p=2 \
    --phase name=alloc-cap16,vram=16GiB,w=2,c=2,j=2,p=2
  ;;
anchors)
  E=/tmp/e2e F=$F t e2e_anchors timeout 420 bash scripts/e2e.sh anchors
  cat /tmp/e2e/summary.txt >> "$S"
  for l in /tmp/e2e/anchors/*.log; do echo "=== $l"; tail -n 40 "$l"; done > "$OUT/anchors.txt"
  # SupraSeal's prover on a synthetic 2^26 partition (supraseal-synth; 24 GB of parameters
  # written to /tmp, removed after), then ours on the same shape (one worker, parameters resident).
  t ss26 timeout 330 $F/supraseal-synth --log2 26 --params /tmp/ss26.params --repeat 4
  rm -f /tmp/ss26.params
  t b26 timeout 200 $F/batch --log2 26 --reuse --phase name=r26-w1,vram=none,w=1,c=1,j=1,p=4
  ;;
e2e)
  if [ -e /tmp/e2e/pid ] && [ ! -e /tmp/e2e/done ] && kill -0 "$(cat /tmp/e2e/pid)" 2>/dev/null; then
    echo "e2e already running (pid $(cat /tmp/e2e/pid)): not started again" | tee -a "$S"; continue
  fi
  rm -rf /tmp/e2e-bin; mkdir -p /tmp/e2e-bin /tmp/e2e; rm -f /tmp/e2e/done /tmp/e2e/pid; cp "$F"/* scripts/e2e.sh /tmp/e2e-bin/
  F=/tmp/e2e-bin setsid nohup bash /tmp/e2e-bin/e2e.sh ${E2E_STEPS:-32GiB:5} \
    > /tmp/e2e/driver.log 2>&1 < /dev/null &
  echo "e2e started: ${E2E_STEPS:-32GiB:5}" | tee -a "$S"
  "$0" e2e-wait
  ;;
e2e-wait)
  w0=$(date +%s)
  sleep 2  # the driver writes its pid first
  alive(){ [ -e /tmp/e2e/pid ] && kill -0 "$(cat /tmp/e2e/pid)" 2>/dev/null; }
  while [ ! -e /tmp/e2e/done ] && alive && [ $(( $(date +%s) - w0 )) -lt "${E2E_WAIT:-560}" ]; do sleep 5; done
  if [ -e /tmp/e2e/done ]; then echo "e2e ended" | tee -a "$S"
  elif alive; then echo "e2e still running" | tee -a "$S"
  else echo "e2e not running (no driver on this machine)" | tee -a "$S"; fi
  cp /tmp/e2e/summary.txt "$OUT/e2e-summary.txt" 2>/dev/null; cp /tmp/e2e/driver.log "$OUT/" 2>/dev/null
  for d in /tmp/e2e/*/; do n=$(basename "$d"); [ "$n" = "*" ] && continue
    [ -e "$d/timeline.txt" ] && cp "$d/timeline.txt" "$OUT/$n-timeline.txt"
    [ -e "$d/prove.log" ] && gzip -c "$d/prove.log" > "$OUT/$n-prove.log.gz"
    for f in "$d"cold-*.log "$d"timeline-cold-*.txt "$d"prove-*.log; do [ -e "$f" ] && gzip -c "$f" > "$OUT/$n-$(basename "$f").gz"; done
    for l in "$d"*.log; do [ -e "$l" ] && { echo "=== $l"; tail -n 300 "$l"; }; done > "$OUT/$n.txt"; done
  cat /tmp/e2e/summary.txt
  ;;
params)
  SEED2K=63757a6b20324b694220666978747572652067726f7468313620706172616d73  # fixture PARAMS_RNG_SEED
  CUZK_FIXED_BASE_N=200000 t gpu_fixed_base timeout 120 $F/gpu_fixed_base --nocapture
  CUZK_FIXTURE_DIR=/tmp/fx2 t fixture2 timeout 300 $F/make_fixture --sector-size 2KiB
  RUST_LOG=info t genparams2 timeout 120 /usr/bin/time -v $F/cuzk gen-params --sector-size 2KiB \
    --seed $SEED2K --device gpu /tmp/gp2
  for f in /tmp/fx2/params/*; do cmp "$f" "/tmp/gp2/$(basename "$f")" && echo "IDENTICAL $(basename "$f")"; done \
    2>&1 | tee -a "$S"
  rm -rf /tmp/gp2
  [ -n "${PARAMS_32G:-}" ] && RUST_LOG=info t genparams32 timeout 590 /usr/bin/time -v $F/cuzk gen-params --sector-size 32GiB \
    --seed bench-32g --device gpu /tmp/p32
  [ -n "${PARAMS_32G:-}" ] && grep -E "parameters in|Maximum resident|Elapsed" "$OUT/genparams32.log" | tee -a "$S"
  ;;
synth)
  for sz in ${SYNTH_SIZES:-2KiB 8MiB}; do
    fx=/tmp/fx${sz:0:1}
    export CUZK_FIXTURE_DIR=$fx CUZK_CIRCUIT_CACHE=/tmp/cuzk-circuits
    RUST_LOG=info CUZK_TEST_SECTOR_SIZE=$sz CUZK_TEST_BOTH_PATHS=1 t cc_$sz timeout 400 $F/compiled_circuit --test-threads=1 --nocapture
    CUZK_TEST_SECTOR_SIZE=$sz CUZK_TEST_PROOFS=20 t gpu_prove_$sz timeout 240 $F/gpu_prove --nocapture
    CUZK_SYNTHESIS=reference t prove_ref_$sz timeout 120 $F/prove --sector-size $sz --backend gpu --repeat 4
    t prove_cc_$sz timeout 120 $F/prove --sector-size $sz --backend gpu --repeat 4
    CUZK_GPU_SPMV=0 t prove_cccpu_$sz timeout 120 $F/prove --sector-size $sz --backend gpu --repeat 4
    CUZK_BENCH_SECTOR_SIZE=$sz t bench_synth_$sz timeout 240 $F/synthesis --bench
  done
  unset CUZK_FIXTURE_DIR CUZK_CIRCUIT_CACHE
  ;;
synth-32g)
  t genc1_32 $F/cuzk gen-c1 --sector-size 32GiB --seed scaling-1 /tmp/c32
  CUZK_CIRCUIT_CACHE=/tmp/cc32 FIL_PROOFS_PARAMETER_CACHE=/tmp/none t scaling32 timeout 300 \
    $F/synth_scaling /tmp/c32/c1.json 1 1000 16 1
  ;;
witness)
  t witness32 timeout 400 $F/witness_check --sector-size 32GiB
  t witness32_1t timeout 200 $F/witness_check --sector-size 32GiB --partitions 0 --threads 1 --native-only --repeat 2
  grep -h -E "generated|native|gadget" "$OUT/witness32.log" "$OUT/witness32_1t.log" | tee -a "$S"
  ;;
daemon)
  d=/tmp/e2e/32GiB; [ -e $d/c1/c1-wrapper.json ] && [ -d $d/params ] || { echo "daemon: run e2e first" | tee -a "$S"; continue; }
  a=${PROVE_STEADY:-$(sed -nE 's/.*steady state \(proofs 1 to [0-9]+\) ([0-9.]+) s per proof.*/\1/p' $d/prove.log | head -1)}
  E=/tmp/daemon-bench F=$F PROVE_STEADY=$a t daemon_bench timeout 560 bash daemon/bench.sh $d/c1/c1-wrapper.json $d/params ${DAEMON_PROOFS:-5} 2 3
  cat "$OUT/daemon_bench.log" >> "$S"; cp /tmp/daemon-bench/*.log /tmp/daemon-bench/*.out "$OUT/" 2>/dev/null
  ;;
profile)
  NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  [ -n "$NCU" ] || { echo "profile: no ncu on this machine" | tee -a "$S"; continue; }
  for k in ${PROFILE:-affine}; do case $k in
  affine)
    CUZK_BENCH_MSM_G1=26 CUZK_BENCH_MSM_G2= CUZK_BENCH_MSM_POREP= t ncu_affine timeout 400 "$NCU" \
      --kernel-name regex:accumulate_affine --launch-count 1 --section SpeedOfLight \
      --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy \
      --section LaunchStats --section ComputeWorkloadAnalysis $F/msm --bench zzz ;;
  sort)
    CUZK_BENCH_MSM_G1=26 CUZK_BENCH_MSM_G2= CUZK_BENCH_MSM_POREP= t ncu_sort timeout 300 "$NCU" \
      --kernel-name regex:'histogram|scatter|scan|coarse' --launch-count 16 --section SpeedOfLight \
      --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats $F/msm --bench zzz ;;
  ntt)
    CUZK_BENCH_NTT_TUNE_LOGS= CUZK_BENCH_NTT_LOGS=27 t ncu_ntt timeout 300 "$NCU" \
      --kernel-name regex:ntt_pass --launch-count 3 --section SpeedOfLight --section WarpStateStats \
      --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis \
      --section MemoryWorkloadAnalysis $F/bench_ntt --bench zzz ;;
  *) echo "profile: unknown kernel set $k (affine, sort, ntt)" | tee -a "$S" ;;
  esac; done
  ;;
*) echo "unknown block $block" | tee -a "$S" ;;
esac; done
cat "$S"
