#pragma once
// Triton's trace extension over the OpenTelemetry tracing the server has:
// the settings that GET/POST /v2/trace/setting, its per-model form
// /v2/models/{m}/trace/setting and gRPC TraceSetting read and change, and
// the decision they make for each inference call.
//
// Settings, in Triton's names and text form, global and per model (a model
// without its own value of a setting takes the global one):
//   trace_level  ["OFF"] or ["TIMESTAMPS"]: whether calls are traced at all
//                (a span holds the call's timestamps; "TENSORS" is refused:
//                spans carry no tensors);
//   trace_rate   "N": one call in N is offered to the tracer (N >= 1);
//   trace_count  "N": at most N more calls are offered, counting down
//                ("-1": no limit);
//   trace_mode   "opentelemetry", read-only.
// trace_file and log_frequency (Triton's own trace files) are refused: the
// spans go to the OTLP endpoint. Offered calls still pass the configured
// OpenTelemetry sampler (tracing.h), so the two thin together. A call
// counts against the rate and count of whoever holds the setting: the
// model when it has its own value, else the global one.
//
// Without an exporter (`exporting` false) the level is OFF and cannot be
// raised; the other settings still read and change.
//
// Threading: every method may be called from any thread at once; one lock,
// held for a few map operations.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/mutex.h"

namespace infergate {

class TraceSettings {
 public:
  // Setting name -> its value as Triton writes it (a level is a list).
  using Values = std::map<std::string, std::vector<std::string>>;
  // Setting name -> a new value, or nullopt to clear a model's own value
  // (so the global one applies again).
  using Change = std::map<std::string, std::optional<std::vector<std::string>>>;

  explicit TraceSettings(bool exporting);

  // The settings in force for `model` ("" = the global ones).
  Values Get(const std::string& model) const;
  // Applies `change` to `model`'s settings ("" = global) all or nothing and
  // returns the settings in force after it. INVALID_ARGUMENT naming the
  // setting for a bad value, an unknown or read-only setting, or a clear
  // of a global setting; FAILED_PRECONDITION for a level above OFF without
  // an exporter.
  absl::StatusOr<Values> Update(const std::string& model, const Change& change);

  // Whether a call for `model` is offered to the tracer, by the level,
  // rate and count in force; counts the call.
  bool Admit(absl::string_view model);

 private:
  struct Setting {
    std::optional<bool> on;  // the level: TIMESTAMPS (true) or OFF
    std::optional<uint32_t> rate;
    std::optional<int32_t> count;
    uint64_t calls = 0;  // calls counted against this holder's rate
  };
  Values Describe(const Setting* own) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const bool exporting_;
  mutable Mutex mu_;
  Setting global_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Setting, std::less<>> models_ ABSL_GUARDED_BY(mu_);
};

}  // namespace infergate
