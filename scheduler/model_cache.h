#pragma once
// Models resident per device, keyed by (model, version, device, dtype).
// Loads are single-flight: concurrent first requests for a key share one load.

#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "devices/device_id.h"
#include "devices/dtype.h"

namespace infergate {

class LoadedModel;

struct ModelKey {
  std::string model;
  int64_t version = 0;
  DeviceId device;
  DType dtype = DType::kFloat32;

  std::string ToString() const;  // "mlp:1@cpu/FLOAT32"
  friend auto operator<=>(const ModelKey&, const ModelKey&) = default;
  friend bool operator==(const ModelKey&, const ModelKey&) = default;
};

struct ResidentModel {
  ModelKey key;
  uint64_t bytes = 0;
};

class ModelCache {
 public:
  using Loader = std::function<absl::StatusOr<std::shared_ptr<LoadedModel>>()>;

  // The loaded model for `key`, loading it with `loader` when absent. A
  // failed load is not cached, so a fixed file loads on the next request.
  // `*loaded` tells whether this call did the load.
  absl::StatusOr<std::shared_ptr<LoadedModel>> GetOrLoad(const ModelKey& key, const Loader& loader,
                                                         bool* loaded = nullptr);

  // Drops every resident key for which `match` is true; returns how many.
  size_t Unload(const std::function<bool(const ModelKey&)>& match);

  std::vector<ResidentModel> Resident() const;

 private:
  using Result = absl::StatusOr<std::shared_ptr<LoadedModel>>;
  struct Slot {
    std::shared_future<Result> result;
    bool ready = false;
    uint64_t bytes = 0;
  };

  mutable std::mutex mu_;
  std::map<ModelKey, std::shared_ptr<Slot>> slots_;
};

}  // namespace infergate
