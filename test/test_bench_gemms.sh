#!/usr/bin/env bash
# build/test/bench_gemms, the GEMM-only time of a training step that make bench prints beside the
# trainer's (test/bench_gemms.cpp): it notes exactly the products the model makes (their count
# and FLOPs against the model's formula, attention's included, with one classifier chunk and with
# four), times them, times the machine's own large GEMM (--peak), and refuses bad flags with one
# error line.
cd "$(dirname "$0")/.." || exit 1
. test/testlib.sh
BUILD=${BUILD:-build}
BENCH=${BENCH_GEMMS:-$BUILD/test/bench_gemms}
if [ ! -x "$BENCH" ]; then
  fail bench_gemms_built "$BENCH not found (make builds it)"
  finish
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# a tiny model: L layers, C channels, H heads of D, V = 64 (padded to 128 columns: one tile of the
# LM head per chunk), B x T = 2 x 8 = 16 rows (one block of attention's query rows per head)
L=2 C=16 H=2 D=8 B=2 T=8 N=16 Vp=128
model=(--n_layer $L --n_head $H --n_embd $C --vocab_size 64 --batch_size $B --seq_len $T --train_data "$tmp")

# check_products NAME CHUNKS FLAGS...: 12 products per layer (4 forward, 8 backward), 3 per
# classifier chunk's tile, and per layer and head attention's 7 (forward: scores, times v;
# backward: the scores again and 4); 2 N C (3C + C + 4C + 4C) FLOPs per layer and pass, 2 N C Vp
# per head pass, 2 T T D per attention product
check_products() {
  local name=$1 chunks=$2; shift 2
  local out
  if ! out=$("$BENCH" --reps 2 "${model[@]}" "$@" 2>&1); then fail "$name" "$out"; return; fi
  local want_calls=$((12 * L + 3 * chunks + 7 * L * B * H))
  local want_gflop
  want_gflop=$(awk -v n=$N -v c=$C -v l=$L -v vp=$Vp -v bh=$((B * H)) -v t=$T -v d=$D \
    'BEGIN { printf "%.6g", (3 * l * 2 * n * c * 12 * c + 3 * 2 * n * c * vp + 7 * l * bh * 2 * t * t * d) * 1e-9 }')
  local line
  line=$(tail -n 1 <<<"$out")
  if [[ $line =~ ^gemm_ms\ [0-9.]+\ calls\ ([0-9]+)\ gflop\ ([0-9.e-]+)\ in_step_ms\ [0-9.]+$ ]] &&
     [ "${BASH_REMATCH[1]}" = "$want_calls" ] && [ "${BASH_REMATCH[2]}" = "$want_gflop" ]; then
    pass "$name"
  else
    fail "$name" "expected $want_calls calls and $want_gflop GFLOP, got: $line"
  fi
}
check_products bench_gemms_products 1
check_products bench_gemms_products_4_chunks 4 --classifier_chunk 4
for pos in learned crope; do check_products "bench_gemms_products_$pos" 1 --pos $pos; done

# --shapes: one row per distinct product; their calls add up to the total
out=$("$BENCH" --reps 1 --shapes "${model[@]}" 2>&1)
sum=$(awk -F'|' '$2 ~ /^ [NT] $/ { s += $8 } END { print s }' <<<"$out")
if [ "$sum" = "$((12 * L + 3 + 7 * L * B * H))" ]; then pass bench_gemms_shapes; else fail bench_gemms_shapes "calls add up to '$sum' in: $out"; fi

expect_fail bench_gemms_reps_needs_value "error: --reps needs a value" -- "$BENCH" "${model[@]}" --reps
expect_fail bench_gemms_bad_reps "error: --reps: expected an integer" -- "$BENCH" --reps 0 "${model[@]}"
expect_fail bench_gemms_unknown_flag "^error: .*bogus" -- "$BENCH" --bogus 1 "${model[@]}"
expect_fail bench_gemms_needs_train_data "^error: train_data is not set" -- "$BENCH" --n_layer 1
# --peak: the machine's own GEMM rate, a positive GFLOP/s; it takes no model
out=$("$BENCH" --peak --reps 1 2>&1)
if [[ $(tail -n 1 <<<"$out") =~ ^sgemm_gflops\ [0-9]+\.[0-9]$ ]] && [[ ! $(tail -n 1 <<<"$out") =~ \ 0\.0$ ]]; then
  pass bench_gemms_peak
else fail bench_gemms_peak "$out"; fi
expect_only_error bench_gemms_peak_no_model "^error: --peak takes no model flags, got --n_layer$" -- \
  "$BENCH" --peak --n_layer 2
finish
