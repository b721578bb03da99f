#include <gtest/gtest.h>
#include <torch/torch.h>

#include "common/error.h"

TEST(FileError, NamesFileAndLine) {
  monoflow::FileError with_line("data/metadata.csv", 12, "empty text");
  EXPECT_STREQ(with_line.what(), "data/metadata.csv:12: empty text");
  EXPECT_EQ(with_line.line(), 12);
  monoflow::FileError without_line("x.yaml", 0, "cannot open");
  EXPECT_STREQ(without_line.what(), "x.yaml: cannot open");
}

TEST(FileError, IsAUserError) {
  try {
    throw monoflow::FileError("a.wav", 0, "unreadable");
  } catch (const monoflow::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("a.wav"), std::string::npos);
    return;
  }
  FAIL() << "FileError was not caught as UserError";
}

TEST(LibTorch, LinksAndComputes) {
  auto t = torch::arange(4, torch::kFloat32);
  EXPECT_EQ(t.sum().item<float>(), 6.0f);
}
