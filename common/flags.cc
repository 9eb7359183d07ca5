#include "common/flags.h"

#include <cmath>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/units.h"

namespace infergate {

void FlagSet::String(std::string name, std::string* target, std::string help) {
  flags_.push_back({name, std::move(help), absl::StrCat("\"", *target, "\""), false,
                    [target](const std::string& v) {
                      *target = v;
                      return absl::OkStatus();
                    },
                    nullptr});
}

void FlagSet::Int(std::string name, int64_t* target, std::string help) {
  flags_.push_back({name, std::move(help), absl::StrCat(*target), false,
                    [target, name](const std::string& v) {
                      int64_t parsed = 0;
                      if (!absl::SimpleAtoi(v, &parsed)) {
                        return absl::InvalidArgumentError(absl::StrCat("--", name, ": '", v, "' is not an integer"));
                      }
                      *target = parsed;
                      return absl::OkStatus();
                    },
                    nullptr});
}

void FlagSet::Bool(std::string name, bool* target, std::string help) {
  flags_.push_back({name, std::move(help), *target ? "true" : "false", true,
                    [target, name](const std::string& v) {
                      if (v == "true" || v == "1" || v == "yes") {
                        *target = true;
                      } else if (v == "false" || v == "0" || v == "no") {
                        *target = false;
                      } else {
                        return absl::InvalidArgumentError(absl::StrCat("--", name, ": '", v, "' is not a boolean"));
                      }
                      return absl::OkStatus();
                    },
                    nullptr});
}

void FlagSet::Double(std::string name, double* target, std::string help) {
  flags_.push_back({name, std::move(help), absl::StrCat(*target), false,
                    [target, name](const std::string& v) {
                      double parsed = 0;
                      if (!absl::SimpleAtod(v, &parsed) || !std::isfinite(parsed)) {
                        return absl::InvalidArgumentError(absl::StrCat("--", name, ": '", v, "' is not a number"));
                      }
                      *target = parsed;
                      return absl::OkStatus();
                    },
                    nullptr});
}

void FlagSet::Duration(std::string name, std::chrono::milliseconds* target, std::string help) {
  flags_.push_back({name, std::move(help), absl::StrCat(target->count(), "ms"), false,
                    [target, name](const std::string& v) -> absl::Status {
                      ASSIGN_OR_RETURN(std::chrono::milliseconds d, ParseDuration(v, absl::StrCat("--", name)));
                      *target = d;
                      return absl::OkStatus();
                    },
                    nullptr});
}

void FlagSet::ByteSize(std::string name, uint64_t* target, std::string help) {
  flags_.push_back({name, std::move(help), absl::StrCat(*target), false,
                    [target, name](const std::string& v) -> absl::Status {
                      absl::StatusOr<uint64_t> bytes = ParseByteSize(v);
                      if (!bytes.ok())
                        return absl::InvalidArgumentError(absl::StrCat("--", name, ": ", bytes.status().message()));
                      *target = *bytes;
                      return absl::OkStatus();
                    },
                    nullptr});
}

void FlagSet::Repeated(std::string name, std::vector<std::string>* target, std::string help) {
  flags_.push_back({name, std::move(help), "none", false,
                    [target](const std::string& v) {
                      target->push_back(v);
                      return absl::OkStatus();
                    },
                    nullptr});
}

void FlagSet::Int(std::string name, int64_t* target, std::string help, Rule<int64_t> rule) {
  Int(std::move(name), target, std::move(help));
  AddRule(target, std::move(rule));
}

void FlagSet::Double(std::string name, double* target, std::string help, Rule<double> rule) {
  Double(std::move(name), target, std::move(help));
  AddRule(target, std::move(rule));
}

void FlagSet::Duration(std::string name, std::chrono::milliseconds* target, std::string help,
                       Rule<std::chrono::milliseconds> rule) {
  Duration(std::move(name), target, std::move(help));
  AddRule(target, std::move(rule));
}

void FlagSet::ByteSize(std::string name, uint64_t* target, std::string help, Rule<uint64_t> rule) {
  ByteSize(std::move(name), target, std::move(help));
  AddRule(target, std::move(rule));
}

absl::Status FlagSet::CheckValues() const {
  for (const Flag& f : flags_) {
    if (!f.check) continue;
    if (std::string broken = f.check(); !broken.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--", f.name, ": ", broken));
    }
  }
  return absl::OkStatus();
}

FlagSet::Rule<int64_t> InRange(int64_t min, int64_t max) {
  return [min, max](const int64_t& v) {
    return v >= min && v <= max ? std::string() : absl::StrCat("must be ", min, "..", max);
  };
}

const FlagSet::Flag* FlagSet::Find(const std::string& name) const {
  for (const Flag& f : flags_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

absl::StatusOr<std::vector<std::string>> FlagSet::Parse(int argc, const char* const* argv, bool* help) {
  *help = false;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      for (++i; i < argc; ++i) positional.emplace_back(argv[i]);
      break;
    }
    if (arg == "--help" || arg == "-h") {
      *help = true;
      continue;
    }
    if (!absl::StartsWith(arg, "--") || arg.size() == 2) {
      positional.push_back(arg);
      continue;
    }
    std::string body = arg.substr(2);
    std::string name = body, value;
    bool has_value = false;
    if (size_t eq = body.find('='); eq != std::string::npos) {
      name = body.substr(0, eq);
      value = body.substr(eq + 1);
      has_value = true;
    }
    const Flag* flag = Find(name);
    if (!flag && !has_value && absl::StartsWith(name, "no")) {
      const Flag* negated = Find(name.substr(2));
      if (negated && negated->is_bool) {
        RETURN_IF_ERROR(negated->set("false"));
        continue;
      }
    }
    if (!flag) return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, " (see --help)"));
    if (!has_value) {
      if (flag->is_bool) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
    }
    RETURN_IF_ERROR(flag->set(value));
  }
  return positional;
}

absl::Status FlagSet::ParseEnvironment(absl::string_view prefix) {
  for (const Flag& f : flags_) {
    std::string name = absl::StrCat(prefix, f.name);
    for (char& c : name) c = c == '-' ? '_' : static_cast<char>(absl::ascii_toupper(static_cast<unsigned char>(c)));
    const char* value = std::getenv(name.c_str());
    if (!value) continue;
    if (absl::Status s = f.set(value); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat(name, ": ", s.message()));
  }
  return absl::OkStatus();
}

std::string FlagSet::Help() const {
  std::string out = usage_;
  if (!out.empty() && out.back() != '\n') out += '\n';
  out += "\nFlags:\n";
  for (const Flag& f : flags_) {
    absl::StrAppend(&out, "  --", f.name, " (default: ", f.default_value, ")\n      ", f.help, "\n");
  }
  absl::StrAppend(&out, "  --help\n      Show this help and exit.\n");
  absl::StrAppend(&out,
                  "\nEvery flag can also be set by an environment variable, e.g. --drain-timeout by "
                  "INFERGATE_DRAIN_TIMEOUT; the command line wins.\n");
  return out;
}

}  // namespace infergate
