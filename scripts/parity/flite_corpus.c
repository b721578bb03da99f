/* A second voice for the parity and alignment benchmarks: the project's sentences spoken by
 * flite (CMU's small synthesizer, Debian's flite1-dev), as an LJSpeech-format folder with the
 * synthesizer's own word timings, the layout scripts/make_corpus.sh writes for espeak-ng:
 *   <out>/metadata.csv   id|text|text
 *   <out>/wavs/<id>.wav  flite's rate (16 kHz for rms/awb/kal16), 16-bit mono; monoflow resamples
 *   <out>/words/<id>.tsv word<TAB>start_s<TAB>end_s per word, from flite's segment relation:
 *                        a word runs from the end of the segment before its first phone to the
 *                        end of its last phone.
 * Build and run (scripts/parity/prepare.sh does both):
 *   cc -O2 -o flite_corpus flite_corpus.c -I/usr/include/flite -lflite_cmu_us_rms \
 *      -lflite_usenglish -lflite_cmulex -lflite -lm
 *   flite_corpus sentences.txt out_dir [prefix]
 * Another of flite's voices (a third voice for docs/accuracy.md, "The aligner config"): define
 * FLITE_VOICE_REGISTER and link that voice, e.g. for awb
 *   cc -O2 -DFLITE_VOICE_REGISTER=register_cmu_us_awb -o flite_awb flite_corpus.c ... -lflite_cmu_us_awb ...
 */
#include <flite.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef FLITE_VOICE_REGISTER
#define FLITE_VOICE_REGISTER register_cmu_us_rms
#endif
cst_voice *FLITE_VOICE_REGISTER(const char *voxdir);

static void make_dir(const char *path) {
  if (mkdir(path, 0755) != 0) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
      fprintf(stderr, "flite_corpus: cannot create %s\n", path);
      exit(1);
    }
  }
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: flite_corpus SENTENCES.txt OUT_DIR [ID_PREFIX (flc)]\n");
    return 2;
  }
  const char *prefix = argc > 3 ? argv[3] : "flc";
  FILE *in = fopen(argv[1], "r");
  if (!in) {
    fprintf(stderr, "flite_corpus: cannot read %s\n", argv[1]);
    return 1;
  }
  char path[4096];
  make_dir(argv[2]);
  snprintf(path, sizeof path, "%s/wavs", argv[2]);
  make_dir(path);
  snprintf(path, sizeof path, "%s/words", argv[2]);
  make_dir(path);
  snprintf(path, sizeof path, "%s/metadata.csv", argv[2]);
  FILE *meta = fopen(path, "w");
  if (!meta) {
    fprintf(stderr, "flite_corpus: cannot write %s\n", path);
    return 1;
  }

  flite_init();
  cst_voice *voice = FLITE_VOICE_REGISTER(NULL);
  char line[8192];
  int n = 0;
  while (fgets(line, sizeof line, in)) {
    line[strcspn(line, "\r\n")] = 0;
    if (!line[0]) continue;
    ++n;
    char id[64];
    snprintf(id, sizeof id, "%s-%04d", prefix, n);
    cst_utterance *utt = flite_synth_text(line, voice);
    snprintf(path, sizeof path, "%s/wavs/%s.wav", argv[2], id);
    if (cst_wave_save_riff(utt_wave(utt), path) != CST_OK_FORMAT) {
      fprintf(stderr, "flite_corpus: cannot write %s\n", path);
      return 1;
    }
    snprintf(path, sizeof path, "%s/words/%s.tsv", argv[2], id);
    FILE *words = fopen(path, "w");
    if (!words) {
      fprintf(stderr, "flite_corpus: cannot write %s\n", path);
      return 1;
    }
    fprintf(words, "word\tstart_s\tend_s\n");
    for (cst_item *w = relation_head(utt_relation(utt, "Word")); w; w = item_next(w)) {
      /* A word without phones (nothing spoken) has no timing. */
      if (!item_as(path_to_item(w, "R:SylStructure.daughter1.daughter1"), "Segment")) continue;
      const float start = ffeature_float(w, "R:SylStructure.daughter1.daughter1.R:Segment.p.end");
      const float end = ffeature_float(w, "R:SylStructure.daughtern.daughtern.R:Segment.end");
      fprintf(words, "%s\t%.4f\t%.4f\n", item_feat_string(w, "name"), start, end);
    }
    fclose(words);
    fprintf(meta, "%s|%s|%s\n", id, line, line);
    delete_utterance(utt);
    if (n % 25 == 0) fprintf(stderr, "flite_corpus: %d sentences\n", n);
  }
  fclose(meta);
  fclose(in);
  fprintf(stderr, "flite_corpus: %d sentences in %s\n", n, argv[2]);
  return 0;
}
