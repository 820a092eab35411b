# shellcheck shell=bash
# The sanitizer builds of the emulated CUDA tests (emu.mk builds them) and what of each the full
# tier runs: test/run_tests.sh --all sources this. Declarations only:
#   san_build TAG FOLDER TARGET WHAT [VAR=VALUE...]  a build in ${BUILD}FOLDER/test (make TARGET),
#       its programs' lines renamed "PASS TAG:name", run with these variables
#   san_only TAG PROGRAM NAME...  PROGRAM runs only its tests whose name contains a NAME
#   san_never TAG PROGRAM         PROGRAM does not run in this build
# The self-tests and every test_cuda* program not named here run whole.

# AddressSanitizer and UBSan: out-of-bounds and misaligned accesses inside a kernel. The flash
# tests leave out the bf16 determinism test (the kernels of forward_backward_bf16, a minute
# there); test_cuda_graph runs learned's and crope's model tests (sinusoidal runs learned's
# kernels with a fixed table, rope crope's without its expand and fold); test_cuda_generate its
# kernels' tests and two schemes' greedy runs (the others run the same kernels).
san_build asan _emu_asan emu-asan-tests sanitizer
san_only asan test_cuda_flash cpu_ config forward_backward head_sizes alibi deterministic_fp32 unaligned \
  bad_head_size memory model eval_longer
san_only asan test_cuda_graph sum_squares clip_grad capture_refuses scratch_growth tiles_rope call_order _learned _crope
san_only asan test_cuda_generate attention_decode greedy_200_rope greedy_200_alibi

# The race detector: any shared or global memory access no barrier or __syncwarp orders against
# another thread's write. For time: test_cuda's kernel tests and a model per precision,
# test_cuda_flash every head size and precision (with ALiBi's bias too), test_cuda_step and
# test_cuda_bf16 learned's and crope's model tests (as above; test_cuda_bf16's tiled-classifier
# memory test runs test_cuda_step's bf16 tiles), test_cuda_generate its kernels' tests, and
# test_cuda_graph not at all (its kernels are test_cuda_step's). One OpenMP thread, as the host's OpenBLAS threads
# are not what it checks, and no second's sleep at each exit (ThreadSanitizer's default
# atexit_sleep_ms: the self-tests' forked children slept 35 s in all).
san_build tsan _emu_tsan emu-tsan-tests "race detector" \
  OMP_NUM_THREADS=1 "TSAN_OPTIONS=atexit_sleep_ms=0 ${TSAN_OPTIONS:-}"
san_only tsan test_cuda cuda_encoder cuda_layernorm cuda_rope cuda_crope cuda_attention cuda_gelu cuda_residual \
  cuda_softmax cuda_adamw cuda_sum_squares cuda_model_crope_loss cuda_tf32_model_learned_loss cuda_bf16_model_rope_loss
san_only tsan test_cuda_flash forward_backward head_sizes alibi unaligned
san_only tsan test_cuda_step classifier profile copy_ints bf16 _learned _crope
san_only tsan test_cuda_bf16 cuda_bf16_round cuda_bf16_encoder cuda_bf16_layernorm cuda_bf16_matmul cuda_bf16_rope \
  cuda_bf16_crope_expand cuda_bf16_gelu_residual cuda_bf16_classifier_loss cuda_bf16_cublas_attention \
  cuda_bf16_adamw_copy _learned _crope
san_only tsan test_cuda_generate attention_decode
san_never tsan test_cuda_graph
