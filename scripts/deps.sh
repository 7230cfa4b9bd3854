#!/usr/bin/env bash
# The one place that lists and installs the system packages qhexrt needs (Debian 12, Ubuntu
# 22.04/24.04: the names below are the same on both).
#   scripts/deps.sh           everything `make test` needs
#   scripts/deps.sh --build   only what building and running need (`make demo`, `make install`)
# Idempotent: installs only what is missing. Needs root (prints the exact sudo line otherwise).
set -euo pipefail

BUILD=(
  build-essential cmake pkg-config
  libjansson-dev            # JSON: manifests, safetensors headers, tokenizer.json
  libpcre2-dev              # pre-tokenizer regex, taken from tokenizer.json
  libutf8proc-dev           # NFC normalization
  libjpeg-dev               # JPEG decoding (libjpeg-turbo on Debian and Ubuntu)
  libspng-dev zlib1g-dev    # PNG decoding
  libavformat-dev libavcodec-dev libavutil-dev libswscale-dev  # video input (optional: the build leaves it out without them)
  libedit-dev               # qhx chat: line editing and history (BSD licence)
  libcurl4-openssl-dev      # qhx pull, -hf: HTTP(S) to the Hugging Face hub (the qhx command only, not libqhx)
  opencl-headers ocl-icd-opencl-dev  # the OpenCL device (optional: the build leaves it out without them)
)
TEST=(
  clang                     # libFuzzer targets (make fuzz)
  python3-jinja2            # tests/cli/chat_templates.sh renders the released chat templates
  python3 python3-numpy     # parity_gate.py over the golden fixtures
  python3-jsonschema        # tests/cli/structured.sh validates constrained outputs against their schemas
  ffmpeg                    # tests/data/video/make.sh: making the video test data (no test runs it)
  python3-venv curl         # tests/cli/serve_openai.sh (the openai client in build/serve-venv), serve_http.sh (raw SSE)
  binutils                  # nm: the exported symbols against qhx.h
  wrk                       # BENCHMARKS.md: the HTTP layer's requests per second (no test runs it)
  gcc-aarch64-linux-gnu libc6-dev-arm64-cross   # make test-arm: the NEON kernels, cross-built
  qemu-user                 # ... and run under qemu-aarch64
  pocl-opencl-icd clinfo    # the OpenCL device's tests on the CPU (PoCL), and a look at the platform
  chromium                  # tests/cli/web_chat.sh: qhx serve's web page in a headless browser
)

# Ubuntu ships Chromium as a snap, installed through its chromium-browser package
if [ -r /etc/os-release ] && [ "$(. /etc/os-release && echo "${ID:-}")" = ubuntu ]; then
  TEST=("${TEST[@]/#chromium/chromium-browser}")
fi

PACKAGES=("${BUILD[@]}")
case "${1:-}" in
  --build) ;;
  "") PACKAGES+=("${TEST[@]}") ;;
  *) echo "usage: scripts/deps.sh [--build]" >&2; exit 2 ;;
esac

if ! command -v dpkg-query >/dev/null || ! command -v apt-get >/dev/null; then
  id=unknown
  [ -r /etc/os-release ] && id=$(. /etc/os-release && echo "${ID:-unknown}")
  echo "deps: this is not a Debian or Ubuntu system ($id): install the equivalents of" >&2
  echo "  ${PACKAGES[*]}" >&2
  echo "(C compiler, CMake >= 3.20, pkg-config, jansson, PCRE2, utf8proc, libjpeg(-turbo), libspng, zlib)" >&2
  exit 1
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "qhexrt needs these packages; run:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
