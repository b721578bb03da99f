// Number normalisation of the original English cleaners (keithito/tacotron numbers.py), which
// spelled numbers with Python's `inflect`. The words are the same as inflect's, hyphens
// included: 123 -> "one hundred twenty-three", 1999 -> "nineteen ninety-nine".
#pragma once

#include <string>

namespace monoflow::text {

// Digits (leading zeros allowed) as inflect.number_to_words(n, andword=...) writes them:
// "one thousand, two hundred thirty-four" (andword "") or "... and thirty-four" (andword "and").
// More than 36 significant digits (past inflect's "decillion") are read digit by digit.
std::string cardinal_words(const std::string& digits, const std::string& andword);
// inflect's ordinal of a cardinal phrase: "twenty-one" -> "twenty-first", "twelve" -> "twelfth".
std::string ordinal_of(const std::string& cardinal_phrase);
// The original _expand_number: 1001..2999 are read as years ("nineteen ninety-nine",
// "two thousand five", "twenty-one hundred"), everything else as a cardinal without "and".
std::string expand_number(const std::string& digits);
// "£<digits and commas>" -> "<digits> pounds" (the original pounds rule).
std::string expand_pounds(const std::string& utf8_text);
// The whole original normalize_numbers: commas in numbers removed, pounds, dollars and cents,
// decimal points ("3.14" -> "three point fourteen"), ordinals (with "and", as the original),
// then the remaining digit runs.
std::string normalize_numbers(const std::string& text);

}  // namespace monoflow::text
