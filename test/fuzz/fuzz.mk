# The readers' fuzz targets (test/fuzz/README.md): test/fuzz/fuzz_*.cpp, each linked with the
# product's readers built by clang under AddressSanitizer and UndefinedBehaviorSanitizer into
# $(FUZZ_BUILD). make fuzz runs each for FUZZ_SECONDS (default 60); make test replays their corpora
# and regression inputs (test/test_fuzz_replay.sh). Needs clang and libFuzzer (Debian's clang and
# libclang-rt-dev): without them make test leaves the targets out and the replay says SKIPPED.
.PHONY: fuzz fuzz-targets
FUZZ_CXX     ?= clang++
FUZZ_BUILD   ?= $(BUILD)_fuzz
FUZZ_SECONDS ?= 60
# libFuzzer's runtime where this clang keeps its own (empty: no fuzzing here)
FUZZ_RT      := $(wildcard $(shell $(FUZZ_CXX) --print-runtime-dir 2>/dev/null)/libclang_rt.fuzzer-*.a)
# -fno-sanitize-recover: undefined behaviour stops the target, a finding like a crash
FUZZ_SAN     := address,undefined -fno-sanitize-recover=undefined
# the optimisation of the readers under test: -O1 for make fuzz's executions per second; CI, which
# only replays the corpora and fuzzes seconds, builds at -O0 in half the time (.ci/run)
FUZZ_OPT     ?= -O1
FUZZ_FLAGS   := -std=c++17 -g1 $(FUZZ_OPT) -Wall -Wextra -Isrc -Itest/fuzz $(CPPFLAGS) $(if $(filter 1,$(ICU)),-DHAVE_ICU) \
                -DFUZZ_GPT2_SMALL='"$(abspath test/fuzz/gpt2_small)"'
FUZZ_SRC     := safetensors fileio config checkpoint dataloader gpt2_encoder gpt2_decoder log memory_estimate
FUZZ_OBJ     := $(patsubst %,$(FUZZ_BUILD)/src/%.o,$(FUZZ_SRC))
FUZZ_LIBS    := $(if $(filter 1,$(ICU)),-licuuc)
FUZZ_TARGETS := $(patsubst test/fuzz/%.cpp,$(FUZZ_BUILD)/%,$(wildcard test/fuzz/fuzz_*.cpp))

fuzz-targets: $(FUZZ_TARGETS) $(FUZZ_BUILD)/print_keys
	@$(if $(FUZZ_RT),,echo "error: no libFuzzer for $(FUZZ_CXX) (install clang and libclang-rt-dev)" && exit 1)
fuzz: fuzz-targets
	FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) test/fuzz/run_fuzz.sh

$(FUZZ_BUILD)/src/%.o: src/%.cpp
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(FUZZ_FLAGS) -MMD -MP -fsanitize=fuzzer-no-link,$(FUZZ_SAN) -c $< -o $@

$(FUZZ_BUILD)/%.o: test/fuzz/%.cpp
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(FUZZ_FLAGS) -MMD -MP -fsanitize=fuzzer-no-link,$(FUZZ_SAN) -c $< -o $@

$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/fuzz_%.o $(FUZZ_OBJ)
	$(FUZZ_CXX) -fsanitize=fuzzer,$(FUZZ_SAN) $^ -o $@ $(FUZZ_LIBS)

# the dictionary's config keys, from the key table itself
$(FUZZ_BUILD)/print_keys: $(FUZZ_BUILD)/print_keys.o $(FUZZ_OBJ)
	$(FUZZ_CXX) -fsanitize=$(FUZZ_SAN) $^ -o $@ $(FUZZ_LIBS)

-include $(wildcard $(FUZZ_BUILD)/*.d $(FUZZ_BUILD)/src/*.d)
