// Adapts the text front-end (monoflow_text) to the dataset's TextEncoder.
//   auto tp = std::make_shared<const text::TextProcessor>(text_options);
//   auto sets = data::load_datasets(data_options, data::text_encoder(tp));
#pragma once

#include <memory>

#include "data/dataset.h"
#include "data/text/text_processor.h"

namespace monoflow::data {

inline TextEncoder text_encoder(std::shared_ptr<const text::TextProcessor> processor) {
  return [processor](const std::string& s) { return processor->encode(s); };
}

}  // namespace monoflow::data
