#!/usr/bin/env bash
# Prepares the parity benchmark on a Debian 12 machine with network (this project's machine), into
# .parity/ (ignored), small enough to carry to the GPU machine:
#   .parity/glow-tts/         the official Glow-TTS source at a pinned commit (fetched, never committed)
#   .parity/wheels/           the pure-Python wheels its text front-end imports (Unidecode, inflect)
#   .parity/corpora/default/  the default corpus (espeak-ng en-us): metadata.csv, wavs/*.flac, words/
#   .parity/corpora/flite/    the same sentences spoken by flite's rms voice, with flite's word timings
#   .parity/corpora/awb/      with --voices: flite's awb voice (Scottish English), flite's timings
#   .parity/corpora/kal/      with --voices: Festival's kal_diphone, Festival's timings
# Usage: scripts/parity/prepare.sh [--official SRC] [--voices "default flite awb kal"]
#        (SRC: a clone URL or a local git folder; default the official repository,
#        jaywalnut310/glow-tts on GitHub; --voices: the corpora to make, default "default flite")
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
PARITY=$ROOT/.parity
OFFICIAL_SRC=https://github.com/jaywalnut310/glow-tts
OFFICIAL_COMMIT=13e997689d643410f5d9f1f9a73877ae85e19bc2
VOICES="default flite"
while (($#)); do
  case "$1" in
    --official) OFFICIAL_SRC=$2; shift 2 ;;
    --voices) VOICES=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "prepare: unknown argument $1" >&2; exit 2 ;;
  esac
done
for voice in $VOICES; do
  case "$voice" in
    default|flite|awb|kal) ;;
    *) echo "prepare: --voices: unknown voice '$voice' (give default, flite, awb, kal)" >&2; exit 2 ;;
  esac
done
mkdir -p "$PARITY"

need=(flite1-dev flac)
[[ " $VOICES " == *" kal "* ]] && need+=(festival festvox-kallpc16k)
missing=()
for p in "${need[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p"); done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The official source at the pinned commit, without its history, pictures and filelists.
if [ ! -f "$PARITY/glow-tts/train.py" ]; then
  rm -rf "$PARITY/glow-tts.git" "$PARITY/glow-tts"
  git clone -q "$OFFICIAL_SRC" "$PARITY/glow-tts.git"
  git -C "$PARITY/glow-tts.git" -c advice.detachedHead=false checkout -q "$OFFICIAL_COMMIT"
  mkdir -p "$PARITY/glow-tts"
  git -C "$PARITY/glow-tts.git" archive "$OFFICIAL_COMMIT" | tar -x -C "$PARITY/glow-tts"
  # data/cmu_dictionary is left out too: the parity configs use no dictionary (3.6 MB less to carry).
  rm -rf "$PARITY/glow-tts.git" "$PARITY/glow-tts/resources" "$PARITY/glow-tts/filelists" "$PARITY/glow-tts/data"
  echo "prepare: official Glow-TTS $OFFICIAL_COMMIT in $PARITY/glow-tts"
fi

# Wheels for the GPU machine's Python (3.12 there); pure Python, so any platform's will do.
if [ -z "$(ls "$PARITY"/wheels/[Uu]nidecode-*.whl 2>/dev/null)" ]; then
  .venv/bin/pip download -q --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
    -d "$PARITY/wheels" Unidecode inflect
fi

to_corpus() {  # source_dir name: metadata and words as they are, the audio as FLAC (half the bytes)
  local src=$1 dst=$PARITY/corpora/$2
  mkdir -p "$dst/wavs" "$dst/words"
  cp "$src/metadata.csv" "$dst/"
  cp "$src"/words/*.tsv "$dst/words/"
  for wav in "$src"/wavs/*.wav; do
    local flac=$dst/wavs/$(basename "${wav%.wav}").flac
    [ -s "$flac" ] || flac -s --best -f -o "$flac" "$wav"
  done
  echo "prepare: $2: $(wc -l < "$dst/metadata.csv") utterances, $(du -sh "$dst" | cut -f1)"
}

flite_voice() {  # flite voice, data folder, id prefix: the sentences spoken by that flite voice
  cc -O2 -DFLITE_VOICE_REGISTER="register_cmu_us_$1" -o "$PARITY/flite_corpus_$1" scripts/parity/flite_corpus.c \
    -I/usr/include/flite "-lflite_cmu_us_$1" -lflite_usenglish -lflite_cmulex -lflite -lm
  mkdir -p "$(dirname "$2")"
  [ -s "$2/metadata.csv" ] || "$PARITY/flite_corpus_$1" scripts/corpus/sentences.txt "$2" "$3"
}

for voice in $VOICES; do  # one statement a line: set -e stops at the first that fails
  case "$voice" in
    default)  # the default corpus (espeak-ng), as scripts/quickstart.sh renders it
      scripts/make_corpus.sh
      to_corpus data/monoflow-corpus default ;;
    flite)  # a second synthesizer: flite's rms, with its own word timings
      flite_voice rms data/flite-corpus flc
      to_corpus data/flite-corpus flite ;;
    awb)  # another of flite's voices, a Scottish-English male
      flite_voice awb data/awb-corpus fla
      to_corpus data/awb-corpus awb ;;
    kal)  # a third synthesizer: Festival's kal_diphone, with Festival's word timings
      [ -s data/kal-corpus/metadata.csv ] ||
        python3 scripts/parity/festival_corpus.py scripts/corpus/sentences.txt data/kal-corpus fst
      to_corpus data/kal-corpus kal ;;
  esac
done
du -sh "$PARITY"
