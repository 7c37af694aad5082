# The two commands of the README: `make run` and `make test`.
BUILD ?= build
JOBS ?= $(shell nproc)
MODEL ?=

.PHONY: deps build test run clean

deps:
	bash deploy/bootstrap-debian.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j$(JOBS)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

run: build
	$(BUILD)/bin/mhla-server $(if $(MODEL),--model $(MODEL),)

clean:
	rm -rf $(BUILD)
