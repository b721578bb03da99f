#!/usr/bin/env bash
# ASan + UBSan over the CPU suites that read untrusted input (issue #13): a second build in
# build-sanitize/ with -fsanitize=address,undefined, then those suites and the fuzzers.
#   scripts/sanitize.sh                 configure, build, run (CI calls it from .ci/run)
#   MONOFLOW_SANITIZE_DIR=... MONOFLOW_JOBS=N MONOFLOW_FUZZ_SECONDS=S scripts/sanitize.sh
#
# Which suites: the parsers and readers of files a user hands us, where a memory error would
# hide: config (YAML), text (cleaners, tokenizer, CMUdict), data (manifests, audio, cache,
# loader), checkpoint (our archives, and their writer thread), interop (torch.save files, official checkpoints), common,
# and the six fuzzers. Not the trainer, models or align suites: they read no outside bytes,
# and building the whole trainer sanitized would not fit CI's time on two cores.
#
# LibTorch comes uninstrumented from the pip wheel; ASan works with it (its allocations are
# intercepted through malloc), but two options are needed:
#   detect_leaks=0        LibTorch's static registries (operators, dispatch tables) are never
#                         freed: LeakSanitizer would report them at every exit
#   protect_shadow_gap=0  so that the CUDA libraries of the CUDA wheel load under ASan
# UBSan stops at the first report (-fno-sanitize-recover), so a report fails the test.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_DIR=${MONOFLOW_SANITIZE_DIR:-$ROOT/build-sanitize}
JOBS=${MONOFLOW_JOBS:-$(nproc)}
FUZZ_SECONDS=${MONOFLOW_FUZZ_SECONDS:-15}
SUITES=(test_common test_config test_text test_data test_checkpoint test_checkpoint_writer test_interop)
FUZZERS=(fuzz_config fuzz_manifest fuzz_wav fuzz_text fuzz_checkpoint fuzz_torch_save)

FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
GENERATOR=()
command -v ninja >/dev/null && GENERATOR=(-G Ninja)
start=$(date +%s)
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_CXX_FLAGS="$FLAGS" \
        -DCMAKE_EXE_LINKER_FLAGS="$FLAGS" -DCMAKE_SHARED_LINKER_FLAGS="$FLAGS" \
        -DMONOFLOW_WITH_CUDA=OFF -DMONOFLOW_PYTHON_MODULE=OFF -DMONOFLOW_PYTHON="$ROOT/.venv/bin/python" \
        -DMONOFLOW_FUZZ_SECONDS="$FUZZ_SECONDS"
fi
# Also for the build: it runs each suite to list its tests.
export ASAN_OPTIONS=detect_leaks=0:protect_shadow_gap=0:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
cmake --build "$BUILD_DIR" -j "$JOBS" --target "${SUITES[@]}" "${FUZZERS[@]}"
echo "sanitize: built in $(( $(date +%s) - start )) s"

start=$(date +%s)
# Each suite's tests carry its name as a label, the fuzzers the label fuzz.
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" -L "^($(IFS='|'; echo "${SUITES[*]}")|fuzz)\$"
echo "sanitize: ran in $(( $(date +%s) - start )) s"
