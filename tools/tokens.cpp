// tokens: what the text front-end of a config makes of a text, to check cleaners, numbers,
// CMUdict and blanks before training:
//   tokens --config configs/ljspeech.yaml --text "Dr. Smith paid $5."
//   tokens --config configs/ljspeech.yaml --file lines.txt      (one text per line)
#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>

#include "cli_main.h"
#include "common/error.h"
#include "data/text/text_processor.h"
#include "data/text/token_report.h"
#include "train/config/config_io.h"

int main(int argc, char** argv) {
  using namespace monoflow;
  CLI::App app{"Print the cleaned text, the tokens and the token ids a config's front-end gives a text."};
  std::string config_path = "configs/ljspeech.yaml", file;
  std::vector<std::string> texts, overrides;
  app.add_option("--config", config_path, "config whose data section sets the front-end");
  app.add_option("--set", overrides, "config override key=value");
  app.add_option("--text", texts, "a text (repeatable)");
  app.add_option("--file", file, "a UTF-8 file, one text per line");
  return cli_main(app, argc, argv, CliStyle("tokens"), [&] {
    const auto config = train::load_config(config_path, overrides);
    const text::TextProcessor processor(config.text);
    if (!file.empty()) {
      std::ifstream in(file);
      if (!in) throw FileError(file, 0, "cannot read");
      for (std::string line; std::getline(in, line);) texts.push_back(line);
    }
    if (texts.empty()) throw UserError("give --text TEXT or --file FILE");
    for (size_t i = 0; i < texts.size(); ++i) std::cout << (i ? "\n" : "") << text::token_report(processor, texts[i]);
    const std::string unknown = processor.unknown_report();
    if (!unknown.empty()) std::cerr << "tokens: warning: " << unknown << "\n";
    return 0;
  });
}
