// The in-process floor: a TorchScript file run directly with LibTorch in one
// process, no serving layer. Prints one line per batch size with rows/s and
// per-call latency, and the best batch size. `--callers N` runs N threads
// calling forward concurrently (each with T intra-op threads), the way the
// server's workers do; on a machine with C cores both 1 caller x C threads
// and C callers x 1 thread are candidates for the floor.
//
//   inprocess-bench MODEL.pt SHAPE_WITHOUT_BATCH [--dtype float32|int64]
//       [--batches 1,2,4,...] [--seconds S] [--threads T] [--callers N]

#include <ATen/Parallel.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <torch/csrc/jit/passes/frozen_graph_optimizations.h>
#include <torch/csrc/jit/passes/freeze_module.h>
#include <torch/script.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "devices/system_info.h"

namespace {

std::vector<int64_t> ParseList(const std::string& text, char sep) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, sep)) {
    if (!item.empty()) out.push_back(std::stoll(item));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: inprocess-bench MODEL.pt SHAPE (e.g. 256 or 3x64x64) [--dtype float32|int64] "
                 "[--batches 1,2,4,8,16,32,64] [--seconds 3] [--threads N] [--callers N]\n";
    return 2;
  }
  std::string path = argv[1];
  std::vector<int64_t> item_shape = ParseList(argv[2], 'x');
  std::string dtype = "float32";
  std::vector<int64_t> batches = {1, 2, 4, 8, 16, 32, 64};
  double seconds = 3;
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  int callers = 1;
  bool optimize = false;
  for (int i = 3; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--dtype") dtype = argv[i + 1];
    else if (flag == "--batches") batches = ParseList(argv[i + 1], ',');
    else if (flag == "--seconds") seconds = std::stod(argv[i + 1]);
    else if (flag == "--threads") threads = std::stoi(argv[i + 1]);
    else if (flag == "--callers") callers = std::max(1, std::stoi(argv[i + 1]));
    else if (flag == "--optimize") optimize = std::string(argv[i + 1]) == "true";
  }
  at::set_num_threads(std::max(1, threads));
  infergate::SetBlasThreads(std::max(1, threads));  // as the server does
  torch::jit::Module m = torch::jit::load(path);
  m.eval();
  if (optimize) m = torch::jit::optimize_for_inference(m);
  double best_rows = 0;
  int64_t best_batch = 0;
  for (int64_t b : batches) {
    std::vector<int64_t> shape = {b};
    shape.insert(shape.end(), item_shape.begin(), item_shape.end());
    // Each caller thread runs forward back to back on its own input, as the
    // server's workers do; latencies are per call.
    std::vector<std::vector<double>> per_caller(callers);
    auto start = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    auto end = start + std::chrono::duration<double>(seconds);
    std::vector<std::thread> threads_run;
    for (int c = 0; c < callers; ++c) {
      threads_run.emplace_back([&, c] {
        c10::InferenceMode guard;
        at::Tensor x = dtype == "int64" ? at::randint(0, 100, shape, at::TensorOptions().dtype(at::kLong))
                                        : at::randn(shape);
        std::vector<c10::IValue> args = {x};
        for (int i = 0; i < 5; ++i) m.forward(args);  // warm-up: profiling runs
        std::this_thread::sleep_until(start);
        std::vector<double>& lat = per_caller[c];
        while (std::chrono::steady_clock::now() < end) {
          auto t0 = std::chrono::steady_clock::now();
          m.forward(args);
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
    std::printf("inprocess batch=%lld callers=%d threads=%d calls=%zu rows/s=%.1f p50_ms=%.3f p99_ms=%.3f\n",
                static_cast<long long>(b), callers, threads, lat.size(), rows, lat[lat.size() / 2] / 1000,
                lat[static_cast<size_t>(0.99 * (lat.size() - 1))] / 1000);
    if (rows > best_rows) {
      best_rows = rows;
      best_batch = b;
    }
  }
  std::printf("inprocess best batch=%lld callers=%d threads=%d rows/s=%.1f\n", static_cast<long long>(best_batch),
              callers, threads, best_rows);
  return 0;
}
