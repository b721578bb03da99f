#!/usr/bin/env bash
# Renders the default monoflow corpus: the sentences of scripts/corpus/sentences.txt (written for
# the project) spoken by espeak-ng, as an LJSpeech-format folder:
#   <out>/metadata.csv   id|text|text   (the text front-end's cleaners do the normalisation)
#   <out>/wavs/<id>.wav  22050 Hz, 16-bit, mono
#   <out>/words/<id>.tsv espeak-ng's word timings of that wav (word, start s, end s; header line):
#                        the reference that scripts/score_alignment.py scores align's output against
# The wav and its word timings come from one synthesis by build/bin/speak (libespeak-ng's word and
# phoneme events; MONOFLOW_SPEAK or MONOFLOW_BUILD_DIR point elsewhere). Without that tool the
# espeak-ng command renders the wavs alone and words/ is not written.
# Usage: scripts/make_corpus.sh [out_dir (default <repo>/data/monoflow-corpus)] [--limit N] [--jobs N]
# Idempotent: a wav is rendered only when missing, when its sentence/voice/renderer changed, or
# when its word timings are missing.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SENTENCES=$ROOT/scripts/corpus/sentences.txt
OUT=""
LIMIT=0
JOBS=$(nproc 2>/dev/null || echo 2)
while (($#)); do
  case "$1" in
    --limit) LIMIT=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) OUT=$1; shift ;;
  esac
done
OUT=${OUT:-$ROOT/data/monoflow-corpus}
VOICE=${MONOFLOW_CORPUS_VOICE:-en-us}
SPEED=${MONOFLOW_CORPUS_SPEED:-160}
RATE=22050

SPEAK=${MONOFLOW_SPEAK:-${MONOFLOW_BUILD_DIR:-$ROOT/build}/bin/speak}
# The tool must work here too: a build without libespeak-ng has one that refuses to speak.
if [ -x "$SPEAK" ] && "$SPEAK" --text=a --wav /dev/null >/dev/null 2>&1; then
  RENDERER=speak
else
  RENDERER=espeak-ng
  command -v espeak-ng >/dev/null || { echo "make_corpus: espeak-ng is not installed (apt-get install espeak-ng)" >&2; exit 1; }
  echo "make_corpus: warning: $SPEAK is not built or cannot speak (built without libespeak-ng):" \
    "rendering with the espeak-ng command, without word timings (words/)" >&2
fi
mkdir -p "$OUT/wavs" "$OUT/words" "$OUT/.sums"

n_total=$(wc -l < "$SENTENCES")
((LIMIT > 0 && LIMIT < n_total)) && n_total=$LIMIT

# One job per sentence that needs rendering: its line number.
export OUT VOICE SPEED RATE SENTENCES SPEAK RENDERER
render() {
  local n=$1 id text sum tmp words
  id=$(printf 'mfc-%04d' "$n")
  text=$(sed -n "${n}p" "$SENTENCES")
  sum=$(printf '%s|%s|%s|%s' "$RENDERER" "$VOICE" "$SPEED" "$text" | md5sum | cut -c1-32)
  words="$OUT/words/$id.tsv"
  if [[ -s "$OUT/wavs/$id.wav" && "$(cat "$OUT/.sums/$id" 2>/dev/null)" == "$sum" &&
        ("$RENDERER" != speak || -s "$words") ]]; then echo kept; return 0; fi
  tmp="$OUT/wavs/.$id.tmp.wav"
  if [[ "$RENDERER" == speak ]]; then
    "$SPEAK" --text="$text" -v "$VOICE" -s "$SPEED" --wav "$tmp" --words "$words.tmp"
    mv "$words.tmp" "$words"
  else
    printf '%s' "$text" | espeak-ng -v "$VOICE" -s "$SPEED" --stdin -w "$tmp"
  fi
  if command -v soxi >/dev/null && [[ "$(soxi -r "$tmp")" != "$RATE" || "$(soxi -c "$tmp")" != 1 ]]; then
    sox "$tmp" -r "$RATE" -c 1 -b 16 "$tmp.2.wav" && mv "$tmp.2.wav" "$tmp"
  fi
  mv "$tmp" "$OUT/wavs/$id.wav"
  printf '%s' "$sum" > "$OUT/.sums/$id"
  echo rendered
}
export -f render
start=$(date +%s%N)
# One line per sentence comes back (rendered or kept); a progress line every EVERY of them, so
# that the ~2 minutes of a first render on two cores show from their first second.
EVERY=${MONOFLOW_CORPUS_PROGRESS_EVERY:-25}
echo "make_corpus: rendering $n_total sentences into $OUT with $RENDERER ($JOBS jobs; up-to-date wavs are kept)"
shopt -s lastpipe  # the loop below runs in this shell, so that its counts stay; pipefail keeps failures
rendered=0
done_count=0
seq 1 "$n_total" | xargs -P "$JOBS" -I{} bash -c 'set -eo pipefail; render {}' | while IFS= read -r what; do
  done_count=$((done_count + 1))
  [[ "$what" == rendered ]] && rendered=$((rendered + 1))
  if ((done_count % EVERY == 0 || done_count == n_total)); then
    printf 'make_corpus: %d/%d sentences (%d rendered, %d s)\n' "$done_count" "$n_total" "$rendered" \
      $((($(date +%s%N) - start) / 1000000000))
  fi
done

# metadata.csv, written atomically
tmp_meta="$OUT/.metadata.csv.tmp"
: > "$tmp_meta"
n=0
while IFS= read -r line && ((n < n_total)); do
  n=$((n + 1))
  printf 'mfc-%04d|%s|%s\n' "$n" "$line" "$line" >> "$tmp_meta"
done < "$SENTENCES"
mv "$tmp_meta" "$OUT/metadata.csv"
ms=$((($(date +%s%N) - start) / 1000000))
printf 'make_corpus: %s: %d utterances (%d rendered now) in %d.%03d s\n' "$OUT" "$n_total" "$rendered" $((ms / 1000)) $((ms % 1000))
