# Thin wrapper over CMake/CTest. `make test` installs what is missing, builds the
# release and sanitizer trees and runs the whole suite.
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
# Seconds of fuzzing per target in `make test` (the smoke run: seeds, regression inputs, a little more).
FUZZ_SECONDS ?= 3
JOBS       ?= $(shell nproc)

.PHONY: all deps build build-asan test test-fast fuzz train bench clean

all: build

deps:
	@bash tools/install_deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

build-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -g" -DLC_SANITIZE=ON -DLC_CUDA=off >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)

# Release build: every test. Sanitizer build: the single-process unit tests. Fuzz tree
# (clang): every libFuzzer target built and run FUZZ_SECONDS on its seeds (bench/fuzz/run.sh).
test: build build-asan
	cd $(BUILD) && ctest --output-on-failure
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -L unit
	FUZZ_BUILD=$(abspath $(FUZZ_BUILD)) JOBS=$(JOBS) bash bench/fuzz/run.sh --smoke $(FUZZ_SECONDS) $(abspath $(FUZZ_BUILD))/work

# Every fuzz target for a minute (bench/fuzz/run.sh SECONDS for longer).
fuzz: deps
	FUZZ_BUILD=$(abspath $(FUZZ_BUILD)) JOBS=$(JOBS) bash bench/fuzz/run.sh 60 $(abspath $(FUZZ_BUILD))/work

# Everything but the 2.5-minute README demo, release tree only.
test-fast: build
	cd $(BUILD) && ctest --output-on-failure -LE demo

# The default training job: the long-range demo. The demo preset learns task:passkey
# sequence-parallel over 2 MPI ranks (ring attention), then answers a fresh sample.
MPIRUN ?= mpirun --allow-run-as-root --oversubscribe
train: build
	MPIRUN="$(MPIRUN)" bash tools/demo.sh $(BUILD) demo-out

bench: build
	./$(BUILD)/longctx bench --model bench-s --seq 1024,4096,16384 --threads 2

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
