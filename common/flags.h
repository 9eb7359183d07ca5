#pragma once
// A small command-line flag parser shared by the server and the tools, so
// that --help always lists every flag with its default.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace infergate {

class FlagSet {
 public:
  explicit FlagSet(std::string usage) : usage_(std::move(usage)) {}

  void String(std::string name, std::string* target, std::string help);
  void Int(std::string name, int64_t* target, std::string help);
  void Bool(std::string name, bool* target, std::string help);
  void Double(std::string name, double* target, std::string help);
  // "30s", "500ms", "2m", "45" (seconds); see ParseDuration.
  void Duration(std::string name, std::chrono::milliseconds* target, std::string help);
  // "64MiB", "2GiB", "1048576"; see ParseByteSize.
  void ByteSize(std::string name, uint64_t* target, std::string help);
  // A rule a flag's final value must meet: "" when the value is acceptable,
  // else what it must be ("must be 1..64"), reported as "--NAME: <that>".
  // Rules are checked by CheckValues, once the environment and the command
  // line are parsed (the command line may mend a value the environment set).
  template <typename T>
  using Rule = std::function<std::string(const T&)>;
  void Int(std::string name, int64_t* target, std::string help, Rule<int64_t> rule);
  void Double(std::string name, double* target, std::string help, Rule<double> rule);
  void Duration(std::string name, std::chrono::milliseconds* target, std::string help,
                Rule<std::chrono::milliseconds> rule);
  void ByteSize(std::string name, uint64_t* target, std::string help, Rule<uint64_t> rule);
  // May be given many times; each occurrence appends one value.
  void Repeated(std::string name, std::vector<std::string>* target, std::string help);

  // Accepts --name=value and --name value (bools: --name, --name=true|false,
  // --noname). Returns the positional arguments. `*help` is set when --help
  // or -h is given. Unknown flags and bad values are errors naming the flag.
  absl::StatusOr<std::vector<std::string>> Parse(int argc, const char* const* argv, bool* help);

  // Every rule, in the order the flags were registered: INVALID_ARGUMENT
  // "--NAME: must ..." for the first value that breaks its flag's rule.
  absl::Status CheckValues() const;
  // Sets flags from environment variables named `prefix` + the flag name in
  // upper case with '-' as '_' (INFERGATE_DRAIN_TIMEOUT for --drain-timeout),
  // so a Kubernetes ConfigMap can configure the server. Call before Parse:
  // the command line wins.
  absl::Status ParseEnvironment(absl::string_view prefix);

  std::string Help() const;

 private:
  struct Flag {
    std::string name;
    std::string help;
    std::string default_value;
    bool is_bool = false;
    std::function<absl::Status(const std::string&)> set;
    std::function<std::string()> check;  // the rule on the current value; empty: none
  };
  // Adds `rule` on `target` to the flag registered last.
  template <typename T>
  void AddRule(const T* target, Rule<T> rule) {
    flags_.back().check = [target, rule = std::move(rule)] { return rule(*target); };
  }
  const Flag* Find(const std::string& name) const;

  std::string usage_;
  std::vector<Flag> flags_;
};

// The commonest rule: an integer in [min, max] ("must be MIN..MAX").
FlagSet::Rule<int64_t> InRange(int64_t min, int64_t max);

}  // namespace infergate
