#pragma once
// The log settings of Triton's logging extension (gRPC LogSettings, REST
// /v2/logging), mapped onto this server's one knob, the lowest level it
// logs (common/logging.h):
//
//   log_verbose_level  uint32  >0: debug lines too (any value: there is one
//                              verbose level); 0: none
//   log_info           bool    info lines
//   log_warning        bool    warning lines
//   log_error          bool    error lines: always true, refused as false
//   log_format         string  "default" (the only format)
//   log_file           string  "" (logs go to standard error; refused
//                              otherwise: the container runtime collects them)
//
// Levels nest: whatever is on, every level above it is on too. A setting
// not named follows the ones named (log_verbose_level 1 turns info and
// warning on; log_warning false turns info and debug off), else keeps its
// value. Named values that would leave a hole (info on, warning off) are
// refused naming the setting, as is an unknown setting or a value of the
// wrong type.
//
// Threading: pure functions; the caller applies the level it gets back
// with SetMinLogLevel.

#include <cstdint>
#include <map>
#include <string>
#include <variant>

#include "absl/status/statusor.h"
#include "common/logging.h"

namespace infergate {

// One setting's value, as the protocol carries it.
using LogSettingValue = std::variant<bool, uint32_t, std::string>;
using LogSettings = std::map<std::string, LogSettingValue>;

// Every setting, as `level` makes it.
LogSettings DescribeLogSettings(LogLevel level);

// The level after `changes`; INVALID_ARGUMENT naming the setting
// ("settings.log_info: ...") for what cannot be applied.
absl::StatusOr<LogLevel> ApplyLogSettings(LogLevel current, const LogSettings& changes);

}  // namespace infergate
