// MONOFLOW_ARG(T, name): LibTorch's TORCH_ARG (torch/arg.h) without LibTorch, so that option
// records stay plain headers the LibTorch-free config can hold. It declares the member `name_`
// with a chainable setter `name(value)` and a getter `name()`:
//
//   struct Options { MONOFLOW_ARG(int64_t, hidden_channels) = 192; };
//   Options().hidden_channels(96).hidden_channels();  // 96
//
// Unlike TORCH_ARG the member stays public, so a config schema row can point at it
// (&Options::hidden_channels_) and the key -> field mapping is written once.
#pragma once

#define MONOFLOW_ARG(T, name)                                       \
 public:                                                            \
  auto name(const T& new_##name)->decltype(*this) {                 \
    this->name##_ = new_##name;                                     \
    return *this;                                                   \
  }                                                                 \
  const T& name() const noexcept { return this->name##_; }          \
  T name##_
