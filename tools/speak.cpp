// speak: a text spoken by espeak-ng into a 16-bit WAV, and the word timings of that synthesis
// as a TSV (word, start s, end s). scripts/make_corpus.sh renders the default corpus with it, so
// that words/<id>.tsv is the reference alignment of wavs/<id>.wav:
//   speak --text "Hello there." --wav hello.wav --words hello.tsv [--voice en-us] [--speed 160]
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>

#include "cli_main.h"
#include "common/error.h"
#include "data/audio.h"
#include "data/text/speech.h"

namespace {

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out.flush()) throw monoflow::FileError(path, 0, "cannot write");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace monoflow;
  CLI::App app{"Speak a text with espeak-ng: a WAV file and the word timings of the same synthesis."};
  std::string text, wav, words;
  text::SpeakOptions o;
  app.add_option("--text", text, "what to say")->required();
  app.add_option("--wav", wav, "output WAV (mono, 16-bit, espeak-ng's rate: 22050 Hz)")->required();
  app.add_option("--words", words, "also write the word timings: word, start s, end s (TSV with a header)");
  app.add_option("--voice,-v", o.voice, "espeak-ng voice or language");
  app.add_option("--speed,-s", o.words_per_minute, "words per minute, 80..450");
  return cli_main(app, argc, argv, CliStyle("speak"), [&] {
    const text::Speech s = text::speak(text, o);
    if (s.samples.empty()) throw UserError("--text '" + text + "': espeak-ng produced no audio");
    write_bytes(wav, data::wav_pcm16_bytes(s.samples, s.sample_rate));
    if (!words.empty()) write_bytes(words, text::word_timings_tsv(s.words));
    return 0;
  });
}
