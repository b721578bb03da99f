// The scripts that sum up profiles and benchmark results, on inputs made here:
// scripts/profile_summary.py (which part of the model each kernel's time lands in, forward and
// backward), scripts/profile_cpu_ops.py (self time by op and input shapes) and
// scripts/parity/report.py (the alignment recipe's tables).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace {

// "python3 <source tree>/<path> ": the script of this tree (MONOFLOW_SOURCE_DIR, else the working
// folder). The scripts need the standard library only.
std::string python_script(const std::string& path) {
  const char* source = std::getenv("MONOFLOW_SOURCE_DIR");
  return std::string("python3 ") + (source ? source : ".") + "/" + path + " ";
}

std::string run(const std::string& command, int* status) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return out;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
  const int raw = pclose(pipe);
  *status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return out;
}

// One event of the trace: ph "X", category, name, start and duration in microseconds, args.
std::string event(const std::string& cat, const std::string& name, int ts, int dur, const std::string& args = "") {
  return "{\"ph\": \"X\", \"cat\": \"" + cat + "\", \"name\": \"" + name + "\", \"ts\": " + std::to_string(ts) +
         ", \"dur\": " + std::to_string(dur) + (args.empty() ? "" : ", \"args\": {" + args + "}") + "}";
}

std::string launch(int ts, int correlation) {
  return event("cuda_runtime", "cudaLaunchKernel", ts, 1, "\"correlation\": " + std::to_string(correlation));
}

std::string kernel(const std::string& name, int ts, int dur, int correlation) {
  return event("kernel", name, ts, dur, "\"correlation\": " + std::to_string(correlation));
}

// The line of the "by part of the model" table that names `part`, or "" when none does.
std::string part_line(const std::string& out, const std::string& part) {
  const size_t table = out.find("by part of the model");
  if (table == std::string::npos) return "";
  for (size_t at = out.find('\n', table); at != std::string::npos && at + 1 < out.size();) {
    const size_t end = out.find('\n', at + 1);
    const std::string line = out.substr(at + 1, end - at - 1);
    if (line.find("  " + part + " ") != std::string::npos) return line;
    if (line.rfind("GPU kernel time", 0) == 0) break;
    at = end;
  }
  return "";
}

// The forward of a coupling block runs a convolution (an ATen op, autograd number 100) and one of
// monoflow's own autograd functions (number 101, which has no op of its number in the trace);
// the text encoder's op is number 200. In the backward, the autograd engine evaluates node 100
// (a 2 ms kernel), node 101 (3 ms) and node 200 (4 ms). The kernels of nodes 100 and 101 belong
// to the coupling block's backward, node 200's to the text encoder's: node 101 takes the scope of
// the forward op made just before it. Before 2026-11-27 its 3 ms were "bwd (no scope)".
TEST(ProfileSummary, BackwardKernelsOfOwnAutogradFunctionsTakeTheirForwardScope) {
  const std::string trace = testing::TempDir() + "profile_summary_trace.json";
  const std::string evaluate = "autograd::engine::evaluate_function: ";
  std::ofstream(trace)
      << "{\"traceEvents\": [\n"
      << event("user_annotation", "monoflow_step", 0, 100000) << ",\n"
      << event("user_annotation", "monoflow::flow::CouplingBlock", 10, 40) << ",\n"
      << event("cpu_op", "aten::conv1d", 12, 5, "\"Sequence number\": 100") << ",\n"
      << launch(13, 1) << ",\n"
      << event("cpu_op", "aten::empty", 20, 2) << ",\n"
      << launch(30, 2) << ",\n"  // the custom function's forward kernel, inside the scope
      << event("user_annotation", "monoflow::text_encoder", 60, 20) << ",\n"
      << event("cpu_op", "aten::mm", 62, 5, "\"Sequence number\": 200") << ",\n"
      << launch(63, 3) << ",\n"
      << event("cpu_op", evaluate + "MmBackward0", 100, 10, "\"Sequence number\": 200") << ",\n"
      << launch(101, 4) << ",\n"
      << event("cpu_op", evaluate + "torch::autograd::CppNode<Gate>", 120, 10, "\"Sequence number\": 101") << ",\n"
      << launch(121, 5) << ",\n"
      << event("cpu_op", evaluate + "ConvolutionBackward0", 140, 10, "\"Sequence number\": 100") << ",\n"
      << launch(141, 6) << ",\n"
      << kernel("conv_fwd", 1000, 1000, 1) << ",\n"
      << kernel("gate_forward", 3000, 1000, 2) << ",\n"
      << kernel("mm_fwd", 5000, 1000, 3) << ",\n"
      << kernel("mm_bwd", 7000, 4000, 4) << ",\n"
      << kernel("gate_backward", 12000, 3000, 5) << ",\n"
      << kernel("conv_bwd", 16000, 2000, 6) << "\n]}\n";
  int status = 0;
  const std::string out = run(python_script("scripts/profile_summary.py") + trace + " 2>&1", &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(part_line(out, "fwd monoflow::flow::CouplingBlock").find("2.00 ms"), std::string::npos) << out;
  EXPECT_NE(part_line(out, "bwd monoflow::flow::CouplingBlock").find("5.00 ms"), std::string::npos) << out;
  EXPECT_NE(part_line(out, "bwd monoflow::text_encoder").find("4.00 ms"), std::string::npos) << out;
  EXPECT_EQ(part_line(out, "bwd (no scope)"), "") << out;
  std::remove(trace.c_str());
}

// A graphed step's trace: its kernels come from one cudaGraphLaunch, with no op or scope around
// them. --names-from an eager trace of the step names each by its twin there (same kernel name,
// grid and block); a kernel with no twin stays "(no scope)".
TEST(ProfileSummary, GraphKernelsTakeTheirEagerTwinsParts) {
  const std::string script = python_script("scripts/profile_summary.py");
  const std::string eager = testing::TempDir() + "profile_summary_eager.json";
  const std::string graph = testing::TempDir() + "profile_summary_graph.json";
  std::ofstream(eager) << "{\"traceEvents\": [\n"
                       << event("user_annotation", "monoflow_step", 0, 100000) << ",\n"
                       << event("user_annotation", "monoflow::flow::CouplingBlock", 10, 40) << ",\n"
                       << event("cpu_op", "aten::conv1d", 12, 5, "\"Sequence number\": 100") << ",\n"
                       << launch(13, 1) << ",\n"
                       << kernel("conv_fwd", 1000, 1000, 1) << "\n]}\n";
  std::ofstream(graph) << "{\"traceEvents\": [\n"
                       << event("user_annotation", "monoflow_step", 0, 100000) << ",\n"
                       << event("cuda_runtime", "cudaGraphLaunch", 10, 5, "\"correlation\": 7") << ",\n"
                       << kernel("conv_fwd", 1000, 2000, 7) << ",\n"
                       << kernel("graph_only", 4000, 3000, 7) << "\n]}\n";
  int status = 0;
  const std::string plain = run(script + graph + " 2>&1", &status);
  ASSERT_EQ(status, 0) << plain;
  EXPECT_EQ(part_line(plain, "fwd monoflow::flow::CouplingBlock"), "") << plain;
  const std::string named = run(script + graph + " --names-from " + eager + " 2>&1", &status);
  ASSERT_EQ(status, 0) << named;
  EXPECT_NE(part_line(named, "fwd monoflow::flow::CouplingBlock").find("2.00 ms"), std::string::npos) << named;
  EXPECT_NE(part_line(named, "(no scope)").find("3.00 ms"), std::string::npos) << named;
  EXPECT_NE(named.find("aten::conv1d"), std::string::npos) << named;
  std::remove(eager.c_str());
  std::remove(graph.c_str());
}

// An inference trace (bench_inference --profile) wraps each call in a "monoflow_call" range: the
// summary reads it with --range and, without, says which range it did not find.
TEST(ProfileSummary, ReadsTheRangeItIsToldOf) {
  const std::string script = python_script("scripts/profile_summary.py");
  const std::string trace = testing::TempDir() + "profile_summary_call.json";
  std::ofstream(trace) << "{\"traceEvents\": [\n"
                       << event("user_annotation", "monoflow_call", 0, 10000) << ",\n"
                       << launch(10, 1) << ",\n"
                       << launch(20, 2) << ",\n"
                       << kernel("decoder_kernel", 100, 3000, 1) << ",\n"
                       << kernel("encoder_kernel", 4000, 1000, 2) << "\n]}\n";
  int status = 0;
  const std::string out = run(script + trace + " --range monoflow_call 2>&1", &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("profile of 1 steps"), std::string::npos) << out;
  EXPECT_NE(out.find("(4.0 ms per step)"), std::string::npos) << out;
  const std::string refused = run(script + trace + " 2>&1", &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(refused.find("no monoflow_step ranges"), std::string::npos) << refused;
  std::remove(trace.c_str());
}

// A CPU trace (bench_inference --device cpu --profile): one call; an op with a nested op, whose
// self time leaves the nested one's out, and the nested op called again with other input shapes.
// By name the two products sum; with --shapes they are rows of their own.
TEST(ProfileCpuOps, SelfTimeByOpAndByInputShapes) {
  const std::string script = python_script("scripts/profile_cpu_ops.py");
  const std::string trace = testing::TempDir() + "profile_cpu_ops.json";
  const auto op = [](const std::string& name, int ts, int dur, const std::string& dims) {
    return "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"tid\": 1, \"name\": \"" + name + "\", \"ts\": " +
           std::to_string(ts) + ", \"dur\": " + std::to_string(dur) + ", \"args\": {\"Input Dims\": " + dims + "}}";
  };
  std::ofstream(trace) << "{\"traceEvents\": [\n"
                       << event("user_annotation", "monoflow_call", 0, 1000) << ",\n"
                       << op("aten::conv1d", 10, 300, "[[1, 2, 3]]") << ",\n"
                       << op("aten::mm", 20, 200, "[[1, 2], [2, 3]]") << ",\n"
                       << op("aten::mm", 400, 100, "[[4, 5], [5, 6]]") << "\n]}\n";
  int status = 0;
  const std::string by_name = run(script + trace + " 2>&1", &status);
  ASSERT_EQ(status, 0) << by_name;
  EXPECT_NE(by_name.find("1 calls, 1.0 ms per call; ops' self time 0.4 ms per call"), std::string::npos) << by_name;
  EXPECT_NE(by_name.find("aten::mm                                         0.30  30.0%          2"), std::string::npos)
      << by_name;
  EXPECT_NE(by_name.find("aten::conv1d                                     0.10  10.0%          1"), std::string::npos)
      << by_name;
  const std::string by_shape = run(script + trace + " --shapes 2>&1", &status);
  ASSERT_EQ(status, 0) << by_shape;
  EXPECT_NE(by_shape.find("aten::mm [[1, 2], [2, 3]]"), std::string::npos) << by_shape;
  const size_t first = by_shape.find("aten::mm [[1, 2], [2, 3]]");
  const size_t second = by_shape.find("aten::mm [[4, 5], [5, 6]]");
  ASSERT_NE(second, std::string::npos) << by_shape;
  EXPECT_LT(first, second) << "the larger self time first: " << by_shape;
  EXPECT_NE(by_shape.find("0.20  20.0%", first), std::string::npos) << by_shape;
  EXPECT_NE(by_shape.find("0.10  10.0%", second), std::string::npos) << by_shape;
  std::remove(trace.c_str());
}

// What scripts/parity/run.sh leaves of the alignment recipe, without parity runs: one score.json
// per scored checkpoint and one for the runs together ("final"). The report has no parity title
// then, lists the checkpoints in order and the runs together last, with their figures.
TEST(ParityReport, RecipeTableListsEachRunAndTheRunsTogetherLast) {
  // Folders by the shell: in this binary std::filesystem::remove_all resolved to libtorch's
  // exported copy, which crashed (a null call).
  const std::string script = python_script("scripts/parity/report.py");
  const std::string work = testing::TempDir() + "parity_report_work";
  int status = 0;
  run("rm -rf '" + work + "'", &status);
  const auto score = [&](const std::string& name, double median, double signed_ms, double w10, double w25) {
    const std::string dir = work + "/recipe/awb/" + name;
    int made = 0;
    run("mkdir -p '" + dir + "'", &made);
    std::ofstream(dir + "/score.json") << "{\"median_abs_ms\": " << median << ", \"median_signed_ms\": " << signed_ms
                                       << ", \"within_10ms\": " << w10 << ", \"within_25ms\": " << w25
                                       << ", \"within_50ms\": 0.99}\n";
  };
  score("final", 9.4, -7.4, 0.5, 0.91);
  score("s2-ckpt_000002500", 7.2, 1.2, 0.639, 0.957);
  score("s1-ckpt_000002500", 11.7, -10.9, 0.437, 0.854);
  const std::string out = run(script + "--work " + work + " --steps 1500 2>&1", &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_EQ(out.find("Parity with the official trainer"), std::string::npos) << out;
  EXPECT_NE(out.find("# Alignment recipe"), std::string::npos) << out;
  const size_t s1 = out.find("| s1-ckpt_000002500 | 11.7 | -10.9 | 43.7% | 85.4% | 99.0% |");
  const size_t s2 = out.find("| s2-ckpt_000002500 | 7.2 | +1.2 | 63.9% | 95.7% | 99.0% |");
  const size_t together = out.find("| runs together | 9.4 | -7.4 | 50.0% | 91.0% | 99.0% |");
  ASSERT_NE(s1, std::string::npos) << out;
  ASSERT_NE(s2, std::string::npos) << out;
  ASSERT_NE(together, std::string::npos) << out;
  EXPECT_LT(s1, s2) << out;
  EXPECT_LT(s2, together) << out;
  run("rm -rf '" + work + "'", &status);
}

// run.sh leaves a failed recipe run out of the runs together and names the others in
// final/seeds.txt; the report says which seeds the figure holds.
TEST(ParityReport, RecipeTableNamesTheSeedsTheRunsTogetherHold) {
  const std::string script = python_script("scripts/parity/report.py");
  const std::string work = testing::TempDir() + "parity_report_seeds";
  int status = 0;
  run("rm -rf '" + work + "' && mkdir -p '" + work + "/recipe/kal/final' '" + work + "/recipe/kal/s3-ckpt_000002500'",
      &status);
  ASSERT_EQ(status, 0);
  for (const char* name : {"final", "s3-ckpt_000002500"}) {
    std::ofstream(work + "/recipe/kal/" + name + "/score.json")
        << "{\"median_abs_ms\": 12.5, \"median_signed_ms\": 3.9, \"within_10ms\": 0.408, \"within_25ms\": 0.783, "
           "\"within_50ms\": 0.939}\n";
  }
  std::ofstream(work + "/recipe/kal/final/seeds.txt") << "1 3 4\n";
  const std::string out = run(script + "--work " + work + " --steps 1500 2>&1", &status);
  ASSERT_EQ(status, 0) << out;
  const size_t seed = out.find("| s3-ckpt_000002500 | 12.5 | +3.9 | 40.8% | 78.3% | 93.9% |");
  const size_t together = out.find("| runs together (seeds 1, 3, 4) | 12.5 | +3.9 | 40.8% | 78.3% | 93.9% |");
  ASSERT_NE(seed, std::string::npos) << out;
  ASSERT_NE(together, std::string::npos) << out;
  EXPECT_LT(seed, together) << "the runs together last: " << out;
  run("rm -rf '" + work + "'", &status);
}

// RECIPE_COMPARE's second scoring of the runs together (final-compare, its align arguments in
// args.txt, its seeds in its own seeds.txt) follows the first as the last row, named by those
// arguments and seeds. The folders' glob order puts final-compare first ('-' sorts before '/').
TEST(ParityReport, RecipeTableNamesTheComparedAlignArgumentsLast) {
  const std::string script = python_script("scripts/parity/report.py");
  const std::string work = testing::TempDir() + "parity_report_compare";
  int status = 0;
  const std::string corpus = work + "/recipe/flite/";
  run("rm -rf '" + work + "' && mkdir -p '" + corpus + "final' '" + corpus + "final-compare' '" + corpus +
          "s1-ckpt_000002500'",
      &status);
  ASSERT_EQ(status, 0);
  const auto score = [&](const std::string& name, double median, double w25) {
    std::ofstream(corpus + name + "/score.json") << "{\"median_abs_ms\": " << median
                                                  << ", \"median_signed_ms\": -1.0, \"within_10ms\": 0.7, "
                                                  << "\"within_25ms\": " << w25 << ", \"within_50ms\": 0.99}\n";
  };
  score("final", 5.4, 0.971);
  score("final-compare", 5.8, 0.970);
  score("s1-ckpt_000002500", 7.5, 0.93);
  std::ofstream(corpus + "final/seeds.txt") << "1 v1-1\n";
  std::ofstream(corpus + "final-compare/seeds.txt") << "1 v1-1\n";  // run.sh copies final's
  std::ofstream(corpus + "final-compare/args.txt") << "--junction middle\n";
  const std::string out = run(script + "--work " + work + " --steps 1500 2>&1", &status);
  ASSERT_EQ(status, 0) << out;
  const size_t seed = out.find("| s1-ckpt_000002500 | 7.5 |");
  const size_t together = out.find("| runs together (seeds 1, v1-1) | 5.4 | -1.0 | 70.0% | 97.1% | 99.0% |");
  const size_t compared =
      out.find("| runs together, align --junction middle (seeds 1, v1-1) | 5.8 | -1.0 | 70.0% | 97.0% | 99.0% |");
  ASSERT_NE(seed, std::string::npos) << out;
  ASSERT_NE(together, std::string::npos) << out;
  ASSERT_NE(compared, std::string::npos) << out;
  EXPECT_LT(seed, together) << out;
  EXPECT_LT(together, compared) << "the compared rule after the default: " << out;
  run("rm -rf '" + work + "'", &status);
}

// Parity runs at equal steps: besides the table's means, each run's validation total and
// alignment, seeds in numeric order (s10 after s9), and a run without an alignment score keeps
// its total.
TEST(ParityReport, EachRunAtTheLastStepHasItsOwnLineInSeedOrder) {
  const std::string script = python_script("scripts/parity/report.py");
  const std::string work = testing::TempDir() + "parity_report_runs";
  int status = 0;
  run("rm -rf '" + work + "' && mkdir -p '" + work + "'", &status);
  {
    std::ofstream evals(work + "/evals.jsonl");
    const auto eval = [&](const std::string& run_name, double total) {
      evals << "{\"run\": \"flite/monoflow-tf32-" << run_name << "\", \"step\": 1500, \"val_mle\": -0.02, "
            << "\"val_duration\": " << total + 0.02 << ", \"val_total\": " << total
            << ", \"sent_frames\": 300, \"sent_true_frames\": 300, \"sent_l1\": 0.9}\n";
    };
    eval("s10", 0.378);
    eval("s9", 0.265);
  }
  std::ofstream(work + "/s9.json") << "{\"median_abs_ms\": 8.5, \"median_signed_ms\": -1.3, \"within_25ms\": 0.888}\n";
  std::ofstream(work + "/aligns.jsonl") << "{\"run\": \"flite/monoflow-tf32-s9\", \"step\": 1500, \"score\": \""
                                        << work << "/s9.json\"}\n";
  const std::string out = run(script + "--work " + work + " --steps 1500 2>&1", &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("- monoflow-tf32: s9 0.265, 88.8% (-1.3 ms); s10 0.378\n"), std::string::npos) << out;
  EXPECT_NE(out.find("| monoflow-tf32 | 2 | -0.020 (-0.020..-0.020) | 0.342 (0.285..0.398) | 0.322 (0.265..0.378) |"),
            std::string::npos)
      << out;
  run("rm -rf '" + work + "'", &status);
}

}  // namespace
