// tools/cli_main.h: every tool's errors become the same messages and exit codes.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "cli_main.h"

namespace monoflow {
namespace {

// Runs cli_main over `args` (argv[0] added) and returns (exit code, stderr).
template <class Body>
std::pair<int, std::string> run(const CliStyle& style, std::vector<std::string> args, Body body) {
  CLI::App app{"test tool"};
  int n = 0;
  app.add_option("--n", n);
  args.insert(args.begin(), "tool");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  ::testing::internal::CaptureStderr();
  const int code = cli_main(app, static_cast<int>(argv.size()), argv.data(), style, body);
  return {code, ::testing::internal::GetCapturedStderr()};
}

TEST(CliMain, MapsErrorsToMessagesAndExitCodes) {
  const CliStyle style("tool");
  EXPECT_EQ(run(style, {"--n", "3"}, [] { return 0; }), std::make_pair(0, std::string()));
  EXPECT_EQ(run(style, {}, [] { return 2; }).first, 2);  // the body's own code
  EXPECT_EQ(run(style, {}, []() -> int { throw UserError("bad key"); }),
            std::make_pair(1, std::string("tool: error: bad key\n")));
  EXPECT_EQ(run(style, {}, []() -> int { throw FileError("x.yaml", 3, "bad"); }),
            std::make_pair(1, std::string("tool: error: x.yaml:3: bad\n")));
  const auto internal = run(style, {}, []() -> int {
    TORCH_CHECK(false, "broken invariant");
    return 0;
  });
  EXPECT_EQ(internal.first, 3);
  EXPECT_EQ(internal.second.rfind("tool: internal error: ", 0), 0u) << internal.second;
  EXPECT_NE(internal.second.find("broken invariant"), std::string::npos) << internal.second;
  EXPECT_EQ(run(style, {}, []() -> int { throw std::runtime_error("odd"); }),
            std::make_pair(3, std::string("tool: error: odd\n")));
}

TEST(CliMain, StyleSetsTheLabelTheBlankLineAndTheUsageCode) {
  EXPECT_EQ(run(CliStyle("convert_weights").user_label(""), {}, []() -> int { throw UserError("no such file"); }),
            std::make_pair(1, std::string("convert_weights: no such file\n")));
  EXPECT_EQ(run(CliStyle("train").blank_line(), {}, []() -> int { throw UserError("x"); }),
            std::make_pair(1, std::string("\ntrain: error: x\n")));
  bool ran = false;
  auto body = [&] {
    ran = true;
    return 0;
  };
  EXPECT_NE(run(CliStyle("tool"), {"--no-such-flag"}, body).first, 0);
  EXPECT_EQ(run(CliStyle("tool").usage_exit_code(2), {"--no-such-flag"}, body).first, 2);
  EXPECT_EQ(run(CliStyle("tool").usage_exit_code(2), {"--n", "many"}, body).first, 2);
  EXPECT_FALSE(ran) << "a rejected command line must not run the body";
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(run(CliStyle("tool").usage_exit_code(2), {"--help"}, body).first, 0);
  EXPECT_NE(::testing::internal::GetCapturedStdout().find("test tool"), std::string::npos);
  EXPECT_FALSE(ran);
}

// --help shows what an option is when it is not given: the value of its variable before
// parsing, or the meaning an option names itself (a sentinel); an empty one shows nothing.
TEST(CliMain, HelpShowsEachOptionsDefault) {
  CLI::App app{"test tool"};
  std::string out = "out.wav", mel_out;
  int batch = 16;
  double noise = 0.667;
  int64_t speaker = -1;
  std::vector<std::string> overrides;
  bool quiet = false;
  app.add_option("-o,--out", out, "output wav");
  app.add_option("--mel-out", mel_out, "also the mel");
  app.add_option("--batch-size", batch, "lines at once");
  app.add_option("--noise-scale", noise, "noise");
  app.add_option("--speaker", speaker, "speaker id")->default_str("none");
  app.add_option("--set", overrides, "override");
  app.add_flag("--quiet", quiet, "no progress");
  show_defaults(app);
  const std::string help = app.help();
  for (const std::string shown : {"-o,--out TEXT=out.wav", "--batch-size INT=16", "--noise-scale FLOAT=0.667",
                                  "--speaker INT=none"}) {
    EXPECT_NE(help.find(shown), std::string::npos) << shown << "\n" << help;
  }
  EXPECT_EQ(help.find("TEXT="), help.find("TEXT=out.wav")) << help;  // --mel-out and --set show none
  EXPECT_EQ(help.find("=[]"), std::string::npos) << help;
  EXPECT_EQ(help.find("--quiet="), std::string::npos) << help;
  // What the user gives still arrives.
  std::vector<std::string> args{"tool", "-o", "x.wav", "--speaker", "2"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
  EXPECT_EQ(out, "x.wav");
  EXPECT_EQ(speaker, 2);
}

}  // namespace
}  // namespace monoflow
