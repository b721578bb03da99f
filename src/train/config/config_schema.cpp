#include "train/config/config_schema.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

namespace monoflow::train::schema {
namespace {

// ---- conversions from a YAML node: strict, so "3.5" is not an integer and "yes" not a boolean

std::string convert(const YAML::Node& n, int64_t* out) {
  if (!n.IsScalar()) return "expected an integer";
  const std::string& s = n.Scalar();
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno == ERANGE) return "expected an integer, got '" + s + "'";
  *out = v;
  return "";
}

std::string convert(const YAML::Node& n, int* out) {
  int64_t v = 0;
  std::string err = convert(n, &v);
  if (!err.empty()) return err;
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
    return "integer " + n.Scalar() + " is out of range";
  *out = static_cast<int>(v);
  return "";
}

std::string convert(const YAML::Node& n, double* out) {
  if (!n.IsScalar()) return "expected a number";
  const std::string& s = n.Scalar();
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
    return "expected a finite number, got '" + s + "'";
  *out = v;
  return "";
}

std::string convert(const YAML::Node& n, bool* out) {
  if (n.IsScalar()) {
    if (n.Scalar() == "true") { *out = true; return ""; }
    if (n.Scalar() == "false") { *out = false; return ""; }
    return "expected true or false, got '" + n.Scalar() + "'";
  }
  return "expected true or false";
}

std::string convert(const YAML::Node& n, std::string* out) {
  if (n.IsNull()) { out->clear(); return ""; }
  if (!n.IsScalar()) return "expected a string";
  *out = n.Scalar();
  return "";
}

std::string convert(const YAML::Node& n, std::vector<std::string>* out) {
  if (!n.IsSequence()) return "expected a list of strings, e.g. [english_cleaners]";
  std::vector<std::string> v;
  for (const auto& item : n) {
    if (!item.IsScalar()) return "expected a list of strings";
    v.push_back(item.Scalar());
  }
  *out = std::move(v);
  return "";
}

std::string convert(const YAML::Node& n, std::array<double, 2>* out) {
  if (!n.IsSequence() || n.size() != 2) return "expected a pair of numbers, e.g. [0.9, 0.98]";
  for (size_t i = 0; i < 2; ++i) {
    std::string err = convert(n[i], &(*out)[i]);
    if (!err.empty()) return err;
  }
  return "";
}

template <class T> const char* type_name();
template <> const char* type_name<int>() { return "an integer"; }
template <> const char* type_name<int64_t>() { return "an integer"; }
template <> const char* type_name<double>() { return "a number"; }
template <> const char* type_name<bool>() { return "true or false"; }
template <> const char* type_name<std::string>() { return "a string"; }
template <> const char* type_name<std::vector<std::string>>() { return "a list of strings"; }
template <> const char* type_name<std::array<double, 2>>() { return "a pair of numbers"; }

YAML::Node to_node(const std::array<double, 2>& v) {
  YAML::Node n(YAML::NodeType::Sequence);
  n.push_back(v[0]);
  n.push_back(v[1]);
  n.SetStyle(YAML::EmitterStyle::Flow);
  return n;
}
YAML::Node to_node(const std::vector<std::string>& v) {
  YAML::Node n(YAML::NodeType::Sequence);
  for (const auto& s : v) n.push_back(s);
  n.SetStyle(YAML::EmitterStyle::Flow);
  return n;
}
// Shortest decimal text that reads back to the same double, so printed configs stay readable.
YAML::Node to_node(const double& v) {
  char buf[32];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string text = buf;
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";  // keep it a float
  return YAML::Node(text);
}
template <class T> YAML::Node to_node(const T& v) { return YAML::Node(v); }

// ---- value checks: return "" when fine

template <class T> using Check = std::function<std::string(const T&)>;

template <class T> Check<T> at_least(T lo) {
  return [lo](const T& v) {
    std::ostringstream m;
    if (v < lo) m << "must be >= " << lo << ", got " << v;
    return m.str();
  };
}
template <class T> Check<T> positive() {
  return [](const T& v) {
    std::ostringstream m;
    if (!(v > 0)) m << "must be > 0, got " << v;
    return m.str();
  };
}
Check<double> probability() {
  return [](const double& v) {
    std::ostringstream m;
    if (v < 0.0 || v >= 1.0) m << "must be in [0, 1), got " << v;
    return m.str();
  };
}
Check<std::string> one_of(std::vector<std::string> allowed) {
  return [allowed](const std::string& v) -> std::string {
    if (std::find(allowed.begin(), allowed.end(), v) != allowed.end()) return "";
    std::string m = "must be one of";
    for (const auto& a : allowed) m += " '" + a + "'";
    return m + ", got '" + v + "'";
  };
}
Check<std::string> device_name() {
  return [](const std::string& v) -> std::string {
    if (v == "auto" || v == "cpu" || v == "cuda") return "";
    if (v.rfind("cuda:", 0) == 0 && v.size() > 5 &&
        v.find_first_not_of("0123456789", 5) == std::string::npos)
      return "";
    return "must be 'auto', 'cpu', 'cuda' or 'cuda:N', got '" + v + "'";
  };
}
Check<std::array<double, 2>> betas() {
  return [](const std::array<double, 2>& v) -> std::string {
    for (double b : v)
      if (b < 0.0 || b >= 1.0) return "each beta must be in [0, 1)";
    return "";
  };
}

template <class Section, class T>
Field field(std::string key, Section Config::*section, T Section::*member, Check<T> check = {}) {
  Field f;
  f.key = std::move(key);
  f.type = type_name<T>();
  f.assign = [section, member, check](Config& c, const YAML::Node& n) -> std::string {
    T value{};
    std::string err = convert(n, &value);
    if (err.empty() && check) err = check(value);
    if (err.empty()) (c.*section).*member = std::move(value);
    return err;
  };
  f.emit = [section, member](const Config& c) { return to_node((c.*section).*member); };
  return f;
}

std::vector<Field> make_fields() {
  using C = Config;
  using TS = TrainSection;
  using DS = DataSection;
  using MS = ModelSection;
  using RS = RunSection;
  return {
      field("train.use_cuda", &C::train, &TS::use_cuda),
      field("train.log_interval", &C::train, &TS::log_interval, positive<int>()),
      field("train.seed", &C::train, &TS::seed),
      field("train.epochs", &C::train, &TS::epochs, positive<int>()),
      field("train.learning_rate", &C::train, &TS::learning_rate, positive<double>()),
      field("train.betas", &C::train, &TS::betas, betas()),
      field("train.eps", &C::train, &TS::eps, positive<double>()),
      field("train.warmup_steps", &C::train, &TS::warmup_steps, positive<int>()),
      field("train.scheduler", &C::train, &TS::scheduler, one_of({"noam", "constant"})),
      field("train.batch_size", &C::train, &TS::batch_size, positive<int>()),
      field("train.ddi", &C::train, &TS::ddi),
      field("train.fp16_run", &C::train, &TS::fp16_run),
      field("train.grad_clip_value", &C::train, &TS::grad_clip_value, at_least<double>(0.0)),
      field("train.max_steps", &C::train, &TS::max_steps, at_least<int64_t>(0)),
      field("train.val_interval", &C::train, &TS::val_interval, at_least(0)),
      field("train.checkpoint_interval", &C::train, &TS::checkpoint_interval, positive<int>()),
      field("train.keep_checkpoints", &C::train, &TS::keep_checkpoints, positive<int>()),
      field("train.max_nonfinite_steps", &C::train, &TS::max_nonfinite_steps, positive<int>()),
      field("train.allow_tf32", &C::train, &TS::allow_tf32),

      field("data.load_mel_from_disk", &C::data, &DS::load_mel_from_disk),
      field("data.training_files", &C::data, &DS::training_files),
      field("data.validation_files", &C::data, &DS::validation_files),
      field("data.text_cleaners", &C::data, &DS::text_cleaners),
      field("data.max_wav_value", &C::data, &DS::max_wav_value, positive<double>()),
      field("data.sampling_rate", &C::data, &DS::sampling_rate, positive<int>()),
      field("data.filter_length", &C::data, &DS::filter_length, positive<int>()),
      field("data.hop_length", &C::data, &DS::hop_length, positive<int>()),
      field("data.win_length", &C::data, &DS::win_length, positive<int>()),
      field("data.n_mel_channels", &C::data, &DS::n_mel_channels, positive<int>()),
      field("data.mel_fmin", &C::data, &DS::mel_fmin, at_least(0.0)),
      field("data.mel_fmax", &C::data, &DS::mel_fmax, positive<double>()),
      field("data.add_noise", &C::data, &DS::add_noise),
      field("data.add_space", &C::data, &DS::add_space),
      field("data.add_blank", &C::data, &DS::add_blank),
      field("data.cmudict_path", &C::data, &DS::cmudict_path),
      field("data.n_speakers", &C::data, &DS::n_speakers, at_least(0)),
      field("data.dataset_dir", &C::data, &DS::dataset_dir),
      field("data.symbols", &C::data, &DS::symbols, one_of({"english", "ipa"})),
      field("data.espeak_voice", &C::data, &DS::espeak_voice),
      field("data.on_unknown_char", &C::data, &DS::on_unknown_char, one_of({"skip", "error"})),
      field("data.validation_size", &C::data, &DS::validation_size, at_least(0)),
      field("data.on_bad_line", &C::data, &DS::on_bad_line, one_of({"skip", "error"})),
      field("data.on_rate_mismatch", &C::data, &DS::on_rate_mismatch, one_of({"resample", "error"})),
      field("data.cache_dir", &C::data, &DS::cache_dir),
      field("data.num_workers", &C::data, &DS::num_workers, at_least(0)),
      field("data.prefetch_batches", &C::data, &DS::prefetch_batches, positive<int>()),
      field("data.max_mel_frames", &C::data, &DS::max_mel_frames, at_least(0)),

      field("model.hidden_channels", &C::model, &MS::hidden_channels, positive<int>()),
      field("model.filter_channels", &C::model, &MS::filter_channels, positive<int>()),
      field("model.filter_channels_dp", &C::model, &MS::filter_channels_dp, positive<int>()),
      field("model.kernel_size", &C::model, &MS::kernel_size, positive<int>()),
      field("model.p_dropout", &C::model, &MS::p_dropout, probability()),
      field("model.n_blocks_dec", &C::model, &MS::n_blocks_dec, positive<int>()),
      field("model.n_layers_enc", &C::model, &MS::n_layers_enc, positive<int>()),
      field("model.n_heads", &C::model, &MS::n_heads, positive<int>()),
      field("model.p_dropout_dec", &C::model, &MS::p_dropout_dec, probability()),
      field("model.dilation_rate", &C::model, &MS::dilation_rate, positive<int>()),
      field("model.kernel_size_dec", &C::model, &MS::kernel_size_dec, positive<int>()),
      field("model.n_block_layers", &C::model, &MS::n_block_layers, positive<int>()),
      field("model.n_sqz", &C::model, &MS::n_sqz, positive<int>()),
      field("model.prenet", &C::model, &MS::prenet),
      field("model.mean_only", &C::model, &MS::mean_only),
      field("model.hidden_channels_enc", &C::model, &MS::hidden_channels_enc, positive<int>()),
      field("model.hidden_channels_dec", &C::model, &MS::hidden_channels_dec, positive<int>()),
      field("model.window_size", &C::model, &MS::window_size, at_least(0)),
      field("model.n_split", &C::model, &MS::n_split, positive<int>()),
      field("model.sigmoid_scale", &C::model, &MS::sigmoid_scale),
      field("model.block_length", &C::model, &MS::block_length, at_least(0)),
      field("model.gin_channels", &C::model, &MS::gin_channels, at_least(0)),

      field("run.dir", &C::run, &RS::dir),
      field("run.device", &C::run, &RS::device, device_name()),
      field("run.align_backend", &C::run, &RS::align_backend,
            one_of({"auto", "cpu", "cuda", "cuda-fast"})),
      field("run.compare_align", &C::run, &RS::compare_align),
      field("run.mas_neg_inf", &C::run, &RS::mas_neg_inf,
            Check<double>([](const double& v) {
              return v < -1e8 ? std::string() : "must be a large negative number (<= -1e8)";
            })),
      field("run.tensorboard", &C::run, &RS::tensorboard),
      field("run.image_interval", &C::run, &RS::image_interval, at_least(0)),
      field("run.cuda_graphs", &C::run, &RS::cuda_graphs),
  };
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

const std::vector<Field>& fields() {
  static const std::vector<Field> all = make_fields();
  return all;
}

const Field* find(const std::string& key) {
  for (const auto& f : fields())
    if (f.key == key) return &f;
  return nullptr;
}

std::string closest_key(const std::string& key) {
  std::string best;
  size_t best_d = std::max<size_t>(3, key.size() / 4) + 1;
  for (const auto& f : fields()) {
    size_t d = edit_distance(key, f.key);
    if (d < best_d) { best_d = d; best = f.key; }
  }
  return best;
}

}  // namespace monoflow::train::schema
