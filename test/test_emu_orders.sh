#!/usr/bin/env bash
# The reductions that cross blocks give the same bits whatever order the blocks and threads run
# in: test_cuda's cuda_reduction_bits (column sums, long embedding runs) under the emulation's
# forward, reverse and random orders (two seeds), each printing a digest of its results' bits;
# every digest must be the forward one's.
cd "$(dirname "$0")/.." || exit 1
. test/testlib.sh
tc=${EMU_BUILD:-${BUILD:-build}_emu}/test/test_cuda
if [ ! -x "$tc" ]; then
  skip emu_reduction_bits_orders "$tc not built (make emu builds it)"
  finish
fi
digest() { env "$@" "$tc" cuda_reduction_bits 2>&1 | sed -n 's/^# cuda_reduction_bits digest \([0-9a-f]*\)$/\1/p'; }
want=$(digest CUDA_EMU_ORDER=forward)
why=""
[ -n "$want" ] || why="no digest in the forward order: $("$tc" cuda_reduction_bits 2>&1 | tail -n 2); "
for o in "CUDA_EMU_ORDER=reverse CUDA_EMU_DEFER=1" "CUDA_EMU_ORDER=random CUDA_EMU_SEED=1" "CUDA_EMU_ORDER=random CUDA_EMU_SEED=2"; do
  # shellcheck disable=SC2086
  got=$(digest $o)
  [ -n "$want" ] && [ "$got" != "$want" ] && why+="$o: digest '$got', forward '$want'; "
done
if [ -z "$why" ]; then pass emu_reduction_bits_orders; else fail emu_reduction_bits_orders "$why"; fi
finish
