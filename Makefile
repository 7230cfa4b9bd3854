# qhexrt: thin wrapper over CMake/CTest.
#   make        the build packages that are missing (Debian, Ubuntu), then the Release build of
#               the library (build/lib) and the commands (build/bin: qhx, qhx_generate) only,
#               quietly (scripts/build.sh; VERBOSE=1 shows the compiler lines); `make build`
#               builds only
#   make test   install deps, build Release + ASan/UBSan (everything: the tests, fuzz replays and
#               benchmarks as well), run every CTest test in both, then the
#               tests labelled tsan under ThreadSanitizer (make test-tsan) and the aarch64
#               kernels under qemu (make test-arm)
#   make demo   install the build packages, build as make does, run text generation on the model
#               in models/shakespeare
#   make test-arm   aarch64 cross build of the kernels (QHX_KERNELS_ONLY), tests run under qemu-aarch64
#   make test-tsan  ThreadSanitizer build, runs the tests labelled tsan (pool, sessions)
#   make fuzz   clang libFuzzer build; runs every fuzz target FUZZ_TIME seconds (default 60)
#   make install [PREFIX=/usr/local] [DESTDIR=]   qhx, qhx_generate, libqhx.so/.a, qhx.h, qhx.pc,
#               qhx-shared.pc; the list of what it wrote goes to build/installed.txt
#   make uninstall   removes every file the last make install wrote (build/installed.txt)
#   make test-hf    the checks against Hugging Face itself (torch + transformers on the CPU): needs
#               the environment of scripts/hf_env.sh; make test never does
JOBS     ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE    ?= cmake
WERROR   ?= $(if $(CI),ON,OFF)
CMFLAGS  ?=
PREFIX   ?= /usr/local
DESTDIR  ?=

.PHONY: all build deps deps-build deps-missing test test-release test-asan test-arm test-tsan test-hf demo fuzz install install-only uninstall clean

all: deps-missing build

# `make` alone: what of scripts/deps.sh --build is missing, on Debian and Ubuntu (elsewhere the
# build says what it lacks)
deps-missing:
	@if command -v dpkg-query >/dev/null && command -v apt-get >/dev/null; then bash scripts/deps.sh --build; fi

# What the demo, the user and make install need: the libraries and the commands, nothing else.
PRODUCT := qhx qhx_static qhx_cli qhx_generate

build:
	@$(CMAKE) -S . -B build -DCMAKE_BUILD_TYPE=Release -DQHX_WERROR=$(WERROR) \
	  -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMFLAGS) >/dev/null
	@bash scripts/build.sh build $(JOBS) $(PRODUCT)

deps:
	@bash scripts/deps.sh

# Only what building and running need (make demo); `deps` adds the test tools.
deps-build:
	@bash scripts/deps.sh --build

# deps installs PoCL, so under `make test` a missing OpenCL platform is a failure, not a skip
test: export QHX_REQUIRE_OPENCL = 1
test: deps test-release test-asan test-tsan test-arm
	@echo "note: the Hugging Face checks are separate: bash scripts/hf_env.sh, then make test-hf"

HF_VENV ?= build/hf-venv
test-hf:
	@[ -x $(HF_VENV)/bin/python ] || { echo "make test-hf: no Hugging Face environment in $(HF_VENV): run scripts/hf_env.sh first" >&2; exit 2; }
	@$(MAKE) --no-print-directory build
	@HF_VENV=$(abspath $(HF_VENV)) bash tests/hf/run_all.sh

test-release: build
	@$(CMAKE) --build build -j $(JOBS)
	cd build && ctest --output-on-failure -j $(JOBS)

test-asan:
	@$(CMAKE) -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQHX_SANITIZE=ON -DQHX_WERROR=$(WERROR) $(CMFLAGS) >/dev/null
	@$(CMAKE) --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS)

# The NEON kernels on an emulated aarch64 CPU: core + kernels only (no arm64 libraries needed),
# every kernel test through qemu-aarch64 (cmake/aarch64-linux-gnu.cmake sets the emulator).
# test_kernels_neon fails unless qhx_kern_select really installed NEON.
test-arm:
	@$(CMAKE) -S . -B build-arm -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DQHX_KERNELS_ONLY=ON \
	  -DCMAKE_BUILD_TYPE=Release -DQHX_WERROR=$(WERROR) $(CMFLAGS) >/dev/null
	@$(CMAKE) --build build-arm -j $(JOBS)
	cd build-arm && ctest --output-on-failure -j $(JOBS)

test-tsan:
	@$(CMAKE) -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQHX_TSAN=ON -DQHX_WERROR=$(WERROR) $(CMFLAGS) >/dev/null
	@$(CMAKE) --build build-tsan -j $(JOBS) --target test_pool test_session_threads
	cd build-tsan && ctest --output-on-failure -L tsan

# New inputs go to build-fuzz/corpus/<name> (the committed seeds in tests/fuzz/corpus/<name> are
# read, not written); a crash is saved as build-fuzz/crash-<name>-*: copy it into the committed
# corpus once fixed, so every test run replays it.
FUZZ_TIME ?= 60
fuzz:
	@CC=clang CXX=clang++ $(CMAKE) -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQHX_LIBFUZZER=ON $(CMFLAGS) >/dev/null
	@$(CMAKE) --build build-fuzz -j $(JOBS)
	@set -e; for t in build-fuzz/fuzz/fuzz_*; do \
	  case $$t in *_replay) continue;; esac; \
	  n=$${t##*/fuzz_}; mkdir -p build-fuzz/corpus/$$n; \
	  dict=; [ -f tests/fuzz/$$n.dict ] && dict=-dict=tests/fuzz/$$n.dict; \
	  echo "fuzz $$n: $(FUZZ_TIME) s"; \
	  $$t build-fuzz/corpus/$$n tests/fuzz/corpus/$$n $$dict -max_total_time=$(FUZZ_TIME) \
	    -artifact_prefix=build-fuzz/crash-$$n- -print_final_stats=1 2>&1 | tail -n 25; \
	done

demo: deps-build build
	@bash scripts/demo.sh

# cmake --install rewrites build/install_manifest.txt on every install from this folder (the
# tests install into temporary prefixes), lists the paths without DESTDIR and ends its last line
# without a newline, so make install keeps its own complete copy, DESTDIR included.
# BUILD_DIR names another configured build folder (tests/cli/install.sh installs its own build's);
# install-only installs what is built there without building; INSTALLED is where the list of the
# installed files goes (the test keeps its own, not to replace a real install's).
BUILD_DIR ?= build
INSTALLED ?= $(BUILD_DIR)/installed.txt
install: build
	@$(MAKE) --no-print-directory install-only
install-only:
	@DESTDIR=$(DESTDIR) $(CMAKE) --install $(BUILD_DIR) | grep -v '^-- Up-to-date' || true
	@sed 's|^|$(DESTDIR)|; $$a\\' $(BUILD_DIR)/install_manifest.txt > $(INSTALLED)
	@echo "installed under $(DESTDIR)$(PREFIX); build programs with: cc prog.c \$$(pkg-config --cflags --libs qhx)" \
	  "(PKG_CONFIG_PATH=$(DESTDIR)$(PREFIX)/lib/pkgconfig outside the default search path)"

uninstall:
	@bash scripts/uninstall.sh $(INSTALLED)

clean:
	rm -rf build build-asan build-arm build-tsan build-fuzz
