// The in-process floor: a TorchScript file (through the server's servable)
// or an AOTInductor package (.pt2, through its loader) run directly in one
// process, no serving layer. Prints one line per batch size with rows/s and
// per-call latency, and the best batch size. `--callers N` runs N threads
// calling forward concurrently (each with T intra-op threads), the way the
// server's workers do; on a machine with C cores both 1 caller x C threads
// and C callers x 1 thread are candidates for the floor.
//
//   inprocess-bench MODEL.pt|MODEL.pt2 SHAPE_WITHOUT_BATCH [--dtype float32|int64]
//       [--batches 1,2,4,...] [--seconds S] [--threads T] [--callers N] [--optimize]
//       [--cpu-tensor-cache BYTES]
//
// A TorchScript model runs through the server's own servable
// (tools/served_torchscript.h): the forward pass and its outputs made ready
// to encode. `--optimize` lets it be optimized as the server optimizes a
// CPU copy in FP32 (scheduler/loaders/torchscript/torchscript_optimization.h); use it wherever
// the server serves the model optimized (its log says which). TorchScript's
// CPU fuser is off, as in the server.

#include <ATen/Parallel.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <torch/csrc/inductor/aoti_runner/model_container_runner.h>
#include <torch/script.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/flags.h"
#include "devices/caching_cpu_allocator.h"
#include "devices/system_info.h"
#include "scheduler/loaders/aoti/aoti_unpacked_variant.h"
#include "scheduler/loaders/torchscript/torchscript_model.h"
#include "scheduler/repository/aoti_package.h"
#include "tools/served_torchscript.h"

namespace {

// "1,2,4" or "3x64x64": positive integers and a separator; nullopt otherwise.
std::optional<std::vector<int64_t>> ParseList(const std::string& text, char sep) {
  std::vector<int64_t> out;
  for (absl::string_view item : absl::StrSplit(text, sep, absl::SkipEmpty())) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(item, &v) || v < 1) return std::nullopt;
    out.push_back(v);
  }
  if (out.empty()) return std::nullopt;
  return out;
}

int Usage(const std::string& why, const infergate::FlagSet& flags) {
  std::cerr << "inprocess-bench: " << why << "\n" << flags.Help();
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dtype = "float32";
  std::string batch_list = "1,2,4,8,16,32,64";
  double seconds = 3;
  int64_t threads = static_cast<int64_t>(std::thread::hardware_concurrency());
  int64_t callers = 1;
  bool optimize = false;
  uint64_t tensor_cache_bytes = 256 << 20;
  infergate::FlagSet flags(
      "inprocess-bench: LibTorch running a model directly, the floor infergate is measured against.\n"
      "Usage: inprocess-bench MODEL.pt|MODEL.pt2 SHAPE (e.g. 256 or 3x64x64) [flags]");
  flags.String("dtype", &dtype, "Input dtype: float32 or int64.");
  flags.String("batches", &batch_list, "Batch sizes to measure, comma-separated.");
  flags.Double("seconds", &seconds, "Seconds to measure each batch size.");
  flags.Int("threads", &threads, "LibTorch (and BLAS) threads per caller.");
  flags.Int("callers", &callers, "Threads calling the model at once.");
  flags.Bool("optimize", &optimize,
             "Optimize a TorchScript model for inference as the server does on the CPU in FP32 "
             "(frozen, optimize_for_inference, checked against the model as saved).");
  flags.ByteSize("cpu-tensor-cache", &tensor_cache_bytes,
                 "Freed tensor blocks kept for reuse, as the server's flag of that name (same default); 0: off.");
  bool help = false;
  absl::StatusOr<std::vector<std::string>> positional = flags.Parse(argc, argv, &help);
  if (help) {
    std::cout << flags.Help();
    return 0;
  }
  if (!positional.ok()) return Usage(std::string(positional.status().message()), flags);
  if (positional->size() != 2) return Usage("needs MODEL.pt (or .pt2) and SHAPE", flags);
  std::string path = (*positional)[0];
  std::optional<std::vector<int64_t>> item_shape = ParseList((*positional)[1], 'x');
  if (!item_shape) return Usage("SHAPE: '" + (*positional)[1] + "' is not a shape such as 256 or 3x64x64", flags);
  std::optional<std::vector<int64_t>> batches = ParseList(batch_list, ',');
  if (!batches) return Usage("--batches: '" + batch_list + "' is not a list such as 1,2,4", flags);
  if (!(seconds > 0)) return Usage("--seconds: must be positive", flags);
  if (threads < 1 || threads > 1024 || callers < 1 || callers > 1024) {
    return Usage("--threads and --callers: must be 1..1024", flags);
  }
  at::set_num_threads(static_cast<int>(threads));
  infergate::SetBlasThreads(static_cast<int>(threads));                   // as the server does
  infergate::CachingCpuAllocator::InstallForProcess(tensor_cache_bytes);  // likewise
  // One forward call on `x`, from either format.
  std::shared_ptr<infergate::TorchScriptModel> script;
  // A package is opened as the server opens it (scheduler/loaders/aoti/aoti_model.h):
  // one container with an instance per caller, as the server has one per
  // worker (an instance runs one call at a time).
  std::unique_ptr<infergate::UnpackedAotiVariant> unpacked;
  std::unique_ptr<torch::inductor::AOTIModelContainerRunner> package;
  auto make_input = [&](int64_t batch) {
    std::vector<int64_t> shape = {batch};
    shape.insert(shape.end(), item_shape->begin(), item_shape->end());
    return dtype == "int64" ? at::randint(0, 100, shape, at::TensorOptions().dtype(at::kLong)) : at::randn(shape);
  };
  if (absl::EndsWith(path, ".pt2")) {
    absl::StatusOr<std::vector<infergate::AotiVariant>> variants = infergate::ReadAotiVariants(path);
    absl::StatusOr<infergate::AotiVariant> variant =
        variants.ok() ? infergate::PickAotiVariant(*variants, infergate::DeviceInfo{}) : variants.status();
    absl::StatusOr<std::unique_ptr<infergate::UnpackedAotiVariant>> files =
        variant.ok() ? infergate::UnpackedAotiVariant::Unpack(path, *variant) : variant.status();
    if (!files.ok()) {
      std::cerr << "inprocess-bench: " << path << ": " << files.status().message() << "\n";
      return 1;
    }
    unpacked = *std::move(files);
    try {
      package = infergate::OpenAotiContainer(*unpacked, *variant, "cpu", static_cast<size_t>(callers));
    } catch (const std::exception& e) {
      std::cerr << "inprocess-bench: " << path << ": " << e.what() << "\n";
      return 1;
    }
    c10::InferenceMode guard;
    // Runs one after another take every instance in turn: each makes its
    // first run here.
    for (int c = 0; c < callers; ++c) package->run({make_input(1)});
  } else {
    // Through the server's own servable: the forward pass and the outputs
    // made ready to encode, optimized where the server would optimize.
    absl::StatusOr<std::shared_ptr<infergate::TorchScriptModel>> served = infergate::LoadServedTorchScript(
        path, *item_shape, dtype == "int64" ? infergate::v1::INT64 : infergate::v1::FLOAT32,
        *std::max_element(batches->begin(), batches->end()), optimize);
    absl::StatusOr<std::vector<infergate::NamedTensor>> first =
        served.ok() ? (*served)->Run({make_input(1)}) : served.status();
    if (!first.ok()) {
      std::cerr << "inprocess-bench: " << path << ": " << first.status().message() << "\n";
      return 1;
    }
    script = *std::move(served);
    if (optimize && !script->optimized()) {
      std::cerr << "inprocess-bench: not optimized, run as saved (as the server would serve it; its log says why)\n";
    }
  }
  auto forward = [&](const at::Tensor& x) {
    if (package) {
      package->run({x});
    } else {
      (void)script->Run({x});
    }
  };
  double best_rows = 0;
  int64_t best_batch = 0;
  for (int64_t b : *batches) {
    // Each caller thread runs forward back to back on its own input, as the
    // server's workers do; latencies are per call.
    std::vector<std::vector<double>> per_caller(static_cast<size_t>(callers));
    auto start = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    auto end = start + std::chrono::duration<double>(seconds);
    std::vector<std::thread> threads_run;
    for (int c = 0; c < callers; ++c) {
      threads_run.emplace_back([&, c] {
        c10::InferenceMode guard;
        at::Tensor x = make_input(b);
        for (int i = 0; i < 5; ++i) forward(x);  // warm-up: profiling runs
        std::this_thread::sleep_until(start);
        std::vector<double>& lat = per_caller[c];
        while (std::chrono::steady_clock::now() < end) {
          auto t0 = std::chrono::steady_clock::now();
          forward(x);
          lat.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
        }
      });
    }
    for (auto& t : threads_run) t.join();
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::vector<double> lat;
    for (const auto& l : per_caller) lat.insert(lat.end(), l.begin(), l.end());
    if (lat.empty()) continue;
    std::sort(lat.begin(), lat.end());
    double rows = static_cast<double>(lat.size()) * static_cast<double>(b) / elapsed;
    std::printf("inprocess batch=%lld callers=%lld threads=%lld calls=%zu rows/s=%.1f p50_ms=%.3f p99_ms=%.3f\n",
                static_cast<long long>(b), static_cast<long long>(callers), static_cast<long long>(threads), lat.size(),
                rows, lat[lat.size() / 2] / 1000, lat[static_cast<size_t>(0.99 * (lat.size() - 1))] / 1000);
    if (rows > best_rows) {
      best_rows = rows;
      best_batch = b;
    }
  }
  std::printf("inprocess best batch=%lld callers=%lld threads=%lld rows/s=%.1f\n", static_cast<long long>(best_batch),
              static_cast<long long>(callers), static_cast<long long>(threads), best_rows);
  return 0;
}
