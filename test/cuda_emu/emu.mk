# The CPU emulation of CUDA (README.md here), included by the Makefile. With NVCC=nvcc-emu the
# Makefile's rules compile the unchanged cuda/*.cu with g++; the emulator's runtime, cuBLAS, cub
# and NCCL (over MPI) stand in for the libraries, and only the binaries that use CUDA are built.
# EMU_SAN / EMU_KSAN / EMU_RT_FLAGS: the sanitizer builds' flags (below); what of each build
# make test-all runs: sanitizers.sh.
EMU_NVCC  := $(CURDIR)/test/cuda_emu/nvcc-emu
EMU_BUILD ?= $(BUILD)_emu
.PHONY: emu emu-asan emu-asan-selftest emu-asan-tests emu-tsan-tests

ifneq ($(EMU),)
EMU_OBJ   := $(patsubst test/cuda_emu/src/%.cpp,$(BUILD)/cuda_emu/%.o,$(filter-out %/cublas.cpp,$(wildcard test/cuda_emu/src/*.cpp)))
# The cuBLAS stand-in is a library, loaded on the first GEMM as cuBLAS is (cuda/matmul.cu), its
# calls into the emulator resolved against the program (-rdynamic). The programs find it in
# $(BUILD)/cuda_emu through an rpath (from $(BUILD)/train and $(BUILD)/test/*): DT_RPATH, which
# comes before LD_LIBRARY_PATH, so that a CUDA folder there never puts the real cuBLAS in its place.
EMU_CUBLAS := $(BUILD)/cuda_emu/libcublas.so.13
NVCCFLAGS ?= -O2
NVCCFLAGS += -std=c++17 -MMD -MP -Isrc -Icuda -Xcompiler -Wall,-Wextra $(EMU_SAN) $(EMU_KSAN)
NVCCFLAGS += $(if $(HAVE_MPI),-DHAVE_NCCL)
CXXFLAGS  += -DHAVE_CUDA $(EMU_SAN)
LDLIBS    += $(EMU_SAN) $(EMU_KSAN) -rdynamic -Wl,--disable-new-dtags,-rpath,'$$ORIGIN/cuda_emu:$$ORIGIN/../cuda_emu'
CUDA_OBJ  := $(patsubst cuda/%.cu,$(BUILD)/cuda/%.o,$(wildcard cuda/*.cu)) $(EMU_OBJ)
PROGRAM_OBJ := $(patsubst cuda/%.cpp,$(HOST_BUILD)/cuda/%.o,$(wildcard cuda/*.cpp))
TESTS     := $(patsubst test/%.cpp,$(BUILD)/test/%,$(wildcard test/test_cuda*.cpp)) $(BUILD)/test/test_emu_selftest

$(BUILD)/cuda/%.o: $(EMU_NVCC)
all: $(EMU_CUBLAS)
$(BUILD)/train $(BUILD)/sample $(TESTS): | $(EMU_CUBLAS)
$(BUILD)/cuda_emu/cublas.o: CXXFLAGS += -fPIC
$(EMU_CUBLAS): $(BUILD)/cuda_emu/cublas.o
	$(CXX) -shared -Wl,-soname,$(notdir $@) $< -o $@ $(LDLIBS)
$(BUILD)/test/cuda_testlib.o: $(EMU_NVCC)
$(BUILD)/cuda_emu/%.o: test/cuda_emu/src/%.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) $(EMU_RT_FLAGS) -Itest/cuda_emu/include -c $< -o $@

# the emulator's self-tests: kernels with known defects (test_emu_selftest.cu)
$(BUILD)/test/test_emu_selftest.o: test/cuda_emu/test_emu_selftest.cu $(EMU_NVCC)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(BUILD)/test/test_emu_selftest: $(BUILD)/test/test_emu_selftest.o $(EMU_OBJ) $(EMU_CUBLAS)
	$(CXX) $^ -o $@ $(LDLIBS)
endif

# The host code (src/*.cpp, test/test_cuda*.cpp, cuda/programs.cpp) includes no CUDA header: it compiles the same
# for the real backend and the emulated one. So where nvcc builds the real one into $(BUILD), the
# emulated builds link $(BUILD)'s host objects, else the emulated build's own; the race
# detector's build links them too, as it leaves the host code uninstrumented.
EMU_HOST     := $(if $(EMU),$(HOST_BUILD),$(if $(NVCC),$(BUILD),$(EMU_BUILD)))
EMU_HOST_OBJ := $(patsubst %.cpp,$(BUILD)/%.o,$(wildcard src/*.cpp test/test_cuda*.cpp cuda/*.cpp))
EMU_AFTER    := $(if $(filter $(BUILD),$(EMU_HOST)),$(EMU_HOST_OBJ),emu)
emu: $(if $(filter $(BUILD),$(EMU_HOST)),$(EMU_HOST_OBJ))
	+@$(MAKE) --no-print-directory BUILD=$(EMU_BUILD) NVCC=$(EMU_NVCC) HOST_BUILD=$(EMU_HOST) all

# AddressSanitizer and UBSan over the kernels and the emulator, into $(BUILD)_emu_asan/. The
# sanitizer builds keep line tables only (-g1): their reports name file and line, and they
# compile in two thirds of the time -g takes. The host code (src/, test/) is built without
# optimisation, in half the time of -O1: the tests spend their time in the kernels and the
# emulator (-O1; the flash tests' host code at -O0: 3 % slower).
ASAN_MAKE = NVCCFLAGS="-O1 -g1" CXXFLAGS="-O0 -g1 -fno-omit-frame-pointer" EMU_RT_FLAGS=-O1 $(MAKE) \
	  --no-print-directory BUILD=$(BUILD)_emu_asan NVCC=$(EMU_NVCC) \
	  EMU_SAN="-fsanitize=address,undefined -fno-sanitize-recover=all"
emu-asan:
	+@$(ASAN_MAKE) all
# only the self-tests (their out-of-bounds and misaligned-access cases need it): the emulator
# and one .cu, not the whole backend
emu-asan-selftest:
	+@$(ASAN_MAKE) $(BUILD)_emu_asan/test/test_emu_selftest
# The CUDA test programs a sanitizer build runs (san_tests TAG FOLDER): those sanitizers.sh does
# not declare san_never for TAG (built for nothing else).
san_tests = $(patsubst test/%.cpp,$(BUILD)$(2)/test/%,$(filter-out \
  $(patsubst %,test/%.cpp,$(shell sed -n 's/^san_never $(1) //p' test/cuda_emu/sanitizers.sh)),$(wildcard test/test_cuda*.cpp)))
# the self-tests and the CUDA tests (make test-all runs them as asan:NAME): out-of-bounds and
# misaligned accesses inside every kernel of cuda/, at the exact line
emu-asan-tests:
	+@$(ASAN_MAKE) $(BUILD)_emu_asan/test/test_emu_selftest $(call san_tests,asan,_emu_asan)

# The race detector (make test-all runs it as tsan:NAME): the kernels' code (EMU_KSAN) built with
# -fsanitize=thread, the emulator told what orders CUDA threads (EMU_RT_FLAGS) and itself not
# instrumented, the host code neither; the self-tests and the CUDA tests.
TSAN_MAKE = NVCCFLAGS="-O1 -g1" CXXFLAGS="-O2 -g1" $(MAKE) --no-print-directory BUILD=$(BUILD)_emu_tsan \
	  NVCC=$(EMU_NVCC) HOST_BUILD=$(EMU_HOST) EMU_KSAN=-fsanitize=thread EMU_RT_FLAGS=-DCUDA_EMU_TSAN
emu-tsan-tests: $(EMU_AFTER)
	+@$(TSAN_MAKE) $(BUILD)_emu_tsan/test/test_emu_selftest $(call san_tests,tsan,_emu_tsan)
