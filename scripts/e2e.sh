#!/bin/bash
# Real-shape sectors end to end on the device, no sealing and no downloaded parameters:
#   cuzk gen-c1 (C1 output of a consistent sparse sector) → cuzk gen-params --device gpu (Groth16
#   test parameters from the compiled circuit) → cuzk prove --repeat R --jobs 2 (the first proof
#   alone and cold — parameters loaded in the process — then R − 1 proofs two in flight, every
#   proof checked by filecoin-proofs' verify_seal) → cuzk verify of the proof (exit 0) and of it
#   with one byte flipped (exit 51 expected).
# Peak host RSS from /usr/bin/time -v, device memory (nvidia-smi) and host memory in use
# (MemTotal − MemAvailable) sampled every 0.5 s, a
# cold-cache disk read of the parameter file measured with dd (the cold proof reads from disk
# when the disk does ≥ 800 MB/s, else from the page cache that gen-params left: said in summary).
#
# E2E_CAPS="24GiB 16GiB" and E2E_BASE=BIN: after a size's run, the same steady-state run under
# each device cap, and uncapped with a baseline build (see the loop below). A cap written
# CAP+base (e.g. 16GiB+base) runs with the environment $E2E_BASE_ENV added (e.g.
# CUZK_MSM_BATCH=1: the same build without a feature, as the baseline of the same lease) and,
# with E2E_BASE_BIN=BIN, with that build instead (an older commit as the baseline).
# E2E_BASE=same: the uncapped baseline is this build with $E2E_BASE_ENV (e.g. CUZK_PACKED_Z=0).
# E2E_MAIN=0: no uncapped run first (the caps only; proof 0 of each cap is then its cold one).
# E2E_COLD="off always": after a size's run, one more cold proof per mode (page cache dropped
# again, CUZK_H_AHEAD=mode, verified the same way), its time in the summary.
#
# Usage: [LOAD_BENCH=1] scripts/e2e.sh STEP...   STEP = SIZE:REPEAT (e.g. 32GiB:5, 64GiB:3), `tests` (the GPU
#   unit tests of device-run.sh's `core` plus gpu_alloc), `post-SIZE:REPEAT` (WindowPoSt and
#   WinningPoSt: gen-params --kind, gen-post, prove-post; see the step), `snap-SIZE:REPEAT`
#   (SnapDeals: gen-params --kind snap-deals, gen-snap, prove-snap --jobs 2) or `anchors`
#   (ours beside SupraSeal on 2 KiB and 8 MiB; binary supraseal-anchor from bench-anchors/supraseal)
# Everything goes to $E (default /tmp/e2e): $E/summary.txt, $E/<size>/*.log, $E/done when the
# last step has ended. One size's parameters at a time (the device's disk is 64 GiB): a size's
# step deletes the files of the sizes before it. Run detached so that it outlives the device call
# (device-run.sh block `e2e`, then `e2e-wait` calls back to back).
F=${F:-.dev/final}; E=${E:-/tmp/e2e}; mkdir -p "$E"; S=$E/summary.txt
rm -f "$E/done" "$S"; echo $$ > "$E/pid"; trap 'date +%s > "$E/done"' EXIT
export RUST_BACKTRACE=1 CUZK_REQUIRE_GPU=1
# /usr/bin/time -v where the device has it (cuzk prints its own peak RSS too).
TV=; [ -x /usr/bin/time ] && TV="/usr/bin/time -v"
t(){ local n=$1; shift; local t0; t0=$(date +%s); "$@" > "$L/$n.log" 2>&1; local rc=$?
  echo "$(date +%T) $n rc=$rc $(( $(date +%s)-t0 ))s" | tee -a "$S"; return $rc; }
{ date; nproc; free -g; df -h /tmp; nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv; } >> "$S" 2>&1
# Every 0.5 s: "epoch-seconds device-MiB-in-use host-MemAvailable-KiB GPU-utilization-%" (the
# host-memory and GPU-busy timeline: utilization.gpu is the share of the last sample period in
# which a kernel ran); peak device use, peak host use (MemTotal − lowest MemAvailable, page cache
# not counted) and the mean GPU utilization between two epochs.
( while :; do m=$(nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader,nounits | head -1 | tr -d ' ')
  echo "$(date +%s) ${m%%,*} $(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo) ${m##*,}"; sleep 0.5; done ) > "$E/smi.txt" 2>&1 &
SMI=$!; trap 'kill $SMI 2>/dev/null; date +%s > "$E/done"' EXIT
busy(){ awk -v a="$1" -v b="$2" '$1 >= a && $1 <= b && $4 != "" { s += $4; n++ } END { printf "%.1f", n ? s / n : 0 }' "$E/smi.txt"; }
peak(){ awk -v a="$1" -v b="$2" '$1 >= a && $1 <= b && $2 + 0 > m { m = $2 + 0 } END { print m + 0 }' "$E/smi.txt"; }
hpeak(){ local tot; tot=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)
  awk -v a="$1" -v b="$2" -v t="$tot" '$1 >= a && $1 <= b && $3 != "" && (m == "" || $3 < m) { m = $3 }
    END { printf "%.1f", (t - m) / 1048576 }' "$E/smi.txt"; }
for step in "$@"; do
  if [ "$step" = tests ]; then
    L=$E/tests; mkdir -p "$L"
    t gpu_field timeout 40 $F/gpu_field --test-threads=1
    t gpu_ntt timeout 90 $F/gpu_ntt --test-threads=1
    t gpu_curve timeout 30 $F/gpu_curve
    t gpu_msm timeout 90 $F/gpu_msm --test-threads=3
    CUZK_FIXED_BASE_N=200000 t gpu_fixed_base timeout 120 $F/gpu_fixed_base
    CUZK_TEST_ALLOC_LOG2=27 t gpu_alloc timeout 120 $F/gpu_alloc --nocapture
    continue
  fi
  if [ "${step%%-*}" = post ]; then
    # post-SIZE[:REPEAT] (issue 41's targets): per kind, WinningPoSt first, its circuit's
    # parameters on the GPU, inputs from gen-post (WindowPoSt: a full partition), then
    # `prove-post --repeat R` (every proof checked by filecoin-proofs' verifier; cold, then the
    # steady state). After WinningPoSt, when a SIZE:R step of this run left the PoRep files: a
    # WinningPoSt started 60 s into two PoRep proofs in flight (its time is the answer under
    # load; E2E_UNDER_LOAD=0 leaves it out). Then the PoRep parameters are deleted (the disk
    # holds one large set) and WindowPoSt runs.
    ps=${step#post-}; size=${ps%%:*}; repeat=${ps#*:}; [ "$repeat" = "$ps" ] && repeat=5
    L=$E/post-$size; mkdir -p "$L"; P=$L/params
    export CUZK_CIRCUIT_CACHE=$L/cc
    for k in winning window; do
      if [ $k = window ]; then
        C1=$E/$size/c1; PP=$E/$size/params
        if [ "${E2E_UNDER_LOAD:-1}" = 1 ] && [ -e "$C1/c1-wrapper.json" ] && [ -e "$L/winning/post.json" ] && [ -d "$PP" ]; then
          CUZK_CIRCUIT_CACHE=$E/$size/cc $F/cuzk prove "$C1/c1-wrapper.json" --prover-id f01000 \
            --params "$PP" --backend gpu --repeat 3 --jobs 2 > "$L/porep_load.log" 2>&1 &
          pr=$!; sleep 60
          t winning_under_load timeout 300 $F/cuzk prove-post "$L/winning/post.json" --params "$P" --backend gpu
          grep -E "proof 0:" "$L/winning_under_load.log" | sed 's/^/under PoRep load: /' | tee -a "$S"
          wait $pr; echo "PoRep beside it: rc=$?" | tee -a "$S"
        fi
        # The WindowPoSt set at 32 GiB is as large as PoRep's: nothing of the PoRep size may
        # stay on the 64 GiB disk. Its circuit cache does not fit beside it either (*I1*: 67 GB
        # written by the A section, 63 GB free): compiled in memory by each command instead
        # (E2E_WINDOW_CC, default `off`; ~20 s a command at 32 GiB).
        rm -rf "$PP" "$E/$size/cc"
        export CUZK_CIRCUIT_CACHE=${E2E_WINDOW_CC:-off}
      fi
      RUST_LOG=info t genparams_$k $TV $F/cuzk gen-params --kind $k-post --sector-size "$size" \
        --seed "post-$size" --device gpu "$P" || continue
      t genpost_$k $F/cuzk gen-post --kind $k --sector-size "$size" --seed "post-$size" "$L/$k" || continue
      a=$(date +%s)
      RUST_LOG=warn,cuzk::engine=info t prove_$k timeout 600 $TV $F/cuzk prove-post "$L/$k/post.json" \
        --params "$P" --backend gpu --repeat "$repeat" --out "$L/$k.proof"
      grep -E "proofs, .* in flight|proof 0:" "$L/prove_$k.log" | tee -a "$S"
      echo "$k: GPU busy $(busy "$a" "$(date +%s)") %, peak device memory $(peak "$a" "$(date +%s)") MiB" | tee -a "$S"
    done
    continue
  fi
  if [ "${step%%-*}" = snap ]; then
    # snap-SIZE[:REPEAT] (issue 42's target): the SnapDeals update circuit's parameters on the
    # GPU, real-shape inputs from gen-snap, then `prove-snap --repeat R --jobs 2` (every proof
    # checked by verify_empty_sector_update_proof; cold, then the steady state). The other
    # sizes' and kinds' parameter files are deleted first (the disk holds one large set).
    ss=${step#snap-}; size=${ss%%:*}; repeat=${ss#*:}; [ "$repeat" = "$ss" ] && repeat=4
    for old in "$E"/*/params "$E"/*/cc; do case $old in "$E/snap-$size/"*) ;; *) rm -rf "$old" ;; esac; done
    L=$E/snap-$size; mkdir -p "$L"; P=$L/params
    export CUZK_CIRCUIT_CACHE=$L/cc
    RUST_LOG=info t genparams_snap $TV $F/cuzk gen-params --kind snap-deals --sector-size "$size" \
      --seed "snap-$size" --device gpu "$P" || continue
    t gensnap $F/cuzk gen-snap --sector-size "$size" --seed "snap-$size" "$L/in" || continue
    a=$(date +%s)
    RUST_LOG=warn,cuzk::prover::gpu=info,cuzk::engine=info t prove_snap timeout 900 $TV $F/cuzk prove-snap \
      "$L/in/snap.json" --params "$P" --backend gpu --repeat "$repeat" --jobs 2 --out "$L/snap.proof"
    z=$(date +%s)
    c0=$(grep -oE "^proof 0: .* in [0-9.]+ s" "$L/prove_snap.log" | grep -oE "[0-9.]+ s$" | cut -d' ' -f1 | cut -d. -f1)
    grep -E "^proof [0-9]+: |proofs, |stages: |error" "$L/prove_snap.log" | tee -a "$S"
    echo "snap: GPU busy steady $(busy "$((a + ${c0:-0}))" "$z") %, peak device memory $(peak "$a" "$z") MiB," \
      "peak host memory in use $(hpeak "$a" "$z") GiB" | tee -a "$S"
    awk -v a="$a" -v z="$z" '$1 >= a && $1 <= z' "$E/smi.txt" > "$L/timeline.txt"
    continue
  fi
  if [ "$step" = anchors ]; then
    # SupraSeal side by side (bench-anchors/supraseal): real-shape C1 outputs and GPU-generated
    # parameters of 2 KiB and 8 MiB, then `cuzk prove --repeat 4` and the SupraSeal anchor
    # `--repeat 4` on the same files, one after the other (the first proof of each is cold).
    L=$E/anchors; mkdir -p "$L"
    [ -x $F/supraseal-anchor ] || { echo "anchors: no supraseal-anchor binary" | tee -a "$S"; continue; }
    for sz in 2KiB 8MiB; do d=$L/$sz
      CUZK_CIRCUIT_CACHE=$d/cc t genc1_$sz $F/cuzk gen-c1 --sector-size $sz --seed anchor --sector-num 3 $d/c1
      CUZK_CIRCUIT_CACHE=$d/cc t genparams_$sz $F/cuzk gen-params --sector-size $sz --seed anchor --device gpu $d/p
      CUZK_CIRCUIT_CACHE=$d/cc t cuzk_$sz timeout 150 $F/cuzk prove $d/c1/c1.json --sector-num 3 \
        --prover-id f01000 --params $d/p --backend gpu --repeat 4 --out $d/proof.bin
      t supraseal_$sz timeout 240 $F/supraseal-anchor $d/c1/c1.json --sector-num 3 --prover-id f01000 \
        --params $d/p --repeat 4
      grep -h -E "in flight|supraseal .*proofs" "$L/cuzk_$sz.log" "$L/supraseal_$sz.log" | tee -a "$S"
    done
    continue
  fi
  size=${step%%:*}; repeat=${step#*:}; [ "$repeat" = "$step" ] && repeat=3
  for old in "$E"/*/params "$E"/*/cc; do case $old in "$E/$size/"*) ;; *) rm -rf "$old" ;; esac; done
  L=$E/$size; mkdir -p "$L"; P=$L/params; C1=$L/c1
  export CUZK_CIRCUIT_CACHE=$L/cc
  t genc1 $TV $F/cuzk gen-c1 --sector-size "$size" --seed "e2e-$size" --sector-num 7 "$C1" || continue
  grep -E "generated in|comm_r" "$L/genc1.log" | tee -a "$S"
  a=$(date +%s)
  RUST_LOG=info t genparams $TV $F/cuzk gen-params --sector-size "$size" \
    --seed "e2e-$size" --device gpu "$P" || continue
  echo "gen-params peak device memory $(peak "$a" "$(date +%s)") MiB" | tee -a "$S"
  grep -E "parameters in|Maximum resident|Elapsed" "$L/genparams.log" | tee -a "$S"
  ls -l "$P" >> "$S"
  pf=$(ls "$P"/*.params | head -1)
  mbs=$(dd if="$pf" of=/dev/null bs=64M count=48 iflag=direct 2>&1 | awk '/copied/ { print int($(NF-1) * ($NF ~ /GB/ ? 1000 : 1)) }')
  echo "parameter file read from disk (dd, 3 GiB, O_DIRECT): ${mbs:-?} MB/s" | tee -a "$S"
  # Dropped unless the disk is slow (< 800 MB/s: a cold proof there measures the disk alone).
  drop(){ [ "${mbs:-0}" -ge 800 ] && sync && echo 3 > /proc/sys/vm/drop_caches; }
  if drop; then
    echo "cold proof: page cache dropped" | tee -a "$S"
  else cat "$pf" > /dev/null; echo "cold proof: parameter file in the page cache (disk too slow, or no drop_caches)" | tee -a "$S"; fi
  rm -f "$L/proof.bin" "$L/bad.bin"
  if [ "${E2E_MAIN:-1}" = 1 ]; then
  a=$(date +%s)
  RUST_LOG=warn,cuzk::prover::gpu=info,cuzk::engine=info,cuzk::srs=debug t prove $TV $F/cuzk prove "$C1/c1-wrapper.json" \
    --prover-id f01000 --params "$P" --backend gpu --repeat "$repeat" --jobs 2 --out "$L/proof.bin"
  rc=$?
  z=$(date +%s)
  echo "prove peak device memory $(peak "$a" "$z") MiB, peak host memory in use $(hpeak "$a" "$z") GiB" | tee -a "$S"
  # Steady state: from the end of proof 0 (the cold one; seconds after the run's start) on.
  c0=$(grep -oE "^proof 0: .* in [0-9.]+ s" "$L/prove.log" | grep -oE "[0-9.]+ s$" | cut -d' ' -f1 | cut -d. -f1)
  echo "GPU busy (mean utilization.gpu): whole run $(busy "$a" "$z") %, steady state (from $((a + ${c0:-0}))) $(busy "$((a + ${c0:-0}))" "$z") %" | tee -a "$S"
  awk -v a="$a" -v z="$z" '$1 >= a && $1 <= z' "$E/smi.txt" > "$L/timeline.txt"
  grep -E "^proof [0-9]+: |proofs, |proof: |stages: |verify_seal|Maximum resident|Elapsed|error" "$L/prove.log" | tee -a "$S"
  # LOAD_BENCH=1: the warm decoding rate of this parameter file (bench params_load, ~2 min).
  if [ "${LOAD_BENCH:-0}" = 1 ] && [ -x $F/params_load ]; then
    CUZK_BENCH_PARAMS_FILE=$pf t load_bench $F/params_load --bench
    grep -E "time:|thrpt:" "$L/load_bench.log" | head -2 | tee -a "$S"
  fi
  [ $rc -eq 0 ] && [ -s "$L/proof.bin" ] || { echo "no proof: verify steps skipped" | tee -a "$S"; continue; }
  t verify $F/cuzk verify "$C1/c1.json" --sector-num 7 --prover-id f01000 --params "$P" --proof "$L/proof.bin"
  cp "$L/proof.bin" "$L/bad.bin"
  b=$(od -An -tu1 -j 1000 -N1 "$L/proof.bin" | tr -d ' ')
  printf "\\x$(printf %02x $(( b ^ 1 )))" | dd of="$L/bad.bin" bs=1 seek=1000 conv=notrunc 2>/dev/null
  cmp -l "$L/proof.bin" "$L/bad.bin" | tee -a "$S"
  $F/cuzk verify "$C1/c1.json" --sector-num 7 --prover-id f01000 --params "$P" --proof "$L/bad.bin" \
    > "$L/verify-bad.log" 2>&1
  echo "flipped byte 1000: cuzk verify exit $? (51 = rejected)" | tee -a "$S"
  fi
  # E2E_CAPS="24GiB 16GiB": the same `prove --repeat R --jobs 2` (two GPU workers) with the
  # device capped at each size (CUZK_VRAM_LIMIT, a smaller card on this one), parameters warm in
  # the page cache; PCIe traffic from `nvidia-smi dmon -s t` (MB/s each second, summed).
  # E2E_BASE=BIN: the same uncapped with another cuzk build (the baseline, same lease).
  for cap in ${E2E_CAPS:-} ${E2E_BASE:+base}; do
    bin=$F/cuzk; lim=${cap%%+*}; envs=(); [ "$lim" != "$cap" ] && read -ra envs <<< "${E2E_BASE_ENV:-}"
    [ "$lim" != "$cap" ] && [ -n "${E2E_BASE_BIN:-}" ] && bin=$E2E_BASE_BIN
    if [ "$cap" = base ]; then
      bin=$E2E_BASE; lim=
      [ "$bin" = same ] && { bin=$F/cuzk; read -ra envs <<< "${E2E_BASE_ENV:-}"; }
    fi
    ( nvidia-smi dmon -s t -d 1 > "$L/dmon-$cap.txt" 2>&1 ) & DMON=$!
    a=$(date +%s)
    [ "$lim" != "$cap" ] && echo "== $cap: with ${envs[*]:-} ${E2E_BASE_BIN:+build $E2E_BASE_BIN}" | tee -a "$S"
    CUZK_VRAM_LIMIT=$lim RUST_LOG=warn,cuzk::prover::gpu=info,cuzk::engine=info t "prove-$cap" \
      env "${envs[@]}" timeout "${E2E_CAP_TIMEOUT:-900}" $TV $bin prove "$C1/c1-wrapper.json" --prover-id f01000 \
      --params "$P" --backend gpu --repeat "$repeat" --jobs 2 --out "$L/proof-$cap.bin"
    z=$(date +%s); kill $DMON 2>/dev/null
    c0=$(grep -oE "^proof 0: .* in [0-9.]+ s" "$L/prove-$cap.log" | grep -oE "[0-9.]+ s$" | cut -d' ' -f1 | cut -d. -f1)
    echo "== $cap: peak device memory $(peak "$a" "$z") MiB, GPU busy steady $(busy "$((a + ${c0:-0}))" "$z") %," \
      "PCIe MB (rx, tx) $(awk '$1 ~ /^[0-9]+$/ { r += $2; t += $3 } END { print r + 0, t + 0 }' "$L/dmon-$cap.txt")" | tee -a "$S"
    awk -v a="$a" -v z="$z" '$1 >= a && $1 <= z' "$E/smi.txt" > "$L/timeline-$cap.txt"
    grep -E "^proof [0-9]+: |proofs, |verify_seal|error" "$L/prove-$cap.log" | tee -a "$S"
    grep -oE "tier [a-z-]+[^ ,]*" "$L/prove-$cap.log" | sort | uniq -c | tee -a "$S"
    echo "H step on the CPU: $(grep -c "runs on the CPU" "$L/prove-$cap.log"), SpMV on the CPU: $(grep -c "SpMV on the CPU" "$L/prove-$cap.log")" | tee -a "$S"
  done
  for m in ${E2E_COLD:-}; do
    if drop; then echo "cold proof, CUZK_H_AHEAD=$m: page cache dropped" | tee -a "$S"
    else echo "cold proof, CUZK_H_AHEAD=$m: page cache NOT dropped (slow disk)" | tee -a "$S"; fi
    a=$(date +%s)
    CUZK_H_AHEAD=$m RUST_LOG=warn,cuzk::prover::gpu=info,cuzk::engine=info,cuzk::srs=debug t "cold-$m" \
      timeout 300 $TV $F/cuzk prove "$C1/c1-wrapper.json" --prover-id f01000 --params "$P" --backend gpu \
      --out "$L/proof-$m.bin"
    z=$(date +%s)
    echo "cold-$m: peak device memory $(peak "$a" "$z") MiB, peak host memory in use $(hpeak "$a" "$z") GiB, GPU busy $(busy "$a" "$z") %" | tee -a "$S"
    awk -v a="$a" -v z="$z" '$1 >= a && $1 <= z' "$E/smi.txt" > "$L/timeline-cold-$m.txt"
    grep -E "^proof [0-9]+: |proofs, |stages: |verify_seal|SpMV on the CPU|error" "$L/cold-$m.log" | head -20 | tee -a "$S"
  done
done
