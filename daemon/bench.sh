#!/bin/bash
# Daemon throughput vs `cuzk prove --jobs` on one machine (the H200 run of issue 28):
#   1. cuzk prove C1 --repeat R --jobs J          (proof 0 cold and alone, then R − 1, J in flight)
#   2. cuzk serve --jobs J --preload porep-<size>  and  bench_client --proofs R --clients C
#      (C concurrent gRPC clients looping Prove; proof 0 alone, then the same steady state)
# and prints both steady states (seconds per proof) and their ratio (≤ 1.05 is the target).
#
# Usage: daemon/bench.sh C1_WRAPPER PARAMS_DIR [R] [J] [C]
#   PROVE_STEADY  skip step 1 and compare against this (s per proof, measured on the same files)
#   BACKEND gpu (default) or cpu (a smoke run without a GPU)
#   F   directory holding `cuzk` (built with --features cuda) and `bench_client` (default
#       target/release and target/release/examples)
#   C1_WRAPPER  e.g. the c1-wrapper.json of `cuzk gen-c1 --sector-size 32GiB --sector-num 7`
#   Defaults: R=9, J=2, C=J+1 (one more client than jobs, so a job is always queued, as behind
#   Curio). Prover id f01000 (gen-c1's default). Logs in ${E:-/tmp/daemon-bench}.
set -u
C1=$1; P=$2; R=${3:-9}; J=${4:-2}; C=${5:-$((J + 1))}
F=${F:-target/release}; BC=${BC:-$F/bench_client}; [ -x "$BC" ] || BC=$F/examples/bench_client
E=${E:-/tmp/daemon-bench}; mkdir -p "$E"
ADDR=127.0.0.1:${PORT:-9820}
export RUST_BACKTRACE=1
size=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["SectorSize"]; print({2048:"2k",8<<20:"8m",512<<20:"512m",32<<30:"32g",64<<30:"64g"}[s])' "$C1")

if [ -n "${PROVE_STEADY:-}" ]; then
  # The reference steady state was measured already (e2e's `cuzk prove --jobs J` on these files).
  a=$PROVE_STEADY; echo "== cuzk prove: steady state $a s per proof (given)"
else
echo "== cuzk prove --repeat $R --jobs $J"
RUST_LOG=warn "$F/cuzk" prove "$C1" --prover-id f01000 --params "$P" --backend "${BACKEND:-gpu}" \
  --repeat "$R" --jobs "$J" --out "$E/prove.bin" 2> "$E/prove.log" >/dev/null
rc=$?; grep -E "proofs, |error" "$E/prove.log"; [ $rc -eq 0 ] || { echo "cuzk prove failed ($rc)"; exit 1; }
a=$(sed -nE 's/.*steady state \(proofs 1 to [0-9]+\) ([0-9.]+) s per proof.*/\1/p' "$E/prove.log")
fi

echo "== cuzk serve --jobs $J, bench_client --proofs $R --clients $C"
RUST_LOG=info "$F/cuzk" serve --listen "$ADDR" --params "$P" --backend "${BACKEND:-gpu}" --jobs "$J" \
  --preload "porep-$size" > "$E/serve.out" 2> "$E/serve.log" &
SERVE=$!
trap 'kill -TERM $SERVE 2>/dev/null' EXIT
for _ in $(seq 600); do grep -q "listening on" "$E/serve.out" && break
  kill -0 $SERVE 2>/dev/null || { echo "cuzk serve exited:"; tail -20 "$E/serve.log"; exit 1; }; sleep 1; done
"$BC" --addr "$ADDR" --c1 "$C1" --miner-id 1000 --proofs "$R" --clients "$C" \
  > "$E/bench.out" 2> "$E/bench.log"
rc=$?; cat "$E/bench.out"; [ $rc -eq 0 ] || { echo "bench_client failed ($rc):"; tail -5 "$E/bench.log"; exit 1; }
kill -TERM $SERVE; wait $SERVE; trap - EXIT
tail -1 "$E/serve.out"
b=$(sed -nE 's/.*steady state \(proofs 1 to [0-9]+\) ([0-9.]+) s per proof.*/\1/p' "$E/bench.out")
python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print(f'steady state: cuzk prove {a:.2f} s/proof, daemon {b:.2f} s/proof, daemon/prove = {b/a:.3f} ({\"within\" if b <= 1.05*a else \"NOT within\"} 5 %)')" "$a" "$b"
