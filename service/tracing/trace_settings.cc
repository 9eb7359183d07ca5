#include "service/tracing/trace_settings.h"

#include <limits>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace infergate {
namespace {

// The one text value of a setting, or INVALID_ARGUMENT naming it.
absl::StatusOr<std::string> OneValue(const std::string& name, const std::vector<std::string>& values) {
  if (values.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Unable to parse '", name, "': expected one value, got ", values.size()));
  }
  return values[0];
}

absl::StatusOr<bool> ParseLevel(const std::vector<std::string>& levels) {
  if (levels.empty()) return absl::InvalidArgumentError("trace_level: expected [\"OFF\"] or [\"TIMESTAMPS\"], got []");
  bool on = false;
  for (const std::string& level : levels) {
    if (level == "OFF") {
      if (levels.size() != 1) return absl::InvalidArgumentError("Expect only one trace level 'OFF' is specified");
    } else if (level == "TIMESTAMPS") {
      on = true;
    } else if (level == "TENSORS") {
      return absl::InvalidArgumentError(
          "trace_level: TENSORS is not served: this server's spans carry each call's timestamps (its queue, "
          "compute and device), not its tensors; use [\"TIMESTAMPS\"]");
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("trace_level: '", level.substr(0, 32), "' is not a level; expected OFF or TIMESTAMPS"));
    }
  }
  return on;
}

absl::StatusOr<uint32_t> ParseRate(const std::string& text) {
  uint64_t rate = 0;
  if (!absl::SimpleAtoi(text, &rate)) {
    return absl::InvalidArgumentError(absl::StrCat("Unable to parse 'trace_rate', got: ", text.substr(0, 32)));
  }
  if (rate < 1 || rate > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("Unable to parse 'trace_rate', value is out of range [ 1, ",
                                                   std::numeric_limits<uint32_t>::max(), " ], got: ", rate));
  }
  return static_cast<uint32_t>(rate);
}

absl::StatusOr<int32_t> ParseCount(const std::string& text) {
  int64_t count = 0;
  if (!absl::SimpleAtoi(text, &count)) {
    return absl::InvalidArgumentError(absl::StrCat("Unable to parse 'trace_count', got: ", text.substr(0, 32)));
  }
  if (count < -1 || count > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("Unable to parse 'trace_count', value is out of range [ -1, ",
                                                   std::numeric_limits<int32_t>::max(), " ], got: ", count));
  }
  return static_cast<int32_t>(count);
}

}  // namespace

TraceSettings::TraceSettings(bool exporting) : exporting_(exporting) {
  global_.on = exporting;
  global_.rate = 1;
  global_.count = -1;
}

TraceSettings::Values TraceSettings::Describe(const Setting* own) const {
  const bool on = own != nullptr && own->on ? *own->on : *global_.on;
  const uint32_t rate = own != nullptr && own->rate ? *own->rate : *global_.rate;
  const int32_t count = own != nullptr && own->count ? *own->count : *global_.count;
  return Values{{"trace_level", {on ? "TIMESTAMPS" : "OFF"}},
                {"trace_rate", {absl::StrCat(rate)}},
                {"trace_count", {absl::StrCat(count)}},
                {"trace_mode", {"opentelemetry"}}};
}

TraceSettings::Values TraceSettings::Get(const std::string& model) const {
  MutexLock lock(mu_);
  auto it = models_.find(model);
  return Describe(model.empty() || it == models_.end() ? nullptr : &it->second);
}

absl::StatusOr<TraceSettings::Values> TraceSettings::Update(const std::string& model, const Change& change) {
  MutexLock lock(mu_);
  auto it = models_.find(model);
  Setting next = model.empty() ? global_ : (it != models_.end() ? it->second : Setting{});
  for (const auto& [name, value] : change) {
    if (name == "trace_file" || name == "log_frequency") {
      return absl::InvalidArgumentError(absl::StrCat(
          name == "trace_file" ? "trace file location can not be updated through network protocol"
                               : "log_frequency can not be updated",
          " (", name, ": this server writes no trace files; its spans go to the OTLP endpoint, --otlp-endpoint)"));
    }
    if (name == "trace_mode") {
      return absl::InvalidArgumentError("trace_mode: the mode is 'opentelemetry' and can not be changed");
    }
    if (name != "trace_level" && name != "trace_rate" && name != "trace_count") {
      return absl::InvalidArgumentError(absl::StrCat("'", name.substr(0, 64),
                                                     "' is not a trace setting; expected trace_level, trace_rate "
                                                     "or trace_count"));
    }
    if (!value) {
      if (model.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": a global setting can not be cleared, only a model's (which then follows it)"));
      }
      if (name == "trace_level") next.on.reset();
      if (name == "trace_rate") next.rate.reset();
      if (name == "trace_count") next.count.reset();
      continue;
    }
    if (name == "trace_level") {
      absl::StatusOr<bool> on = ParseLevel(*value);
      if (!on.ok()) return on.status();
      if (*on && !exporting_) {
        return absl::FailedPreconditionError(
            "trace_level: tracing is off, so no level above OFF can be set: start the server with an OTLP "
            "endpoint (--otlp-endpoint, or OTEL_EXPORTER_OTLP_ENDPOINT)");
      }
      next.on = *on;
    } else {
      ASSIGN_OR_RETURN(std::string text, OneValue(name, *value));
      if (name == "trace_rate") {
        absl::StatusOr<uint32_t> rate = ParseRate(text);
        if (!rate.ok()) return rate.status();
        next.rate = *rate;
        next.calls = 0;
      } else {
        absl::StatusOr<int32_t> count = ParseCount(text);
        if (!count.ok()) return count.status();
        next.count = *count;
      }
    }
  }
  if (model.empty()) {
    global_ = next;
    return Describe(nullptr);
  }
  if (!next.on && !next.rate && !next.count) {
    if (it != models_.end()) models_.erase(it);
    return Describe(nullptr);
  }
  Setting& own = models_[model];
  own = next;
  return Describe(&own);
}

bool TraceSettings::Admit(absl::string_view model) {
  MutexLock lock(mu_);
  auto it = models_.find(model);
  Setting* own = it == models_.end() ? nullptr : &it->second;
  const bool on = own != nullptr && own->on ? *own->on : *global_.on;
  if (!on) return false;
  Setting& rate_holder = own != nullptr && own->rate ? *own : global_;
  if (rate_holder.calls++ % *rate_holder.rate != 0) return false;
  Setting& count_holder = own != nullptr && own->count ? *own : global_;
  if (*count_holder.count == 0) return false;
  if (*count_holder.count > 0) --*count_holder.count;
  return true;
}

}  // namespace infergate
