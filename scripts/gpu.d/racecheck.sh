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
# racecheck's hazards by kind and (access, function, line) pair. Its reports read
#   Error: Potential RAW hazard detected at __shared__ 0x400 in block (0,0,0) :
#       Write Thread (31,0,0) at ...::fused_chunk<...>(...)+0x7e10 in mas_fast_fused.cu:205
#       Read Thread (32,0,0) at ...::fused_chunk<...>(...)+0x35c0 in mas_fast_fused.cu:181
python3 - "$S/racecheck.txt" <<'PY'
import collections, re, sys
lines = open(sys.argv[1], errors="replace").read().split("\n")
access = re.compile(r"(Read|Write) Thread \(\d+,\d+,\d+\) at (.*?)\+0x[0-9a-f]+ in (\S+):(\d+)")
pairs = collections.Counter()
for i, line in enumerate(lines[:-2]):
    m = re.search(r"Potential (\w+) hazard detected", line)
    a, b = access.search(lines[i + 1]), access.search(lines[i + 2])
    if not (m and a and b):
        continue
    name = lambda x: "%s %s %s:%s" % (x[1], re.sub(r".*::", "", x[2].split("(")[0]).rstrip("<"), x[3], x[4])
    pairs[(m[1], name(a), name(b))] += 1
print("racecheck hazards by pair (%d in all):" % sum(pairs.values()))
for (kind, a, b), n in pairs.most_common(20):
    print("  %6d  %s  %-40s vs %s" % (n, kind, a, b))
PY
echo "== memcheck over the MAS CUDA suite"
start=$(date +%s)
timeout 400 "$SAN" --tool memcheck "$BUILD/bin/test_align" --gtest_filter='MasCuda.*:-*Long*' > "$S/memcheck_suite.txt" 2>&1
code=$?
printf 'memcheck suite exit %s, %s s: %s; %s\n' $code $(($(date +%s) - start)) \
  "$(grep -E '^\[  (PASSED|FAILED)  \]' "$S/memcheck_suite.txt" | tr '\n' ' ')" "$(grep '^========= ERROR SUMMARY' "$S/memcheck_suite.txt")"
[ $code -eq 0 ] || rc=1
exit $rc
