#!/usr/bin/env bash
# docs/passes.md carries what `pipeweave opt --list-passes` prints, between its ```text
# fence and the closing one: a pass or option added without the page fails here.
#   docs_passes_test.sh PIPEWEAVE DOCS_PASSES_MD
set -u
pw=$1
page=$2
listed=$(awk '/^```text$/ {on = 1; next} /^```$/ {on = 0} on' "$page")
actual=$("$pw" opt --list-passes 2>&1) || { echo "FAIL: opt --list-passes exited $?"; exit 1; }
if [[ "$listed" != "$actual" ]]; then
  echo "FAIL: $page is out of date with 'pipeweave opt --list-passes':"
  diff <(echo "$listed") <(echo "$actual") | head -10
  echo "regenerate its list with build/tools/pipeweave opt --list-passes"
  exit 1
fi
echo "docs/passes.md matches opt --list-passes"
