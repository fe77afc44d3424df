#!/usr/bin/env bash
# check_report_in_chromium.sh REPORT_FIXTURE WORKDIR [SCREENSHOT.png]
# Renders the fixture's report.html in headless chromium and checks that every script
# ran: <body data-render-ok="1" data-charts="N>=1">, no data-js-errors, and no console
# error or uncaught exception in chromium's log. Fails (never skips) without chromium.
set -euo pipefail

fixture=$1
work=$2
screenshot=${3:-}

chromium=$(command -v chromium || command -v chromium-browser || true)
if [[ -z "$chromium" ]]; then
  echo "FAIL: chromium not found; install it (Debian: apt-get install chromium)" >&2
  exit 1
fi

rm -rf "$work"
mkdir -p "$work"
"$fixture" "$work/report.html"

# Root in a container needs --no-sandbox; a private profile keeps parallel runs apart.
flags=(--headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$work/profile"
       --enable-logging=stderr --v=0 --virtual-time-budget=5000)
"$chromium" "${flags[@]}" --dump-dom "file://$work/report.html" >"$work/dom.html" 2>"$work/chromium.log" || {
  echo "FAIL: chromium exited with $?; log:" >&2
  cat "$work/chromium.log" >&2
  exit 1
}

fail=0
body=$(grep -o '<body[^>]*>' "$work/dom.html" | head -n 1 || true)
echo "body: $body"
if [[ "$body" != *'data-render-ok="1"'* ]]; then
  echo 'FAIL: no data-render-ok="1" on <body>' >&2
  fail=1
fi
charts=$(sed -n 's/.*data-charts="\([0-9]*\)".*/\1/p' <<<"$body")
if [[ -z "$charts" || "$charts" -lt 1 ]]; then
  echo "FAIL: data-charts is '${charts}', expected >= 1" >&2
  fail=1
fi
if [[ "$body" == *'data-js-errors'* ]]; then
  echo "FAIL: the page recorded script errors: $(grep -o 'id="js-errors"[^<]*' "$work/dom.html")" >&2
  fail=1
fi
# The fixture's failure message "</script><b>x</b>..." must stay text, not markup.
if grep -q '<b>' "$work/dom.html"; then
  echo "FAIL: a trial message became markup (<b> in the DOM)" >&2
  fail=1
fi
if grep -E 'CONSOLE|Uncaught' "$work/chromium.log" >&2; then
  echo "FAIL: console messages or uncaught exceptions in chromium's log (above)" >&2
  fail=1
fi

if [[ -n "$screenshot" ]]; then
  "$chromium" "${flags[@]}" --hide-scrollbars --window-size=1400,2000 \
    --screenshot="$screenshot" "file://$work/report.html" 2>>"$work/chromium.log"
fi

if [[ $fail -ne 0 ]]; then
  echo "chromium log: $work/chromium.log; DOM: $work/dom.html" >&2
  exit 1
fi
echo "OK: report.html rendered $charts charts without script errors"
