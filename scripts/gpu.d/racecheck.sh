#!/usr/bin/env bash
# compute-sanitizer hook for scripts/gpu.sh (GPU machine, about a minute): memcheck, racecheck
# and synccheck over the small-shape set of cuda-fast v4 (test_mas_handover's
# SmallShapesForRacecheck), then memcheck over the whole MAS CUDA suite. racecheck cannot
# follow the acquire/release flags of v4's warp hand-over, so it reports those accesses as
# hazards; the table groups its reports by source line pair, to be read against the
# argument in src/align/kernels/mas_fast_fused.cu ("Why the hand-over is race-free").
# Full reports land in $OUT/sanitizer/.
set -uo pipefail
HANDOVER="$BUILD/bin/test_mas_handover"
[ -x "$HANDOVER" ] || { echo "racecheck.sh: $HANDOVER not built, skipped"; exit 0; }
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2> /dev/null)
[ -n "$SAN" ] || { echo "racecheck.sh: compute-sanitizer not found, skipped"; exit 0; }
S=$OUT/sanitizer
mkdir -p "$S"
echo "== compute-sanitizer on cuda-fast v4 (small shapes)"
rc=0
for tool in memcheck racecheck synccheck; do
  extra=()
  [ $tool = racecheck ] && extra=(--racecheck-report hazard)
  start=$(date +%s)
  timeout 300 "$SAN" --tool $tool "${extra[@]}" --print-limit 100000 "$HANDOVER" \
    --gtest_filter='*SmallShapesForRacecheck*' > "$S/$tool.txt" 2>&1
  code=$?
  summary=$(grep -E '^========= (ERROR SUMMARY|RACECHECK SUMMARY)' "$S/$tool.txt" | tr '\n' ' ')
  passed=$(grep -c '^\[       OK \]' "$S/$tool.txt")
  printf '%-10s exit %s, %s s, test passed: %s, %s\n' $tool $code $(($(date +%s) - start)) "$passed" "$summary"
  [ $code -eq 0 ] || [ $tool = racecheck ] || rc=1
done
# racecheck's hazards by (access, line) pair: "Write at ... file:line" followed by the other
# access's location.
grep -m 4 -A1 "Race reported" "$S/racecheck.txt" | cut -c1-200
python3 - "$S/racecheck.txt" <<'PY'
import collections, re, sys
pairs, cur = collections.Counter(), None
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"(Error|Warning): Race reported between (\w+) access at (.+?):(\d+)", line)
    if m:
        cur = (m.group(2), f"{m.group(3).split('/')[-1].split(' ')[-1]}:{m.group(4)}")
        continue
    m = re.search(r"and (\w+) access at (.+?):(\d+)", line)
    if m and cur:
        pairs[(cur, (m.group(1), f"{m.group(2).split('/')[-1].split(' ')[-1]}:{m.group(3)}"))] += 1
        cur = None
print(f"racecheck hazard reports by location pair ({sum(pairs.values())} in all):")
for ((a, la), (b, lb)), n in pairs.most_common(20):
    print(f"  {n:6d}  {a:5s} {la:32s} vs {b:5s} {lb}")
PY
echo "== memcheck over the MAS CUDA suite"
start=$(date +%s)
timeout 400 "$SAN" --tool memcheck "$BUILD/bin/test_align" --gtest_filter='MasCuda.*:-*Long*' > "$S/memcheck_suite.txt" 2>&1
code=$?
printf 'memcheck suite exit %s, %s s: %s; %s\n' $code $(($(date +%s) - start)) \
  "$(grep -E '^\[  (PASSED|FAILED)  \]' "$S/memcheck_suite.txt" | tr '\n' ' ')" "$(grep '^========= ERROR SUMMARY' "$S/memcheck_suite.txt")"
[ $code -eq 0 ] || rc=1
exit $rc
