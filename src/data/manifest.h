// Utterance lists: the LJSpeech layout (metadata.csv: id|raw text|normalized text, audio in
// wavs/<id>.wav) and the official Glow-TTS filelists (path|text, or path|speaker|text).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace monoflow::data {

struct Utterance {
  std::string id;          // LJSpeech id, or the audio file's stem for filelists
  std::string audio_path;  // resolved path
  std::string text;        // the normalized column (LJSpeech) or the text field
  int64_t speaker = -1;    // -1: single-speaker
  std::string source;      // file the line came from
  int line = 0;            // 1-based line number in `source`
};

// The bad-line policy (data.on_bad_line): `error` throws a FileError(file, line, what) at the
// first bad line; `skip` prints "warning: file:line: what (skipped)" and counts it.
class BadLines {
 public:
  explicit BadLines(const std::string& policy);  // "skip" | "error"
  void report(const std::string& file, int line, const std::string& what);
  int64_t skipped() const { return skipped_; }
  // Warnings after the first `max_printed` are counted but not printed.
  void set_max_printed(int64_t n) { max_printed_ = n; }

 private:
  bool skip_;
  int64_t skipped_ = 0;
  int64_t max_printed_ = 50;
};

// dataset_dir/metadata.csv; audio dataset_dir/wavs/<id>.wav. Lines need 3 fields, a non-empty
// normalized text and an id that is a plain file name (common/contained_path.h: no '/', '\\',
// "..", NUL). A missing metadata.csv, or one that is not a regular file (a FIFO, a folder),
// throws FileError.
std::vector<Utterance> read_ljspeech(const std::string& dataset_dir, BadLines& bad);

// A filelist: path|text, or path|speaker|text when multi_speaker (speaker: a non-negative
// integer below n_speakers when n_speakers > 0). Relative paths are resolved against base_dir
// when it is non-empty, else used as they are (relative to the working directory, as the
// original). A path may have sub-folders but must stay inside base_dir (or the working
// directory): an absolute path, or one whose ".." leads out, is a bad line unless
// `allow_outside` (data.allow_outside_paths). Blank lines are ignored. A missing filelist, or
// one that is not a regular file, throws FileError.
std::vector<Utterance> read_filelist(const std::string& path, bool multi_speaker,
                                     int n_speakers, const std::string& base_dir,
                                     BadLines& bad, bool allow_outside = false);

// Splits `all` into (train, validation): `validation_size` utterances chosen by a seeded
// shuffle; both parts keep the input order. validation_size >= size leaves one for training.
std::pair<std::vector<Utterance>, std::vector<Utterance>> seeded_split(
    const std::vector<Utterance>& all, int validation_size, int64_t seed);

}  // namespace monoflow::data
