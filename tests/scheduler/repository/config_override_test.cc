#include "scheduler/repository/config_override.h"

#include <gtest/gtest.h>

#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "tests/common/text_proto.h"

namespace infergate {
namespace {

v1::ModelConfig Text(const std::string& text) { return testing::FromText<v1::ModelConfig>(text); }

TEST(ConfigOverrideTest, NamedFieldsReplaceTheFilesWholeListsIncludedTheRestStays) {
  const v1::ModelConfig file = Text(R"(
    description: "from the file" max_batch_size: 64 warmup: true
    inputs { name: "a" dtype: FLOAT32 dims: [4] } inputs { name: "b" dtype: INT64 dims: [2] }
    dynamic_batching { max_queue_delay_us: 500 preferred_batch_sizes: [8] })");
  ConfigOverride patch;
  patch.values = Text(R"(max_batch_size: 4 inputs { name: "c" dtype: FLOAT16 dims: [1] } warmup: false)");
  patch.fields = {"max_batch_size", "inputs", "warmup"};
  v1::ModelConfig out = ApplyConfigOverride(file, patch);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(out, Text(R"(
    description: "from the file" max_batch_size: 4 warmup: false
    inputs { name: "c" dtype: FLOAT16 dims: [1] }
    dynamic_batching { max_queue_delay_us: 500 preferred_batch_sizes: [8] })")))
      << out.ShortDebugString();
}

TEST(ConfigOverrideTest, AFieldNamedButEmptyClearsIt) {
  ConfigOverride patch;
  patch.fields = {"devices", "dynamic_batching"};
  v1::ModelConfig out =
      ApplyConfigOverride(Text(R"(devices: ["cuda:0"] dynamic_batching { max_queue_delay_us: 9 })"), patch);
  EXPECT_EQ(out.devices_size(), 0);
  EXPECT_FALSE(out.has_dynamic_batching());
}

// A config an override changed is no longer the Triton file as written.
TEST(ConfigOverrideTest, AnOverrideDropsTheTritonTextAnEmptyOneKeepsIt) {
  const v1::ModelConfig file = Text(R"(max_batch_size: 8 triton_config_text: "max_batch_size: 8")");
  ConfigOverride patch;
  EXPECT_EQ(ApplyConfigOverride(file, patch).triton_config_text(), "max_batch_size: 8");
  patch.values = Text("max_batch_size: 2");
  patch.fields = {"max_batch_size"};
  EXPECT_TRUE(ApplyConfigOverride(file, patch).triton_config_text().empty());
}

TEST(ConfigOverrideTest, EqualityIsByFieldsAndValues) {
  ConfigOverride a, b;
  a.values = b.values = Text("max_batch_size: 4");
  a.fields = b.fields = {"max_batch_size"};
  EXPECT_TRUE(a == b);
  b.fields.insert("inputs");
  EXPECT_FALSE(a == b);
}

}  // namespace
}  // namespace infergate
