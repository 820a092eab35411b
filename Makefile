# GPT-2 trainer: learned, sinusoidal, RoPE, CRoPE, xPos, NoPE or ALiBi positions; CPU reference
# backend (OpenBLAS + OpenMP) and, when nvcc is found, the CUDA backend.
#   make           build build/train, build/sample and the test programs (installs missing
#                  Debian packages; the CUDA backend too when nvcc is found), and what make cpu builds
#   make run       the main job: the synthetic position task, every position scheme, on the
#                  CPU; builds only what make cpu builds
#   make cpu       build_cpu/train and build_cpu/sample, without the CUDA backend even where
#                  nvcc is found (make run's, and the CPU recipe's with --device cpu)
#   make test      every CPU test, the gradient check, every CUDA test once under the CPU
#                  emulation; last line "N passed, N failed, N skipped" (test/README.md)
#   make test-all  make test, and the second thread order with deferred work, the sanitizer
#                  builds, the long cases (what CI runs)
#   make bench     CPU training throughput beside PyTorch (ARGS="--quick --no-torch")
#   make emu       the CUDA backend built for the CPU emulation (test/cuda_emu) into build_emu/;
#                  make emu-asan, make emu-tsan-tests: its sanitizer builds (test/cuda_emu/emu.mk)
#   make lab       the kernel lab (test/lab/); make lab-emu builds it for the emulation
#   make fuzz      every reader's fuzz target for FUZZ_SECONDS each (default 60), with a table of
#                  executions, coverage and findings (test/fuzz/README.md; needs clang)
#   make deps      install the missing Debian packages (make does it once by itself)
#   make clean     remove the build folders
#   make help      this list

comma    := ,
.DEFAULT_GOAL := all
# Every core by default (a -j on the command line wins; sub-makes share the top one's jobs).
ifeq ($(MAKELEVEL),0)
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 2)
endif
CXX      ?= g++
NVCC     ?= $(firstword $(wildcard /usr/local/cuda/bin/nvcc) $(shell command -v nvcc 2>/dev/null))
PYTHON   ?= $(shell scripts/pick_python.sh)
# Output folder: every object and binary goes under it (tests run what it holds).
BUILD    ?= build
# The host code's objects (src/*.cpp, test/*.cpp) come from here: $(BUILD), unless a build of the
# CUDA emulation links another build's, compiled the same (test/cuda_emu/emu.mk).
HOST_BUILD ?= $(BUILD)
CXXFLAGS ?= -O3 -march=native
CXXFLAGS += -std=c++17 -fopenmp -fno-math-errno -Wall -Wextra -MMD -MP -Isrc -Icuda
# OpenBLAS built on OpenMP shares the trainer's OpenMP threads; the pthreads
# build's threads would compete with them for the cores (about 1.5x slower here).
OPENBLAS_OMP := $(dir $(firstword $(wildcard /usr/lib/*/openblas-openmp/libopenblas.so)))
OPENBLAS_LIB := $(if $(OPENBLAS_OMP),-L$(OPENBLAS_OMP) -Wl$(comma)-rpath$(comma)$(OPENBLAS_OMP))
LDLIBS   := $(OPENBLAS_LIB) -lopenblas -fopenmp
# nlohmann/json from Debian's nlohmann-json3-dev, else from .gpu_deps/include, where
# scripts/prepare_gpu_deps.sh puts it for a machine that cannot install packages.
CPPFLAGS += $(if $(wildcard .gpu_deps/include/nlohmann/json.hpp),-idirafter .gpu_deps/include)
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
# ICU (Debian libicu-dev): the Unicode classes of build/sample --prompt's GPT-2 pre-tokenizer
# (src/gpt2_encoder.cpp). Without unicode/uchar.h, or with ICU=0, --prompt says the build has none.
ICU      ?= $(if $(shell printf '\043include <unicode/uchar.h>\n' | $(CXX) $(CPPFLAGS) -E -x c++ - >/dev/null 2>&1 && echo yes),1,0)
ifeq ($(ICU),1)
CXXFLAGS += -DHAVE_ICU
LDLIBS   += -licuuc
endif
CXXFLAGS += $(CPPFLAGS)
# MPI (Debian's libopenmpi-dev, or MPICH): data-parallel training under mpirun (src/dist.h), its
# flags from `mpicc -show` (both wrappers print the compiler, then its flags). Without it the
# trainer is built for one process, as it runs without mpirun anyway.
MPICC    ?= mpicc
MPI_SHOW := $(wordlist 2,999,$(shell $(MPICC) -show 2>/dev/null))
ifneq ($(MPI_SHOW),)
HAVE_MPI := yes
CXXFLAGS += -DHAVE_MPI -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX $(filter -I% -D% -pthread,$(MPI_SHOW))
LDLIBS   += $(filter-out -I% -D%,$(MPI_SHOW))
endif
SAY      := $(if $(filter 0,$(MAKELEVEL)),$(if $(filter help clean,$(MAKECMDGOALS))$(MAKE_RESTARTS),,yes))
ifneq ($(SAY),)
$(info MPI: $(if $(HAVE_MPI),found ($(MPICC): $(filter -l%,$(MPI_SHOW))): multi-process training with mpirun,not found: one process only (install libopenmpi-dev for mpirun)))
endif

MAINS    := src/train.cpp src/sample.cpp
TESTS    := $(patsubst test/%.cpp,$(BUILD)/test/%,$(wildcard test/test_*.cpp))

# NVCC= on make's command line leaves the CUDA backend out on purpose (make cpu): the trainer
# then says so, not that nvcc was not found. BACKEND_FLAGS: what the mains and the tests are
# compiled with for the backend; the library objects (src/ but the mains) need none.
ifeq ($(origin NVCC)$(NVCC),command line)
BACKEND_FLAGS += -DCUDA_LEFT_OUT
endif
# The CUDA backend (cuda/*.cu). With NVCC=nvcc-emu the same rules build it for the CPU
# emulation of CUDA instead: test/cuda_emu/emu.mk says how (and holds its sanitizer builds).
EMU      := $(filter nvcc-emu,$(notdir $(NVCC)))
include test/cuda_emu/emu.mk
ifeq ($(EMU),)
ifneq ($(NVCC),)
CUDA_HOME := $(patsubst %/bin/nvcc,%,$(NVCC))
# machine code for each of CUDA_ARCHS (sm_80, sm_90), plus PTX of the last for newer cards. CI
# compiles for sm_90 alone (.ci/run): its tests read sm_90's ptxas report and run no GPU code.
CUDA_ARCHS ?= 80 90
NVCCFLAGS ?= -O3 $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a)) \
             -gencode arch=compute_$(lastword $(CUDA_ARCHS)),code=compute_$(lastword $(CUDA_ARCHS))
NVCCFLAGS += -std=c++17 -MMD -MP -Isrc -Icuda -Xcompiler -Wall,-Wextra
BACKEND_FLAGS += -DHAVE_CUDA -I$(CUDA_HOME)/include
CUDA_OBJ  := $(patsubst cuda/%.cu,$(BUILD)/cuda/%.o,$(wildcard cuda/*.cu))
# the programs' side of the backend (cuda/programs.cpp: host code, linked into train and sample)
PROGRAM_OBJ := $(patsubst cuda/%.cpp,$(HOST_BUILD)/cuda/%.o,$(wildcard cuda/*.cpp))
# ptxas's report (registers, spills per kernel) kept beside each object for scripts/check_spills.sh
# --build; the compiler's other messages still reach the terminal
PTXAS_REPORT = -Xptxas -v 2>$@.ptxas; rc=$$?; grep -v '^ptxas info\|^    [0-9]* bytes stack frame' $@.ptxas >&2; exit $$rc
# cuBLAS is not linked: the backend loads it on its first GEMM (cuda/matmul.cu), found through this
# runpath too; -ldl for dlopen where the C library does not hold it (glibc before 2.34)
LDLIBS    += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -ldl
# NCCL, the CUDA backend's collectives across ranks (cuda/nccl.cu), with MPI to launch: nccl.h
# where NVIDIA's packages put it (/usr/include, $NCCL_HOME, the toolkit's own folder)
NCCL_INC  := $(patsubst %/nccl.h,%,$(firstword $(wildcard $(if $(NCCL_HOME),$(NCCL_HOME)/include/nccl.h) \
               /usr/include/nccl.h $(CUDA_HOME)/include/nccl.h)))
ifneq ($(and $(HAVE_MPI),$(NCCL_INC)),)
NVCCFLAGS += -DHAVE_NCCL $(filter-out -I/usr/include,-I$(NCCL_INC))
LDLIBS    += $(if $(NCCL_HOME),-L$(NCCL_HOME)/lib -Wl$(comma)-rpath$(comma)$(NCCL_HOME)/lib) -lnccl
endif
ifneq ($(SAY),)
$(info NCCL: $(if $(NCCL_INC),$(if $(HAVE_MPI),found ($(NCCL_INC)/nccl.h): multi-GPU training with mpirun,found but not used: it needs MPI),not found: one GPU per run (install libnccl-dev, or set NCCL_HOME)))
endif
else
# no CUDA backend to test on a GPU: the CUDA tests run under the emulation (make emu) only
TESTS     := $(filter-out $(BUILD)/test/test_cuda%,$(TESTS))
endif
endif

BINS     := $(patsubst src/%.cpp,$(BUILD)/%,$(MAINS))
# The library objects compile the same for every backend: make cpu links $(BUILD)'s.
LIB_BUILD ?= $(HOST_BUILD)
LIB_OBJ  := $(patsubst src/%.cpp,$(LIB_BUILD)/src/%.o,$(filter-out $(MAINS),$(wildcard src/*.cpp)))

.PHONY: all test test-all cpu run bench deps clean help
.SECONDARY:  # keep the objects make would see as intermediate
all: $(BINS) $(TESTS)

# The missing Debian packages go in first: make remakes this included file, then reads the
# Makefile again, so the checks above (cblas.h, sleef.h, mpicc) see what was just installed.
ifeq ($(filter help clean deps,$(MAKECMDGOALS)),)
include $(BUILD)/deps.mk
endif
$(BUILD)/deps.mk: scripts/install_deps.sh
	@scripts/install_deps.sh
	@mkdir -p $(BUILD) && echo '# scripts/install_deps.sh has run for this build' > $@

$(BUILD)/src/%.o: src/%.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -c $< -o $@

$(BUILD)/test/%.o: test/%.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -c $< -o $@
$(patsubst src/%.cpp,$(BUILD)/src/%.o,$(MAINS)): CXXFLAGS += $(BACKEND_FLAGS)
$(BUILD)/test/%.o: CXXFLAGS += $(BACKEND_FLAGS)
ifeq ($(origin LIB_BUILD),command line)  # make cpu's, made first by the make that called it
$(LIB_BUILD)/src/%.o: src/%.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -c $< -o $@
endif

$(BUILD)/cuda/%.o: cuda/%.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@ $(PTXAS_REPORT)

$(BUILD)/cuda/%.o: cuda/%.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) $(BACKEND_FLAGS) -c $< -o $@

$(BINS): $(BUILD)/%: $(HOST_BUILD)/src/%.o $(LIB_OBJ) $(CUDA_OBJ) $(PROGRAM_OBJ)
	$(CXX) $^ -o $@ $(LDLIBS)

$(BUILD)/test/%: $(HOST_BUILD)/test/%.o $(LIB_OBJ) $(CUDA_OBJ)
	$(CXX) $^ -o $@ $(LDLIBS)

# The CUDA test programs count the device memory and the graphs the backend holds at the CUDA
# runtime's calls: the linker routes these through test/cuda_testlib.cu (ld --wrap).
CUDA_TEST_WRAP := -Wl,--wrap=cudaMalloc,--wrap=cudaFree,--wrap=cudaGraphInstantiate,--wrap=cudaGraphExecDestroy
CUDA_TESTS     := $(patsubst test/%.cpp,$(BUILD)/test/%,$(wildcard test/test_cuda*.cpp))
$(CUDA_TESTS): $(BUILD)/test/%: $(HOST_BUILD)/test/%.o $(BUILD)/test/cuda_testlib.o $(LIB_OBJ) $(CUDA_OBJ)
	$(CXX) $^ -o $@ $(LDLIBS) $(CUDA_TEST_WRAP)

$(BUILD)/test/cuda_testlib.o: test/cuda_testlib.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

# the kernel lab (test/lab/): make lab, make lab-emu
include test/lab/lab.mk
# the readers' fuzz targets (test/fuzz/): make fuzz; make test replays their inputs
include test/fuzz/fuzz.mk

# The test tiers: test/README.md. Their builds run side by side, sharing make's jobs (emu.mk
# orders those that link another's objects).
test: all emu lab-emu $(if $(FUZZ_RT),fuzz-targets)
	BUILD=$(BUILD) EMU_BUILD=$(EMU_BUILD) PYTHON=$(PYTHON) test/run_tests.sh
test-all: all emu lab-emu emu-asan-tests emu-tsan-tests $(if $(FUZZ_RT),fuzz-targets)
	BUILD=$(BUILD) EMU_BUILD=$(EMU_BUILD) PYTHON=$(PYTHON) test/run_tests.sh --all

# make cpu builds the trainer and the sampler without the CUDA backend into $(BUILD)_cpu, whether
# nvcc is found or not, so the build in $(BUILD) stays whole: what make run and the CPU recipe
# (scripts/reproduce_paper.sh ... -- --device cpu) train with, and no more. Only the mains are
# compiled again; the library objects are $(BUILD)'s.
# make run trains with it, unless configs/synthetic.json asks for --device cuda (then $(BUILD)).
# Options of scripts/run_synthetic.sh go in ARGS: make run ARGS="--results scripts/results"
# regenerates the README's table, figure and logs.
CPU_BUILD := $(BUILD)_cpu
cpu: $(LIB_OBJ)
	@$(MAKE) --no-print-directory BUILD=$(CPU_BUILD) NVCC= LIB_BUILD=$(LIB_BUILD) $(CPU_BUILD)/train $(CPU_BUILD)/sample
RUN_CUDA  := $(and $(NVCC),$(shell grep -l '"device": *"cuda"' configs/synthetic.json))
RUN_BUILD := $(if $(RUN_CUDA),$(BUILD),$(CPU_BUILD))
run: $(if $(RUN_CUDA),$(RUN_BUILD)/train $(RUN_BUILD)/sample,cpu)
	TRAIN=$(RUN_BUILD)/train SAMPLE=$(RUN_BUILD)/sample PYTHON=$(PYTHON) scripts/run_synthetic.sh $(ARGS)

help:
	@sed -n '/^#   make /,/^[^#]/s/^# //p' $(firstword $(MAKEFILE_LIST))

# options of scripts/bench_cpu.sh go in ARGS: make bench ARGS="--quick --no-torch"
# (it times each step's GEMMs alone with $(BUILD)/test/bench_gemms: a benchmark tool, not a test)
ifeq ($(EMU),)
all: $(BUILD)/test/bench_gemms
# and build_cpu/, so the README's CPU commands run as written after make as after make run
all: cpu
endif
bench: all
	TRAIN=$(BUILD)/train scripts/bench_cpu.sh $(ARGS)

deps:
	scripts/install_deps.sh

clean:
	rm -rf $(BUILD) $(BUILD)_cpu $(EMU_BUILD) $(BUILD)_emu_asan $(BUILD)_emu_tsan $(FUZZ_BUILD)

-include $(wildcard $(BUILD)/*/*.d)
