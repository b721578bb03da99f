// align (src/infer/align_export, tools/align): the word tier's rules, TextGrids written and
// parsed back, durations (.json, .npy) against the model's own MAS durations, and the tool end
// to end on the tiny corpus with a checkpoint the trainer wrote, bad lines included.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>
#include <tuple>

#include "common/error.h"
#include "data/audio.h"
#include "data/batch.h"
#include "data/dataset.h"
#include "data/manifest.h"
#include "data/text_encoder.h"
#include "models/glow_tts.h"
#include "test_util.h"
#include "tiny_corpus.h"
#include "infer/align_export/aligner.h"
#include "infer/align_export/ensemble.h"
#include "infer/align_export/recentre.h"
#include "infer/align_export/textgrid.h"
#include "infer/align_export/time_ensemble.h"
#include "infer/align_export/utterance_files.h"
#include "infer/align_export/word_spans.h"
#include "train/checkpoint.h"
#include "train/config/config_io.h"
#include "train/config/options_map.h"
#include "infer/npy.h"
#include "train/trainer.h"

namespace monoflow::train {
namespace {

using testing::read_text;
using testing::TempDir;

// Character tokens of `text` with the given durations, classified as the aligner does.
std::vector<AlignedToken> char_tokens(const std::string& text, const std::vector<int64_t>& frames) {
  EXPECT_EQ(text.size(), frames.size());
  std::vector<AlignedToken> out;
  for (size_t i = 0; i < text.size(); ++i) {
    const std::string s(1, text[i]);
    out.push_back({s, std::isalnum(static_cast<unsigned char>(text[i])) != 0, text[i] == ' ', frames[i]});
  }
  return out;
}

std::vector<FrameInterval> expected(std::initializer_list<FrameInterval> l) { return l; }

void expect_intervals(const std::vector<FrameInterval>& got, const std::vector<FrameInterval>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].begin, want[i].begin) << i;
    EXPECT_EQ(got[i].end, want[i].end) << i;
    EXPECT_EQ(got[i].label, want[i].label) << i;
  }
}

TEST(WordSpans, WordsOfTheCleanedTextLoseTheirPunctuation) {
  EXPECT_EQ(words_of("hello, world. -- it's 5 o'clock! "),
            (std::vector<std::string>{"hello", "world", "it's", "5", "o'clock"}));
  EXPECT_TRUE(words_of(" . , ").empty());
}

// The tool's and the Python module's --junction names read back to the rules they name.
TEST(WordSpans, JunctionNamesReadBack) {
  for (const Junction j : {Junction::kMiddle, Junction::kNextWord, Junction::kCentre}) {
    EXPECT_EQ(junction_named(junction_name(j)), j) << junction_name(j);
  }
  EXPECT_STREQ(junction_name(Junction::kCentre), "centre");
  EXPECT_FALSE(junction_named("late").has_value());
  // The list the option checks and error messages give: every rule once, each name read back.
  EXPECT_EQ(junction_names(), (std::vector<std::string>{"middle", "next", "centre"}));
  for (const auto& name : junction_names()) EXPECT_EQ(junction_name(*junction_named(name)), name);
}

// "ab cd, ef.": a one-frame space between ab and cd, seven frames of ", " before ef, a final ".".
TEST(WordSpans, ShortGapsAreSplitOrGoToTheNextWordLongOnesArePauses) {
  const auto tokens = char_tokens("ab cd, ef.", {2, 3, 1, 2, 2, 5, 2, 1, 1, 4});
  const std::vector<std::string> words = {"ab", "cd", "ef"};
  WordSpanOptions o;
  o.min_pause_frames = 4;
  WordIntervals w = word_intervals(tokens, words, o);
  EXPECT_TRUE(w.labels_from_text);
  EXPECT_EQ(w.words, 3);
  // By default (kCentre) ab's one-frame space is split at its exact middle; the seven frames
  // before ef are a pause.
  expect_intervals(w.intervals,
                   expected({{0, 5.5, "ab"}, {5.5, 10, "cd"}, {10, 17, ""}, {17, 19, "ef"}, {19, 23, ""}}));
  // Below the pause threshold the 7-frame gap is split as well, 3.5 frames a side ...
  o.min_pause_frames = 8;
  w = word_intervals(tokens, words, o);
  expect_intervals(w.intervals,
                   expected({{0, 5.5, "ab"}, {5.5, 13.5, "cd"}, {13.5, 19, "ef"}, {19, 23, ""}}));
  // ... or, kMiddle, at its middle rounded down to a frame: 3 frames to "cd", 4 to "ef", and ab's
  // one-frame space whole to cd ...
  o.junction = Junction::kMiddle;
  w = word_intervals(tokens, words, o);
  expect_intervals(w.intervals, expected({{0, 5, "ab"}, {5, 13, "cd"}, {13, 19, "ef"}, {19, 23, ""}}));
  // ... or, kNextWord, it is the next word's onset.
  o.junction = Junction::kNextWord;
  w = word_intervals(tokens, words, o);
  expect_intervals(w.intervals, expected({{0, 5, "ab"}, {5, 10, "cd"}, {10, 19, "ef"}, {19, 23, ""}}));
  o.junction = Junction::kCentre;
  w = word_intervals(tokens, words, o);
  expect_intervals(w.intervals,
                   expected({{0, 5.5, "ab"}, {5.5, 13.5, "cd"}, {13.5, 19, "ef"}, {19, 23, ""}}));
  // Tokens: one interval each, back to back.
  const auto t = token_intervals(tokens);
  ASSERT_EQ(t.size(), 10u);
  EXPECT_EQ(t[2].label, " ");
  EXPECT_EQ(t[2].begin, 5);
  EXPECT_EQ(t[9].end, 23);
}

TEST(WordSpans, BlanksAndALeadingSpaceAndAMismatchedWordList) {
  // add_space + add_blank: " a b " -> <blank> " " <blank> a <blank> ' <blank> b ...
  std::vector<AlignedToken> tokens;
  auto add = [&](const std::string& s, int64_t f) {
    tokens.push_back({s, std::isalnum(static_cast<unsigned char>(s[0])) != 0 && s != "<blank>", s == " ", f});
  };
  // A word takes the blank right before its first spoken token and the one right after its last.
  add("<blank>", 1), add(" ", 3), add("<blank>", 1);   // leading pause: 4 frames, then i'm's blank
  add("i", 2), add("<blank>", 1), add("'", 1), add("<blank>", 1), add("m", 2);  // "i'm": frames 4..13
  add("<blank>", 1), add(" ", 1), add("<blank>", 1);   // the blanks are the words'; a 1-frame gap
  add("o", 2), add("k", 2), add("<blank>", 1);          // "ok": frames 14..20
  add(".", 1), add("<blank>", 5);                       // a trailing pause
  WordSpanOptions o;
  o.min_pause_frames = 4;
  WordIntervals w = word_intervals(tokens, {"i'm", "ok"}, o);
  expect_intervals(w.intervals, expected({{0, 4, ""}, {4, 13.5, "i'm"}, {13.5, 20, "ok"}, {20, 26, ""}}));
  // A word list that does not match the token groups: the groups spell the labels.
  w = word_intervals(tokens, {"im", "o", "k"}, o);
  EXPECT_FALSE(w.labels_from_text);
  EXPECT_EQ(w.intervals[1].label, "i'm");
  EXPECT_EQ(w.intervals[2].label, "ok");
}

// Frame s stands for the audio around s * hop: the boundary before it lies half a hop earlier,
// one half a frame into it (kCentre) at s * hop; the ends are the grid's.
TEST(WordSpans, FrameBoundariesInSeconds) {
  const FrameTiming t{256, 22050};
  const double hop_s = 256.0 / 22050;
  EXPECT_DOUBLE_EQ(t.boundary(0, 100), 0.0);
  EXPECT_DOUBLE_EQ(t.boundary(10, 100), 9.5 * hop_s);
  EXPECT_DOUBLE_EQ(t.boundary(10.5, 100), 10 * hop_s);
  EXPECT_DOUBLE_EQ(t.boundary(100, 100), 100 * hop_s);
  EXPECT_DOUBLE_EQ(t.boundary(99.5, 100), 99 * hop_s);
}

UtteranceAlignment example_alignment() {
  UtteranceAlignment u;
  u.id = "ex-1";
  u.cleaned_text = "ab cd, \"ef\".";
  const std::string text = "ab cd, \"ef\".";
  u.tokens = char_tokens(text, {2, 3, 1, 2, 2, 5, 2, 1, 1, 1, 1, 4});
  for (const auto& t : u.tokens) {
    u.token_ids.push_back(static_cast<unsigned char>(t.symbol[0]));
    u.frames += t.frames;
  }
  return u;
}

TEST(TextGrid, WrittenThenParsedBackCoversTheUtteranceContiguously) {
  const UtteranceAlignment u = example_alignment();
  const FrameTiming timing{256, 22050};
  const WordIntervals words = word_intervals(u.tokens, words_of(u.cleaned_text), WordSpanOptions{});
  const std::string text = format_textgrid(alignment_textgrid(u, words, timing));
  EXPECT_EQ(text.rfind("File type = \"ooTextFile\"\nObject class = \"TextGrid\"\n", 0), 0u) << text;
  const TextGrid g = parse_textgrid(text, "ex-1.TextGrid");
  const double total = 25.0 * 256 / 22050;
  EXPECT_EQ(g.xmin, 0.0);
  EXPECT_EQ(g.xmax, total);
  ASSERT_EQ(g.tiers.size(), 2u);
  EXPECT_EQ(g.tiers[0].name, "words");
  EXPECT_EQ(g.tiers[1].name, "tokens");
  for (const TextGridTier& tier : g.tiers) {
    ASSERT_FALSE(tier.intervals.empty());
    EXPECT_EQ(tier.intervals.front().xmin, 0.0) << tier.name;
    EXPECT_EQ(tier.intervals.back().xmax, total) << tier.name;
    for (size_t i = 0; i < tier.intervals.size(); ++i) {
      EXPECT_LT(tier.intervals[i].xmin, tier.intervals[i].xmax) << tier.name << " " << i;
      if (i > 0) EXPECT_EQ(tier.intervals[i].xmin, tier.intervals[i - 1].xmax) << tier.name << " " << i;
    }
  }
  // Words: ab, cd, a pause of ", \"" (8 frames >= the default 4), ef, then a pause of "\".".
  std::vector<std::string> labels;
  for (const auto& in : g.tiers[0].intervals) labels.push_back(in.text);
  EXPECT_EQ(labels, (std::vector<std::string>{"ab", "cd", "", "ef", ""}));
  // Inside the utterance a boundary before frame s lies at (s - 0.5) * hop / rate (frame s is
  // centred on s * hop); the first is 0, the last the end.
  // The one-frame space between ab and cd is split at its exact middle (the default), so that
  // boundary lies at frame 5's centre.
  const auto at = [](double s) { return s == 0 ? 0.0 : (s - 0.5) * 256 / 22050; };
  const std::vector<double> word_edges = {0, 5.5, 10, 18, 20, 25};
  for (size_t i = 0; i < g.tiers[0].intervals.size(); ++i) {
    EXPECT_NEAR(g.tiers[0].intervals[i].xmin, at(word_edges[i]), 1e-12) << i;
  }
  EXPECT_NEAR(g.tiers[0].intervals[1].xmin, 5.0 * 256 / 22050, 1e-12);
  // Tokens: every symbol, quotes and spaces included, each from its first frame.
  int64_t frame = 0;
  ASSERT_EQ(g.tiers[1].intervals.size(), u.tokens.size());
  for (size_t i = 0; i < u.tokens.size(); ++i) {
    EXPECT_EQ(g.tiers[1].intervals[i].text, u.tokens[i].symbol) << i;
    EXPECT_EQ(g.tiers[1].intervals[i].xmin, at(frame)) << i;
    frame += u.tokens[i].frames;
  }
}

TEST(TextGrid, TheWordEdgesAtTheSilenceMoveIntoTheWordAtMostAQuarterOfIt) {
  TextGridTier t;
  t.name = "words";
  t.intervals = {{0.0, 0.1, ""}, {0.1, 0.5, "long"}, {0.5, 0.54, "a"}, {0.54, 0.7, ""},
                 {0.7, 0.78, "short"}, {0.78, 1.0, ""}};
  TextGridTier unchanged = t;
  pull_edges_from_silence(unchanged, 0.0);
  for (size_t i = 0; i < t.intervals.size(); ++i) {
    EXPECT_EQ(unchanged.intervals[i].xmin, t.intervals[i].xmin) << i;
    EXPECT_EQ(unchanged.intervals[i].xmax, t.intervals[i].xmax) << i;
  }
  pull_edges_from_silence(t, 0.023);
  const std::vector<std::pair<double, double>> expected = {
      {0.0, 0.123},    // the leading silence grows to the first word's new start
      {0.123, 0.5},    // "long": its start moves 23 ms; the edge it shares with "a" stays
      {0.5, 0.54},     // "a" and the pause inside the utterance stay
      {0.54, 0.7},
      {0.7, 0.76},     // "short" (80 ms), the last word: its end moves a quarter of it, 20 ms
      {0.76, 1.0}};    // the trailing silence; the tier's ends stay
  ASSERT_EQ(t.intervals.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(t.intervals[i].xmin, expected[i].first, 1e-12) << i;
    EXPECT_NEAR(t.intervals[i].xmax, expected[i].second, 1e-12) << i;
  }
  // Without a leading or trailing pause nothing moves.
  TextGridTier speech;
  speech.intervals = {{0.0, 0.3, "a"}, {0.3, 0.4, ""}, {0.4, 0.9, "b"}};
  pull_edges_from_silence(speech, 0.023);
  EXPECT_EQ(speech.intervals[0].xmax, 0.3);
  EXPECT_EQ(speech.intervals[2].xmin, 0.4);
  // Through alignment_textgrid: only the last word's end moves (the example has no leading
  // pause), and the words tier still covers the utterance; the tokens tier is unchanged.
  const UtteranceAlignment u = example_alignment();
  const WordIntervals words = word_intervals(u.tokens, words_of(u.cleaned_text), WordSpanOptions{});
  const FrameTiming timing{256, 22050};
  const TextGrid plain = alignment_textgrid(u, words, timing);
  const TextGrid pulled = alignment_textgrid(u, words, timing, 0.01);
  const auto& pw = pulled.tiers[0].intervals;
  const auto& w = plain.tiers[0].intervals;
  ASSERT_EQ(pw.size(), 5u);  // ab, cd, pause, ef, pause
  for (size_t i = 0; i + 2 < pw.size(); ++i) {
    EXPECT_EQ(pw[i].xmin, w[i].xmin) << i;
    EXPECT_EQ(pw[i].xmax, w[i].xmax) << i;
  }
  EXPECT_EQ(pw[3].xmin, w[3].xmin);
  const double ef_quarter = 2.0 * 256 / 22050 / 4;  // "ef" lasts 2 frames: a quarter, 5.8 ms < 10 ms
  EXPECT_NEAR(pw[3].xmax, w[3].xmax - ef_quarter, 1e-12);
  EXPECT_EQ(pw[4].xmin, pw[3].xmax);
  EXPECT_EQ(pw[4].xmax, w[4].xmax);
  ASSERT_EQ(pulled.tiers[1].name, "tokens");
  EXPECT_EQ(format_textgrid(TextGrid{0, plain.xmax, {pulled.tiers[1]}}),
            format_textgrid(TextGrid{0, plain.xmax, {plain.tiers[1]}}));
}

TEST(TextGrid, WhatIsNotALongTextGridIsRefusedWithItsLine) {
  const UtteranceAlignment u = example_alignment();
  const WordIntervals words = word_intervals(u.tokens, words_of(u.cleaned_text), WordSpanOptions{});
  std::string text = format_textgrid(alignment_textgrid(u, words, FrameTiming{}));
  text.replace(text.find("intervals: size = 5"), 19, "intervals: size = 6");
  try {
    parse_textgrid(text, "x.TextGrid");
    FAIL() << "parsed a TextGrid with a wrong count";
  } catch (const FileError& e) {
    EXPECT_EQ(e.file(), "x.TextGrid");
    EXPECT_GT(e.line(), 10);
    EXPECT_NE(std::string(e.what()).find("intervals ["), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_textgrid("File type = \"ooTextFile short\"\n", "y"), FileError);
}

TEST(Npy, Int32AndFloat32ReadBackAsWritten) {
  const auto ints = torch::tensor({3, 0, 7, 12, 1}, torch::kInt64);
  const torch::Tensor back = decode_npy(encode_npy_int32(ints), "d.npy");
  EXPECT_EQ(back.scalar_type(), torch::kInt32);
  EXPECT_TRUE(torch::equal(back, ints.to(torch::kInt32)));
  const auto floats = torch::randn({4, 3});
  EXPECT_TRUE(torch::equal(decode_npy(encode_npy_float32(floats), "m.npy"), floats));
  std::string truncated = encode_npy_int32(ints);
  truncated.pop_back();
  EXPECT_THROW(decode_npy(truncated, "t.npy"), FileError);
  EXPECT_THROW(decode_npy("not numpy", "n.npy"), FileError);
}

// scripts/score_alignment.py on a TextGrid whose words are off by known amounts.
TEST(ScoreAlignment, MedianAndSharesOfKnownErrors) {
  const std::string python = MONOFLOW_TEST_PYTHON;  // the script needs the standard library only
  if (python.empty()) GTEST_SKIP() << "no Python configured";
  TempDir dir;
  ASSERT_EQ(std::system(("mkdir -p " + (dir / "tg") + " " + (dir / "words")).c_str()), 0);
  // Reference: espeak-ng's words as written ("7", "1,250"); the hypothesis: align's cleaned words.
  std::ofstream(dir / "words/u1.tsv") << "word\tstart_s\tend_s\nThe\t0.100\t0.300\n7\t0.300\t0.600\n"
                                         "fifteen\t0.700\t1.000\n1,250\t1.000\t1.500\nwas the\t1.500\t1.800\n";
  TextGrid g;
  g.xmax = 1.9;
  g.tiers.push_back({"words",
                     {{0, 0.105, ""}, {0.105, 0.320, "the"}, {0.320, 0.640, "seven"}, {0.640, 0.800, ""},
                      {0.800, 1.000, "fifteen"}, {1.000, 1.200, "one"}, {1.200, 1.500, "thousand"},
                      {1.500, 1.620, "was"}, {1.620, 1.805, "the"}, {1.805, 1.9, ""}}});
  g.tiers.push_back({"tokens", {{0, 1.9, "x"}}});
  std::ofstream(dir / "tg/u1.TextGrid") << format_textgrid(g);
  int status = 0;
  const std::string script = std::string(MONOFLOW_TEST_DIR) + "/../../scripts/score_alignment.py";
  const std::string out = testing::run_command(python + " " + script + " --textgrids " + (dir / "tg") +
                                                   " --reference " + (dir / "words") + " --json " + (dir / "s.json") +
                                                   " 2>&1",
                                               &status);
  ASSERT_EQ(status, 0) << out;
  // Pairs: the/The, fifteen, "was the" (espeak-ng's joined word) with "was" and "the", all the
  // same text; seven/7 is paired by position (one for one inside a differing run) and not scored;
  // "1,250" against "one thousand" is left out. Scored boundaries, without the utterance's first
  // onset (The) and last offset ("was the"): the's end +20, fifteen's start +100 and end 0,
  // was's start 0 (ms) -> |e| sorted 0 0 20 100.
  const std::string json = read_text(dir / "s.json");
  auto number = [&](const std::string& key) {
    const size_t at = json.find("\"" + key + "\": ");
    EXPECT_NE(at, std::string::npos) << key << " in " << json;
    return std::atof(json.c_str() + at + key.size() + 4);
  };
  EXPECT_EQ(number("paired_words"), 3);
  EXPECT_EQ(number("paired_by_position"), 1);
  EXPECT_EQ(number("reference_words"), 5);
  EXPECT_EQ(number("aligned_words"), 7);
  EXPECT_EQ(number("boundaries"), 4);
  EXPECT_NEAR(number("median_abs_ms"), 10.0, 1e-6);
  EXPECT_NEAR(number("mean_abs_ms"), 30.0, 1e-6);
  EXPECT_NEAR(number("within_10ms"), 2.0 / 4, 1e-9);
  EXPECT_NEAR(number("within_25ms"), 3.0 / 4, 1e-9);
  EXPECT_NEAR(number("within_50ms"), 3.0 / 4, 1e-9);
  EXPECT_NE(out.find("\nmedian |error| 10.0 ms, mean 30.0 ms, median signed +10.0 ms"), std::string::npos) << out;
  // Less the median signed error (+10 ms): +10, +90, -10, -10 ms.
  const size_t less = json.find("\"less_offset\": {");
  ASSERT_NE(less, std::string::npos) << json;
  const std::string less_json = json.substr(less, json.find('}', less) - less);
  auto less_number = [&](const std::string& key) {
    const size_t at = less_json.find("\"" + key + "\": ");
    EXPECT_NE(at, std::string::npos) << key << " in " << less_json;
    return std::atof(less_json.c_str() + at + key.size() + 4);
  };
  EXPECT_NEAR(less_number("median_signed_ms"), 0.0, 1e-6);  // by construction
  EXPECT_NEAR(less_number("median_abs_ms"), 10.0, 1e-6);
  EXPECT_NEAR(less_number("mean_abs_ms"), 30.0, 1e-6);
  EXPECT_NEAR(less_number("within_25ms"), 3.0 / 4, 1e-9);
  EXPECT_NE(out.find("less its median signed error (+10.0 ms, a constant offset): median |error| 10.0 ms, mean 30.0 "
                     "ms; within 10 ms"),
            std::string::npos)
      << out;
  // seven/7 on a line of its own: start +20, end +40 ms.
  EXPECT_NE(out.find("the 2 boundaries of the words paired by position: median |error| 30.0 ms"), std::string::npos)
      << out;
  // --row: the same figures as one CSV line after the labels (all errors >= 0: signed = abs).
  const std::string row = testing::run_command(python + " " + script + " --textgrids " + (dir / "tg") +
                                                   " --reference " + (dir / "words") + " --row u1,7 2>&1",
                                               &status);
  ASSERT_EQ(status, 0) << row;
  EXPECT_EQ(row, "u1,7,10.0,10.0,50.0,75.0,75.0\n");
}

// The value list after "key": [ in the durations JSON.
std::vector<int64_t> json_ints(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\": [");
  EXPECT_NE(at, std::string::npos) << key;
  std::istringstream in(json.substr(json.find('[', at) + 1, json.find(']', at) - json.find('[', at) - 1));
  std::vector<int64_t> out;
  for (std::string v; std::getline(in, v, ',');) out.push_back(std::stoll(v));
  return out;
}

int64_t json_int(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\": ");
  EXPECT_NE(at, std::string::npos) << key;
  return std::stoll(json.substr(at + key.size() + 4));
}

// A tiny corpus and a checkpoint of three training steps, shared by the end-to-end tests.
class AlignRun : public testing::SharedCheckpointSuite<AlignRun> {
 public:
  static std::string make_checkpoint(const TempDir& dir) {
    testing::write_tiny_corpus(dir / "corpus");
    const Config c = testing::tiny_config(dir / "corpus", dir / "run", 3);
    RunOptions ro;
    ro.quiet = true;
    ro.config_yaml = to_yaml(c);
    return train(c, ro).checkpoint;
  }

 protected:
  // align on the CPU, quietly, over the tiny corpus with the shared checkpoint, into dir/out.
  static AlignOptions cpu_options(const std::string& out) {
    AlignOptions o;
    o.checkpoints = {*checkpoint_};
    o.dataset_dir = *dir_ / "corpus";
    o.out_dir = *dir_ / out;
    o.device = "cpu";
    o.progress = false;
    return o;
  }
  // The checkpoint of another tiny run (three steps, the config with `overrides`) in dir/name,
  // trained on first use.
  static std::string variant_checkpoint(const std::string& name, const std::vector<std::string>& overrides) {
    static std::map<std::string, std::string> trained;
    auto& checkpoint = trained[*dir_ / name];
    if (checkpoint.empty()) {
      const Config c = testing::tiny_config(*dir_ / "corpus", *dir_ / name, 3, overrides);
      RunOptions ro;
      ro.quiet = true;
      ro.config_yaml = to_yaml(c);
      checkpoint = train(c, ro).checkpoint;
    }
    return checkpoint;
  }
  // The TextGrid that align wrote for utterance `id` into dir/out.
  static TextGrid textgrid_of(const std::string& out, const std::string& id) {
    const std::string path = *dir_ / (out + "/textgrids/" + id + ".TextGrid");
    return parse_textgrid(read_text(path), path);
  }
};

// The durations files hold the model's own MAS durations (computed here one utterance at a time),
// with the frames the model does not see (past its multiple of n_sqz) on the last token, and sum
// to the mel's frames; the TextGrid spans them.
TEST_F(AlignRun, DurationFilesHoldTheModelsDurationsAndSumToTheMelFrames) {
  ASSERT_FALSE(checkpoint_->empty());
  AlignOptions o = cpu_options("aligned");
  o.batch_size = 1;
  const AlignReport r = align_dataset(o);
  EXPECT_EQ(r.utterances, 10);
  EXPECT_EQ(r.bad_lines, 0);
  EXPECT_EQ(r.backend, "cpu");
  EXPECT_EQ(r.word_label_fallbacks, 0);
  EXPECT_TRUE(std::isfinite(r.mean_mle));

  // The model, as align builds it, run by hand.
  const Config c = parse_config(read_checkpoint_state(*checkpoint_).config_yaml, "snapshot");
  auto tp = std::make_shared<const text::TextProcessor>(c.text);
  models::GlowTTS model(model_options(c, static_cast<int64_t>(tp->vocab_size())));
  load_checkpoint(*checkpoint_, *model, nullptr);
  model->set_ddi(false);
  model->eval();
  data::BadLines bad("error");
  data::DataOptions d = data_options(c);
  d.max_mel_frames = 0;
  const data::TtsDataset dataset(data::read_ljspeech(*dir_ / "corpus", bad), d, data::text_encoder(tp), bad);
  ASSERT_EQ(dataset.size(), 10u);
  align::MasOptions mas;
  torch::NoGradGuard no_grad;
  int64_t words = 0;
  for (size_t i = 0; i < dataset.size(); ++i) {
    const data::DatasetItem& item = dataset.item(i);
    const data::Batch b = data::collate({dataset.get(i, 0)});
    const auto out = model->forward(b.text, b.text_lengths, b.mel, b.mel_lengths, b.speakers, mas);
    std::vector<int64_t> want(item.text.size());
    for (size_t t = 0; t < want.size(); ++t) want[t] = out.durations[0][static_cast<int64_t>(t)].item<int64_t>();
    const int64_t mel_frames = b.mel_lengths[0].item<int64_t>();
    want.back() += mel_frames - out.y_lengths[0].item<int64_t>();
    EXPECT_EQ(mel_frames, data::probe_audio(item.utterance.audio_path).frames / 256 + 1);

    const std::string stem = o.out_dir + "/durations/" + item.utterance.id;
    const std::string json = read_text(stem + ".json");
    EXPECT_EQ(json_ints(json, "durations"), want) << item.utterance.id;
    EXPECT_EQ(json_ints(json, "token_ids"), item.text) << item.utterance.id;
    EXPECT_EQ(json_int(json, "frames"), mel_frames);
    EXPECT_EQ(json_int(json, "hop_length"), c.data.mel.hop_length);
    EXPECT_EQ(json_int(json, "sampling_rate"), c.data.mel.sampling_rate);
    EXPECT_EQ(json_int(json, "win_length"), c.data.mel.win_length);
    const torch::Tensor npy = decode_npy(read_text(stem + ".npy"), stem + ".npy");
    ASSERT_EQ(npy.numel(), static_cast<int64_t>(want.size()));
    EXPECT_EQ(npy.sum().item<int64_t>(), mel_frames);
    for (size_t t = 0; t < want.size(); ++t) EXPECT_EQ(npy[static_cast<int64_t>(t)].item<int32_t>(), want[t]);

    const std::string tg_path = o.out_dir + "/textgrids/" + item.utterance.id + ".TextGrid";
    const TextGrid g = parse_textgrid(read_text(tg_path), tg_path);
    EXPECT_EQ(g.xmax, static_cast<double>(mel_frames) * 256 / 22050);
    std::vector<std::string> labels;
    for (const auto& in : g.tiers.at(0).intervals) {
      if (!in.text.empty()) labels.push_back(in.text);
    }
    EXPECT_EQ(labels, words_of(tp->clean(item.utterance.text))) << item.utterance.id;
    words += static_cast<int64_t>(labels.size());
    EXPECT_EQ(g.tiers.at(1).intervals.size(), item.text.size());
  }
  EXPECT_EQ(r.words, words);
  const std::string summary = read_text(r.summary_path);
  EXPECT_EQ(summary.rfind("id\tsource\ttokens\twords\tframes\tseconds\tmle\tword_labels\n", 0), 0u);
  EXPECT_EQ(std::count(summary.begin(), summary.end(), '\n'), 11);
  EXPECT_NE(summary.find("TINY-100\t" + (*dir_ / "corpus") + "/metadata.csv:1\t"), std::string::npos) << summary;
}

// The durations files say the frames' timing as align computed them, the window included (a
// tool placing a boundary near the sound needs its reach): given another window, they say it.
TEST_F(AlignRun, DurationFilesSayTheHopRateAndWindowOfTheirFrames) {
  ASSERT_FALSE(checkpoint_->empty());
  AlignOptions o = cpu_options("window_512");
  o.overrides.push_back("data.win_length=512");
  align_dataset(o);
  const std::string json = read_text(o.out_dir + "/durations/TINY-100.json");
  EXPECT_EQ(json_int(json, "win_length"), 512);
  EXPECT_EQ(json_int(json, "hop_length"), 256);
  EXPECT_EQ(json_int(json, "sampling_rate"), 22050);
}

// Several checkpoints: the durations are the median of their boundaries, token by token.
TEST(MedianDurations, EachBoundaryIsTheMedianOverTheModels) {
  // Two utterances of 3 tokens (the second has 2, then padding); boundaries (cumulative):
  // utterance 0: [2, 5, 9], [3, 4, 9], [1, 6, 9] -> medians [2, 5, 9] -> durations [2, 3, 4].
  // utterance 1: [1, 4, 4], [2, 4, 4], [3, 4, 4] -> [2, 4, 4] -> [2, 2, 0].
  const auto d = [](std::vector<int64_t> v) { return torch::tensor(v, torch::kInt64).view({2, 3}); };
  const torch::Tensor m = median_durations({d({2, 3, 4, 1, 3, 0}), d({3, 1, 5, 2, 2, 0}), d({1, 5, 3, 3, 1, 0})});
  EXPECT_TRUE(torch::equal(m, d({2, 3, 4, 2, 2, 0}))) << m;
  EXPECT_TRUE(torch::equal(m.sum(1), torch::tensor({9, 4}, torch::kInt64)));
  // Two models: the lower median of each boundary ([2, 5, 9] and [3, 4, 9] -> [2, 4, 9]).
  EXPECT_TRUE(torch::equal(median_durations({d({2, 3, 4, 1, 3, 0}), d({3, 1, 5, 2, 2, 0})}), d({2, 2, 5, 1, 3, 0})));
  // One model: its own durations.
  EXPECT_TRUE(torch::equal(median_durations({d({2, 3, 4, 1, 3, 0})}), d({2, 3, 4, 1, 3, 0})));
  EXPECT_THROW(median_durations({}), UserError);
  EXPECT_THROW(median_durations({d({1, 1, 1, 1, 1, 1}), torch::ones({3, 2}, torch::kInt64)}), UserError);
}

TEST(MedianDurations, EveryTokenKeepsAFrameOverManyRandomModels) {
  torch::manual_seed(3);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<torch::Tensor> models;
    for (int m = 0; m < 5; ++m) {
      // 40 frames over 8 tokens, each at least one: 32 spread at random.
      const torch::Tensor cuts = std::get<0>(torch::randint(0, 33, {7}, torch::kInt64).sort());
      const torch::Tensor ends = torch::cat({cuts, torch::tensor({32}, torch::kInt64)}) + torch::arange(1, 9);
      models.push_back(torch::diff(ends, 1, 0, torch::zeros({1}, torch::kInt64)).view({1, 8}));
    }
    const torch::Tensor m = median_durations(models);
    EXPECT_EQ(m.sum().item<int64_t>(), 40);
    EXPECT_GE(m.min().item<int64_t>(), 1) << m;
  }
}

// The tool with three runs' checkpoints writes the median of what each one alone gives.
TEST_F(AlignRun, SeveralCheckpointsGiveTheMedianOfTheirDurations) {
  ASSERT_FALSE(checkpoint_->empty());
  std::vector<std::string> checkpoints{*checkpoint_};
  for (const int64_t seed : {7, 11}) {  // two more runs of the config, other seeds
    Config c = testing::tiny_config(*dir_ / "corpus", *dir_ / ("run_seed" + std::to_string(seed)), 3);
    c.train.seed = seed;
    RunOptions ro;
    ro.quiet = true;
    ro.config_yaml = to_yaml(c);
    checkpoints.push_back(train(c, ro).checkpoint);
  }
  AlignOptions o = cpu_options("");
  o.images = true;
  for (size_t i = 0; i < checkpoints.size(); ++i) {
    o.checkpoints = {checkpoints[i]};
    o.out_dir = *dir_ / ("single_" + std::to_string(i));
    align_dataset(o);
  }
  o.checkpoints = checkpoints;
  o.out_dir = *dir_ / "median";
  const AlignReport r = align_dataset(o);
  EXPECT_EQ(r.utterances, 10);
  int differ = 0;  // utterances where the runs disagree somewhere
  for (const std::string id : {"TINY-100", "TINY-101", "TINY-102", "TINY-103", "TINY-104"}) {
    std::vector<torch::Tensor> each;
    for (size_t i = 0; i < checkpoints.size(); ++i) {
      const auto v = json_ints(read_text(*dir_ / ("single_" + std::to_string(i) + "/durations/" + id + ".json")), "durations");
      each.push_back(torch::tensor(v, torch::kInt64).view({1, -1}));
    }
    differ += !torch::equal(each[0], each[1]) || !torch::equal(each[0], each[2]);
    const auto got = json_ints(read_text(*dir_ / ("median/durations/" + id + ".json")), "durations");
    const torch::Tensor want = median_durations(each);
    EXPECT_TRUE(torch::equal(torch::tensor(got, torch::kInt64).view({1, -1}), want)) << id;
    EXPECT_FALSE(read_text(*dir_ / ("median/images/" + id + ".png")).empty()) << id;
  }
  EXPECT_GT(differ, 0);  // else the median would not be tested
}

// Runs of several frame grids (time_ensemble.h): medians in seconds.
TEST(TimeEnsemble, TheMedianOfOddAndEvenCounts) {
  EXPECT_EQ(median_of({3, 1, 2}), 2);
  EXPECT_EQ(median_of({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(median_of({5}), 5);
  EXPECT_THROW(median_of({}), UserError);
}

TextGridTier word_tier(std::vector<TextGridInterval> words, double xmax) {
  TextGridTier t;
  t.name = "words";
  double at = 0;
  for (const TextGridInterval& w : words) {
    if (w.xmin > at) t.intervals.push_back({at, w.xmin, ""});
    t.intervals.push_back(w);
    at = w.xmax;
  }
  if (at < xmax) t.intervals.push_back({at, xmax, ""});
  return t;
}

TEST(TimeEnsemble, EachWordEdgeIsTheRunsMedianAndGapsTooShortForAPauseAreSplit) {
  const std::vector<TextGridTier> runs{
      word_tier({{0.10, 0.30, "a"}, {0.30, 0.50, "b"}, {0.60, 0.90, "c"}}, 1.0),
      word_tier({{0.12, 0.28, "a"}, {0.31, 0.52, "b"}, {0.52, 0.80, "c"}}, 0.98),
      word_tier({{0.08, 0.33, "a"}, {0.33, 0.49, "b"}, {0.58, 0.95, "c"}}, 1.01)};
  // Medians: a [0.10, 0.30], b [0.31, 0.50], c [0.58, 0.90]; a and b, 10 ms apart, meet at their
  // middle; b and c, 80 ms apart, have a pause between them.
  const TextGridTier t = median_word_tier(runs, 1.0, 0.040);
  const double ab = (0.30 + 0.31) / 2;
  const std::vector<std::tuple<double, double, std::string>> want{
      {0, 0.10, ""}, {0.10, ab, "a"}, {ab, 0.50, "b"}, {0.50, 0.58, ""}, {0.58, 0.90, "c"}, {0.90, 1.0, ""}};
  ASSERT_EQ(t.intervals.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_DOUBLE_EQ(t.intervals[i].xmin, std::get<0>(want[i])) << i;
    EXPECT_DOUBLE_EQ(t.intervals[i].xmax, std::get<1>(want[i])) << i;
    EXPECT_EQ(t.intervals[i].text, std::get<2>(want[i])) << i;
  }
  // A grid that ends before the last word's median end cuts it there.
  const TextGridTier shorter = median_word_tier(runs, 0.85, 0.040);
  EXPECT_EQ(shorter.intervals.back().text, "c");
  EXPECT_DOUBLE_EQ(shorter.intervals.back().xmax, 0.85);
  // No pause threshold: every gap stays a pause.
  EXPECT_EQ(median_word_tier(runs, 1.0, 0).intervals.size(), 7u);
  EXPECT_THROW(median_word_tier({runs[0], word_tier({{0.1, 0.5, "a"}}, 1.0)}, 1.0, 0.04), UserError);
  EXPECT_THROW(median_word_tier({}, 1.0, 0.04), UserError);
}

TextGridTier token_tier(std::vector<double> bounds, double xmax) {
  TextGridTier t;
  double at = 0;
  bounds.push_back(xmax);
  for (const double b : bounds) {
    t.intervals.push_back({at, b, "x"});
    at = b;
  }
  return t;
}

TEST(TimeEnsemble, TokenBoundariesGoToTheNearestFrameAndKeepAFrameEach) {
  const FrameTiming timing{100, 1000, 400};  // 0.1-s frames: boundary f at (f - 0.5) * 0.1 s
  // Medians 0.28 and 0.61 s: frame boundaries 3 (0.25 s) and 7 (0.65 s).
  EXPECT_EQ(median_token_frames({token_tier({0.24, 0.52}, 1.0), token_tier({0.32, 0.70}, 1.0)}, timing, 10),
            (std::vector<int64_t>{3, 4, 3}));
  // Three runs: the middle one's boundaries.
  EXPECT_EQ(median_token_frames({token_tier({0.24, 0.52}, 1.0), token_tier({0.32, 0.70}, 1.0),
                                 token_tier({0.45, 0.88}, 1.0)},
                                timing, 10),
            (std::vector<int64_t>{4, 3, 3}));
  // Crowded at either end: every token keeps a frame.
  EXPECT_EQ(median_token_frames({token_tier({0.01, 0.02}, 1.0)}, timing, 10), (std::vector<int64_t>{1, 1, 8}));
  EXPECT_EQ(median_token_frames({token_tier({0.98, 0.99}, 1.0)}, timing, 10), (std::vector<int64_t>{8, 1, 1}));
  EXPECT_THROW(median_token_frames({token_tier({0.2}, 1.0), token_tier({0.2, 0.3}, 1.0)}, timing, 10), UserError);
  EXPECT_THROW(median_token_frames({token_tier({0.2, 0.3}, 1.0)}, timing, 2), UserError);
}

// A checkpoint of hop 256 and one of hop 128, each aligned on its own mels: together, each word
// edge is the mean of the two runs' (the median of two), gaps under 40 ms joined at their middle,
// and the durations are on the first checkpoint's frames.
TEST_F(AlignRun, CheckpointsOfTwoHopsCombineTheirWordEdgesInTime) {
  ASSERT_FALSE(checkpoint_->empty());
  const std::string hop128 = variant_checkpoint("run_hop128", {"data.hop_length=128"});
  AlignOptions o = cpu_options("single_hop256");
  align_dataset(o);
  o.checkpoints = {hop128};
  o.out_dir = *dir_ / "single_hop128";
  align_dataset(o);
  o.checkpoints = {*checkpoint_, hop128};
  o.out_dir = *dir_ / "two_hops";
  const AlignReport r = align_dataset(o);
  EXPECT_EQ(r.utterances, 10);
  const auto words = [](const TextGrid& g) {
    std::vector<TextGridInterval> w;
    for (const TextGridInterval& in : g.tiers.at(0).intervals) {
      if (!in.text.empty()) w.push_back(in);
    }
    return w;
  };
  int differ = 0;
  for (int i = 100; i < 110; ++i) {
    const std::string id = "TINY-" + std::to_string(i);
    const auto a = words(textgrid_of("single_hop256", id)), b = words(textgrid_of("single_hop128", id));
    const TextGrid both = textgrid_of("two_hops", id);
    const auto got = words(both);
    ASSERT_EQ(a.size(), b.size()) << id;
    ASSERT_EQ(got.size(), a.size()) << id;
    std::vector<double> begin, end;
    for (size_t k = 0; k < a.size(); ++k) {
      differ += a[k].xmin != b[k].xmin || a[k].xmax != b[k].xmax;
      begin.push_back(std::min((a[k].xmin + b[k].xmin) / 2, both.xmax));
      end.push_back(std::min((a[k].xmax + b[k].xmax) / 2, both.xmax));
    }
    for (size_t k = 0; k + 1 < a.size(); ++k) {
      if (begin[k + 1] - end[k] < 0.040) end[k] = begin[k + 1] = (end[k] + begin[k + 1]) / 2;
    }
    for (size_t k = 0; k < a.size(); ++k) {
      EXPECT_DOUBLE_EQ(got[k].xmin, begin[k]) << id << " word " << k;
      EXPECT_DOUBLE_EQ(got[k].xmax, end[k]) << id << " word " << k;
      EXPECT_EQ(got[k].text, a[k].text);
    }
    // The durations: hop 256's frames, every token one at least, summing to the mel's frames.
    const std::string json = read_text(*dir_ / ("two_hops/durations/" + id + ".json"));
    EXPECT_EQ(json_int(json, "hop_length"), 256);
    const auto durations = json_ints(json, "durations");
    EXPECT_EQ(std::accumulate(durations.begin(), durations.end(), int64_t{0}), json_int(json, "frames"));
    EXPECT_GE(*std::min_element(durations.begin(), durations.end()), 1);
    EXPECT_EQ(both.xmax, json_int(json, "frames") * 256.0 / 22050);
    EXPECT_EQ(both.tiers.at(1).intervals.size(), durations.size());
  }
  EXPECT_GT(differ, 0) << "the two runs agree everywhere: the test tells nothing";
}

// Runs that encode the text differently cannot be combined; recentring measures one grid.
TEST_F(AlignRun, CheckpointsOfAnotherFrontEndOrRecentringOverTwoGridsAreRefused) {
  ASSERT_FALSE(checkpoint_->empty());
  const std::string with_blanks = variant_checkpoint("run_blank", {"data.add_blank=true"});
  AlignOptions o = cpu_options("refused");
  o.checkpoints = {*checkpoint_, with_blanks};
  const std::string front_end = testing::error_of([&] { align_dataset(o); });
  EXPECT_NE(front_end.find("--checkpoint " + with_blanks + ": its text front-end"), std::string::npos) << front_end;
  o.checkpoints = {*checkpoint_, variant_checkpoint("run_hop128", {"data.hop_length=128"})};
  o.recentre = true;
  const std::string recentre = testing::error_of([&] { align_dataset(o); });
  EXPECT_NE(recentre.find("--recentre: the checkpoints are on 2 frame grids"), std::string::npos) << recentre;
}

// An utterance that the first grid can use and a later one cannot (too few hop-256 frames for its
// tokens) is a bad line of that grid: skipped with its file and line while the others align, or,
// under on_bad_line: error, the error.
TEST_F(AlignRun, AnUtteranceALaterGridCannotUseIsABadLineOfThatGrid) {
  ASSERT_FALSE(checkpoint_->empty());
  const std::string hop128 = variant_checkpoint("run_hop128", {"data.hop_length=128"});
  const std::string filelist = *dir_ / "short_list.txt";
  {
    // A quarter second for 30 characters: 22 frames at hop 256, 44 at hop 128.
    const int rate = 22050;
    const torch::Tensor wave =
        0.3 * torch::sin(torch::arange(rate / 4, torch::kFloat32) * static_cast<float>(2 * M_PI * 220.0 / rate));
    write_file(*dir_ / "corpus/wavs/TINY-SHORT.wav", encode_wav16(wave, rate));
    std::ofstream(filelist) << "wavs/TINY-100.wav|hello world.\n"
                            << "wavs/TINY-SHORT.wav|a longer line for a short one.\n";
  }
  AlignOptions o = cpu_options("short_hop128");
  o.filelist = filelist;
  o.checkpoints = {hop128};
  EXPECT_EQ(align_dataset(o).utterances, 2);  // the hop-128 grid alone takes both

  o.checkpoints = {hop128, *checkpoint_};
  o.out_dir = *dir_ / "short_two_hops";
  const AlignReport r = align_dataset(o);
  EXPECT_EQ(r.utterances, 1);
  EXPECT_EQ(r.bad_lines, 1);
  EXPECT_TRUE(std::filesystem::exists(o.out_dir + "/durations/TINY-100.json"));
  EXPECT_FALSE(std::filesystem::exists(o.out_dir + "/durations/TINY-SHORT.json"));
  EXPECT_FALSE(std::filesystem::exists(o.out_dir + "/textgrids/TINY-SHORT.TextGrid"));

  o.overrides = {"data.on_bad_line=error"};
  o.out_dir = *dir_ / "short_error";
  const std::string error = testing::error_of([&] { align_dataset(o); });
  EXPECT_NE(error.find(filelist + ":2: "), std::string::npos) << error;
  EXPECT_NE(error.find("usable mel frames"), std::string::npos) << error;
}

// Recentring (recentre.h): the spectral change around word junctions, the offset it tells, and
// the boundaries moved by it.
TEST(Recentre, TheChangePeaksWhereTheSpectrumMoves) {
  // Four bands, 40 frames; the spectrum steps up at frame 12 and down at frame 24. With
  // junctions at 10 and 22, the change peaks 2 frames after them.
  torch::Tensor mel = torch::zeros({4, 40}, torch::kFloat32);
  mel.slice(1, 12, 24).fill_(1.0);
  JunctionChange change;
  change.add(mel, {10, 22});
  EXPECT_EQ(change.junctions(), 2);
  EXPECT_NEAR(change.peak_lag(), 2.0, 1e-9);
  // A step spread over two frames (halfway at 13): the peak lies between lags 2 and 3.
  torch::Tensor ramp = torch::zeros({4, 40}, torch::kFloat32);
  ramp.slice(1, 12, 13).fill_(0.5);
  ramp.slice(1, 13, 40).fill_(1.0);
  JunctionChange spread;
  spread.add(ramp, {10});
  EXPECT_NEAR(spread.peak_lag(), 2.5, 1e-9);
  // Junctions too near an end are left out; none left: no peak.
  JunctionChange edge;
  edge.add(mel, {2, 38});
  EXPECT_EQ(edge.junctions(), 0);
  EXPECT_TRUE(std::isnan(edge.peak_lag()));
  // A peak at the edge of the reach tells nothing.
  JunctionChange far;
  far.add(mel, {12 - JunctionChange::kReach});
  EXPECT_TRUE(std::isnan(far.peak_lag()));
}

TEST(Recentre, TheOffsetIsTheDistanceFromTheUsualPeak) {
  torch::Tensor mel = torch::zeros({4, 60}, torch::kFloat32);
  for (int64_t s = 12; s < 60; s += 12) mel.slice(1, s, s + 6).fill_(1.0);  // steps at 12, 18, 24, ...
  JunctionChange change;
  change.add(mel, {12, 24, 36});  // peaks at lag 0: the run is kChangePeakLagFrames late
  EXPECT_NEAR(change.peak_lag(), 0.0, 1e-9);
  EXPECT_NEAR(run_offset_frames(change, 3), kChangePeakLagFrames, 1e-9);
  EXPECT_EQ(run_offset_frames(change, 4), 0.0);  // too few junctions to tell
  EXPECT_EQ(run_offset_frames(JunctionChange{}, 0), 0.0);
}

TEST(Recentre, JunctionsAreWhereTwoWordsMeet) {
  WordIntervals w;
  w.intervals = {{0, 5, ""}, {5, 20, "one"}, {20, 31, "two"}, {31, 40, ""}, {40, 52, "three"}, {52, 60, ""}};
  EXPECT_EQ(word_junctions(w), (std::vector<int64_t>{20}));
}

TEST(Recentre, ShiftingKeepsTheGridsEndsAndTheOrder) {
  TextGrid g{0, 1.0, {{"words", {{0, 0.1, ""}, {0.1, 0.5, "a"}, {0.5, 0.99, "b"}, {0.99, 1.0, ""}}}}};
  TextGrid earlier = g;
  shift_boundaries(earlier, 0.02);
  const auto& e = earlier.tiers[0].intervals;
  EXPECT_DOUBLE_EQ(e[0].xmin, 0.0);
  EXPECT_DOUBLE_EQ(e[1].xmin, 0.08);
  EXPECT_DOUBLE_EQ(e[2].xmin, 0.48);
  EXPECT_DOUBLE_EQ(e[3].xmin, 0.97);
  EXPECT_DOUBLE_EQ(e[3].xmax, 1.0);
  for (size_t i = 0; i + 1 < e.size(); ++i) EXPECT_DOUBLE_EQ(e[i].xmax, e[i + 1].xmin);
  TextGrid later = g;
  shift_boundaries(later, -0.05);  // the last boundary would pass the end: it stops 0.1 ms before it
  const auto& l = later.tiers[0].intervals;
  EXPECT_DOUBLE_EQ(l[1].xmin, 0.15);
  EXPECT_DOUBLE_EQ(l[3].xmin, 1.0 - 1e-4);
  EXPECT_DOUBLE_EQ(l[3].xmax, 1.0);
  EXPECT_LT(l[2].xmin, l[2].xmax);
}

// Through the tool's path: the TextGrids move by the reported offset, the durations do not.
// Recentring splits touching words by kMiddle, the rule its constant was calibrated with, in
// place of the default kCentre (whose TextGrids differ on this corpus: the junction test below).
TEST_F(AlignRun, RecentringMovesTheTextGridsByTheReportedOffset) {
  ASSERT_FALSE(checkpoint_->empty());
  AlignOptions o = cpu_options("recentred");
  o.recentre = true;
  o.recentre_min_junctions = 1;  // the tiny corpus has few
  const AlignReport moved = align_dataset(o);
  o.recentre = false;
  o.junction = Junction::kMiddle;
  o.out_dir = *dir_ / "as_mas";
  const AlignReport kept = align_dataset(o);
  EXPECT_EQ(kept.recentred_ms, 0.0);
  EXPECT_GT(moved.junctions, 0);
  EXPECT_NE(moved.recentred_ms, 0.0);  // else nothing below is tested (this model: ~-16 ms)
  for (const std::string id : {"TINY-100", "TINY-101", "TINY-102", "TINY-103", "TINY-104"}) {
    EXPECT_EQ(read_text(*dir_ / ("recentred/durations/" + id + ".json")), read_text(*dir_ / ("as_mas/durations/" + id + ".json")));
    TextGrid want = textgrid_of("as_mas", id);
    shift_boundaries(want, moved.recentred_ms / 1000);
    EXPECT_EQ(format_textgrid(textgrid_of("recentred", id)), format_textgrid(want)) << id;
  }
}

// align's default splits the frames between touching words at their exact middle, without
// rounding to the frame grid (kMiddle's rounding down and kNextWord's onset are the other rules):
// the default TextGrids are kCentre's, which differ from both others'.
TEST_F(AlignRun, TouchingWordsMeetAtTheExactMiddleOfTheFramesBetweenThemByDefault) {
  ASSERT_FALSE(checkpoint_->empty());
  AlignOptions o = cpu_options("junction_default");
  align_dataset(o);
  o.out_dir = *dir_ / "junction_middle";
  o.junction = Junction::kMiddle;
  align_dataset(o);
  o.out_dir = *dir_ / "junction_next";
  o.junction = Junction::kNextWord;
  align_dataset(o);
  o.out_dir = *dir_ / "junction_centre";
  o.junction = Junction::kCentre;
  align_dataset(o);
  int differ_next = 0, differ_middle = 0;
  for (const std::string id : {"TINY-100", "TINY-101", "TINY-102", "TINY-103", "TINY-104"}) {
    const std::string as_default = format_textgrid(textgrid_of("junction_default", id));
    EXPECT_EQ(as_default, format_textgrid(textgrid_of("junction_centre", id))) << id;
    differ_next += as_default != format_textgrid(textgrid_of("junction_next", id));
    differ_middle += as_default != format_textgrid(textgrid_of("junction_middle", id));
  }
  EXPECT_GT(differ_next, 0) << "no utterance has a gap between words: the test tells nothing";
  EXPECT_GT(differ_middle, 0) << "no utterance has an odd count of frames between words";
}

// An official Glow-TTS file (what convert_weights --to-official writes) aligns like the monoflow
// checkpoint it came from, given the config; without one, the error says to give it.
TEST_F(AlignRun, AnOfficialCheckpointAlignsLikeItsMonoflowTwin) {
  ASSERT_FALSE(checkpoint_->empty());
  const std::string official = *dir_ / "official.pth";
  int status = 0;
  const std::string out = testing::run_command(std::string(MONOFLOW_CONVERT_WEIGHTS_EXE) + " --to-official " +
                                                   *checkpoint_ + " " + official + " 2>&1",
                                               &status);
  ASSERT_EQ(status, 0) << out;
  const std::string config = *dir_ / "official_config.yaml";
  std::ofstream(config) << to_yaml(testing::tiny_config(*dir_ / "corpus", *dir_ / "run", 3));

  AlignOptions o = cpu_options("from_monoflow");
  align_dataset(o);
  o.checkpoints = {official};
  o.out_dir = *dir_ / "from_official";
  o.config = config;
  align_dataset(o);
  for (const std::string id : {"TINY-100", "TINY-104", "TINY-109"}) {
    EXPECT_EQ(read_text(*dir_ / ("from_official/durations/" + id + ".json")),
              read_text(*dir_ / ("from_monoflow/durations/" + id + ".json"))) << id;
  }
  o.config.clear();
  o.out_dir = *dir_ / "no_config";
  try {
    align_dataset(o);
    ADD_FAILURE() << "an official file without --config aligned";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("official Glow-TTS checkpoint carries no config; give the model's config "
                                         "with --config"),
              std::string::npos)
        << e.what();
  }
}

// The tool leaves MAS's boundaries by default (the recentring constant belongs to one voice)
// and moves them only when asked; the TextGrids then differ by the reported offset.
TEST_F(AlignRun, TheToolRecentresOnlyWhenAsked) {
  ASSERT_FALSE(checkpoint_->empty());
  const std::string base = std::string(MONOFLOW_ALIGN_EXE) + " --checkpoint " + *checkpoint_ + " --dataset-dir " +
                           (*dir_ / "corpus") + " --device cpu -q";
  int status = 0;
  std::string out = testing::run_command(base + " --out " + (*dir_ / "tool_default") + " 2>&1", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("TextGrids as MAS placed them"), std::string::npos) << out;
  // --recentre asks for it; the tiny corpus has too few junctions to tell an offset (under 200),
  // and the tool says so rather than moving anything. It splits touching words by --junction
  // middle, the rule its constant was calibrated with, and says so.
  out = testing::run_command(base + " --recentre --out " + (*dir_ / "tool_recentre") + " 2>&1", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("not recentred ("), std::string::npos) << out;
  EXPECT_NE(out.find("touching words split by --junction middle"), std::string::npos) << out;
  out = testing::run_command(base + " --junction middle --out " + (*dir_ / "tool_middle") + " 2>&1", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(read_text(*dir_ / "tool_recentre/textgrids/TINY-101.TextGrid"),
            read_text(*dir_ / "tool_middle/textgrids/TINY-101.TextGrid"));
}

// By default the word edges at the leading and trailing silence move by half the analysis
// window (512 samples at 22050 Hz); nothing else in the TextGrid changes.
TEST_F(AlignRun, TheWordEdgesAtTheSilenceMoveByHalfTheWindowByDefault) {
  ASSERT_FALSE(checkpoint_->empty());
  AlignOptions o = cpu_options("edges_default");
  align_dataset(o);
  o.out_dir = *dir_ / "edges_off";
  o.silence_edge_ms = 0;
  align_dataset(o);
  const double half_window = 512.0 / 22050;
  int moved = 0;
  for (const std::string id : {"TINY-100", "TINY-101", "TINY-102", "TINY-103", "TINY-104"}) {
    const TextGrid pulled = textgrid_of("edges_default", id), plain = textgrid_of("edges_off", id);
    ASSERT_EQ(pulled.tiers.size(), 2u);
    EXPECT_EQ(format_textgrid(TextGrid{0, plain.xmax, {pulled.tiers[1]}}),
              format_textgrid(TextGrid{0, plain.xmax, {plain.tiers[1]}})) << id;
    const auto& pw = pulled.tiers[0].intervals;
    const auto& w = plain.tiers[0].intervals;
    ASSERT_EQ(pw.size(), w.size()) << id;
    const size_t n = w.size();
    ASSERT_GE(n, 2u) << id;
    const auto reach = [&](size_t i) { return std::min(half_window, (w[i].xmax - w[i].xmin) / 4); };
    std::vector<double> xmin(n), xmax(n);  // the expected tier
    for (size_t i = 0; i < n; ++i) xmin[i] = w[i].xmin, xmax[i] = w[i].xmax;
    if (w[0].text.empty() && !w[1].text.empty()) {  // a leading pause, then the first word
      xmin[1] += reach(1);
      xmax[0] = xmin[1];
      ++moved;
    }
    if (!w[n - 2].text.empty() && w[n - 1].text.empty()) {  // the last word, then a trailing pause
      xmax[n - 2] -= reach(n - 2);
      xmin[n - 1] = xmax[n - 2];
      ++moved;
    }
    for (size_t i = 0; i < n; ++i) {
      EXPECT_NEAR(pw[i].xmin, xmin[i], 1e-12) << id << " " << i;
      EXPECT_NEAR(pw[i].xmax, xmax[i], 1e-12) << id << " " << i;
    }
  }
  EXPECT_GT(moved, 0);  // the tiny corpus's sentences end with a pause ("." and silence)
}

// The tool on a filelist with a missing wav and a malformed line: skipped and named under
// on_bad_line: skip, a clear error (exit 1, nothing written) under error.
TEST_F(AlignRun, TheToolSkipsBadLinesOrStopsAtTheFirst) {
  const std::string filelist = *dir_ / "list.txt";
  {
    std::ofstream fl(filelist);
    const std::string meta = read_text(*dir_ / "corpus/metadata.csv");
    std::istringstream lines(meta);
    for (std::string line; std::getline(lines, line);) {
      const std::string id = line.substr(0, line.find('|'));
      const std::string text = line.substr(line.rfind('|') + 1);
      fl << "wavs/" << id << ".wav|" << text << "\n";
    }
    fl << "wavs/MISSING.wav|a missing file.\n";  // line 11
    fl << "no separator on this line\n";           // line 12
  }
  const std::string base = std::string(MONOFLOW_ALIGN_EXE) + " --checkpoint " + *checkpoint_ + " --filelist " +
                           filelist + " --dataset-dir " + (*dir_ / "corpus") + " --device cpu --batch-size 4 -q";
  int status = 0;
  std::string out = testing::run_command(base + " --out " + (*dir_ / "skip") + " --images 2>&1", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find(filelist + ":11: "), std::string::npos) << out;
  EXPECT_NE(out.find(filelist + ":12: "), std::string::npos) << out;
  EXPECT_NE(out.find("(skipped)"), std::string::npos) << out;
  EXPECT_NE(out.find("align: 10 utterances"), std::string::npos) << out;
  EXPECT_NE(out.find("2 bad line(s) skipped"), std::string::npos) << out;
  const std::string summary = read_text(*dir_ / "skip/summary.tsv");
  EXPECT_EQ(std::count(summary.begin(), summary.end(), '\n'), 11) << summary;
  EXPECT_EQ(read_text(*dir_ / "skip/images/TINY-104.png").substr(1, 3), "PNG");
  EXPECT_FALSE(read_text(*dir_ / "skip/textgrids/TINY-109.TextGrid").empty());

  // Under error: the malformed line is found while the list is read, before any audio is opened.
  out = testing::run_command(base + " --out " + (*dir_ / "error") + " --set data.on_bad_line=error 2>&1", &status);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status << ": " << out;
  EXPECT_NE(out.find("align: error: " + filelist + ":12: expected 2 '|'-separated fields"), std::string::npos) << out;
  EXPECT_EQ(read_text(*dir_ / "error/summary.tsv"), "");
  // Without it, the missing audio.
  const std::string list = read_text(filelist);
  std::ofstream(filelist, std::ios::trunc) << list.substr(0, list.rfind("no separator"));
  out = testing::run_command(base + " --out " + (*dir_ / "error") + " --set data.on_bad_line=error 2>&1", &status);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status << ": " << out;
  EXPECT_NE(out.find("align: error: " + filelist + ":11: "), std::string::npos) << out;
  EXPECT_NE(out.find("MISSING.wav"), std::string::npos) << out;
  EXPECT_EQ(read_text(*dir_ / "error/summary.tsv"), "");

  // No dataset at all, or an unknown option value: errors that say what to give.
  out = testing::run_command(std::string(MONOFLOW_ALIGN_EXE) + " --checkpoint " + *checkpoint_ + " --out " +
                                 (*dir_ / "none") + " 2>&1", &status);
  EXPECT_NE(out.find("give --dataset-dir DIR or --filelist FILE"), std::string::npos) << out;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << out;
}

}  // namespace
}  // namespace monoflow::train
