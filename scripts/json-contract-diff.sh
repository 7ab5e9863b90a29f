#!/usr/bin/env bash
# Compares the `--json` output of two contextfold binaries over a corpus: `compact --json`
# (default budget and --budget 8000, and the conversations they write) and
# `replay --json --window 16k,32k,64k` (with its per-file CSV). Durations are left out.
# Usage: scripts/json-contract-diff.sh BEFORE AFTER [CORPUS_DIR] [OUT_DIR]
set -euo pipefail
before=$1 after=$2 corpus=${3:-../shared/corpus} out=${4:-$(mktemp -d)}
files=()
for file in "$corpus"/*.json; do [[ $(basename "$file") == manifest.json ]] || files+=("$file"); done
# Durations change from run to run; a written file's path names the side's own directory.
drop='walk(if type == "object" then with_entries(select(.key | test("duration|elapsed") | not)) else . end)
  | if type == "object" and (.output | type) == "string" then .output |= sub(".*/"; "") else . end'
for side in before after; do
  bin=${!side}
  mkdir -p "$out/$side"
  for budget in default 8000; do
    flags=(); [[ $budget == default ]] || flags=(--budget "$budget")
    "$bin" compact "${files[@]}" --json "${flags[@]}" --out-dir "$out/$side/compact-$budget" \
      > "$out/$side/compact-$budget.raw" 2> "$out/$side/compact-$budget.err" || echo "$side compact $budget: exit $?"
    jq -cS "$drop" "$out/$side/compact-$budget.raw" > "$out/$side/compact-$budget.jsonl"
  done
  "$bin" replay "${files[@]}" --json --window 16k,32k,64k --csv "$out/$side/replay.csv" \
    > "$out/$side/replay.raw" 2> "$out/$side/replay.err" || echo "$side replay: exit $?"
  jq -cS "$drop" "$out/$side/replay.raw" > "$out/$side/replay.json"
done
status=0
for name in compact-default.jsonl compact-8000.jsonl replay.json replay.csv; do
  if cmp -s "$out/before/$name" "$out/after/$name"; then echo "same: $name"; else echo "DIFFERENT: $name"; status=1; fi
  if [[ $name == compact-* ]]; then
    diff --new-line-format= --unchanged-line-format= "$out/before/$name" "$out/after/$name" | jq -r '"  report changed: " + .file' || true
  fi
done
for budget in default 8000; do
  if diff -rq "$out/before/compact-$budget" "$out/after/compact-$budget" > /dev/null; then
    echo "same: compact-$budget/ (written conversations)"
  else echo "DIFFERENT: compact-$budget/ (written conversations)"; status=1; fi
done
echo "output in $out"
exit $status
