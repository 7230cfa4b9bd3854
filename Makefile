# qhexrt: thin wrapper over CMake/CTest.
#   make        Release build into build/bin (qhx, qhx_generate)
#   make test   install deps, build Release + ASan/UBSan, run every CTest test in both
#   make demo   install deps, build, run text generation on a small random demo model
JOBS     ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE    ?= cmake
WERROR   ?= $(if $(CI),ON,OFF)
CMFLAGS  ?=

.PHONY: all build deps test test-release test-asan test-tsan demo fuzz clean

all: build

build:
	@$(CMAKE) -S . -B build -DCMAKE_BUILD_TYPE=Release -DQHX_WERROR=$(WERROR) $(CMFLAGS) >/dev/null
	@$(CMAKE) --build build -j $(JOBS)

deps:
	@bash scripts/deps.sh

test: deps test-release test-asan

test-release: build
	cd build && ctest --output-on-failure -j $(JOBS)

test-asan:
	@$(CMAKE) -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQHX_SANITIZE=ON -DQHX_WERROR=$(WERROR) $(CMFLAGS) >/dev/null
	@$(CMAKE) --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -LE tsan

test-tsan:
	@$(CMAKE) -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQHX_TSAN=ON $(CMFLAGS) >/dev/null
	@$(CMAKE) --build build-tsan -j $(JOBS)
	cd build-tsan && ctest --output-on-failure -L tsan

demo: deps build
	@bash scripts/demo.sh

clean:
	rm -rf build build-asan build-tsan build-fuzz
