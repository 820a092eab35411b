# shellcheck shell=bash
# The sanitizer builds of the emulated CUDA tests (emu.mk builds them), what of each the full
# tier runs, and what of each program it runs in the reverse thread order with deferred work
# (TAG emu-rev-defer, the emulated build): test/run_tests.sh --all sources this. Declarations only:
#   san_build TAG FOLDER TARGET WHAT [VAR=VALUE...]  a build in ${BUILD}FOLDER/test (make TARGET),
#       its programs' lines renamed "PASS TAG:name", run with these variables
#   san_cuda_env TAG WHAT VAR=VALUE...  its test_cuda* programs (not the self-tests) with these too
#   san_only TAG PROGRAM NAME...  PROGRAM runs only its tests whose name contains a NAME
#   san_never TAG PROGRAM         PROGRAM does not run in this build (nor is built for it)
# Every program not named here runs whole.
# A subset leaves out what another test of the same run covers: every kernel stays tested in each
# order and sanitizer. The model tests repeat the kernels once per position scheme: learned's and
# crope's cover them (sinusoidal runs learned's kernels with a fixed table, rope and xpos crope's
# without its expand and fold, nope and ALiBi the attention that the kernel tests run with and
# without ALiBi's bias), crope's scalings whose s follows the length the tables rewritten in place.

# The reverse thread order with the streams' work deferred (the forward order, make test, runs
# every test): a kernel that needs the forward order, or host code reading a result or refilling
# a buffer before the stream is waited for. ASan's runs of the CUDA tests take this order (below),
# so its own run holds only what ASan's subsets leave out. No CPU-only test (flash_cpu_, config).
san_never emu-rev-defer test_cuda
san_never emu-rev-defer test_cuda_step
san_never emu-rev-defer test_cuda_bf16
san_only emu-rev-defer test_cuda_flash deterministic_tf32 deterministic_bf16
san_only emu-rev-defer test_cuda_graph column_sums _crope
san_only emu-rev-defer test_cuda_generate _learned _crope

# AddressSanitizer and UBSan: out-of-bounds and misaligned accesses inside a kernel, and in the
# host code, built with it too; the CUDA tests in the reverse order with deferred work. The flash
# tests leave out the bf16 and tf32 determinism tests (the kernels of forward_backward_bf16, a
# minute here); test_cuda_graph runs learned's model tests and crope's with the dynamic scaling
# (its tables made again under a graph), its kernels being test_cuda_step's; test_cuda_generate
# its kernels' tests and two schemes' greedy runs.
san_build asan _emu_asan emu-asan-tests sanitizer
san_cuda_env asan "reverse order, deferred work" CUDA_EMU_ORDER=reverse CUDA_EMU_DEFER=1
san_only asan test_cuda cuda_encoder cuda_reduction cuda_layernorm cuda_matmul cuda_rope cuda_crope cuda_attention \
  cuda_gelu cuda_residual cuda_softmax cuda_adamw cuda_sum_squares cuda_oom_message _learned_ _crope_ mlp_hidden \
  paper_shape_crope
san_only asan test_cuda_step classifier profile copy_ints bf16 _learned _crope
san_only asan test_cuda_bf16 cuda_bf16_round cuda_bf16_encoder cuda_bf16_layernorm cuda_bf16_matmul cuda_bf16_rope \
  cuda_bf16_crope_expand cuda_bf16_gelu_residual cuda_bf16_classifier_loss cuda_bf16_cublas_attention \
  cuda_bf16_adamw_copy cuda_bf16_memory_tiles _learned _crope
san_only asan test_cuda_flash cpu_ config forward_backward head_sizes cuda_flash_alibi deterministic_fp32 unaligned \
  bad_head_size cuda_flash_memory cuda_flash_model_learned cuda_flash_model_crope eval_longer_crope
san_only asan test_cuda_graph sum_squares clip_grad capture_refuses scratch_growth tiles_rope call_order _learned \
  crope_dynamic
san_only asan test_cuda_generate attention_decode cuda_generate_greedy_rope cuda_generate_greedy_alibi

# The race detector: any shared or global memory access no barrier or __syncwarp orders against
# another thread's write (within a kernel: the kernel tests run each one). For time: test_cuda's
# kernel tests and the TF32 model, test_cuda_flash every head size and precision (with ALiBi's
# bias too), test_cuda_step its kernels' tests, the bf16 step over vocabulary tiles (the bf16
# model: the chunked classifier's kernels are test_cuda_bf16's) and crope's fp32 model tests,
# test_cuda_bf16 its kernels' tests and crope's model tests (test_cuda_bf16's tiled-classifier
# memory test runs test_cuda_step's bf16 tiles), test_cuda_generate its kernels' tests, and
# test_cuda_graph not at all (its kernels are test_cuda_step's); of the self-tests the races it
# must see and the emulator's machinery it must see none in (the kernels of every order, mma.sync,
# ldmatrix, shuffles, graphs, deferred streams), not the error reports the other builds check the
# same. One OpenMP thread, as the host's
# OpenBLAS threads are not what it checks, and no second's sleep at each exit (ThreadSanitizer's
# default atexit_sleep_ms: the self-tests' forked children slept 35 s in all).
san_build tsan _emu_tsan emu-tsan-tests "race detector" \
  OMP_NUM_THREADS=1 "TSAN_OPTIONS=atexit_sleep_ms=0 ${TSAN_OPTIONS:-}"
san_only tsan test_cuda cuda_encoder cuda_layernorm cuda_rope cuda_crope cuda_attention cuda_gelu cuda_residual \
  cuda_softmax cuda_adamw cuda_sum_squares cuda_tf32_model_learned_loss
san_only tsan test_emu_selftest correct_kernel mma_sync_ptx mma_tf32_ptx ldmatrix_ptx partial_warp_shuffle graph_replays \
  defer_graph defer_stream capture_fork race
san_only tsan test_cuda_flash forward_backward head_sizes cuda_flash_alibi unaligned
san_only tsan test_cuda_step classifier profile copy_ints bf16_tiles _crope
san_only tsan test_cuda_bf16 cuda_bf16_round cuda_bf16_encoder cuda_bf16_layernorm cuda_bf16_matmul cuda_bf16_rope \
  cuda_bf16_crope_expand cuda_bf16_gelu_residual cuda_bf16_classifier_loss cuda_bf16_cublas_attention \
  cuda_bf16_adamw_copy _crope
san_only tsan test_cuda_generate attention_decode
san_never tsan test_cuda_graph
