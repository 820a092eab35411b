# GPT-2 trainer: learned, sinusoidal, RoPE or CRoPE positions; CPU reference
# backend (OpenBLAS + OpenMP) and, when nvcc is found, the CUDA backend.
#   make          build build/train and the test binaries (installs missing Debian packages)
#   make test     build and run every test; last line "N passed, N failed, N skipped"
#                 (the CUDA tests also run on the CPU under emulation: build_emu/, below)
#   make emu      the CUDA backend built for the CPU emulation (test/cuda_emu) into build_emu/
#   make emu-asan the same with -fsanitize=address,undefined, into build_emu_asan/
#   make emu-tsan-tests  the race detector over the emulated kernels (-fsanitize=thread), into
#                 build_emu_tsan/
#   make lab      the kernel lab (cuda/lab/: attention, classifier, layernorm, adamw; every
#                 version of a kernel checked against the CPU and timed); make lab-emu builds
#                 it for the emulation (checks only; make test runs them there)
#   make run      the main job: the synthetic position task, learned vs rope vs crope
#   make bench    CPU training throughput table (PyTorch beside it when python3-torch is installed)
#   make deps     install the missing Debian packages (make does it once by itself)
#   make clean

comma    := ,
CXX      ?= g++
NVCC     ?= $(firstword $(wildcard /usr/local/cuda/bin/nvcc) $(shell command -v nvcc 2>/dev/null))
PYTHON   ?= $(shell scripts/pick_python.sh)
# Output folder: every object and binary goes under it (tests run what it holds).
BUILD    ?= build
CXXFLAGS ?= -O3 -march=native
CXXFLAGS += -std=c++17 -fopenmp -fno-math-errno -Wall -Wextra -MMD -MP -Isrc -Icuda
# OpenBLAS built on OpenMP shares the trainer's OpenMP threads; the pthreads
# build's threads would compete with them for the cores (about 1.5x slower here).
OPENBLAS_OMP := $(dir $(firstword $(wildcard /usr/lib/*/openblas-openmp/libopenblas.so)))
OPENBLAS_LIB := $(if $(OPENBLAS_OMP),-L$(OPENBLAS_OMP) -Wl$(comma)-rpath$(comma)$(OPENBLAS_OMP))
LDLIBS   := $(OPENBLAS_LIB) -lopenblas -fopenmp
# Without cblas.h (a GPU machine that cannot install packages) the CPU backend
# falls back to a plain-loop GEMM; extra include folders come in through CPPFLAGS.
ifeq ($(shell echo '\#include <cblas.h>' | $(CXX) $(CPPFLAGS) -E -x c++ - >/dev/null 2>&1 && echo yes),)
CXXFLAGS += -DNO_CBLAS
LDLIBS   := -fopenmp
endif
# SLEEF (Debian libsleef-dev): the CPU ops' vectorised exp (src/ops/vec.h). Without
# sleef.h, or with SLEEF=0, they take libm's one element at a time (slower; test/test_no_sleef.sh).
# (printf's \043 is the '#': GNU Make 4.3 passes a '\#' in $(shell) on to the shell as it is.)
SLEEF    ?= $(if $(shell printf '\043include <sleef.h>\n' | $(CXX) $(CPPFLAGS) -E -x c++ - >/dev/null 2>&1 && echo yes),1,0)
ifeq ($(SLEEF),1)
CXXFLAGS += -DHAVE_SLEEF
LDLIBS   += -lsleef
endif
CXXFLAGS += $(CPPFLAGS)
# MPI (Debian's libopenmpi-dev): data-parallel training under mpirun (src/dist.h). Without it
# the trainer is built for one process, as it runs without mpirun anyway.
MPI_LDLIBS := $(shell mpicc --showme:link 2>/dev/null)
ifneq ($(MPI_LDLIBS),)
HAVE_MPI := yes
CXXFLAGS += -DHAVE_MPI -DOMPI_SKIP_MPICXX $(shell mpicc --showme:compile)
LDLIBS   += $(MPI_LDLIBS)
endif
ifeq ($(MAKELEVEL),0)
$(info MPI: $(if $(HAVE_MPI),found (mpicc): multi-process training with mpirun,not found: one process only (install libopenmpi-dev for mpirun)))
endif

MAINS    := src/train.cpp src/sample.cpp
TESTS    := $(patsubst test/%.cpp,$(BUILD)/test/%,$(wildcard test/test_*.cpp))
# CPU emulation of CUDA (test/cuda_emu/README.md): the same rules with NVCC=nvcc-emu compile
# the unchanged cuda/*.cu with g++; the emulator's runtime, cuBLAS and cub stand in for the
# libraries, and only the binaries that use CUDA are built. EMU_BUILD is its output folder.
EMU_NVCC  := $(CURDIR)/test/cuda_emu/nvcc-emu
EMU_BUILD ?= $(BUILD)_emu
EMU       := $(filter nvcc-emu,$(notdir $(NVCC)))
ifneq ($(EMU),)
EMU_OBJ   := $(patsubst test/cuda_emu/src/%.cpp,$(BUILD)/cuda_emu/%.o,$(wildcard test/cuda_emu/src/*.cpp))
NVCCFLAGS ?= -O2
NVCCFLAGS += -std=c++17 -MMD -MP -Isrc -Icuda -Xcompiler -Wall,-Wextra $(EMU_SAN) $(EMU_KSAN)
CXXFLAGS  += -DHAVE_CUDA $(EMU_SAN)
LDLIBS    += $(EMU_SAN) $(EMU_KSAN)
CUDA_OBJ  := $(patsubst cuda/%.cu,$(BUILD)/cuda/%.o,$(wildcard cuda/*.cu)) $(EMU_OBJ)
TESTS     := $(patsubst test/%.cpp,$(BUILD)/test/%,$(wildcard test/test_cuda*.cpp)) $(BUILD)/test/test_emu_selftest
else ifneq ($(NVCC),)
CUDA_HOME := $(patsubst %/bin/nvcc,%,$(NVCC))
# sm_80 and sm_90 machine code, plus PTX for newer cards
NVCCFLAGS ?= -O3 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
             -gencode arch=compute_90,code=compute_90
NVCCFLAGS += -std=c++17 -MMD -MP -Isrc -Icuda -Xcompiler -Wall,-Wextra
CXXFLAGS  += -DHAVE_CUDA -I$(CUDA_HOME)/include
CUDA_OBJ  := $(patsubst cuda/%.cu,$(BUILD)/cuda/%.o,$(wildcard cuda/*.cu))
LDLIBS    += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart
endif

# NCCL, the CUDA backend's collectives across ranks (cuda/nccl.cu), with MPI to launch: the
# toolkit's nccl.h, or under the emulation its stand-in over MPI (test/cuda_emu/src/nccl.cpp)
ifneq ($(HAVE_MPI),)
ifneq ($(EMU),)
NVCCFLAGS += -DHAVE_NCCL
else ifneq ($(and $(NVCC),$(wildcard $(CUDA_HOME)/include/nccl.h)),)
NVCCFLAGS += -DHAVE_NCCL
LDLIBS    += -lnccl
endif
endif

BINS     := $(patsubst src/%.cpp,$(BUILD)/%,$(MAINS))
LIB_OBJ  := $(patsubst src/%.cpp,$(BUILD)/src/%.o,$(filter-out $(MAINS),$(wildcard src/*.cpp)))

.PHONY: all test run bench deps clean emu emu-asan emu-asan-selftest emu-asan-tests emu-tsan-tests lab lab-emu
.SECONDARY:  # keep the objects make would see as intermediate
all: $(BUILD)/.deps $(BINS) $(TESTS)

$(BUILD)/.deps: scripts/install_deps.sh
	@scripts/install_deps.sh
	@mkdir -p $(BUILD) && touch $@

$(BUILD)/src/%.o: src/%.cpp | $(BUILD)/.deps
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -c $< -o $@

$(BUILD)/test/%.o: test/%.cpp | $(BUILD)/.deps
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -c $< -o $@

$(BUILD)/cuda/%.o: cuda/%.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(BINS): $(BUILD)/%: $(BUILD)/src/%.o $(LIB_OBJ) $(CUDA_OBJ)
	$(CXX) $^ -o $@ $(LDLIBS)

$(BUILD)/test/%: $(BUILD)/test/%.o $(LIB_OBJ) $(CUDA_OBJ)
	$(CXX) $^ -o $@ $(LDLIBS)

# kernel lab: one program per kernel family (cuda/lab/*.cu), linked as the tests are
LABS := $(patsubst cuda/lab/%.cu,$(BUILD)/lab/%,$(wildcard cuda/lab/*.cu))
lab: $(BUILD)/.deps $(if $(NVCC),$(LABS))
	@$(if $(NVCC),,echo "error: make lab needs nvcc (or make lab-emu)" && exit 1)

lab-emu:
	@$(MAKE) --no-print-directory BUILD=$(EMU_BUILD) NVCC=$(EMU_NVCC) lab

$(BUILD)/lab/%.o: cuda/lab/%.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -Xcompiler -fopenmp -c $< -o $@  # the CPU reference is OpenMP

$(BUILD)/lab/%: $(BUILD)/lab/%.o $(LIB_OBJ) $(CUDA_OBJ)
	$(CXX) $^ -o $@ $(LDLIBS)

ifneq ($(EMU),)
$(BUILD)/cuda/%.o: $(EMU_NVCC)
$(BUILD)/cuda_emu/%.o: test/cuda_emu/src/%.cpp | $(BUILD)/.deps
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) $(EMU_RT_FLAGS) -Itest/cuda_emu/include -c $< -o $@

# the emulator's self-tests: kernels with known defects (test/cuda_emu/test_emu_selftest.cu)
$(BUILD)/test/test_emu_selftest.o: test/cuda_emu/test_emu_selftest.cu $(EMU_NVCC)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(BUILD)/test/test_emu_selftest: $(BUILD)/test/test_emu_selftest.o $(EMU_OBJ)
	$(CXX) $^ -o $@ $(LDLIBS)
endif

emu:
	@$(MAKE) --no-print-directory BUILD=$(EMU_BUILD) NVCC=$(EMU_NVCC) all

ASAN_MAKE = NVCCFLAGS="-O1 -g" CXXFLAGS="-O1 -g -fno-omit-frame-pointer" $(MAKE) --no-print-directory \
	  BUILD=$(BUILD)_emu_asan NVCC=$(EMU_NVCC) EMU_SAN="-fsanitize=address,undefined -fno-sanitize-recover=all"
emu-asan:
	+@$(ASAN_MAKE) all
# only the emulator's self-tests in the sanitizer build (their out-of-bounds and misaligned-access
# cases need it): the emulator and one .cu, not the whole backend
emu-asan-selftest:
	+@$(ASAN_MAKE) $(BUILD)_emu_asan/test/test_emu_selftest
# the self-tests and the CUDA tests in the sanitizer build (make test runs them as asan:NAME):
# out-of-bounds and misaligned accesses inside every kernel of cuda/, at the exact line
emu-asan-tests:
	+@$(ASAN_MAKE) $(BUILD)_emu_asan/test/test_emu_selftest \
	  $(patsubst test/%.cpp,$(BUILD)_emu_asan/test/%,$(wildcard test/test_cuda*.cpp))

# The race detector (make test runs these as tsan:NAME): the kernels' code (EMU_KSAN) built with
# -fsanitize=thread, the emulator told what orders CUDA threads (EMU_RT_FLAGS) and itself not
# instrumented, the host code neither; the self-tests and the CUDA tests.
TSAN_MAKE = NVCCFLAGS="-O1 -g" CXXFLAGS="-O2 -g" $(MAKE) --no-print-directory BUILD=$(BUILD)_emu_tsan \
	  NVCC=$(EMU_NVCC) EMU_KSAN=-fsanitize=thread EMU_RT_FLAGS=-DCUDA_EMU_TSAN
emu-tsan-tests:
	+@$(TSAN_MAKE) $(BUILD)_emu_tsan/test/test_emu_selftest \
	  $(patsubst test/%.cpp,$(BUILD)_emu_tsan/test/%,$(wildcard test/test_cuda*.cpp))

test: all
	@$(if $(EMU),,$(MAKE) --no-print-directory emu)
	@$(MAKE) --no-print-directory lab-emu  # test/test_lab.sh runs the lab under the emulation
	@$(MAKE) --no-print-directory emu-asan-tests
	@$(MAKE) --no-print-directory emu-tsan-tests
	BUILD=$(BUILD) EMU_BUILD=$(EMU_BUILD) PYTHON=$(PYTHON) test/run_tests.sh

run: all
	TRAIN=$(BUILD)/train PYTHON=$(PYTHON) scripts/run_synthetic.sh

# options of scripts/bench_cpu.sh go in ARGS: make bench ARGS="--quick --no-torch"
# (it times each step's GEMMs alone with $(BUILD)/test/bench_gemms: a benchmark tool, not a test)
ifeq ($(EMU),)
all: $(BUILD)/test/bench_gemms
endif
bench: all
	TRAIN=$(BUILD)/train scripts/bench_cpu.sh $(ARGS)

deps:
	scripts/install_deps.sh

clean:
	rm -rf $(BUILD) $(EMU_BUILD) $(BUILD)_emu_asan $(BUILD)_emu_tsan

-include $(wildcard $(BUILD)/*/*.d)
