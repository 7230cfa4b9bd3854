#!/usr/bin/env bash
# The one place that lists and installs the Debian packages qhexrt needs.
# Idempotent: installs only what is missing. Needs root (prints the sudo line otherwise).
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config
  clang                     # libFuzzer targets (optional fuzzing runs)
  libjansson-dev            # JSON: manifests, safetensors headers, tokenizer.json
  libpcre2-dev              # pre-tokenizer regex, taken from tokenizer.json
  libutf8proc-dev           # NFC normalization
  libjpeg62-turbo-dev       # JPEG decoding
  libspng-dev zlib1g-dev    # PNG decoding
  libedit-dev               # qhx chat: line editing and history (BSD licence)
  python3-jinja2            # tests/cli/chat_templates.sh renders the released chat templates
  python3 python3-numpy     # parity_gate.py over the golden fixtures
  gcc-aarch64-linux-gnu libc6-dev-arm64-cross   # make test-arm: the NEON kernels, cross-built
  qemu-user                 # ... and run under qemu-aarch64
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "qhexrt needs these Debian packages; run:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
