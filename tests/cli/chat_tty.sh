#!/usr/bin/env bash
# qhx chat as a person at a terminal gets it (a pseudo-terminal, lib/chat_tty.py): the banner, a
# pasted block as one message, /set, /system, /stats (the speed line only there), and the line
# history kept across runs under XDG_STATE_HOME.
# Usage: chat_tty.sh BIN_DIR DATA_DIR SOURCE_DIR
set -u
BIN=$1 DATA=$2 SRC=$3
tmp=$(mktemp -d /tmp/qhx_chat_tty.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
timeout 300 python3 "$SRC/tests/cli/lib/chat_tty.py" "$BIN/qhx" "$DATA/fixtures/parity/qwen35-tiny-f32" "$tmp/state" || exit 1
echo "chat_tty: ok"
