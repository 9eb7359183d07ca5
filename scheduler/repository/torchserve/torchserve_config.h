#pragma once
// TorchServe's config.properties, as KServe mounts it with a model store
// (/mnt/models/config/config.properties): which archives to serve, and each
// model version's batching and timeout settings. Every key TorchServe knows
// has a row in one table (PropertyUseOf) saying what infergate does with
// it: reads it, honours it as an address only when asked to, ignores it
// because it changes nothing here, or refuses the file because it would
// change behaviour that infergate does not have. A key in no row is
// refused too, named. Pure functions; thread-safe.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace infergate {

// One model version's entry of `model_snapshot` (or `models`), with
// TorchServe's defaults for what it leaves out.
struct TorchServeVersionSettings {
  std::string mar_name;  // the archive in the model store
  bool default_version = false;
  uint32_t batch_size = 1;                     // batchSize: most requests per forward pass
  uint64_t max_batch_delay_ms = 100;           // maxBatchDelay
  std::optional<uint64_t> response_timeout_s;  // responseTimeout; unset: default_response_timeout
  uint32_t min_workers = 1, max_workers = 1;   // read, and noted: devices' workers serve every model
};

struct TorchServeAddresses {
  std::string inference;   // inference_address, e.g. http://0.0.0.0:8085
  std::string management;  // management_address
  std::string metrics;     // metrics_address
  int grpc_inference_port = 0;
};

struct TorchServeConfig {
  // model name -> TorchServe version ("1.0") -> settings; empty when the
  // file has neither model_snapshot nor models.
  std::map<std::string, std::map<std::string, TorchServeVersionSettings>> snapshot;
  // load_models as written: "all", or archives ("a.mar", "name=a.mar")
  // separated by commas; empty: the key is absent.
  std::string load_models;
  std::string model_store;  // model_store as written; "" when absent
  uint64_t default_response_timeout_s = 120;
  uint32_t job_queue_size = 0;  // 0: not set (infergate's queue capacity applies)
  TorchServeAddresses addresses;
  // Keys read but without effect here, each with why, for the log.
  std::vector<std::string> notes;
};

enum class PropertyUse {
  kRead,      // infergate applies it
  kAddress,   // a listening address: applied only with --torchserve-addresses
  kNoEffect,  // changes nothing a client sees here (threads, Python set-up)
  kRefused,   // would change behaviour infergate lacks: the file is refused
};

struct PropertyRow {
  PropertyUse use;
  // kNoEffect: why ignoring it is safe; kRefused: what to use instead.
  absl::string_view why;
};

// The row for `key`; kRefused with an empty reason for a key TorchServe
// does not document.
PropertyRow PropertyUseOf(absl::string_view key);

// Parses and checks the file's text. INVALID_ARGUMENT naming the key for a
// refused key or a bad value (e.g. "model_snapshot: models.mnist.1.0.batchSize").
absl::StatusOr<TorchServeConfig> ParseTorchServeConfig(absl::string_view text);

// Orders TorchServe version names as numbers part by part ("1.10" after
// "1.9"), falling back to text for parts that are not numbers.
bool TorchServeVersionLess(absl::string_view a, absl::string_view b);

}  // namespace infergate
