#include "train/config/config_schema.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <type_traits>
#include <utility>

#include "common/checks.h"

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

// ---- value checks of the train and run sections (the libraries' records check their own
// values in validate(), with the same texts: common/checks.h)

template <class T> using Check = std::function<std::string(const T&)>;

template <class T> Check<T> at_least(T lo) {
  return [lo](const T& v) { return check::at_least(v, lo); };
}
template <class T> Check<T> positive() {
  return [](const T& v) { return check::positive(v); };
}
Check<std::string> one_of(std::vector<std::string> allowed) {
  return [allowed](const std::string& v) { return check::one_of(v, allowed); };
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

// ---- rows

// The field a row fills, reached from the Config by member pointers:
// member(c, &Config::data, &DataOptions::mel, &MelOptions::hop_length) is c.data.mel.hop_length.
template <class Object> Object& member(Object& o) { return o; }
template <class Object, class Member, class... More>
auto& member(Object& o, Member m, More... more) {
  return member(o.*m, more...);
}
template <class... Path>
using FieldType = std::decay_t<decltype(member(std::declval<Config&>(), std::declval<Path>()...))>;

template <class T, class... Path>
Field make_field(std::string key, Check<T> check, Path... path) {
  Field f;
  f.key = std::move(key);
  f.type = type_name<T>();
  f.assign = [check, path...](Config& c, const YAML::Node& n) -> std::string {
    T value{};
    std::string err = convert(n, &value);
    if (err.empty() && check) err = check(value);
    if (err.empty()) member(c, path...) = std::move(value);
    return err;
  };
  f.emit = [path...](const Config& c) { return to_node(member(c, path...)); };
  return f;
}

// A row: the YAML key and the path to its field; type and conversion follow from the field.
template <class... Path> Field field(std::string key, Path... path) {
  return make_field(std::move(key), Check<FieldType<Path...>>{}, path...);
}
// The same with a range check read with the value (train and run sections).
template <class T, class... Path> Field checked(std::string key, Check<T> check, Path... path) {
  return make_field(std::move(key), std::move(check), path...);
}

std::vector<Field> make_fields() {
  using C = Config;
  using TS = TrainSection;
  using DO = data::DataOptions;
  using MO = data::MelOptions;
  using TO = text::TextOptions;
  using LO = data::LoaderOptions;
  using GO = models::GlowTTSOptions;
  using RS = RunSection;
  return {
      field("train.use_cuda", &C::train, &TS::use_cuda),
      checked("train.log_interval", positive<int>(), &C::train, &TS::log_interval),
      field("train.seed", &C::train, &TS::seed),
      checked("train.epochs", positive<int>(), &C::train, &TS::epochs),
      checked("train.learning_rate", positive<double>(), &C::train, &TS::learning_rate),
      checked("train.betas", betas(), &C::train, &TS::betas),
      checked("train.eps", positive<double>(), &C::train, &TS::eps),
      checked("train.warmup_steps", positive<int>(), &C::train, &TS::warmup_steps),
      checked("train.scheduler", one_of({"noam", "constant"}), &C::train, &TS::scheduler),
      checked("train.batch_size", positive<int>(), &C::train, &TS::batch_size),
      field("train.ddi", &C::train, &TS::ddi),
      field("train.fp16_run", &C::train, &TS::fp16_run),
      checked("train.grad_clip_value", at_least(0.0), &C::train, &TS::grad_clip_value),
      checked("train.max_steps", at_least<int64_t>(0), &C::train, &TS::max_steps),
      checked("train.val_interval", at_least(0), &C::train, &TS::val_interval),
      checked("train.checkpoint_interval", positive<int>(), &C::train, &TS::checkpoint_interval),
      checked("train.keep_checkpoints", positive<int>(), &C::train, &TS::keep_checkpoints),
      checked("train.max_nonfinite_steps", positive<int>(), &C::train, &TS::max_nonfinite_steps),
      field("train.allow_tf32", &C::train, &TS::allow_tf32),
      field("train.autocast_text_side", &C::train, &TS::autocast_text_side),

      // The data section: data::DataOptions (with its MelOptions), text::TextOptions and the
      // loader's threads; their validate() checks the values (config_io.cpp: validate).
      field("data.load_mel_from_disk", &C::data, &DO::load_mel_from_disk),
      field("data.training_files", &C::data, &DO::training_files),
      field("data.validation_files", &C::data, &DO::validation_files),
      field("data.text_cleaners", &C::text, &TO::cleaners),
      field("data.max_wav_value", &C::data, &DO::mel, &MO::max_wav_value),
      field("data.sampling_rate", &C::data, &DO::mel, &MO::sampling_rate),
      field("data.filter_length", &C::data, &DO::mel, &MO::filter_length),
      field("data.hop_length", &C::data, &DO::mel, &MO::hop_length),
      field("data.win_length", &C::data, &DO::mel, &MO::win_length),
      field("data.n_mel_channels", &C::data, &DO::mel, &MO::n_mel_channels),
      field("data.mel_fmin", &C::data, &DO::mel, &MO::mel_fmin),
      field("data.mel_fmax", &C::data, &DO::mel, &MO::mel_fmax),
      field("data.add_noise", &C::data, &DO::mel, &MO::add_noise),
      field("data.add_space", &C::text, &TO::add_space),
      field("data.add_blank", &C::text, &TO::add_blank),
      field("data.cmudict_path", &C::text, &TO::cmudict_path),
      field("data.n_speakers", &C::data, &DO::n_speakers),
      field("data.dataset_dir", &C::data, &DO::dataset_dir),
      field("data.symbols", &C::text, &TO::symbols),
      field("data.espeak_voice", &C::text, &TO::espeak_voice),
      field("data.on_unknown_char", &C::text, &TO::on_unknown_char),
      field("data.validation_size", &C::data, &DO::validation_size),
      field("data.on_bad_line", &C::data, &DO::on_bad_line),
      field("data.on_rate_mismatch", &C::data, &DO::on_rate_mismatch),
      field("data.cache_dir", &C::data, &DO::cache_dir),
      field("data.num_workers", &C::loader, &LO::num_workers),
      field("data.prefetch_batches", &C::loader, &LO::prefetch_batches),
      field("data.max_mel_frames", &C::data, &DO::max_mel_frames),
      field("data.allow_outside_paths", &C::data, &DO::allow_outside_paths),

      // The model section: models::GlowTTSOptions, checked by its validate().
      field("model.hidden_channels", &C::model, &GO::hidden_channels_),
      field("model.filter_channels", &C::model, &GO::filter_channels_),
      field("model.filter_channels_dp", &C::model, &GO::filter_channels_dp_),
      field("model.kernel_size", &C::model, &GO::kernel_size_),
      field("model.p_dropout", &C::model, &GO::p_dropout_),
      field("model.n_blocks_dec", &C::model, &GO::n_blocks_dec_),
      field("model.n_layers_enc", &C::model, &GO::n_layers_enc_),
      field("model.n_heads", &C::model, &GO::n_heads_),
      field("model.p_dropout_dec", &C::model, &GO::p_dropout_dec_),
      field("model.dilation_rate", &C::model, &GO::dilation_rate_),
      field("model.kernel_size_dec", &C::model, &GO::kernel_size_dec_),
      field("model.n_block_layers", &C::model, &GO::n_block_layers_),
      field("model.n_sqz", &C::model, &GO::n_sqz_),
      field("model.prenet", &C::model, &GO::prenet_),
      field("model.mean_only", &C::model, &GO::mean_only_),
      field("model.hidden_channels_enc", &C::model, &GO::hidden_channels_enc_),
      field("model.hidden_channels_dec", &C::model, &GO::hidden_channels_dec_),
      field("model.window_size", &C::model, &GO::window_size_),
      field("model.n_split", &C::model, &GO::n_split_),
      field("model.sigmoid_scale", &C::model, &GO::sigmoid_scale_),
      field("model.block_length", &C::model, &GO::block_length_),
      field("model.gin_channels", &C::model, &GO::gin_channels_),

      field("run.dir", &C::run, &RS::dir),
      checked("run.device", device_name(), &C::run, &RS::device),
      checked("run.align_backend", one_of({"auto", "cpu", "cuda", "cuda-fast"}), &C::run, &RS::align_backend),
      field("run.compare_align", &C::run, &RS::compare_align),
      checked("run.mas_neg_inf",
              Check<double>([](const double& v) {
                return v < -1e8 ? std::string() : "must be a large negative number (<= -1e8)";
              }),
              &C::run, &RS::mas_neg_inf),
      field("run.tensorboard", &C::run, &RS::tensorboard),
      checked("run.image_interval", at_least(0), &C::run, &RS::image_interval),
      field("run.cuda_graphs", &C::run, &RS::cuda_graphs),
      checked("run.cudnn_search", one_of({"auto", "always", "never"}), &C::run, &RS::cudnn_search),
      checked("run.threads", at_least(0), &C::run, &RS::threads),
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
