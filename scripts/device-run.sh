#!/bin/bash
# The H200 runs behind BENCHMARKS.md. Usage: scripts/device-run.sh BLOCK...
#   core     GPU core tests and NTT/MSM benches (gpu_field gpu_ntt gpu_curve gpu_msm, bench_ntt, msm)
#   check    GPU == CPU of all five MSMs on synthetic 2^20 partitions, resident/partial/streaming
#   real     the real 2 KiB and 8 MiB sectors: fixtures made there (make_fixture), GPU proof ==
#            CPU proof and verify_seal (gpu_prove; 100 proofs from 8 threads for 2 KiB, memory
#            back at baseline), `prove --backend gpu --repeat 3` for both sizes
#   scale    32 GiB-shaped partitions (2^27): 1 vs 2 workers with parameters resident, then the
#            two-worker scenario (16 GiB cap, 5 proofs of 10 partitions at concurrency 3)
#   scale-short  a few 2^27 partitions resident and capped (timings of a changed build)
#   scaling32 witness of a real-shape 32 GiB partition on 16 and 1 threads (cuzk gen-c1 + synth_scaling)
#   gputests the GPU unit tests of `core` without its benches
#   kernels-a, kernels-b  issue 13's correctness set in two back-to-back calls of one warm lease:
#            (a) fixtures in the background beside gpu_field, gpu_curve, gpu_msm and `check`;
#            (b) gpu_prove on both fixtures, then 2^27 partitions resident (`scale-short`'s first phase)
#   fixtures both real fixtures made there, side by side, into /tmp/fx2 and /tmp/fx8 (~5 min)
#   fixtures-gpu  the same fixtures in seconds: their Groth16 parameters from `cuzk gen-params
#            --device gpu` with the fixtures' seed (bellperson's generator gives the same files,
#            *run D1*), so make_fixture only seals the sector
#   anchor26 SupraSeal's prover on a synthetic 2^26 partition (supraseal-synth) beside ours
#            (batch --log2 26 --reuse) on the same shape
#   kernels-c, kernels-d  the fourth session's set, back to back in one warm lease:
#            (c) fixtures-gpu, gpu_field, gpu_curve, gpu_ntt (every pass product), gpu_msm,
#            `check`, gpu_prove on both fixtures, `cuzk prove` with CUZK_GPU_SPMV=0 (the CPU
#            SpMV step in place) with verify_seal;
#            (d) the NTT bench of every pass product, the MSM window/occupancy sweep at 2^26 and 2^27 (G1) and 2^24 (G2), then 2^27
#            partitions resident with 1 and 2 workers and capped at 16 GiB
#   kernels-e, kernels-f  the fifth session's set (lazy reduction), back to back: (e) the
#            correctness set of kernels-c without gpu_ntt and the CPU-SpMV prove; (f) the MSM
#            bench A/B (msm_base: CUZK_NVCC_FLAGS=-DCUZK_LAZY=0) and 2^27 partitions;
#   kernels-g  the NTT change and CUZK_GPU_SECTIONS: gpu_ntt, gpu_prove (both fixtures), the
#            NTT bench, 2^27 partitions, `cuzk prove --repeat 8 --jobs 4` (8 MiB) with 1 and 2
#            GPU sections
#   kernels-h … kernels-k  the sixth session's set (batch-affine accumulation), back to back:
#            (h) gpu_msm (forced batch-affine cases included), `check` and gpu_prove on both
#            fixtures with CUZK_MSM_AFFINE_MIN_LIST=0 (batch-affine on every G1 MSM), gpu_prove
#            with the default; (i) the MSM bench with both accumulations in one call (A/B,
#            profiled); (j) 2^27 partitions resident with each accumulation and capped at 16 GiB;
#            (k) the windowed inversion and the batch-affine tuning: gpu_field, gpu_fixed_base,
#            gpu_msm, then the MSM bench at G1 2^26 / 2^27 with the occupancy / window sweep at
#            2^27 and 128 / 512 / 1024 chains per thread; (l) the final defaults (4 blocks, a full
#            wave of threads first): gpu_msm, the MSM bench at G1 2^26 / 2^27, two 2^27 partitions;
#            (m) the last build: gpu_msm, `check` and gpu_prove with batch-affine forced
#   kernels-n  the seventh session's H step in six transforms: fixtures-gpu, gpu_ntt (the H step
#            against bellperson's seven-transform sequence), gpu_prove on both fixtures, the NTT
#            bench at 2^24 / 2^27, the batch-affine threshold (both accumulations at G1 2^23 …
#            2^25, extra chain counts; the PoRep mix at 2^27 profiled), two 2^27 partitions
#   kernels-o  the batch-affine kernel's code size (products and the inversion sharing sites):
#            gpu_field, gpu_fixed_base, gpu_msm, the MSM bench at G1 2^26 / 2^27 of the build
#            before (msm_old), this one (msm) and its out-of-line-product build (msm_ool:
#            CUZK_NVCC_FLAGS=-DCUZK_AFFINE_OOL=1), same call; `check` with batch-affine forced;
#            two 2^27 partitions
#   kernels-p  the seventh session's final build (out-of-line products in the batch-affine
#            kernel): fixtures-gpu, gpu_msm, `check` and gpu_prove on both fixtures with
#            batch-affine forced, the MSM bench (both accumulations at G1 2^24 / 2^26 / 2^27, the
#            occupancy / window sweep at 2^27), 2^27 partitions resident and capped at 16 GiB
#   kernels-q  the final build (at most 512 chains per thread): gpu_msm, the MSM bench at G1
#            2^27, three 2^27 partitions resident
#   kernels-r  the two-pass scatter: gpu_msm, the MSM bench with the one-pass and the two-pass
#            scatter (same call), `check`, ncu of the bucketing kernels at 2^26, 2^27 partitions
#   kernels-t  the final build (two-pass scatter): gpu_msm (the rest only if it passes),
#            fixtures-gpu, gpu_prove on both fixtures, `check`, the MSM bench at G1 2^26 / 2^27
#            with 3 and 7 windows per group
#   kernels-u, kernels-v  the block-shared inversion of the batch-affine step and Fr's reduction
#            rows with additions, A/B against the build before (bench_ntt_old, msm_old,
#            batch_old: CUZK_NVCC_FLAGS="-DCUZK_AFFINE_BLOCK_INV=0 -DCUZK_FR_LOW_ADD=0"): (u)
#            gpu_field, gpu_ntt, gpu_msm, the NTT bench at 2^24 / 2^27, the MSM bench (both
#            accumulations) at G1 2^23 / 2^24 / 2^26; (v) G1 2^27 and 2^27 partitions
#   kernels-w  the final build of that change (batch-affine from 2^26 list entries): gpu_msm (the
#            rest only if it passes), gpu_curve, fixtures-gpu, gpu_prove on both fixtures, `check`
#            with batch-affine forced on every G1 MSM (CUZK_MSM_AFFINE_MIN_LIST=0)
#   kernels-x  its timings: the MSM bench (both accumulations) at G1 2^21 / 2^22, the PoRep-shaped
#            2^27 MSMs; 2^27 partitions resident with 1 and 2 workers, capped at 16 GiB with the
#            threshold before (CUZK_MSM_AFFINE_MIN_LIST=268435456) and this one
#   kernels-y  the final build (batch-affine from 3 x 2^25 list entries; the partial tier runs
#            its plan's pass): `check`, 2^27 partitions resident, then capped at 16 GiB (partial,
#            2^23-point passes) with RUST_LOG=cuzk::gpu::alloc=debug
#   kernels-z1  the binary extended Euclidean inversion of the batch-affine step and G2's
#            batch-affine accumulation: gpu_field (inverse_vartime against blstrs), gpu_msm (the
#            forced G2 batch-affine cases), gpu_curve (the rest only if they pass), then the MSM
#            bench of the build before (msm_old: CUZK_NVCC_FLAGS=-DCUZK_AFFINE_BININV=0) and of
#            this one, both accumulations, G1 2^23 / 2^24 / 2^26 / 2^27 and G2 2^21 / 2^22 / 2^24
#            (the new build), same call
#   kernels-z2  its correctness: `check` with batch-affine forced on every MSM (G2 included),
#            fixtures-gpu, gpu_prove on both fixtures, `check` with the defaults, then the
#            thresholds: both accumulations at G1 2^21 / 2^22, G2 2^20 and the PoRep mix at 2^27
#   kernels-z3  its partitions: 2^27 resident (3; then 2 with batch-affine from 2^24 list
#            entries, CUZK_MSM_AFFINE_MIN_LIST=16777216: the L, A, B lists of the PoRep mix) and
#            capped at 16 GiB (2)
#   kernels-z4  the final build of that session (batch-affine from 2^26 G1 / 2^25 G2 list
#            entries): gpu_field, gpu_curve, gpu_msm (the rest only if they pass), fixtures-gpu,
#            gpu_prove on both fixtures, `check` with the defaults, 2^27 partitions resident (3)
#            and capped at 16 GiB (2), gpu_ntt
#   anchors-z  SupraSeal beside cuzk in one call: `scripts/e2e.sh anchors` (2 KiB and 8 MiB:
#            real-shape C1, GPU-generated parameters, `cuzk prove --repeat 4` and
#            `supraseal-anchor --repeat 4`); `anchor26` next in the same warm lease (2^26)
#   check-z  `check` (the start tier now forces partial at 2^20), then anchors-z and anchor26
#   kernels-y1  the batch-affine passes software-pipelined (CUZK_AFFINE_PREFETCH of commit ec92b6e,
#            dropped in the next commit; the build before packed as msm_old:
#            `CUZK_NVCC_FLAGS=-DCUZK_AFFINE_PREFETCH=0`, at most 512 chains): gpu_msm, the MSM
#            bench of both builds (G1 2^24 / 2^26 / 2^27, G2 2^24), `check`, the sweeps at G1
#            2^24 / 2^26 (occupancy, window, chains per thread 32 / 100 / 128 / 150; the two-pass
#            scatter with 7 windows per group), 2^27 partitions resident (3)
#   kernels-y2  the batch-affine shape at most 100 chains per thread (the build before: 512):
#            gpu_msm, the MSM bench at G1 2^24 / 2^26 / 2^27 (G2 2^24) with chains per thread
#            48 / 64 / 80 / 128 / 512 beside the default, with the 4-block (default) and the
#            3-block variant, `check`, fixtures-gpu, gpu_prove on both fixtures, 2^27
#            partitions resident (3) and capped at 16 GiB (2), then anchors-z
#   final-y  the final build of the session of 2026-12-03: gpu_field, gpu_curve, gpu_ntt, gpu_msm,
#            fixtures-gpu, gpu_prove on both fixtures, `check`
#   kernels-y3  ncu-affine on that build, then 2^27 partitions resident with 1 worker (3) and
#            2 workers (4) in one process
#   ncu-sort-ntt  ncu of the bucketing kernels (histogram, scan, scatter) at G1 2^26 and of three
#            NTT passes at 2^27
#   ncu-affine  ncu of one batch-affine accumulation launch at G1 2^26 (speed of light, warp
#            states, memory, occupancy, launch statistics)
#   synth    the compiled circuit vs the reference synthesis on both fixtures (needs `fixtures`
#            in the same warm lease): compiled == reference (a, b, c, witness, densities, proof
#            bytes), GPU proof == CPU proof, `prove --backend gpu --repeat 4` with
#            CUZK_SYNTHESIS=reference, compiled, and compiled with CUZK_GPU_SPMV=0, and the
#            synthesis bench (SYNTH_SIZES="2KiB" for one size)
#   alloc    the allocator on the device: gpu_alloc (MSM workspaces within their planned arena, 2^27),
#            then a 2^27 synthetic partition on every tier and under a 16 GiB cap (batch exits 4 if a
#            partition's arena high-water mark exceeds its plan or the driver's use exceeds the cap)
#   spmv     GPU SpMV == CPU SpMV (gpu_spmv: random matrices and edge cases for every scheme, the
#            real 2 KiB compiled circuit, the device R1CS check); the 2 KiB fixture is made if missing
#   e2e-start  scripts/e2e.sh $E2E_STEPS (default "32GiB:5") started detached (setsid) from copies
#            of the binaries and the script in /tmp/e2e-bin, so that it runs on across calls; then
#   e2e-wait   waits until it has ended or $E2E_WAIT seconds (default 560) have passed, and copies
#            /tmp/e2e's summary and logs into $OUT (issue the next e2e-wait call at once: the
#            machine goes back 30 s after a call; e2e-wait returns early when no driver runs).
#            The run behind BENCHMARKS.md (*run E*, ~24 device-minutes): `E2E_STEPS="32GiB:4
#            64GiB:3 anchors tests" scripts/device-run.sh e2e-start e2e-wait`, then
#            `scripts/device-run.sh e2e-wait` until it says "e2e ended" (twice there).
#   params   Groth16 test parameters on the GPU: gpu_fixed_base (GPU == blstrs), then
#            `cuzk gen-params --device gpu` for 2 KiB with the fixture's seed == the bellperson
#            fixture made there (cmp), then 32 GiB (time, peak RSS; files in /tmp/p32, 44 GiB:
#            one size at a time on the device's 64 GiB disk). Binaries: gpu_fixed_base (test),
#            cuzk (cargo build --release -p cuzk-cli --features cuda), make_fixture.
# Binaries are built on a machine with cargo (here: no cargo on the device machine):
#   source <(bash scripts/install-cuda.sh); export CUZK_CUDA_ARCHS=sm_90
#   cargo test --release --features cuda,test-hooks --no-run   # gpu_field gpu_ntt gpu_curve gpu_msm gpu_prove gpu_alloc gpu_spmv
#                                                    # (test-hooks: the test kernels of gpu_field, bench_ntt)
#   cargo bench --features cuda,test-hooks --no-run    # ntt msm
#   cargo build --release --features cuda,test-hooks --examples   # batch prove make_fixture synth_scaling
#   cargo bench --features cuda --no-run --bench synthesis  # synthesis (CPU; same binary kind)
#   CUZK_NVCC_FLAGS=-DCUZK_LAZY=0 cargo bench --features cuda,test-hooks --no-run --bench msm
#                                                    # msm_base of kernels-f (the formulas before
#                                                    # lazy reduction), packed by hand as msm_base.gz
#   (cd bench-anchors/supraseal && CARGO_TARGET_DIR=../../target cargo build --release)  # the
#                                                    # SupraSeal anchor of `e2e.sh anchors` (optional)
# then copied (stripped, gzipped) into $F (default .dev/final) under the names used below.
F=${F:-.dev/final}; OUT=${OUT:-/tmp/cuzk-out}; mkdir -p "$OUT"; S=$OUT/summary.txt
(cd "$F" && for z in *.gz; do [ -e "$z" ] && gunzip -f "$z"; done; chmod +x ./*)
export RUST_BACKTRACE=1
# GPU tests fail (instead of skipping) when no device is visible.
export CUZK_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$OUT/smi.txt"
t(){ local n=$1; shift; local t0; t0=$(date +%s); "$@" > "$OUT/$n.log" 2>&1; echo "$n rc=$? $(( $(date +%s)-t0 ))s" | tee -a "$S"; }
# GPU == CPU of all five MSMs on synthetic 2^20 partitions, resident / partial / streaming
# (timeout $1 seconds).
check_tiers(){ t check timeout "$1" $F/batch --log2 20 --check \
    --phase name=check-resident,vram=resident,w=2,c=2,j=2,p=2 \
    --phase name=check-partial,vram=partial,w=2,c=2,j=2,p=2 \
    --phase name=check-streaming,vram=streaming,w=2,c=2,j=2,p=2; }
# gpu_prove (GPU proof bytes == CPU proof bytes, verify_seal) on the fixtures in /tmp/fx2, /tmp/fx8.
gpu_prove_both(){
  CUZK_FIXTURE_DIR=/tmp/fx2 CUZK_TEST_SECTOR_SIZE=2KiB CUZK_TEST_PROOFS=8 t gpu_prove2 timeout 240 $F/gpu_prove --nocapture
  CUZK_FIXTURE_DIR=/tmp/fx8 CUZK_TEST_SECTOR_SIZE=8MiB CUZK_TEST_PROOFS=4 t gpu_prove8 timeout 240 $F/gpu_prove --nocapture; }
# `cuzk prove` of the 8 MiB fixture on the GPU, logged as $1, further arguments after it.
prove_fixture8(){ local n=$1 fx=/tmp/fx8; shift
  t "$n" timeout 200 $F/cuzk prove $fx/c1.json --params $fx/params \
    --sector-num "$(sed -n 's/.*"sector_id": *\([0-9]*\).*/\1/p' $fx/fixture.json)" \
    --prover-id "$(sed -n 's/.*"prover_id": *"\([0-9a-f]*\)".*/\1/p' $fx/fixture.json)" \
    --backend gpu "$@"; }
for block in "$@"; do case $block in
core)
  t gpu_field timeout 40 $F/gpu_field --test-threads=1
  t gpu_ntt timeout 90 $F/gpu_ntt --test-threads=1
  t gpu_curve timeout 30 $F/gpu_curve
  t gpu_msm timeout 90 $F/gpu_msm --test-threads=3
  CUZK_BENCH_NTT_TUNE_LOGS= CUZK_BENCH_NTT_LOGS=27 t bench_ntt timeout 45 $F/bench_ntt --bench 'ntt_forward/2\^27'
  CUZK_BENCH_MSM_G1=24,26,27 CUZK_BENCH_MSM_G2=22,24 CUZK_BENCH_MSM_POREP=27 t bench_msm timeout 110 $F/msm --bench
  ;;
check)
  check_tiers 90
  ;;
real)
  # Both fixtures at once (16 cores; ~2.5 min for 2 KiB alone).
  CUZK_FIXTURE_DIR=/tmp/fx2 t fixture2 $F/make_fixture --sector-size 2KiB &
  CUZK_FIXTURE_DIR=/tmp/fx8 t fixture8 $F/make_fixture --sector-size 8MiB &
  wait
  CUZK_FIXTURE_DIR=/tmp/fx2 CUZK_TEST_SECTOR_SIZE=2KiB CUZK_TEST_PROOFS=100 t gpu_prove2 timeout 240 $F/gpu_prove --nocapture
  CUZK_FIXTURE_DIR=/tmp/fx8 CUZK_TEST_SECTOR_SIZE=8MiB CUZK_TEST_PROOFS=20 t gpu_prove8 timeout 240 $F/gpu_prove --nocapture
  CUZK_FIXTURE_DIR=/tmp/fx2 t prove2 timeout 60 $F/prove --sector-size 2KiB --backend gpu --repeat 3
  CUZK_FIXTURE_DIR=/tmp/fx8 t prove8 timeout 90 $F/prove --sector-size 8MiB --backend gpu --repeat 3
  ;;
scale)
  RUST_LOG=warn,cuzk::prover::gpu=debug t b27 timeout 560 $F/batch --log2 27 --reuse \
    --phase name=cap16-w2,vram=16GiB,w=2,c=5,j=3,p=10 \
    --phase name=resident-w1,vram=none,w=1,c=2,j=2,p=4 \
    --phase name=resident-w2,vram=none,w=2,c=2,j=2,p=4
  ;;
scale-short)
  t b27s timeout 240 $F/batch --log2 27 --reuse \
    --phase name=resident-w1,vram=none,w=1,c=1,j=1,p=3 \
    --phase name=cap16-w2,vram=16GiB,w=2,c=2,j=2,p=2
  ;;
kernels-a)
  # Issue 13's correctness set, first half (one warm lease, then `kernels-b` at once): both
  # fixtures built in the background while the fixture-free GPU tests and the GPU == CPU check
  # of all five MSMs on three tiers run (longer timeouts: they share the CPU with the fixtures).
  CUZK_FIXTURE_DIR=/tmp/fx2 t fixture2 $F/make_fixture --sector-size 2KiB &
  CUZK_FIXTURE_DIR=/tmp/fx8 t fixture8 $F/make_fixture --sector-size 8MiB &
  t gpu_field timeout 120 $F/gpu_field --test-threads=1
  t gpu_curve timeout 120 $F/gpu_curve
  t gpu_msm timeout 300 $F/gpu_msm --test-threads=3
  check_tiers 400
  wait
  ;;
kernels-b)
  # Second half: GPU proof == CPU proof and verify_seal on both real fixtures, then 2^27
  # partitions with the parameters resident (GPU time per stage).
  gpu_prove_both
  RUST_LOG=warn,cuzk::prover::gpu=debug t b27s timeout 240 $F/batch --log2 27 --reuse \
    --phase name=resident-w1,vram=none,w=1,c=1,j=1,p=3
  ;;
fixtures-gpu)
  SEEDFX=63757a6b20324b694220666978747572652067726f7468313620706172616d73  # fixture PARAMS_RNG_SEED
  for sz in 2KiB 8MiB; do
    d=/tmp/fx${sz:0:1}; mkdir -p $d/params
    [ -e $d/fixture.json ] || t genparams_$sz timeout 240 $F/cuzk gen-params --sector-size $sz \
      --seed $SEEDFX --device gpu $d/params
    CUZK_FIXTURE_DIR=$d t fixture_$sz timeout 240 $F/make_fixture --sector-size $sz
  done
  ;;
kernels-c)
  "$0" fixtures-gpu
  t gpu_field timeout 120 $F/gpu_field --test-threads=1
  t gpu_curve timeout 120 $F/gpu_curve
  t gpu_ntt timeout 200 $F/gpu_ntt --test-threads=1
  t gpu_msm timeout 300 $F/gpu_msm --test-threads=3
  check_tiers 300
  gpu_prove_both
  CUZK_GPU_SPMV=0 RUST_LOG=info prove_fixture8 prove_cpuspmv --repeat 2
  ;;
anchor26)
  # SupraSeal's prover on a synthetic 2^26 partition (bench-anchors/supraseal, binary
  # supraseal-synth; 24 GB of parameters written to /tmp, removed after), then ours on the same
  # shape (batch --log2 26 --reuse, one worker, parameters resident).
  t ss26 timeout 330 $F/supraseal-synth --log2 26 --params /tmp/ss26.params --repeat 4
  rm -f /tmp/ss26.params
  t b26 timeout 200 $F/batch --log2 26 --reuse --phase name=r26-w1,vram=none,w=1,c=1,j=1,p=4
  ;;
kernels-d)
  CUZK_BENCH_NTT_TUNE_LOGS= CUZK_BENCH_NTT_LOGS=24,27 t bench_ntt timeout 120 $F/bench_ntt --bench zzz
  CUZK_BENCH_MSM_SWEEP=26,27 CUZK_BENCH_MSM_G1=26,27 CUZK_BENCH_MSM_G2=24 CUZK_BENCH_MSM_POREP= \
    t sweep timeout 330 $F/msm --bench zzz
  RUST_LOG=warn,cuzk::prover::gpu=debug t b27 timeout 250 $F/batch --log2 27 --reuse \
    --phase name=resident-w1,vram=none,w=1,c=1,j=1,p=3 \
    --phase name=resident-w2,vram=none,w=2,c=2,j=2,p=3 \
    --phase name=cap16-w1,vram=16GiB,w=1,c=1,j=1,p=3
  ;;
kernels-e)
  # Fifth session (lazy reduction in the point formulas): the correctness set of kernels-c
  # without the NTT and the CPU-SpMV prove (their kernels did not change).
  "$0" fixtures-gpu
  t gpu_field timeout 120 $F/gpu_field --test-threads=1
  t gpu_curve timeout 120 $F/gpu_curve
  t gpu_msm timeout 300 $F/gpu_msm --test-threads=3
  check_tiers 300
  gpu_prove_both
  ;;
kernels-f)
  # A/B of the MSM in one call: msm_base (a build with CUZK_NVCC_FLAGS=-DCUZK_LAZY=0, the
  # formulas before) then msm; then 2^27 partitions resident and capped.
  for b in msm_base msm; do
    CUZK_BENCH_MSM_G1=24,26,27 CUZK_BENCH_MSM_G2=22,24 CUZK_BENCH_MSM_POREP= \
      t ${b}_1 timeout 200 $F/$b --bench zzz
  done
  RUST_LOG=warn,cuzk::prover::gpu=debug t b27 timeout 200 $F/batch --log2 27 --reuse \
    --phase name=resident-w1,vram=none,w=1,c=1,j=1,p=3 \
    --phase name=cap16-w1,vram=16GiB,w=1,c=1,j=1,p=3
  ;;
kernels-g)
  # Fifth session, the NTT change (direct twist table, scales folded into the pointwise step)
  # and CUZK_GPU_SECTIONS: gpu_ntt, gpu_prove on both fixtures, the NTT bench, 2^27 partitions,
  # then `cuzk prove --repeat 8 --jobs 4` of the 8 MiB fixture with 1 and 2 GPU sections.
  "$0" fixtures-gpu
  t gpu_ntt timeout 200 $F/gpu_ntt --test-threads=1
  gpu_prove_both
  CUZK_BENCH_NTT_TUNE_LOGS= CUZK_BENCH_NTT_LOGS=24,27 t bench_ntt timeout 120 $F/bench_ntt --bench zzz
  t b27 timeout 200 $F/batch --log2 27 --reuse --phase name=resident-w1,vram=none,w=1,c=1,j=1,p=3
  for s in 1 2; do CUZK_GPU_SECTIONS=$s prove_fixture8 prove8_s$s --repeat 8 --jobs 4; done
  ;;
kernels-h)
  "$0" fixtures-gpu
  t gpu_msm timeout 300 $F/gpu_msm --test-threads=3
  CUZK_MSM_AFFINE_MIN_LIST=0 check_tiers 300
  export CUZK_MSM_AFFINE_MIN_LIST=0; gpu_prove_both; unset CUZK_MSM_AFFINE_MIN_LIST
  ;;
kernels-i)
  CUZK_BENCH_MSM_ACCUMULATION=both CUZK_BENCH_MSM_PROFILE=1 CUZK_BENCH_MSM_G1=24,26,27 CUZK_BENCH_MSM_G2= \
    CUZK_BENCH_MSM_POREP=27 t msm_ab timeout 300 $F/msm --bench zzz
  ;;
kernels-j)
  for a in affine xyzz; do CUZK_MSM_ACCUMULATION=$a t b27_$a timeout 150 $F/batch --log2 27 --reuse \
    --phase name=resident-$a,vram=none,w=1,c=1,j=1,p=3; done
  t b27_cap timeout 150 $F/batch --log2 27 --reuse --phase name=cap16-w2,vram=16GiB,w=2,c=2,j=2,p=2
  ;;
kernels-k)
  t gpu_field timeout 120 $F/gpu_field --test-threads=1
  t gpu_fixed_base timeout 120 $F/gpu_fixed_base
  t gpu_msm timeout 200 $F/gpu_msm --test-threads=3
  CUZK_BENCH_MSM_G1=26,27 CUZK_BENCH_MSM_POREP= CUZK_BENCH_MSM_G2= CUZK_BENCH_MSM_SWEEP=27 \
    CUZK_BENCH_MSM_AFFINE_CHAINS=128,512,1024 CUZK_BENCH_MSM_PROFILE=1 t msm_tune timeout 300 $F/msm --bench zzz
  ;;
kernels-m)
  # The last build of the sixth session: gpu_msm, then batch-affine forced on every G1 MSM:
  # GPU == CPU of all five MSMs on three tiers and gpu_prove on both fixtures.
  "$0" fixtures-gpu
  t gpu_msm timeout 200 $F/gpu_msm --test-threads=3
  export CUZK_MSM_AFFINE_MIN_LIST=0; check_tiers 200; gpu_prove_both; unset CUZK_MSM_AFFINE_MIN_LIST
  ;;
kernels-n)
  "$0" fixtures-gpu
  t gpu_ntt timeout 300 $F/gpu_ntt --test-threads=1
  gpu_prove_both
  CUZK_BENCH_NTT_TUNE_LOGS= CUZK_BENCH_NTT_LOGS=24,27 t bench_ntt timeout 200 $F/bench_ntt --bench zzz
  CUZK_BENCH_MSM_ACCUMULATION=both CUZK_BENCH_MSM_PROFILE=1 CUZK_BENCH_MSM_G1=23,24,25 CUZK_BENCH_MSM_G2= \
    CUZK_BENCH_MSM_POREP=27 CUZK_BENCH_MSM_AFFINE_CHAINS=32,128 t msm_thr timeout 300 $F/msm --bench zzz
  t b27 timeout 150 $F/batch --log2 27 --reuse --phase name=resident-w1,vram=none,w=1,c=1,j=1,p=2
  ;;
kernels-o)
  t gpu_field timeout 120 $F/gpu_field
  t gpu_fixed_base timeout 120 $F/gpu_fixed_base
  t gpu_msm timeout 200 $F/gpu_msm --test-threads=3
  for v in msm_old msm msm_ool; do [ -x $F/$v ] && CUZK_BENCH_MSM_G1=26,27 CUZK_BENCH_MSM_POREP= \
    CUZK_BENCH_MSM_G2= CUZK_BENCH_MSM_PROFILE=1 t ab_$v timeout 200 $F/$v --bench zzz; done
  export CUZK_MSM_AFFINE_MIN_LIST=0; check_tiers 200; unset CUZK_MSM_AFFINE_MIN_LIST
  t b27 timeout 150 $F/batch --log2 27 --reuse --phase name=resident-w1,vram=none,w=1,c=1,j=1,p=2
  ;;
kernels-p)
  "$0" fixtures-gpu
  t gpu_msm timeout 200 $F/gpu_msm --test-threads=3
  export CUZK_MSM_AFFINE_MIN_LIST=0; check_tiers 200; gpu_prove_both; unset CUZK_MSM_AFFINE_MIN_LIST
  CUZK_BENCH_MSM_ACCUMULATION=both CUZK_BENCH_MSM_PROFILE=1 CUZK_BENCH_MSM_G1=24,26,27 CUZK_BENCH_MSM_G2= \
    CUZK_BENCH_MSM_POREP= CUZK_BENCH_MSM_SWEEP=27 t msm_p timeout 300 $F/msm --bench zzz
  t b27 timeout 150 $F/batch --log2 27 --reuse --phase name=resident-w1,vram=none,w=1,c=1,j=1,p=2
  t b27_cap timeout 150 $F/batch --log2 27 --reuse --phase name=cap16-w2,vram=16GiB,w=2,c=2,j=2,p=2
  ;;
kernels-q)
  t gpu_msm timeout 200 $F/gpu_msm --test-threads=3
  CUZK_BENCH_MSM_G1=27 CUZK_BENCH_MSM_G2= CUZK_BENCH_MSM_POREP= CUZK_BENCH_MSM_PROFILE=1 t msm27 timeout 200 $F/msm --bench zzz
  t b27 timeout 150 $F/batch --log2 27 --reuse --phase name=resident-w1,vram=none,w=1,c=1,j=1,p=3
  ;;
ncu-affine)
  NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  CUZK_BENCH_MSM_G1=26 CUZK_BENCH_MSM_G2= CUZK_BENCH_MSM_POREP= t ncu_affine timeout 400 "$NCU" \
    --kernel-name regex:accumulate_affine --launch-count 1 --section SpeedOfLight \
    --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy \
    --section LaunchStats --section ComputeWorkloadAnalysis $F/msm --bench zzz
  ;;
kernels-r)
  # the two-pass scatter: gpu_msm, the MSM bench one-pass then two-pass (same call), `check`,
  # ncu of the bucketing kernels at 2^26, two 2^27 partitions
  t gpu_msm timeout 300 $F/gpu_msm --test-threads=3
  CUZK_BENCH_MSM_TWO_PASS_MIN_LIST=18446744073709551615 CUZK_BENCH_MSM_G1=24,26,27 CUZK_BENCH_MSM_G2= \
    CUZK_BENCH_MSM_POREP=27 CUZK_BENCH_MSM_PROFILE=1 t msm_onepass timeout 300 $F/msm --bench zzz
  CUZK_BENCH_MSM_G1=24,26,27 CUZK_BENCH_MSM_G2= CUZK_BENCH_MSM_POREP=27 CUZK_BENCH_MSM_PROFILE=1 \
    t msm_twopass timeout 300 $F/msm --bench zzz
  check_tiers 200
  NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  CUZK_BENCH_MSM_G1=26 CUZK_BENCH_MSM_G2= CUZK_BENCH_MSM_POREP= t ncu_twopass timeout 300 "$NCU" \
    --kernel-name regex:'histogram|scatter|coarse' --launch-count 16 --section SpeedOfLight \
    --section MemoryWorkloadAnalysis $F/msm --bench zzz
  t b27 timeout 150 $F/batch --log2 27 --reuse --phase name=resident-w1,vram=none,w=1,c=1,j=1,p=2
  ;;
kernels-t)
  # the final build (two-pass scatter): gpu_msm (the rest only if it passes), fixtures-gpu,
  # gpu_prove on both fixtures, `check`, the MSM bench with 3 and 7 windows per group
  t gpu_msm timeout 300 $F/gpu_msm --test-threads=3
  grep -q "^gpu_msm rc=0" "$S" || exit 1
  "$0" fixtures-gpu
  gpu_prove_both
  check_tiers 200
  (export CUZK_BENCH_MSM_G1=26,27 CUZK_BENCH_MSM_G2= CUZK_BENCH_MSM_POREP=27 CUZK_BENCH_MSM_PROFILE=1; t msm_gw3 timeout 300 $F/msm --bench zzz)
  (export CUZK_BENCH_MSM_G1=26,27 CUZK_BENCH_MSM_G2= CUZK_BENCH_MSM_POREP= CUZK_BENCH_MSM_PROFILE=1 \
    CUZK_BENCH_MSM_TWO_PASS_WINDOWS=7; t msm_gw7 timeout 300 $F/msm --bench zzz)
  ;;
kernels-u)
  # the block-shared inversion of the batch-affine step and Fr's reduction rows with additions:
  # gpu_field, gpu_ntt, gpu_msm (the rest only if they pass), then the NTT and MSM benches of the
  # build before (bench_ntt_old, msm_old: CUZK_NVCC_FLAGS="-DCUZK_AFFINE_BLOCK_INV=0
  # -DCUZK_FR_LOW_ADD=0") and of this one, alternating, same call
  t gpu_field timeout 60 $F/gpu_field --test-threads=1
  t gpu_ntt timeout 150 $F/gpu_ntt --test-threads=1
  t gpu_msm timeout 300 $F/gpu_msm --test-threads=3
  for x in gpu_field gpu_ntt gpu_msm; do grep -q "^$x rc=0" "$S" || exit 1; done
  (export CUZK_BENCH_NTT_TUNE_LOGS= CUZK_BENCH_NTT_LOGS=24,27
   t ntt_old timeout 120 $F/bench_ntt_old --bench zzz; t ntt_new timeout 120 $F/bench_ntt --bench zzz)
  (export CUZK_BENCH_MSM_ACCUMULATION=both CUZK_BENCH_MSM_G1=23,24,26 CUZK_BENCH_MSM_G2= \
     CUZK_BENCH_MSM_POREP= CUZK_BENCH_MSM_PROFILE=1
   t msm_old timeout 200 $F/msm_old --bench zzz; t msm_new timeout 200 $F/msm --bench zzz)
  ;;
kernels-v)
  # the same builds at G1 2^27 and in two 2^27 partitions, resident
  (export CUZK_BENCH_MSM_G1=27 CUZK_BENCH_MSM_G2= CUZK_BENCH_MSM_POREP= CUZK_BENCH_MSM_PROFILE=1
   t msm27_old timeout 150 $F/msm_old --bench zzz; t msm27_new timeout 150 $F/msm --bench zzz)
  t b27_old timeout 150 $F/batch_old --log2 27 --reuse --phase name=resident-w1,vram=none,w=1,c=1,j=1,p=2
  t b27_new timeout 150 $F/batch --log2 27 --reuse --phase name=resident-w1,vram=none,w=1,c=1,j=1,p=2
  ;;
kernels-w)
  t gpu_msm timeout 300 $F/gpu_msm --test-threads=3
  grep -q "^gpu_msm rc=0" "$S" || exit 1
  t gpu_curve timeout 120 $F/gpu_curve
  "$0" fixtures-gpu
  gpu_prove_both
  (export CUZK_MSM_AFFINE_MIN_LIST=0; check_tiers 200)
  ;;
kernels-x)
  (export CUZK_BENCH_MSM_ACCUMULATION=both CUZK_BENCH_MSM_G1=21,22 CUZK_BENCH_MSM_G2= \
     CUZK_BENCH_MSM_POREP= CUZK_BENCH_MSM_PROFILE=1; t msm_small timeout 120 $F/msm --bench zzz)
  (export CUZK_BENCH_MSM_G1= CUZK_BENCH_MSM_G2= CUZK_BENCH_MSM_POREP=27 CUZK_BENCH_MSM_PROFILE=1
   t msm_porep timeout 120 $F/msm --bench zzz)
  t b27_res timeout 200 $F/batch --log2 27 --reuse \
    --phase name=resident-w1,vram=none,w=1,c=1,j=1,p=3 \
    --phase name=resident-w2,vram=none,w=2,c=2,j=2,p=4
  CUZK_MSM_AFFINE_MIN_LIST=268435456 t b27_cap_old timeout 100 $F/batch --log2 27 --reuse \
    --phase name=cap16-w1,vram=16GiB,w=1,c=1,j=1,p=2
  t b27_cap timeout 100 $F/batch --log2 27 --reuse --phase name=cap16-w1,vram=16GiB,w=1,c=1,j=1,p=2
  ;;
kernels-y)
  check_tiers 200
  t b27_res timeout 150 $F/batch --log2 27 --reuse --phase name=resident-w1,vram=none,w=1,c=1,j=1,p=3
  (export RUST_LOG=cuzk::gpu::alloc=debug
   t b27_cap timeout 150 $F/batch --log2 27 --reuse --phase name=cap16-w1,vram=16GiB,w=1,c=1,j=1,p=3)
  ;;
kernels-z1)
  t gpu_field timeout 90 $F/gpu_field --test-threads=1
  t gpu_msm timeout 300 $F/gpu_msm --test-threads=3
  t gpu_curve timeout 60 $F/gpu_curve
  for x in gpu_field gpu_msm gpu_curve; do grep -q "^$x rc=0" "$S" || exit 1; done
  (export CUZK_BENCH_MSM_ACCUMULATION=both CUZK_BENCH_MSM_G1=23,24,26 CUZK_BENCH_MSM_G2= \
     CUZK_BENCH_MSM_POREP= CUZK_BENCH_MSM_PROFILE=1
   t msm_old timeout 200 $F/msm_old --bench zzz; t msm_new timeout 200 $F/msm --bench zzz)
  (export CUZK_BENCH_MSM_G1=27 CUZK_BENCH_MSM_G2= CUZK_BENCH_MSM_POREP= CUZK_BENCH_MSM_PROFILE=1
   t msm27_old timeout 120 $F/msm_old --bench zzz; t msm27_new timeout 120 $F/msm --bench zzz)
  (export CUZK_BENCH_MSM_ACCUMULATION=both CUZK_BENCH_MSM_G1= CUZK_BENCH_MSM_G2=21,22,24 \
     CUZK_BENCH_MSM_POREP= CUZK_BENCH_MSM_PROFILE=1 CUZK_BENCH_MSM_SWEEP=24
   t msm_g2 timeout 300 $F/msm --bench zzz)
  ;;
kernels-z2)
  (export CUZK_MSM_AFFINE_MIN_LIST=0; check_tiers 200)
  "$0" fixtures-gpu
  gpu_prove_both
  check_tiers 200
  (export CUZK_BENCH_MSM_ACCUMULATION=both CUZK_BENCH_MSM_G1=21,22 CUZK_BENCH_MSM_G2=20 \
     CUZK_BENCH_MSM_POREP=27 CUZK_BENCH_MSM_PROFILE=1
   t msm_thr timeout 200 $F/msm --bench zzz)
  ;;
kernels-z3)
  t b27_res timeout 200 $F/batch --log2 27 --reuse --phase name=resident-w1,vram=none,w=1,c=1,j=1,p=3
  CUZK_MSM_AFFINE_MIN_LIST=16777216 t b27_res_lo timeout 150 $F/batch --log2 27 --reuse \
    --phase name=resident-w1-affine24,vram=none,w=1,c=1,j=1,p=2
  t b27_cap timeout 150 $F/batch --log2 27 --reuse --phase name=cap16-w1,vram=16GiB,w=1,c=1,j=1,p=2
  ;;
kernels-z4)
  t gpu_field timeout 90 $F/gpu_field --test-threads=1
  t gpu_curve timeout 60 $F/gpu_curve
  t gpu_msm timeout 300 $F/gpu_msm --test-threads=3
  for x in gpu_field gpu_curve gpu_msm; do grep -q "^$x rc=0" "$S" || exit 1; done
  "$0" fixtures-gpu
  gpu_prove_both
  check_tiers 200
  t b27_res timeout 150 $F/batch --log2 27 --reuse --phase name=resident-w1,vram=none,w=1,c=1,j=1,p=3
  t b27_cap timeout 150 $F/batch --log2 27 --reuse --phase name=cap16-w1,vram=16GiB,w=1,c=1,j=1,p=2
  t gpu_ntt timeout 150 $F/gpu_ntt --test-threads=1
  ;;
anchors-z)
  E=/tmp/e2e F=$F t e2e_anchors timeout 420 bash scripts/e2e.sh anchors
  cat /tmp/e2e/summary.txt >> "$S"
  for l in /tmp/e2e/anchors/*.log; do echo "=== $l"; tail -n 40 "$l"; done > "$OUT/anchors.txt"
  ;;
check-z)
  check_tiers 200
  "$0" anchors-z anchor26
  ;;
kernels-y2)
  t gpu_msm timeout 300 $F/gpu_msm --test-threads=3
  grep -q "^gpu_msm rc=0" "$S" || exit 1
  (export CUZK_BENCH_MSM_G1=24,26,27 CUZK_BENCH_MSM_G2=24 CUZK_BENCH_MSM_POREP= CUZK_BENCH_MSM_PROFILE=1 \
     CUZK_BENCH_MSM_AFFINE_CHAINS=48,64,80,128,512
   t msm_mb4 timeout 200 $F/msm --bench zzz
   CUZK_BENCH_MSM_G2= CUZK_BENCH_MSM_AFFINE_MIN_BLOCKS=3 t msm_mb3 timeout 200 $F/msm --bench zzz)
  check_tiers 200
  "$0" fixtures-gpu
  gpu_prove_both
  t b27_res timeout 150 $F/batch --log2 27 --reuse --phase name=resident-w1,vram=none,w=1,c=1,j=1,p=3
  t b27_cap timeout 150 $F/batch --log2 27 --reuse --phase name=cap16-w1,vram=16GiB,w=1,c=1,j=1,p=2
  "$0" anchors-z
  ;;
final-y)
  t gpu_field timeout 90 $F/gpu_field --test-threads=1
  t gpu_curve timeout 60 $F/gpu_curve
  t gpu_ntt timeout 150 $F/gpu_ntt --test-threads=1
  t gpu_msm timeout 200 $F/gpu_msm --test-threads=3
  "$0" fixtures-gpu
  gpu_prove_both
  check_tiers 200
  ;;
kernels-y3)
  "$0" ncu-affine
  t b27_w12 timeout 240 $F/batch --log2 27 --reuse \
    --phase name=resident-w1,vram=none,w=1,c=1,j=1,p=3 \
    --phase name=resident-w2,vram=none,w=2,c=2,j=2,p=4
  ;;
kernels-y1)
  t gpu_msm timeout 300 $F/gpu_msm --test-threads=3
  grep -q "^gpu_msm rc=0" "$S" || exit 1
  (export CUZK_BENCH_MSM_G1=24,26,27 CUZK_BENCH_MSM_G2=24 CUZK_BENCH_MSM_POREP= CUZK_BENCH_MSM_PROFILE=1
   t msm_old timeout 200 $F/msm_old --bench zzz; t msm_new timeout 200 $F/msm --bench zzz)
  check_tiers 200
  (export CUZK_BENCH_MSM_G1=24,26 CUZK_BENCH_MSM_G2= CUZK_BENCH_MSM_POREP= CUZK_BENCH_MSM_PROFILE=1 \
     CUZK_BENCH_MSM_SWEEP=24,26 CUZK_BENCH_MSM_AFFINE_CHAINS=32,100,128,150
   t msm_sweep timeout 240 $F/msm --bench zzz)
  (export CUZK_BENCH_MSM_G1=26 CUZK_BENCH_MSM_G2= CUZK_BENCH_MSM_POREP= CUZK_BENCH_MSM_PROFILE=1 \
     CUZK_BENCH_MSM_TWO_PASS_WINDOWS=7
   t msm_tp7 timeout 120 $F/msm --bench zzz)
  t b27_res timeout 150 $F/batch --log2 27 --reuse --phase name=resident-w1,vram=none,w=1,c=1,j=1,p=3
  ;;
ncu-sort-ntt)
  # the bucketing kernels (counting sort) at G1 2^26 and the NTT passes at 2^27, ncu
  NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  CUZK_BENCH_MSM_G1=26 CUZK_BENCH_MSM_G2= CUZK_BENCH_MSM_POREP= t ncu_sort timeout 300 "$NCU" \
    --kernel-name regex:'histogram|scatter|scan' --launch-count 8 --section SpeedOfLight \
    --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats $F/msm --bench zzz
  CUZK_BENCH_NTT_TUNE_LOGS= CUZK_BENCH_NTT_LOGS=27 t ncu_ntt timeout 300 "$NCU" \
    --kernel-name regex:ntt_pass --launch-count 3 --section SpeedOfLight --section WarpStateStats \
    --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis $F/bench_ntt --bench zzz
  ;;
kernels-l)
  t gpu_msm timeout 200 $F/gpu_msm --test-threads=3
  CUZK_BENCH_MSM_G1=26,27 CUZK_BENCH_MSM_POREP= CUZK_BENCH_MSM_G2= CUZK_BENCH_MSM_PROFILE=1 t msm_final timeout 200 $F/msm --bench zzz
  t b27_final timeout 150 $F/batch --log2 27 --reuse --phase name=resident-w1,vram=none,w=1,c=1,j=1,p=2
  ;;
fixtures)
  CUZK_FIXTURE_DIR=/tmp/fx2 t fixture2 $F/make_fixture --sector-size 2KiB &
  CUZK_FIXTURE_DIR=/tmp/fx8 t fixture8 $F/make_fixture --sector-size 8MiB &
  wait
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
alloc)
  CUZK_TEST_ALLOC_LOG2=27 t gpu_alloc timeout 120 $F/gpu_alloc --nocapture
  RUST_LOG=warn,cuzk::prover::gpu=info t alloc27 timeout 560 $F/batch --log2 27 \
    --phase name=alloc-resident,vram=resident,w=1,c=1,j=1,p=2 \
    --phase name=alloc-full,vram=full-staging,w=1,c=1,j=1,p=2 \
    --phase name=alloc-partial,vram=partial,w=1,c=1,j=1,p=2 \
    --phase name=alloc-streaming,vram=streaming,w=1,c=1,j=1,p=2 \
    --phase name=alloc-cap16,vram=16GiB,w=2,c=2,j=2,p=2
  ;;
scaling32)
  # A real-shape 32 GiB C1 (no sealing), then synthesis of its partition 0 on 16 and 1 threads
  # (no parameter file needed). Binaries: cuzk, synth_scaling (cargo build --release --example
  # synth_scaling).
  t genc1_32 $F/cuzk gen-c1 --sector-size 32GiB --seed scaling-1 /tmp/c32
  CUZK_CIRCUIT_CACHE=/tmp/cc32 FIL_PROOFS_PARAMETER_CACHE=/tmp/none t scaling32 timeout 300 \
    $F/synth_scaling /tmp/c32/c1.json 1 1000 16 1
  ;;
e2e-start)
  if [ -e /tmp/e2e/pid ] && [ ! -e /tmp/e2e/done ] && kill -0 "$(cat /tmp/e2e/pid)" 2>/dev/null; then
    echo "e2e already running (pid $(cat /tmp/e2e/pid)): not started again" | tee -a "$S"; continue
  fi
  rm -rf /tmp/e2e-bin; mkdir -p /tmp/e2e-bin /tmp/e2e; rm -f /tmp/e2e/done /tmp/e2e/pid; cp "$F"/* scripts/e2e.sh /tmp/e2e-bin/
  F=/tmp/e2e-bin setsid nohup bash /tmp/e2e-bin/e2e.sh ${E2E_STEPS:-32GiB:5} \
    > /tmp/e2e/driver.log 2>&1 < /dev/null &
  echo "e2e started: ${E2E_STEPS:-32GiB:5}" | tee -a "$S"
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
    for l in "$d"*.log; do [ -e "$l" ] && { echo "=== $l"; tail -n 300 "$l"; }; done > "$OUT/$n.txt"; done
  cat /tmp/e2e/summary.txt
  ;;
gputests)
  t gpu_field timeout 40 $F/gpu_field --test-threads=1
  t gpu_ntt timeout 90 $F/gpu_ntt --test-threads=1
  t gpu_curve timeout 30 $F/gpu_curve
  t gpu_msm timeout 90 $F/gpu_msm --test-threads=3
  ;;
spmv)
  # /tmp/fx2 is the `real` block's 2 KiB fixture; the test makes it (~2.5 min) when missing.
  CUZK_FIXTURE_DIR=/tmp/fx2 RUST_LOG=info t gpu_spmv timeout 420 $F/gpu_spmv --test-threads=1 --nocapture
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
*) echo "unknown block $block" | tee -a "$S" ;;
esac; done
cat "$S"
