#!/usr/bin/env bash
# qhx pull against curl on loopback: one file of SIZE_MB (default 1024) served by the mock hub
# (tests/cli/lib/hub_mock.py, 127.0.0.1 only), fetched RUNS times by `curl -o FILE` (no hash)
# and by `qhx pull` (resume-capable partial file, sha256 of every byte, fdatasync, rename,
# link). Prints each run's MB/s and peak RSS (GNU time) and the median ratio qhx / curl.
# Usage: bench/hub_download.sh [BUILD_DIR] [SIZE_MB] [RUNS]
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$SRC/build} SIZE_MB=${2:-1024} RUNS=${3:-3}
QHX=$BUILD/bin/qhx
tmp=$(mktemp -d /tmp/qhx_hubbench.XXXXXX)
mock=
trap '[ -n "$mock" ] && kill "$mock" 2>/dev/null; rm -rf "$tmp"' EXIT
mkdir -p "$tmp/repo"
echo '{"model_type": "none"}' >"$tmp/repo/config.json"
head -c $((SIZE_MB << 20)) /dev/urandom >"$tmp/repo/big.safetensors"
python3 "$SRC/tests/cli/lib/hub_mock.py" serve --port-file "$tmp/ports" --repo bench/big=$tmp/repo >/dev/null 2>&1 &
mock=$!
for _ in $(seq 1 600); do [ -s "$tmp/ports" ] && break; sleep 0.1; done
read -r HP SP <"$tmp/ports"
sha=$(sha256sum "$tmp/repo/big.safetensors" | cut -d' ' -f1)
bytes=$((SIZE_MB << 20))
rate() { python3 -c "print('%.0f' % ($bytes / 1e6 / $1))"; }
curl_rates=() qhx_rates=()
for i in $(seq 1 "$RUNS"); do
  rm -f "$tmp/out.bin"
  /usr/bin/time -f "%e %M %U %S" -o "$tmp/t" curl -s -o "$tmp/out.bin" "http://127.0.0.1:$SP/lfs/$sha"
  read -r s kb u sy <"$tmp/t"
  r=$(rate "$s"); curl_rates+=("$r")
  echo "curl      run $i: $s s, $r MB/s, peak RSS $((kb / 1024)) MiB, cpu user $u s sys $sy s"
  rm -f "$tmp/out.bin"
  rm -rf "$tmp/hf"
  HF_HOME=$tmp/hf HF_ENDPOINT=http://127.0.0.1:$HP /usr/bin/time -f "%e %M %U %S" -o "$tmp/t" \
    "$QHX" pull -q bench/big --include big.safetensors >/dev/null
  read -r s kb u sy <"$tmp/t"
  r=$(rate "$s"); qhx_rates+=("$r")
  echo "qhx pull  run $i: $s s, $r MB/s, peak RSS $((kb / 1024)) MiB, cpu user $u s sys $sy s"
done
python3 - "${curl_rates[*]}" "${qhx_rates[*]}" <<'PY'
import statistics, sys
c = [float(x) for x in sys.argv[1].split()]
q = [float(x) for x in sys.argv[2].split()]
print("median: curl %.0f MB/s, qhx pull %.0f MB/s: %.0f %%" % (statistics.median(c), statistics.median(q),
      100 * statistics.median(q) / statistics.median(c)))
PY
