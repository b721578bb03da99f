// Fuzzes the dataset lists: an LJSpeech metadata.csv and a filelist, read by
// data::load_datasets with both on_bad_line policies (the manifest parser, the BOM and UTF-8
// checks, the text encoder, the audio probe and the alignment check behind them). A bad line
// is skipped or a FileError naming file:line; nothing else may escape.
#include <cmath>
#include <filesystem>
#include <memory>

#include "data/audio.h"
#include "data/datasets.h"
#include "data/text_encoder.h"
#include "fuzz_driver.h"

using namespace monoflow;

namespace {

// Seconds of a tone, so that lines can pass the alignment check.
std::vector<float> tone(double seconds) {
  std::vector<float> s(static_cast<size_t>(seconds * 22050));
  for (size_t i = 0; i < s.size(); ++i) s[i] = 0.3f * static_cast<float>(std::sin(i * 0.05));
  return s;
}

struct Corpus {
  std::string dir;
  data::TextEncoder encoder;
};

const Corpus& corpus() {
  static const Corpus c = [] {
    Corpus out;
    out.dir = fuzz::temp_dir("fuzz_manifest");
    std::filesystem::create_directories(out.dir + "/wavs");
    data::write_audio(out.dir + "/wavs/LJ001-0001.wav", tone(1.0), 22050);
    data::write_audio(out.dir + "/wavs/LJ001-0002.wav", tone(0.3), 22050);
    data::write_audio(out.dir + "/wavs/stereo.wav", tone(0.8), 16000, 2);
    text::TextOptions o;
    o.add_blank = true;
    out.encoder = data::text_encoder(std::make_shared<const text::TextProcessor>(o));
    return out;
  }();
  return c;
}

data::DataOptions options(const std::string& policy) {
  data::DataOptions o;
  o.on_bad_line = policy;
  o.validation_size = 1;
  o.n_sqz = 2;
  return o;
}

// The first byte picks the layout: '/' a filelist (path|text), '+' a multi-speaker filelist
// (path|speaker|text), each after that byte, anything else an LJSpeech metadata.csv.
void run(const std::string& input) {
  const Corpus& c = corpus();
  const bool multi = !input.empty() && input[0] == '+';
  const bool filelist = multi || (!input.empty() && input[0] == '/');
  fuzz::write_bytes(c.dir + (filelist ? "/filelist.txt" : "/metadata.csv"), filelist ? input.substr(1) : input);
  fuzz::QuietStderr quiet;
  for (const char* policy : {"skip", "error"}) {
    data::DataOptions o = options(policy);
    if (filelist) {
      // Paths relative to the corpus (an absolute one, or one leading out, is a bad line); the
      // validation set is the seeded split (a second list naming the same wavs would repeat them).
      o.training_files = c.dir + "/filelist.txt";
      o.dataset_dir = c.dir;
      o.n_speakers = multi ? 4 : 0;
    } else {
      o.dataset_dir = c.dir;
    }
    data::load_datasets(o, c.encoder);
  }
}

}  // namespace

int main(int argc, char** argv) {
  fuzz::Target t;
  t.name = "fuzz_manifest";
  const std::string dir = corpus().dir;
  // Valid for both layouts: an LJSpeech line (id|text|text) whose id is also a readable path.
  const std::string wav1 = dir + "/wavs/LJ001-0001";
  t.seeds = {"LJ001-0001|Hello there.|Hello there.\nLJ001-0002|Hi.|Hi.\n",
             "/wavs/LJ001-0001.wav|Printing, in the only sense.\nwavs/stereo.wav|Hi there.\n",
             "+wavs/LJ001-0001.wav|3|Printing.\nwavs/stereo.wav|0|A b c.\n"};
  t.valid_seeds = t.seeds.size();
  // Issue #13's inputs: a BOM, invalid UTF-8, text with no symbol of the set, text too long
  // for its audio, CRLF, empty and missing fields, a missing file.
  t.seeds.insert(t.seeds.end(), {"\xEF\xBB\xBFLJ001-0001|Hello.|Hello.\n", "LJ001-0001|caf\xE9|caf\xE9\n",
                                 "LJ001-0001|\xE6\x97\xA5\xE6\x9C\xAC|\xE6\x97\xA5\xE6\x9C\xAC\n",
                                 "LJ001-0002|" + std::string(200, 'a') + "|" + std::string(200, 'a') + "\n",
                                 "LJ001-0001|Hello.|Hello.\r\n\r\nLJ001-0002||\r\n|||\n",
                                 "missing|a|a\n../../etc/passwd|a|a\n" + dir + "|a|a\n",
                                 // Issue #28's: ids and paths that lead out, a repeated wav.
                                 "/../LJ001-0001.wav|a\nwavs/../../x.wav|a\n" + dir + "/wavs/LJ001-0001.wav|a\n",
                                 "LJ001-0001|a|a\nLJ001-0001|b|b\n..|c|c\na\\b|d|d\n"});
  t.dictionary = {"|", "||", "\n", "\r\n", "\xEF\xBB\xBF", "\xC3\x28", "\xFF", "\xE9", "\xF0\x9F\x98\x80", "LJ001-0001",
                  "LJ001-0002", wav1 + ".wav", dir + "/wavs/stereo.wav", "wavs/", "../", "..", "\\", "{HH AH0}", "$1,000", "-1", "99999999999", " "};
  t.run = run;
  t.fixed_cases = [dir] {
    // metadata.csv or the filelist is a directory, or missing.
    const std::string other = fuzz::temp_dir("fuzz_manifest_dirs");
    std::filesystem::create_directories(other + "/metadata.csv");
    fuzz::QuietStderr quiet;
    data::DataOptions o = options("error");
    o.dataset_dir = other;
    fuzz::expect_user_error([&] { data::load_datasets(o, corpus().encoder); }, "metadata.csv is a directory");
    o.dataset_dir = other + "/missing";
    fuzz::expect_user_error([&] { data::load_datasets(o, corpus().encoder); }, "a missing dataset_dir");
    data::DataOptions l = options("skip");
    l.training_files = other + "/metadata.csv";
    fuzz::expect_user_error([&] { data::load_datasets(l, corpus().encoder); }, "a directory as the filelist");
  };
  return fuzz::fuzz_main(argc, argv, t);
}
