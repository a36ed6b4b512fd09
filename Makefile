# The two commands of the README: `make demo` and `make test`. Both do all set-up on a fresh
# Debian 12 machine (packages, configure, build).
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build demo test test-slow test-asan fuzz bench clean

all: build

deps:
	bash scripts/install-deps.sh

$(BUILD_DIR)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

configure: $(BUILD_DIR)/CMakeCache.txt

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

demo: build
	bash scripts/demo.sh $(BUILD_DIR)/dionsim

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) -LE slow

test-slow: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) -L slow

test-asan: deps
	cmake --preset asan
	cmake --build --preset asan -j $(JOBS)
	ctest --preset asan -j $(JOBS)

# libFuzzer targets with ASan + UBSan (clang-14, the "fuzz" preset), FUZZ_SECONDS per target
# (time-boxed), FUZZ_RSS_MB memory limit; fails when a target finds a crash, leak or timeout.
FUZZ_SECONDS ?= 60
FUZZ_RSS_MB ?= 2048
fuzz:
	bash scripts/install-deps.sh fuzz
	cmake --preset fuzz
	cmake --build --preset fuzz -j $(JOBS)
	bash scripts/fuzz.sh build/fuzz $(FUZZ_SECONDS) $(FUZZ_RSS_MB)

bench: build
	bash scripts/bench.sh $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR)
