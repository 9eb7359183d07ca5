#pragma once
// Test helper: a protobuf message from text format, failing the test (and
// naming the text) when it does not parse.

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <string>

namespace infergate::testing {

template <typename Message>
Message FromText(const std::string& text) {
  Message message;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &message)) << text;
  return message;
}

}  // namespace infergate::testing
