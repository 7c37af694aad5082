# The two commands of the README: `make run` and `make test`.
BUILD ?= build
JOBS ?= $(shell nproc)
MODEL ?=
# `make test` also builds the C code under AddressSanitizer + UndefinedBehaviorSanitizer
# (jemalloc off) in SANITIZE_BUILD and runs these tests there: the C tests and the
# server's integration test, against the sanitized binaries. SANITIZE=0 skips it.
SANITIZE ?= 1
SANITIZE_BUILD ?= build-asan
SANITIZE_TESTS ?= ^(engine[.](checkpoints|batch_independence[.].*|weight_dtype|context_limit|bad_checkpoints|sampler|step_choose|error_codes)|kvstate[.](churn|prefix_exact[.].*)|server[.](integration|tool_parse|chat_messages|tool_calls)|client[.]unit|tokenizer[.](data|unit|agree[.].*)|fault[.].*)$$
SANITIZE_ENV = ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=0 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 MHLA_TEST_TIME_FACTOR=2

# `make run` installs and builds only what serving needs: the compilers and
# -dev packages (no PyTorch, Node, qemu or HAProxy: those are the tests'), and
# the programs, not the tests and benchmarks.
PROGRAMS = mhla-server mhla-cli mhla-bench mhla-generate mhla-tokenize mhla-grammar

.PHONY: deps serve-deps build build-programs test test-sanitize run clean

deps:
	bash deploy/bootstrap-debian.sh

serve-deps:
	bash deploy/bootstrap-debian.sh --build-only

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j$(JOBS)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)
ifneq ($(SANITIZE),0)
	$(MAKE) test-sanitize
endif

test-sanitize:
	cmake -S . -B $(SANITIZE_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMHLA_SANITIZE=ON \
	      -DMHLA_CUDA=OFF
	cmake --build $(SANITIZE_BUILD) -j$(JOBS) --target sanitize-tests
	$(SANITIZE_ENV) ctest --test-dir $(SANITIZE_BUILD) --output-on-failure -j$(JOBS) \
	      -R '$(SANITIZE_TESTS)'

build-programs: serve-deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j$(JOBS) --target $(PROGRAMS)

run: build-programs
	$(BUILD)/bin/mhla-server $(if $(MODEL),--model $(MODEL),)

clean:
	rm -rf $(BUILD) $(SANITIZE_BUILD)
