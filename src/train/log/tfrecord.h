// TFRecord framing, the container of TensorBoard event files:
//   uint64 length (little endian) | uint32 masked CRC32C of the length bytes | data |
//   uint32 masked CRC32C of the data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace monoflow::train {

uint32_t crc32c(const void* data, size_t size);                // Castagnoli, reflected
uint32_t masked_crc32c(const void* data, size_t size);        // rotated right 15, + 0xa282ead8
std::string tfrecord_frame(const std::string& data);          // one framed record

}  // namespace monoflow::train
