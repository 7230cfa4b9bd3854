#!/usr/bin/env bash
# qhx bench in llama-bench's spelling: -p/-n/-t comma lists and -r give one test per prompt
# size, generation size and thread count; -o md is llama-bench's table, -o json its array of
# objects (its field names), -o csv its header and rows; bad lists and formats are usage errors.
# Run as: bash bench_llama.sh BIN_DIR DATA_DIR SOURCE_DIR
set -uo pipefail
QHX=$1/qhx
FX=$2/fixtures/parity/qwen35-tiny-f32
[ -d "$FX" ] || { echo "FAIL: bench_llama: $FX missing" >&2; exit 1; }
tmp=$(mktemp -d /tmp/qhx_bench_llama.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# md: a header, the separator, then threads x (pp + tg) rows in order
timeout 300 "$QHX" bench -m "$FX" -p 16,32 -n 8 -t 1,2 -r 2 >"$tmp/md" 2>"$tmp/err" || bad "-o md failed: $(cat "$tmp/err")"
python3 - "$tmp/md" <<'PY' || bad "md table: $(cat "$tmp/md")"
import re, sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
head = [c.strip() for c in lines[0].strip("|").split("|")]
assert head == ["model", "size", "params", "backend", "threads", "test", "t/s"], head
assert set(lines[1].replace("|", "").replace(" ", "")) <= set("-:"), lines[1]
rows = [[c.strip() for c in l.strip("|").split("|")] for l in lines[2:]]
assert [(r[4], r[5]) for r in rows] == [("1", "pp16"), ("1", "pp32"), ("1", "tg8"), ("2", "pp16"), ("2", "pp32"), ("2", "tg8")], rows
for r in rows:
    m = re.fullmatch(r"(\d+\.\d\d) ± (\d+\.\d\d)", r[6])
    assert m and float(m.group(1)) > 0, r[6]
    assert r[3] == "CPU" and r[1].endswith("MiB") and r[0].startswith("qwen3_5"), r
PY
# json: an array, llama-bench's names, avg_ts = mean of samples_ts, samples per -r
timeout 300 "$QHX" bench -m "$FX" -p 8 -n 4,0 -r 3 -t 1 -o json >"$tmp/json" 2>"$tmp/err" || bad "-o json failed: $(cat "$tmp/err")"
python3 - "$tmp/json" <<'PY' || bad "json: $(head -c 600 "$tmp/json")"
import json, statistics, sys
d = json.load(open(sys.argv[1]))
assert isinstance(d, list) and len(d) == 2, d
assert [(t["n_prompt"], t["n_gen"]) for t in d] == [(8, 0), (0, 4)]
for t in d:
    for k in ("model_filename", "model_type", "model_size", "model_n_params", "n_threads", "test_time", "avg_ns",
              "stddev_ns", "avg_ts", "stddev_ts", "samples_ns", "samples_ts"):
        assert k in t, k
    assert t["n_threads"] == 1 and len(t["samples_ns"]) == 3 and len(t["samples_ts"]) == 3
    assert abs(statistics.mean(t["samples_ts"]) - t["avg_ts"]) <= 1e-3 * t["avg_ts"] + 1e-3, t
    assert abs(statistics.stdev(t["samples_ts"]) - t["stddev_ts"]) <= 1e-3 * t["avg_ts"] + 1e-3, t
    assert t["model_size"] > 0 and t["model_n_params"] > 0
PY
# csv: the header, one row per test, the same fields
timeout 300 "$QHX" bench -m "$FX" -p 8 -n 4 -r 1 -t 2 -o csv >"$tmp/csv" 2>"$tmp/err" || bad "-o csv failed: $(cat "$tmp/err")"
python3 - "$tmp/csv" <<'PY' || bad "csv: $(cat "$tmp/csv")"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 2, rows
assert [(r["n_prompt"], r["n_gen"]) for r in rows] == [("8", "0"), ("0", "4")]
assert all(r["n_threads"] == "2" and float(r["avg_ts"]) > 0 for r in rows)
PY
# refusals: exit 2, one line naming the option
refuse() {
  local needle=$1; shift
  timeout 60 "$QHX" bench -m "$FX" "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  [ $rc = 2 ] && grep -q -- "$needle" "$tmp/err" && [ ! -s "$tmp/out" ] || bad "bench $*: exit $rc, $(cat "$tmp/err") $(head -c 200 "$tmp/out")"
}
refuse "-o" -p 8 -o xml
refuse "-p" -p 8,x
refuse "-p" -p 8,,16
refuse "-p" -p ,8
refuse "-p" -p 8,
refuse "-t" -t 0 -p 8
refuse "-r" -p 8 -r 0
refuse "-n" -n -1
refuse "no test" -p 0 -n 0
refuse "--pp" -p 8 --pp 8
refuse "-p" -p 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17
timeout 60 "$QHX" bench -p 8 >"$tmp/out" 2>"$tmp/err"; [ $? = 2 ] && grep -q -- "-m" "$tmp/err" || bad "no -m: $(cat "$tmp/err")"

[ $fail = 0 ] && echo "bench_llama: ok"
exit $fail
