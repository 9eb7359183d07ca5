#pragma once
// Names one resident copy of a model: which model and version, on which
// device, in which compute dtype.

#include <chrono>
#include <cstdint>
#include <string>

#include "devices/device_id.h"
#include "devices/dtype.h"

namespace infergate {

struct ModelKey {
  std::string model;
  int64_t version = 0;
  DeviceId device;
  DType dtype = DType::kFloat32;
  // Which load of the version's files (model_repository.h): a replaced
  // model.pt is cached apart from the copy still answering.
  uint64_t generation = 0;

  std::string ToString() const;  // "mlp:1@cpu/FLOAT32"
  friend auto operator<=>(const ModelKey&, const ModelKey&) = default;
  friend bool operator==(const ModelKey&, const ModelKey&) = default;
};

struct ResidentModel {
  ModelKey key;
  uint64_t bytes = 0;
  bool pinned = false;
  int in_flight = 0;
  std::chrono::steady_clock::time_point ready_since;  // when its load finished
  uint64_t last_used = 0;                             // the order of its latest use (larger: later)
};

}  // namespace infergate
