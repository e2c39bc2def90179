# The two commands a newcomer needs: `make demo` and `make test`. Both install what they need
# (scripts/bootstrap, Debian packages only) and build first.
#
#   make build     binaries in build/bin, libvgpu.so in build/lib (g++, Release, -Werror)
#   make test      format check; the Release build's binaries with the tests that need them
#                  (integration, chart, image, vgpu); then the ASan+UBSan build (clang) runs the
#                  unit tests and every fuzzer for a bounded time. Each test is compiled once.
#   make test-unit every test of the Release build, unit tests included (a developer's quick run)
#   make demo      the main job (builds hami-sim only)
#   make image     the container image, build/image/hami.oci.tar (OCI archive, Debian packages)
#   make format    reformat the tree with clang-format

JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
CMAKE_FLAGS ?=
CTEST_FLAGS ?= --output-on-failure -j $(JOBS)
# ccache keys on paths relative to the checkout, so a fresh clone on the same machine reuses the
# cache of an earlier one.
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1
# Depend mode: on a miss ccache runs the compiler once (its -MD output lists the headers to hash)
# instead of running the preprocessor first, about 0.5 s of a 7 s g++ object.
export CCACHE_DEPEND := 1
# helm and kubectl as scripts/bootstrap fetches them (.tools/bin) come before any on the system:
# the tests need kubectl 1.24 or later.
export PATH := $(CURDIR)/.tools/bin:$(PATH)

FORMAT_FILES = $(shell git ls-files --cached --others --exclude-standard '*.h' '*.cc' '*.c' 2>/dev/null)

.PHONY: all bootstrap configure build test test-release test-unit test-asan demo image format check-format clean

all: build

bootstrap:
	@scripts/bootstrap

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

configure: bootstrap $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

$(ASAN_BUILD)/build.ninja:
	CC=clang CXX=clang++ cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug \
	  -DHAMI_SANITIZE=ON -DHAMI_FUZZ=ON -DCMAKE_CXX_FLAGS_DEBUG= -DCMAKE_C_FLAGS_DEBUG= \
	  "-DCMAKE_CXX_FLAGS=-O1 -gline-tables-only" "-DCMAKE_C_FLAGS=-O1 -gline-tables-only" \
	  $(CMAKE_FLAGS)

# make test's Release pass: the tests that run only there (docs/DEVELOPING.md, "Test labels").
# The unit test binaries are not built for it: the sanitizer pass compiles and runs them.
RELEASE_LABELS ?= integration|chart|image|vgpu
# The sanitizer pass's labels (test-asan).
ASAN_LABELS ?= unit|fuzz

test-release: configure
	cmake --build $(BUILD) -j $(JOBS) --target release-checks
	cd $(BUILD) && ctest $(CTEST_FLAGS) -L '$(RELEASE_LABELS)'

test-unit: build
	cd $(BUILD) && ctest $(CTEST_FLAGS)

test-asan: bootstrap $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest $(CTEST_FLAGS) -L '$(ASAN_LABELS)'

test: bootstrap check-format test-release test-asan

# The demo runs hami-sim alone (every component in one process): install only what building it
# needs (no clang, image tools or helm) and build that target only, not the tests, so a first
# `make demo` on a fresh machine compiles about a third of what `make test` does.
demo:
	@scripts/bootstrap --demo
	@$(MAKE) --no-print-directory $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target hami-sim
	@scripts/demo

image: build
	image/build.sh $(BUILD)

format:
	clang-format -i $(FORMAT_FILES)

check-format:
	@clang-format --dry-run -Werror $(FORMAT_FILES) && echo "check-format: ok"

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
