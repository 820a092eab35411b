# The kernel lab (README.md here): one program per kernel family, test/lab/*.cu, linked as the
# tests are. `make lab` needs nvcc; `make lab-emu` builds it for the CPU emulation (checks only).
.PHONY: lab lab-emu
LABS := $(patsubst test/lab/%.cu,$(BUILD)/lab/%,$(wildcard test/lab/*.cu))
lab: $(if $(NVCC),$(LABS))
	@$(if $(NVCC),,echo "error: make lab needs nvcc (or make lab-emu)" && exit 1)

# after make emu, whose objects it links (two makes would compile them at once)
lab-emu: emu
	+@$(MAKE) --no-print-directory BUILD=$(EMU_BUILD) NVCC=$(EMU_NVCC) HOST_BUILD=$(EMU_HOST) lab

$(BUILD)/lab/%.o: test/lab/%.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -Xcompiler -fopenmp -c $< -o $@  # the CPU reference is OpenMP

$(BUILD)/lab/%: $(BUILD)/lab/%.o $(LIB_OBJ) $(CUDA_OBJ)
	$(CXX) $^ -o $@ $(LDLIBS)
