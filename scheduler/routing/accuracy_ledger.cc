#include "scheduler/routing/accuracy_ledger.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"

namespace infergate {
namespace {

constexpr char kAccuracySection[] = "accuracy";

// Names and problems are free text: the characters the line format uses
// (tab, newline, ';', '=', '/', '%') are written as %XX.
std::string Escape(absl::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\t' || c == '\n' || c == '\r' || c == ';' || c == '=' || c == '/' || c == '%') {
      absl::StrAppendFormat(&out, "%%%02X", static_cast<unsigned char>(c));
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::optional<std::string> Unescape(absl::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    int value = 0;
    if (i + 2 >= text.size()) return std::nullopt;
    if (!absl::SimpleHexAtoi(text.substr(i + 1, 2), &value)) return std::nullopt;
    out.push_back(static_cast<char>(value));
    i += 2;
  }
  return out;
}

std::optional<DType> DTypeByName(absl::string_view name) {
  for (DType d : kAllDTypes) {
    if (DTypeName(d) == name) return d;
  }
  return std::nullopt;
}

std::optional<DeviceKind> KindByName(absl::string_view name) {
  for (DeviceKind k : {DeviceKind::kCpu, DeviceKind::kCuda, DeviceKind::kMps}) {
    if (DeviceKindName(k) == name) return k;
  }
  return std::nullopt;
}

}  // namespace

AccuracyLedger::AccuracyLedger(std::shared_ptr<StateFile> state_file, std::string libtorch_version)
    : state_file_(std::move(state_file)), libtorch_version_(std::move(libtorch_version)) {}

std::string AccuracyLedger::Render(const AccuracyKey& key, const std::string& libtorch, const AccuracyMeasurement& m) {
  std::string measured;
  if (!m.problem.empty()) {
    measured = absl::StrCat("problem=", Escape(m.problem));
  } else {
    std::vector<std::string> outputs;
    for (const OutputError& e : m.outputs) {
      outputs.push_back(absl::StrFormat("%s=%.17g/%.17g/%d", Escape(e.output), e.max_abs_error, e.reference_magnitude,
                                        e.new_non_finite ? 1 : 0));
    }
    measured = absl::StrCat("outputs=", absl::StrJoin(outputs, ";"));
  }
  return absl::StrCat(DeviceKindName(key.kind), "\t", Escape(key.device_signature), "\t", DTypeName(key.dtype), "\t",
                      Escape(key.model), "\t", key.file_digest, "\t", Escape(key.inputs), "\t", libtorch, "\t",
                      measured);
}

std::optional<AccuracyLedger::Entry> AccuracyLedger::Parse(const std::string& line) {
  std::vector<absl::string_view> f = absl::StrSplit(line, '\t');
  if (f.size() != 8) return std::nullopt;
  Entry e;
  std::optional<DeviceKind> kind = KindByName(f[0]);
  std::optional<std::string> signature = Unescape(f[1]);
  std::optional<DType> dtype = DTypeByName(f[2]);
  std::optional<std::string> model = Unescape(f[3]);
  std::optional<std::string> inputs = Unescape(f[5]);
  if (!kind || !signature || !dtype || !model || !inputs || f[4].empty()) return std::nullopt;
  e.key = {*model, std::string(f[4]), *kind, *signature, *dtype, *inputs};
  e.libtorch = std::string(f[6]);
  absl::string_view measured = f[7];
  if (absl::ConsumePrefix(&measured, "problem=")) {
    std::optional<std::string> problem = Unescape(measured);
    if (!problem || problem->empty()) return std::nullopt;
    e.measurement.problem = *problem;
    return e;
  }
  if (!absl::ConsumePrefix(&measured, "outputs=")) return std::nullopt;
  for (absl::string_view item : absl::StrSplit(measured, ';', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> named = absl::StrSplit(item, absl::MaxSplits('=', 1));
    std::vector<absl::string_view> figures = absl::StrSplit(named.second, '/');
    OutputError out;
    std::optional<std::string> name = Unescape(named.first);
    if (!name || figures.size() != 3 || !absl::SimpleAtod(figures[0], &out.max_abs_error) ||
        !absl::SimpleAtod(figures[1], &out.reference_magnitude) || (figures[2] != "0" && figures[2] != "1")) {
      return std::nullopt;
    }
    out.output = *name;
    out.new_non_finite = figures[2] == "1";
    e.measurement.outputs.push_back(std::move(out));
  }
  if (e.measurement.outputs.empty()) return std::nullopt;
  return e;
}

absl::Status AccuracyLedger::Load() {
  std::map<AccuracyKey, AccuracyMeasurement> loaded;
  size_t dropped = 0;
  for (const std::string& line : state_file_->Section(kAccuracySection)) {
    std::optional<Entry> e = Parse(line);
    if (!e || e->libtorch != libtorch_version_) {
      ++dropped;
      continue;
    }
    loaded[e->key] = std::move(e->measurement);
  }
  if (dropped > 0) {
    LOG_INFO << "state file " << state_file_->path() << ": " << dropped
             << " accuracy check result(s) from another LibTorch version or unreadable dropped; those are "
                "checked again";
  }
  uint64_t snapshot = 0;
  {
    MutexLock lock(mu_);
    entries_ = std::move(loaded);
    if (dropped > 0) snapshot = state_file_->Stage(kAccuracySection, RenderAll());
  }
  if (snapshot != 0) (void)state_file_->Write(snapshot);
  return absl::OkStatus();
}

std::optional<AccuracyMeasurement> AccuracyLedger::Find(const AccuracyKey& key) const {
  MutexLock lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void AccuracyLedger::Record(const AccuracyKey& key, const AccuracyMeasurement& measurement) {
  uint64_t snapshot = 0;
  {
    MutexLock lock(mu_);
    entries_[key] = measurement;
    snapshot = state_file_->Stage(kAccuracySection, RenderAll());
  }
  if (absl::Status written = state_file_->Write(snapshot); !written.ok()) {
    LOG_WARNING << "cannot persist accuracy check results: " << written.message();
  }
}

std::vector<std::string> AccuracyLedger::RenderAll() const {
  std::vector<std::string> out;
  for (const auto& [key, measurement] : entries_) out.push_back(Render(key, libtorch_version_, measurement));
  return out;
}

}  // namespace infergate
