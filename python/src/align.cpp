// monoflow.align: forced alignment of a dataset (src/infer/align_export/aligner.h), returning
// each utterance's durations (frames per token) besides the files align writes. Without an
// out_dir the files go to a temporary folder that is removed afterwards.
#include <stdlib.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <variant>

#include "bindings.h"
#include "common/error.h"
#include "data/posix_fs.h"
#include "infer/align_export/aligner.h"

namespace monoflow::python {
namespace {

using train::AlignOptions;
using train::AlignReport;

struct Alignment {
  AlignReport report;
  std::map<std::string, torch::Tensor> durations;  // id -> int64 [tokens]
  std::map<std::string, std::vector<std::string>> tokens;  // id -> the tokens' symbols
  std::string out_dir;  // "" when a temporary folder held the files
};

// A folder under $TMPDIR (else /tmp), removed with this object. POSIX calls, not
// std::filesystem: libtorch.so exports copies of its operations (data/posix_fs.h).
class TemporaryFolder {
 public:
  TemporaryFolder() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != 0 ? tmp : "/tmp") + "/monoflow-align-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) throw FileError(pattern, 0, "cannot create a temporary folder");
    path_ = pattern;
  }
  ~TemporaryFolder() { data::posix::remove_tree(path_); }
  TemporaryFolder(const TemporaryFolder&) = delete;
  TemporaryFolder& operator=(const TemporaryFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

Alignment align(AlignOptions o) {
  Alignment a;
  a.out_dir = o.out_dir;
  o.on_utterance = [&](const train::UtteranceAlignment& u) {
    torch::Tensor frames = torch::empty({static_cast<int64_t>(u.tokens.size())}, torch::kInt64);
    std::vector<std::string> symbols;
    for (size_t t = 0; t < u.tokens.size(); ++t) {
      frames[static_cast<int64_t>(t)] = u.tokens[t].frames;
      symbols.push_back(u.tokens[t].symbol);
    }
    a.durations[u.id] = frames;
    a.tokens[u.id] = std::move(symbols);
  };
  std::optional<TemporaryFolder> temporary;
  if (o.out_dir.empty()) {
    temporary.emplace();
    o.out_dir = temporary->path();
  }
  a.report = train::align_dataset(o);
  if (temporary) a.report.summary_path.clear();  // removed with the folder
  return a;
}

}  // namespace

void bind_align(py::module_& m) {
  py::class_<Alignment>(m, "Alignment", "What monoflow.align found: durations per utterance and the run's report.")
      .def_readonly("durations", &Alignment::durations,
                    "utterance id -> int64 tensor [tokens]: mel frames per token, summing to the utterance's frames")
      .def_readonly("tokens", &Alignment::tokens, "utterance id -> the tokens' symbols")
      .def_readonly("out_dir", &Alignment::out_dir, "where the files are ('' when out_dir was not given)")
      .def_property_readonly("utterances", [](const Alignment& a) { return a.report.utterances; })
      .def_property_readonly("bad_lines", [](const Alignment& a) { return a.report.bad_lines; })
      .def_property_readonly("words", [](const Alignment& a) { return a.report.words; })
      .def_property_readonly("audio_seconds", [](const Alignment& a) { return a.report.audio_seconds; })
      .def_property_readonly("mean_mle", [](const Alignment& a) { return a.report.mean_mle; })
      .def_property_readonly("recentred_ms", [](const Alignment& a) { return a.report.recentred_ms; })
      .def_property_readonly("elapsed_s", [](const Alignment& a) { return a.report.elapsed_s; })
      .def_property_readonly("backend", [](const Alignment& a) { return a.report.backend; })
      .def_property_readonly("device", [](const Alignment& a) { return a.report.device; })
      .def_property_readonly("summary_path", [](const Alignment& a) { return a.report.summary_path; });

  m.def(
      "align",
      [](std::variant<std::string, std::vector<std::string>> checkpoint, std::optional<std::string> dataset_dir,
         std::optional<std::string> filelist, std::optional<std::string> out_dir, std::optional<std::string> config,
         std::vector<std::string> overrides, const std::string& device, int batch_size,
         std::optional<std::string> cache_dir, bool images, double min_pause_ms, const std::string& junction,
         std::optional<double> silence_edge_ms, bool recentre, bool progress) {
        AlignOptions o;
        if (auto* one = std::get_if<std::string>(&checkpoint)) {
          o.checkpoints = {*one};
        } else {
          o.checkpoints = std::get<std::vector<std::string>>(checkpoint);
        }
        if (o.checkpoints.empty()) throw UserError("checkpoint: give one checkpoint, or a list of runs of one text front-end");
        o.dataset_dir = dataset_dir.value_or("");
        o.filelist = filelist.value_or("");
        o.out_dir = out_dir.value_or("");
        o.config = config.value_or("");
        o.overrides = std::move(overrides);
        o.device = device;
        o.batch_size = batch_size;
        o.cache_dir = cache_dir.value_or("");
        o.images = images;
        o.min_pause_ms = min_pause_ms;
        const auto named = train::junction_named(junction);
        if (!named) {
          std::string names;
          for (const auto& name : train::junction_names()) names += (names.empty() ? "'" : ", '") + name + "'";
          throw UserError("junction: '" + junction + "': give one of " + names + " (align --junction)");
        }
        o.junction = *named;
        o.silence_edge_ms = silence_edge_ms.value_or(-1);
        o.recentre = recentre;
        o.progress = progress;
        py::gil_scoped_release release;
        return align(std::move(o));
      },
      py::arg("checkpoint"), py::kw_only(), py::arg("dataset_dir") = py::none(), py::arg("filelist") = py::none(),
      py::arg("out_dir") = py::none(), py::arg("config") = py::none(),
      py::arg("overrides") = std::vector<std::string>{}, py::arg("device") = "cpu", py::arg("batch_size") = 0,
      py::arg("cache_dir") = py::none(), py::arg("images") = false,
      py::arg("min_pause_ms") = AlignOptions{}.min_pause_ms, py::arg("junction") = train::junction_name(AlignOptions{}.junction),
      py::arg("silence_edge_ms") = py::none(), py::arg("recentre") = false, py::arg("progress") = false);
}

}  // namespace monoflow::python
