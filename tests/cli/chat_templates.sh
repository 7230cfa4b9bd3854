#!/usr/bin/env bash
# The built-in chat formats (src/text/tok_chat.c) against the released chat templates, token for
# token: every template under tests/data/chat_templates, rendered by python3-jinja2 as
# transformers renders it, over a matrix of conversations (system or not, several turns,
# thinking on/off and reasoning in the history, images, tools and tool responses), must equal
# `qhx chat-format`. Skipped (77), and says so, while no template is there.
# Run as: bash chat_templates.sh BIN_DIR DATA_DIR SOURCE_DIR
set -uo pipefail
QHX=$1/qhx
FIX=$2/fixtures/parity
[ -d "$FIX/qwen35-tiny-f32" ] && [ -d "$FIX/qwen3vl-tiny-f32" ] || { echo "FAIL: chat_templates: fixtures missing under $FIX" >&2; exit 1; }
python3 -c 'import jinja2' 2>/dev/null || { echo "FAIL: chat_templates: python3-jinja2 missing (scripts/deps.sh installs it)" >&2; exit 1; }
python3 "$3/tests/cli/lib/chat_templates.py" "$QHX" "$2/chat_templates" "$FIX/qwen35-tiny-f32" "$FIX/qwen3vl-tiny-f32"
rc=$?
# the note for a checkpoint whose own chat_template is not a known one, said once
tmp=$(mktemp -d /tmp/qhx_chat_templates.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/m"
for f in "$FIX/qwen35-tiny-f32"/*; do ln -s "$(realpath "$f")" "$tmp/m/"; done
rm "$tmp/m/tokenizer_config.json"
# another template in the family's turn marks (a fine-tune's edit): a note, and the built-in format
python3 -c "import json,sys; t=json.load(open(sys.argv[1])); t['chat_template']='{% for m in messages %}<|im_start|>{{ m.role }}{{ m.content }}<|im_end|>{% endfor %}'; json.dump(t, open(sys.argv[2], 'w'))" \
  "$FIX/qwen35-tiny-f32/tokenizer_config.json" "$tmp/m/tokenizer_config.json"
printf 'hi\n' | "$QHX" chat -m "$tmp/m" -n 2 --greedy >/dev/null 2>"$tmp/err"
[ "$(grep -c "not a released one" "$tmp/err")" = 1 ] && grep -q "the built-in Qwen3.5 format is used" "$tmp/err" ||
  { echo "FAIL: chat with an unknown chat_template: $(cat "$tmp/err")"; rc=1; }
"$QHX" generate -m "$tmp/m" -p hi --chat -n 2 --greedy --quiet >/dev/null 2>"$tmp/err"
[ "$(grep -c "not a released one" "$tmp/err")" = 1 ] || { echo "FAIL: generate --chat with an unknown chat_template: $(cat "$tmp/err")"; rc=1; }
"$QHX" generate -m "$FIX/qwen35-tiny-f32" -p hi --chat -n 2 --greedy --quiet >/dev/null 2>"$tmp/err"
grep -q "not a released one" "$tmp/err" && { echo "FAIL: a note without a chat_template: $(cat "$tmp/err")"; rc=1; }
# a template that writes no turns of the family's format: chat refused with one line (a chat
# prompt would silently differ), plain text still runs
python3 -c "import json,sys; t=json.load(open(sys.argv[1])); t['chat_template']='{{ messages }}'; json.dump(t, open(sys.argv[2], 'w'))" \
  "$FIX/qwen35-tiny-f32/tokenizer_config.json" "$tmp/m/tokenizer_config.json"
printf 'hi\n' | "$QHX" chat -m "$tmp/m" -n 2 --greedy >/dev/null 2>"$tmp/err"; r=$?
[ $r = 1 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "does not write Qwen3.5 turns" "$tmp/err" ||
  { echo "FAIL: chat with a foreign chat_template: exit $r: $(cat "$tmp/err")"; rc=1; }
"$QHX" generate -m "$tmp/m" -p hi -n 2 --greedy --quiet >/dev/null 2>"$tmp/err" || { echo "FAIL: plain text with a foreign chat_template: $(cat "$tmp/err")"; rc=1; }
# tools: rendered by both formats (the matrix above compares them with the templates), and a
# malformed tool call is one line
printf '{"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f"}}]}' >"$tmp/tools.json"
for m in qwen35-tiny-f32 qwen3vl-tiny-f32; do
  "$QHX" chat-format -m "$FIX/$m" "$tmp/tools.json" >"$tmp/out" 2>"$tmp/err" && grep -q "^# Tools" "$tmp/out" ||
    { echo "FAIL: chat-format with tools on $m: $(cat "$tmp/err")"; rc=1; }
done
grep -q '^{"type": "function", "function": {"name": "f"}}$' "$tmp/out" || { echo "FAIL: Qwen3-VL tools are not tojson lines: $(cat "$tmp/out")"; rc=1; }
printf '{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "", "tool_calls": [{"function": {"arguments": {}}}]}]}' >"$tmp/bad.json"
"$QHX" chat-format -m "$FIX/qwen35-tiny-f32" "$tmp/bad.json" >/dev/null 2>"$tmp/err"
[ $? = 1 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "has no name" "$tmp/err" || { echo "FAIL: a tool call without a name: $(cat "$tmp/err")"; rc=1; }
exit $rc
