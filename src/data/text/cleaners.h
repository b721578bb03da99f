// The original cleaners (keithito/tacotron cleaners.py), by name. Each takes and returns UTF-8.
#pragma once

#include <string>
#include <vector>

namespace monoflow::text {

// "english_cleaners", "basic_cleaners", "transliteration_cleaners".
const std::vector<std::string>& known_cleaners();
// Throws UserError naming the unknown cleaner and the known ones.
void check_cleaner_names(const std::vector<std::string>& names);
// Applies the named cleaners in order.
std::string run_cleaners(const std::string& utf8_text, const std::vector<std::string>& names);

// The steps the pipelines are made of.
std::string lowercase(const std::string& utf8_text);            // Unicode-aware for Latin/Greek/Cyrillic
std::string collapse_whitespace(const std::string& utf8_text);  // runs of whitespace -> " "
std::string convert_to_ascii(const std::string& utf8_text);     // see transliterate.h
std::string expand_abbreviations(const std::string& text);      // "dr." -> "doctor", ...

// lowercase + collapse_whitespace.
std::string basic_cleaners(const std::string& text);
// convert_to_ascii + lowercase + collapse_whitespace.
std::string transliteration_cleaners(const std::string& text);
// convert_to_ascii + lowercase + normalize_numbers + expand_abbreviations + collapse_whitespace.
// "£<number>" is expanded to "<number> pounds" before transliteration: the original ran
// unidecode first, which turned "£" into "PS", so its pounds rule never applied.
std::string english_cleaners(const std::string& text);

}  // namespace monoflow::text
