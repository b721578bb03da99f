#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "train/log/tfrecord.h"

namespace monoflow::train {

TEST(Crc32c, KnownVectors) {
  // RFC 3720 (iSCSI) B.4 test vectors and the common "123456789" check value.
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  std::string zeros(32, '\0');
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  std::string ones(32, '\xff');
  EXPECT_EQ(crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  std::string inc(32, '\0');
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<char>(i);
  EXPECT_EQ(crc32c(inc.data(), inc.size()), 0x46DD794Eu);
}

TEST(Crc32c, MaskRotatesAndAddsTheConstant) {
  const uint32_t crc = crc32c("abc", 3);
  EXPECT_EQ(masked_crc32c("abc", 3), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

TEST(TfRecord, FramingLayout) {
  const std::string data = "hello";
  const std::string rec = tfrecord_frame(data);
  ASSERT_EQ(rec.size(), 8 + 4 + data.size() + 4);
  uint64_t len = 0;
  std::memcpy(&len, rec.data(), 8);  // little endian on x86
  EXPECT_EQ(len, 5u);
  uint32_t len_crc = 0, data_crc = 0;
  std::memcpy(&len_crc, rec.data() + 8, 4);
  EXPECT_EQ(len_crc, masked_crc32c(rec.data(), 8));
  EXPECT_EQ(rec.substr(12, 5), data);
  std::memcpy(&data_crc, rec.data() + 17, 4);
  EXPECT_EQ(data_crc, masked_crc32c(data.data(), data.size()));
}

}  // namespace monoflow::train
