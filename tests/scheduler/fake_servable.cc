#include "tests/scheduler/fake_servable.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "devices/device_failure.h"
#include "scheduler/repository/model_config.h"

namespace infergate::testing {
namespace {

class FakeServable final : public Servable {
 public:
  FakeServable(std::shared_ptr<FakeScript> script, DeviceId device, InputSignature signature)
      : script_(std::move(script)), device_(device), signature_(std::move(signature)) {}

  absl::StatusOr<std::vector<NamedTensor>> Run(const std::vector<at::Tensor>& inputs) const override {
    (device_.kind == DeviceKind::kCpu ? script_->runs_on_cpu : script_->runs_elsewhere)++;
    if (script_->on_run) {
      if (absl::Status s = script_->on_run(device_); !s.ok()) return s;
    }
    return std::vector<NamedTensor>{{"y", inputs.at(0).mul(2)}};
  }
  const InputSignature& signature() const override { return signature_; }
  DType compute_dtype() const override { return DType::kFloat32; }
  uint64_t resident_bytes() const override { return 1024; }

 private:
  std::shared_ptr<FakeScript> script_;
  DeviceId device_;
  InputSignature signature_;
};

}  // namespace

void Gate::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  ++waiting_;
  cv_.notify_all();
  cv_.wait(lock, [this] { return open_; });
  --waiting_;
}

void Gate::Open() {
  std::lock_guard<std::mutex> lock(mu_);
  open_ = true;
  cv_.notify_all();
}

bool Gate::AwaitWaiters(int n) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return waiting_ >= n; });
}

ServableLoader FakeLoader(std::shared_ptr<FakeScript> script) {
  return [script](const std::string&, const v1::ModelConfig& config, const DeviceInfo& device, DType,
                  const AdmitBytes&) -> absl::StatusOr<std::shared_ptr<Servable>> {
    script->loads++;
    return std::make_shared<FakeServable>(script, device.id, DeclaredSignature(config));
  };
}

absl::Status OutOfMemory(const DeviceId& device) {
  return WithDeviceFailure(absl::ResourceExhaustedError(absl::StrCat(device.ToString(), " out of memory")),
                           DeviceFailure::kOutOfMemory, device.ToString());
}

absl::Status UnsupportedOp(const std::string& op) {
  return WithDeviceFailure(
      absl::UnimplementedError(absl::StrCat("The operator '", op, "' is not currently implemented for the MPS device")),
      DeviceFailure::kUnsupportedOp, op);
}

TempRepository::TempRepository(const std::map<std::string, std::string>& configs) {
  static std::atomic<int> counter{0};
  root_ = (std::filesystem::temp_directory_path() / absl::StrCat("infergate-core-test-", ::getpid(), "-", counter++))
              .string();
  for (const auto& [name, config] : configs) {
    std::filesystem::create_directories(std::filesystem::path(root_) / name / "1");
    std::ofstream(std::filesystem::path(root_) / name / "config.pbtxt") << config;
    std::ofstream(std::filesystem::path(root_) / name / "1" / "model.pt") << "";
  }
}

TempRepository::~TempRepository() {
  std::error_code ec;
  std::filesystem::remove_all(root_, ec);
}

std::vector<DeviceInfo> FakeDevices(bool cuda, bool mps) {
  std::vector<DeviceInfo> out;
  auto add = [&](DeviceId id, const char* name, int capability) {
    DeviceInfo d;
    d.id = id;
    d.name = name;
    d.simulated = id.kind != DeviceKind::kCpu;
    d.supported_dtypes = {DType::kFloat32, DType::kFloat16, DType::kInt64};
    d.precision = {id.kind, capability, 0};
    d.memory_total_bytes = uint64_t{1} << 30;
    out.push_back(d);
  };
  if (cuda) add({DeviceKind::kCuda, 0}, "fake cuda", 80);
  if (mps) add({DeviceKind::kMps, 0}, "fake mps", 0);
  add({DeviceKind::kCpu, 0}, "fake cpu", 0);
  return out;
}

}  // namespace infergate::testing
