#!/usr/bin/env bash
# `pipeweave opt` end to end: --list-passes, instrumentation on stderr, output files in
# both formats matching the golden the in-process golden test checks.
#   opt_cli_test.sh PIPEWEAVE GOLDEN_DIR WORK_DIR
set -u
pw=$1
golden=$2
work=$3
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

list=$("$pw" opt --list-passes) || fail "--list-passes exited $?"
for want in "append-backward" "dce" "optimizer=<string>" "lr=<float>" "one of sgd, adam"; do
  grep -qF -- "$want" <<<"$list" || fail "--list-passes does not show '$want'"
done

rm -f "$work"/sgd.pbtxt "$work"/sgd.pb "$work"/again.pbtxt
"$pw" opt "$golden/mlp.pbtxt" -p 'append-backward{lr=0.1}' -o "$work/sgd.pbtxt" \
  --print-after=all --time-passes --stats 2>"$work/stderr" || fail "opt exited $?"
for want in "// ----- IR after append-backward ----- //" "Pass execution timing report" \
            "append-backward" "(verifier)" "Pass statistics" "sum-ops"; do
  grep -qF -- "$want" "$work/stderr" || fail "stderr lacks '$want'"
done
cmp -s "$work/sgd.pbtxt" "$golden/append_backward_sgd.expected.pbtxt" ||
  fail "opt output differs from append_backward_sgd.expected.pbtxt"

# Binary out, then back to text with an empty pipeline (load + verify + save).
"$pw" opt "$golden/mlp.pbtxt" -p 'append-backward{lr=0.1}' -o "$work/sgd.pb" ||
  fail "opt to .pb exited $?"
"$pw" opt "$work/sgd.pb" -o "$work/again.pbtxt" || fail "opt .pb -> .pbtxt exited $?"
cmp -s "$work/again.pbtxt" "$golden/append_backward_sgd.expected.pbtxt" ||
  fail "binary round trip differs from the golden"

# Without -o the module goes to stdout; --no-verify is accepted.
"$pw" opt "$golden/mlp.pbtxt" -p dce --no-verify | grep -q 'name: "mlp"' ||
  fail "no module text on stdout"

# A bad pipeline: exit 2, one line on stderr, no output file.
"$pw" opt "$golden/mlp.pbtxt" -p 'dce,' -o "$work/bad.pb" 2>"$work/stderr"
code=$?
((code == 2)) || fail "bad pipeline exited $code, want 2"
[[ $(wc -l <"$work/stderr") == 1 ]] || fail "bad pipeline: stderr is not one line"
[[ ! -e $work/bad.pb ]] || fail "bad pipeline created the output file"
echo "ok"
