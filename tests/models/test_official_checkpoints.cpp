// The files the official Glow-TTS really writes (utils.save_checkpoint with its numpy learning
// rate and full Adam state, zip and legacy format, init.py's ddi_G.pth), made by its saving code
// in Python torch, read here with exact weights; and the pickle reader on what else such files
// may hold (numpy arrays, sets, bytes, objects of other classes) and on what it must refuse.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/error.h"
#include "model_test_util.h"
#include "models/glow_tts.h"
#include "models/interop/pickle_compat.h"
#include "models/interop/pickle_reader.h"
#include "models/interop/weights.h"
#include "official_files.h"

namespace monoflow::models {
namespace {

namespace fs = std::filesystem;

std::vector<char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

c10::IValue entry(const c10::IValue& dict, const std::string& key) { return dict.toGenericDict().at(key); }

// BINUNICODE of `s` (spelled out: a hex escape in a literal would swallow a following a-f/0-9).
std::string binunicode(const std::string& s) {
  std::string out = "X";
  for (int i = 0; i < 4; ++i) out += static_cast<char>((s.size() >> (8 * i)) & 0xff);
  return out + s;
}

// One folder of official files for the tiny multi-speaker model, made once for the suite.
class OfficialCheckpoints : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    python_ = new std::string(official_files::python_with_torch());
    if (python_->empty()) return;
    dir_ = new std::string((fs::temp_directory_path() / ("monoflow_official_" + std::to_string(::getpid()))).string());
    fs::create_directories(*dir_);
    GlowTTS model(testing::tiny_reference_options());
    error_ = new std::string(official_files::make_official_checkpoints(*python_, state_dict(*model), *dir_));
  }
  static void TearDownTestSuite() {
    if (dir_ != nullptr) {
      std::error_code ec;
      for (const auto& f : fs::directory_iterator(*dir_, ec)) fs::remove(f.path(), ec);
      fs::remove(*dir_, ec);
    }
  }
  void SetUp() override {
    if (python_->empty()) GTEST_SKIP() << "no Python with torch and numpy (MONOFLOW_PYTHON)";
    ASSERT_TRUE(error_->empty()) << *error_;
  }
  static std::string path(const std::string& name) { return *dir_ + "/" + name; }

  static std::string* python_;
  static std::string* dir_;
  static std::string* error_;
};
std::string* OfficialCheckpoints::python_ = nullptr;
std::string* OfficialCheckpoints::dir_ = nullptr;
std::string* OfficialCheckpoints::error_ = nullptr;

TEST_F(OfficialCheckpoints, EveryFileLoadsWithExactWeights) {
  for (const auto& [file, values, iteration] : {std::make_tuple("G_1.pth", "G_1.pth.values", 1),
                                                std::make_tuple("G_1_legacy.pth", "G_1.pth.values", 1),
                                                std::make_tuple("ddi_G.pth", "ddi_G.pth.values", 0)}) {
    SCOPED_TRACE(file);
    int64_t read_iteration = -1;
    const StateDict sd = read_state_dict(path(file), &read_iteration);
    EXPECT_EQ(read_iteration, iteration);
    const auto expected = official_files::read_values(path(values));
    ASSERT_EQ(sd.size(), expected.size());
    for (size_t i = 0; i < sd.size(); ++i) {
      EXPECT_EQ(sd[i].first, expected[i].first);
      EXPECT_EQ(sd[i].second.dtype(), torch::kFloat32) << sd[i].first;
      EXPECT_TRUE(torch::equal(sd[i].second, expected[i].second)) << sd[i].first;
    }
    GlowTTS model(testing::tiny_reference_options());
    import_official_weights(*model, path(file));  // strict: every key, every shape
    const auto params = model->named_parameters();
    for (const auto& [key, t] : expected) EXPECT_TRUE(torch::equal(params[key], t)) << key;
  }
  // The DDI file and the one after a step differ (the step moved every weight).
  EXPECT_FALSE(torch::equal(read_state_dict(path("G_1.pth"))[0].second, read_state_dict(path("ddi_G.pth"))[0].second));
}

TEST_F(OfficialCheckpoints, OptimizerStateAndNumpyLearningRateReadAsValues) {
  const std::string meta = path("G_1.meta");
  const auto first = official_files::read_values(path("G_1.pth.values"))[0].second;
  for (const char* file : {"G_1.pth", "G_1_legacy.pth"}) {
    SCOPED_TRACE(file);
    const c10::IValue ck = read_torch_save(file_bytes(path(file)), file);
    EXPECT_EQ(entry(ck, "iteration").toInt(), 1);
    ASSERT_TRUE(entry(ck, "learning_rate").isDouble()) << entry(ck, "learning_rate").tagKind();  // numpy.float64
    EXPECT_EQ(entry(ck, "learning_rate").toDouble(), official_files::meta_value(meta, "learning_rate"));
    const c10::IValue opt = entry(ck, "optimizer");
    const c10::IValue group = entry(opt, "param_groups").toListRef()[0];
    EXPECT_EQ(entry(group, "lr").toDouble(), official_files::meta_value(meta, "lr"));
    const auto& betas = entry(group, "betas").toTupleRef().elements();
    ASSERT_EQ(betas.size(), 2u);
    EXPECT_EQ(betas[0].toDouble(), official_files::meta_value(meta, "betas", 0));
    EXPECT_EQ(betas[1].toDouble(), official_files::meta_value(meta, "betas", 1));
    EXPECT_EQ(entry(group, "eps").toDouble(), official_files::meta_value(meta, "eps"));
    EXPECT_EQ(static_cast<double>(entry(group, "params").toListRef().size()), official_files::meta_value(meta, "params"));
    const c10::IValue state0 = entry(opt, "state").toGenericDict().at(c10::IValue(int64_t{0}));
    EXPECT_EQ(entry(state0, "exp_avg").toTensor().sizes(), first.sizes());
    EXPECT_GT(entry(state0, "exp_avg_sq").toTensor().abs().sum().item<double>(), 0.0);
    EXPECT_EQ(entry(state0, "step").toTensor().item<double>(), 1.0);
  }
  const c10::IValue ddi = read_torch_save(file_bytes(path("ddi_G.pth")), "ddi_G.pth");
  EXPECT_EQ(entry(ddi, "iteration").toInt(), 0);
  EXPECT_EQ(entry(ddi, "learning_rate").toDouble(), 1.0);
  EXPECT_EQ(entry(entry(ddi, "optimizer"), "state").toGenericDict().size(), 0u);
}

// What else a torch.save file may hold: numpy arrays (either byte order, Fortran order),
// numpy scalars of other types, sets, bytes, and objects of classes the reader does not
// know, which come back as None rather than stopping the read.
TEST_F(OfficialCheckpoints, NumpyArraysSetsBytesAndOtherObjects) {
  const std::string script = path("extras.py");
  std::ofstream(script) << "import datetime, sys, numpy as np, torch\n"
                           "d = {'arr': np.arange(6, dtype='>i4').reshape(2, 3),\n"
                           "     'farr': np.asfortranarray(np.arange(6.0).reshape(2, 3)),\n"
                           "     'f32': np.float32(1.5), 'i64': np.int64(-5), 'b': np.bool_(True),\n"
                           "     'set': {3}, 'bytes': b'\\x00\\xff', 'date': datetime.date(2020, 1, 2),\n"
                           "     'w': torch.arange(4.0)}\n"
                           "torch.save(d, sys.argv[1])\n"
                           "torch.save(d, sys.argv[2], _use_new_zipfile_serialization=False)\n";
  int status = 0;
  const std::string out = official_files::run(*python_ + " " + script + " " + path("extras.pt") + " " +
                                                  path("extras_legacy.pt"), &status);
  ASSERT_EQ(status, 0) << out;
  for (const char* file : {"extras.pt", "extras_legacy.pt"}) {
    SCOPED_TRACE(file);
    const c10::IValue d = read_torch_save(file_bytes(path(file)), file);
    EXPECT_TRUE(torch::equal(entry(d, "arr").toTensor(), torch::arange(6, torch::kInt32).reshape({2, 3})));
    EXPECT_TRUE(torch::equal(entry(d, "farr").toTensor(), torch::arange(6, torch::kFloat64).reshape({2, 3})));
    EXPECT_EQ(entry(d, "f32").toDouble(), 1.5);
    EXPECT_EQ(entry(d, "i64").toInt(), -5);
    EXPECT_EQ(entry(d, "b").toBool(), true);
    ASSERT_TRUE(entry(d, "set").isList());
    EXPECT_EQ(entry(d, "set").toListRef()[0].toInt(), 3);
    EXPECT_TRUE(entry(d, "bytes").isNone());
    EXPECT_TRUE(entry(d, "date").isNone());
    EXPECT_TRUE(torch::equal(entry(d, "w").toTensor(), torch::arange(4, torch::kFloat32)));
  }
}

TEST(PickleReader, RefusesWhatTorchSaveDoesNotWriteNamingTheFile) {
  using namespace std::string_literals;
  auto error_of = [](const std::string& program) {
    try {
      unpickle(program, 0, nullptr, nullptr, "x.pth");
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  // An opcode outside what torch.save writes (0xff), named with its place.
  EXPECT_NE(error_of("\x80\x02\xff."s).find("x.pth: cannot read this torch.save file's pickle (opcode 0xff"),
            std::string::npos);
  // A whole pickled module (torch.save(model)): the class is named, with what to save instead.
  const std::string module = "\x80\x02"s + "c__main__\nFlowGenerator\n)\x81}b."s;
  EXPECT_NE(error_of(module).find("__main__.FlowGenerator"), std::string::npos) << error_of(module);
  EXPECT_NE(error_of(module).find("state_dict"), std::string::npos);
  // Truncated and unbalanced programs.
  EXPECT_NE(error_of("\x80\x02}"s).find("truncated"), std::string::npos);
  EXPECT_NE(error_of("\x80\x02}s."s).find("stack underflow"), std::string::npos);
  // A tensor where no storage can be loaded.
  const std::string tensor = "\x80\x02("s + binunicode("storage") + "ctorch\nFloatStorage\n"s + binunicode("0") +
                             binunicode("cpu") + "K\x01tQ."s;
  EXPECT_NE(error_of(tensor).find("a tensor where none is expected"), std::string::npos) << error_of(tensor);
}

TEST(PickleReader, SharedNestedListsAreConvertedOnceAndStayShared) {
  using namespace std::string_literals;
  // L0 = [], L(k) = [L(k-1), L(k-1)] through the memo, 60 levels: 2^60 paths from the root, so
  // a walk that converted each path would never end; the reader must convert each list once.
  // Each list is memoised and popped; the last one stays as the result.
  std::string program = "\x80\x02]q\x00"s;
  constexpr int kLevels = 60;
  for (int k = 1; k <= kLevels; ++k) {
    const char prev = static_cast<char>(k - 1), self = static_cast<char>(k);
    program += "0]("s + "h"s + prev + "h"s + prev + "e"s + "q"s + self;
  }
  program += "."s;
  c10::IValue v = unpickle(program, 0, nullptr, nullptr, "x.pth");
  for (int k = kLevels; k > 0; --k) {
    ASSERT_TRUE(v.isList()) << "level " << k;
    const auto list = v.toListRef();
    ASSERT_EQ(list.size(), 2u) << "level " << k;
    EXPECT_TRUE(list[0].is(list[1])) << "level " << k << ": the shared list was copied";
    v = list[0];
  }
  ASSERT_TRUE(v.isList());
  EXPECT_EQ(v.toListRef().size(), 0u);
}

TEST(PickleReader, OrderedDictAttributesAreDroppedAndOrderKept) {
  using namespace std::string_literals;
  // OrderedDict() with items 'k': 5, 'a': 1, then BUILD({'_metadata': 1}) as torch.save writes it.
  const std::string od = "\x80\x02"s + "ccollections\nOrderedDict\nq\x00)Rq\x01("s + binunicode("k") + "K\x05"s +
                         binunicode("a") + "K\x01u}"s + binunicode("_metadata") + "K\x01sb."s;
  const auto d = unpickle(od, 0, nullptr, nullptr, "x").toGenericDict();
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d.begin()->key().toStringRef(), "k");
  EXPECT_EQ(d.at("a").toInt(), 1);
}

}  // namespace
}  // namespace monoflow::models
