#pragma once
// The flow a queued job waits in on its device (fair_queue.h): one model
// version. Work that is no model's (a task) has the empty key.

#include <compare>
#include <cstdint>
#include <string>

namespace infergate {

struct FlowKey {
  std::string model;
  int64_t version = 0;

  bool empty() const { return model.empty(); }
  // "mlp:1", for messages; "" for the empty key.
  std::string ToString() const;
  friend auto operator<=>(const FlowKey&, const FlowKey&) = default;
  friend bool operator==(const FlowKey&, const FlowKey&) = default;
};

}  // namespace infergate
