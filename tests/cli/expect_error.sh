#!/usr/bin/env bash
# Runs a command that must fail cleanly:
#   expect_error.sh EXPECTED_TEXT OUTPUT_FILE -- COMMAND [ARGS...]
# Passes when the exit code is 1..127 (no crash, no signal), stderr is exactly one line
# containing EXPECTED_TEXT, and OUTPUT_FILE (if not "-") was neither created nor changed.
set -u
expected=$1
output=$2
shift 3
before=""
[[ $output != - && -e $output ]] && before=$(sha256sum "$output")
stderr_file=$(mktemp)
trap 'rm -f "$stderr_file"' EXIT
"$@" >/dev/null 2>"$stderr_file"
code=$?
fail() { echo "FAIL: $*"; echo "--- stderr:"; cat "$stderr_file"; exit 1; }
((code >= 1 && code <= 127)) || fail "exit code $code (want 1..127) from: $*"
lines=$(wc -l <"$stderr_file")
((lines == 1)) || fail "stderr has $lines lines (want exactly one)"
grep -qF -- "$expected" "$stderr_file" || fail "stderr does not mention '$expected'"
if [[ $output != - ]]; then
  after=""
  [[ -e $output ]] && after=$(sha256sum "$output")
  [[ $before == "$after" ]] || fail "output file $output was created or changed"
fi
echo "ok: exit $code: $(cat "$stderr_file")"
