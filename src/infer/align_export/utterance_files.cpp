#include "infer/align_export/utterance_files.h"

#include <algorithm>
#include <sstream>
#include <utility>

#include "train/log/metrics_log.h"

namespace monoflow::train {
namespace {

template <class T, class F>
std::string json_list(const std::vector<T>& items, F item_text) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + item_text(items[i]);
  return out + "]";
}

std::string json_string(const std::string& s) { return "\"" + json_escape(s) + "\""; }

TextGridTier tier(const std::string& name, const std::vector<FrameInterval>& intervals, const FrameTiming& t,
                  int64_t total) {
  TextGridTier out;
  out.name = name;
  for (const FrameInterval& in : intervals) {
    out.intervals.push_back({t.boundary(in.begin, total), t.boundary(in.end, total), in.label});
  }
  return out;
}

}  // namespace

std::string durations_json(const UtteranceAlignment& u, const FrameTiming& timing) {
  std::ostringstream o;
  o << "{\"id\": " << json_string(u.id) << ", \"text\": " << json_string(u.cleaned_text) << ",\n";
  o << " \"tokens\": " << json_list(u.tokens, [](const AlignedToken& t) { return json_string(t.symbol); }) << ",\n";
  o << " \"token_ids\": " << json_list(u.token_ids, [](int64_t id) { return std::to_string(id); }) << ",\n";
  o << " \"durations\": " << json_list(u.tokens, [](const AlignedToken& t) { return std::to_string(t.frames); })
    << ",\n";
  o << " \"frames\": " << u.frames << ", \"hop_length\": " << timing.hop_length
    << ", \"sampling_rate\": " << timing.sampling_rate << ", \"win_length\": " << timing.win_length << "}\n";
  return o.str();
}

void pull_edges_from_silence(TextGridTier& words, double seconds) {
  std::vector<TextGridInterval>& in = words.intervals;
  if (seconds <= 0 || in.size() < 2) return;
  const auto reach = [&](const TextGridInterval& w) { return std::min(seconds, (w.xmax - w.xmin) / 4); };
  if (in[0].text.empty() && !in[1].text.empty()) {
    in[1].xmin += reach(in[1]);
    in[0].xmax = in[1].xmin;
  }
  TextGridInterval &last = in[in.size() - 2], &trailing = in.back();
  if (!last.text.empty() && trailing.text.empty()) {
    last.xmax -= reach(last);
    trailing.xmin = last.xmax;
  }
}

TextGrid alignment_textgrid(const UtteranceAlignment& u, const WordIntervals& words, const FrameTiming& timing,
                            double silence_edge_s) {
  TextGridTier word_tier = tier("words", words.intervals, timing, u.frames);
  pull_edges_from_silence(word_tier, silence_edge_s);
  return alignment_textgrid(u, std::move(word_tier), timing);
}

TextGrid alignment_textgrid(const UtteranceAlignment& u, TextGridTier words, const FrameTiming& timing) {
  TextGrid g;
  g.xmin = 0;
  g.xmax = timing.seconds(u.frames);
  g.tiers.push_back(std::move(words));
  g.tiers.push_back(tier("tokens", token_intervals(u.tokens), timing, u.frames));
  return g;
}

}  // namespace monoflow::train
