// Adapts the text front-end (monoflow_text) to the dataset's TextEncoder.
//   auto tp = std::make_shared<const text::TextProcessor>(text_options);
//   auto sets = data::load_datasets(data_options, data::text_encoder(tp));
#pragma once

#include <algorithm>
#include <memory>

#include "common/error.h"
#include "data/dataset.h"
#include "data/text/text_processor.h"

namespace monoflow::data {

// True when some token stands for a character (or ARPAbet / IPA symbol) of the text: not the
// pad, the blank of add_blank or the space of add_space. False when every character was
// dropped as unknown, so that the model would learn the audio against spaces and blanks.
inline bool has_text_symbol(const text::TextProcessor& tp, const std::vector<int64_t>& ids) {
  const int64_t space = tp.id_of(" ");
  return std::any_of(ids.begin(), ids.end(), [&](int64_t id) {
    return id != tp.pad_id() && id != tp.blank_id() && id != space;
  });
}

// Encodes with `processor`; a text with no symbol of the set throws UserError, which the
// dataset reports as a bad line (file:line).
inline TextEncoder text_encoder(std::shared_ptr<const text::TextProcessor> processor) {
  return [processor](const std::string& s) {
    std::vector<int64_t> ids = processor->encode(s);
    if (!has_text_symbol(*processor, ids)) {
      throw UserError("no character of '" + s + "' has a symbol in the " + processor->options().symbols +
                      " symbol set (after cleaning); every one would be dropped");
    }
    return ids;
  };
}

}  // namespace monoflow::data
