#!/usr/bin/env bash
# Parity benchmark hook for scripts/gpu.sh: the official Glow-TTS trainer and monoflow on the same
# corpora, seeds and split (scripts/parity/README.md). Needs .parity/ carried along (made by
# scripts/parity/prepare.sh) and the tools train, convert_weights, align and preprocess built:
#   TESTS=0 TARGETS="train convert_weights align preprocess" HOOKS=parity bash scripts/gpu.sh
# Settings pass through (CORPORA, SEEDS, STEPS, SAVE_EVERY, SIDES: see scripts/parity/run.sh).
set -uo pipefail
[ -d .parity/glow-tts ] || { echo "parity.sh: .parity/ not carried (scripts/parity/prepare.sh makes it), skipped"; exit 0; }
echo "== parity with the official trainer"
BUILD="$BUILD" OUT="$OUT" PARITY=.parity bash scripts/parity/run.sh
