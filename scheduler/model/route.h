#pragma once
// Where and how one request runs: the model version, the device, the compute
// dtype, and, when it is not where the client asked, why.

#include <cstdint>
#include <memory>
#include <optional>

#include "devices/device_info.h"
#include "devices/dtype.h"
#include "scheduler/model/fallback_reason.h"
#include "scheduler/model/model_key.h"
#include "scheduler/repository/model_repository.h"

namespace infergate {

struct Route {
  std::shared_ptr<const ModelEntry> model;
  int64_t version = 0;
  bool latest = false;      // the client asked for the latest version (no version)
  uint64_t generation = 0;  // of the version's files, from the repository view
  FileStamp stamp;          // the model.pt that generation was read from
  DeviceRequest requested;  // what the client asked for, parsed
  DeviceInfo device;        // device.id is where it runs
  DType dtype = DType::kFloat32;
  std::optional<FallbackReason> fallback;  // set when it runs elsewhere than asked
  // Set when the accuracy contract changed the dtype: "inaccurate:bfloat16
  // (error ...)", "unverified:float16".
  std::string precision_reason;
  // A reduced dtype whose accuracy check should start (precision_checker.h).
  std::optional<DType> precision_check;
  // Under `auto` with background moves: the ready path taken
  // (ReadyPathName, scheduler/routing/ready_path.h; null otherwise) and its
  // estimate of when the request finishes, from its planning (0: none, the
  // model's latency measured neither there nor anywhere to guess it from).
  const char* ready_path = nullptr;
  double expected_us = 0;
  double load_expected_us = 0;  // the load's part of expected_us (0: no load on the path)
  // The run's part of expected_us: the model's latency on `device` the
  // planning used, measured there or, before it ever ran there, guessed
  // from the CPU's (EstimateUnmeasuredLatencies). The job's expected
  // compute falls back to it until a run there is measured
  // (RequestDispatcher::ExpectCompute); 0: none, or the route moved since.
  double compute_expected_us = 0;

  ModelKey key() const { return {model->name, version, device.id, dtype, generation}; }
};

}  // namespace infergate
