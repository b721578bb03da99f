// Praat TextGrids in the long text format ("ooTextFile"), the format Praat writes by default
// and the Montreal Forced Aligner exports: interval tiers only, which is all align writes.
#pragma once

#include <string>
#include <vector>

namespace monoflow::train {

struct TextGridInterval {
  double xmin = 0, xmax = 0;
  std::string text;
};

struct TextGridTier {
  std::string name;
  std::vector<TextGridInterval> intervals;  // contiguous, from the grid's xmin to its xmax
};

struct TextGrid {
  double xmin = 0, xmax = 0;
  std::vector<TextGridTier> tiers;
};

// The file's text. Times are written in the shortest form that reads back to the same double;
// a quote in a label is doubled, as Praat does; a line break in a label becomes a space.
std::string format_textgrid(const TextGrid& grid);

// Reads what format_textgrid writes, and Praat's own long-format interval tiers (labels on one
// line). FileError naming source:line for anything else (a short-format file, a point tier, a
// missing field, a count that does not match).
TextGrid parse_textgrid(const std::string& text, const std::string& source);

}  // namespace monoflow::train
