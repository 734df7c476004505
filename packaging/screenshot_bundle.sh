#!/bin/sh
# Open the built bundle (dist/Llambda) under Xvfb on the self-test model, ask it "ping", and save
# a screenshot of the whole screen: what a person sees after a double-click.
#
#   packaging/screenshot_bundle.sh [OUT.png]      default: screenshots/bundle.png
#
# Needs Xvfb (Debian: apt-get install xvfb) and xdotool for typing the question (without it the
# screenshot shows the window with the model loaded); the screen is grabbed from the X server by a
# separate Qt client (PYTHON, default .venv/bin/python, with PySide6).
# A set LLAMBDA_HOME is used and kept (to look at the conversation afterwards); otherwise a
# temporary one is used and removed. Uses a temporary LLAMBDA_HOME: the user's own models and conversations are untouched.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/screenshots/bundle.png}
bundle=${BUNDLE:-$root/dist/Llambda}
[ -x "$bundle/Llambda" ] || { echo "screenshot_bundle.sh: build the bundle first (packaging/build_bundle.sh)" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
if [ -n "${LLAMBDA_HOME:-}" ]; then home=$LLAMBDA_HOME; keep=1; else home=$(mktemp -d); keep=0; fi
log=$(mktemp)
dfile=$(mktemp)
Xvfb -displayfd 3 -screen 0 1400x900x24 -nolisten tcp 3>"$dfile" 2>/dev/null &
xvfb=$!
app=
cleanup() {
    [ -n "$app" ] && kill "$app" 2>/dev/null && wait "$app" 2>/dev/null || true
    kill "$xvfb" 2>/dev/null || true
    [ "$keep" = 1 ] || rm -rf "$home"
    rm -f "$log" "$dfile"
}
trap cleanup EXIT
for _ in $(seq 50); do [ -s "$dfile" ] && break; sleep 0.2; done
[ -s "$dfile" ] || { echo "screenshot_bundle.sh: Xvfb did not start" >&2; exit 1; }
display=:$(head -1 "$dfile")
if [ -z "${PYTHON:-}" ]; then
    if [ -x "$root/.venv/bin/python" ]; then PYTHON=$root/.venv/bin/python; else PYTHON=python3; fi
fi
# wait_for SECONDS COMMAND...: poll until COMMAND succeeds
wait_for() { t=$1; shift; for _ in $(seq $(( t * 5 ))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done; return 1; }
answered() {
    "$PYTHON" -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); sys.exit(0 if any("Hello from Llambda!" in l for l in c.iterdump()) else 1)' "$home/data/chats.sqlite3"
}
model=$bundle/_internal/resources/selftest/tiny.gguf
DISPLAY=$display LLAMBDA_HOME=$home QT_QPA_PLATFORM=xcb "$bundle/Llambda" "$model" >"$log" 2>&1 &
app=$!
if command -v xdotool >/dev/null 2>&1; then
    wait_for 60 env DISPLAY=$display xdotool search --name '^Llambda$' \
        || { echo "screenshot_bundle.sh: no Llambda window appeared" >&2; cat "$log" >&2; exit 1; }
    win=$(DISPLAY=$display xdotool search --name '^Llambda$' | head -1)
    sleep 3   # the model is imported and loaded in the worker thread
    DISPLAY=$display xdotool windowfocus --sync "$win" 2>/dev/null || true
    DISPLAY=$display xdotool type --delay 40 "ping"
    DISPLAY=$display xdotool key Return
    wait_for 60 answered || echo "screenshot_bundle.sh: no answer stored after 60 s" >&2
    sleep 0.5
else
    sleep 8
fi
DISPLAY=$display QT_QPA_PLATFORM=xcb "$PYTHON" -c '
import sys
from PySide6.QtGui import QGuiApplication
app = QGuiApplication(sys.argv[:1])
sys.exit(0 if app.primaryScreen().grabWindow(0).save(sys.argv[1], "PNG") else 1)
' "$out"
if ! kill -0 "$app" 2>/dev/null; then
    echo "screenshot_bundle.sh: Llambda exited early:" >&2
    cat "$log" >&2
    exit 1
fi
echo "screenshot_bundle.sh: $out"
