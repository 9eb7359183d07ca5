#pragma once
// Prometheus exposition: request, queue, compute and batch metrics recorded
// by the service; cache, fallback and rejection events from the scheduler;
// per-device figures read at scrape time. Metric references are cached so
// the request path does no family lookups.

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "scheduler/core/inference_core.h"
#include "scheduler/model/scheduler_observer.h"
#include "scheduler/repository/torchserve/torchserve_store.h"
#include "service/call/call_environment.h"
#include "service/call/inflight_budget.h"
#include "service/http/http_server.h"

namespace infergate {

class Tracing;  // tracing.h

struct BuildVersions {
  std::string infergate;
  std::string libtorch;
  std::string grpc;
};

class Metrics final : public SchedulerObserver, public InferCallObserver {
 public:
  // Serves /metrics on `address` ("0.0.0.0:9464"; port 0 picks one).
  // Device figures are read from `core`, the bytes held from `budget`, and
  // the span export counts from `tracing` (each may be null), at scrape
  // time; all must outlive this.
  static absl::StatusOr<std::unique_ptr<Metrics>> Start(const std::string& address, const InferenceCore& core,
                                                        const BuildVersions& versions,
                                                        const InflightBudget* budget = nullptr,
                                                        const Tracing* tracing = nullptr);
  ~Metrics() override;

  int port() const { return port_; }

  // One finished Infer call. `model` must be a repository model or "" (never
  // a client-supplied unknown name); `device` "" when it was never routed.
  // Timings are absent (zero) for calls that did not run.
  void RecordRequest(const std::string& model, const std::string& device, int grpc_code, double total_s, double queue_s,
                     double compute_s, uint32_t batch_size, bool ran);

  // One finished inference call of any front end: `status` is what the
  // client got; `result` is set when the model ran and the answer went out.
  void RecordInfer(const RequestLabels& labels, const absl::Status& status, const InferenceResult* result,
                   uint64_t total_us) override;

  void OnCacheLookup(const DeviceId& device, bool hit) override;
  void OnModelLoad(const std::string& model, const DeviceId& device, double seconds, bool ok) override;
  void OnModelTransfer(const std::string& model, const DeviceId& device, uint64_t bytes, double seconds) override;
  void OnWaitedForLoad(const DeviceId& device, size_t requests) override;
  void OnModelMove(const std::string& model, const DeviceId& device, const std::string& reason) override;
  void OnModelUpdate(const std::string& model, ModelUpdateResult result) override;
  void OnEviction(const DeviceId& device, EvictionReason why) override;
  void OnFallback(const std::string& from, const std::string& to, const std::string& reason) override;
  void OnReadyPathAnswered(const std::string& path, const std::string& device, bool estimated, bool regret) override;
  void OnRejected(const DeviceId& device, const std::string& model, RejectionReason reason) override;
  void OnPrecisionCheck(const std::string& model, const std::string& device, const std::string& dtype,
                        PrecisionCheckKind kind, PrecisionCheckResult result) override;
  void OnPrecisionError(const std::string& model, const std::string& device, const std::string& dtype,
                        double relative_error) override;
  // A call refused before it reached the core: kDraining, kInflightBytes.
  void OnAdmissionRejection(RejectionReason reason) override;
  void OnHandlerInput(const std::string& model, double seconds) override;

  // Also exports TorchServe's frontend metrics under their own names, so
  // dashboards built on them keep working: ts_inference_requests_total,
  // ts_inference_latency_microseconds and ts_queue_latency_microseconds
  // (counters, labels model_name and model_version), with version names
  // from `catalog` (null: the repository's numbers). Call before traffic;
  // `catalog` must outlive this.
  void ExportTorchServeNames(const TorchServeCatalog* catalog);

 private:
  Metrics();
  // Start's steps: every family registered (the request path's with the
  // build's versions, then the models' and the cache's), the series
  // dashboards and alerts expect made at 0 for the core's devices, and
  // /metrics served on `address`.
  void RegisterRequestFamilies(const BuildVersions& versions);
  void RegisterModelFamilies();
  void AddExpectedSeries(const InferenceCore& core);
  absl::Status Serve(const std::string& address);

  struct RequestSeries {
    prometheus::Histogram* request = nullptr;
    prometheus::Histogram* queue = nullptr;
    prometheus::Histogram* compute = nullptr;
    prometheus::Histogram* batch = nullptr;
    std::array<std::atomic<prometheus::Counter*>, 17> by_code{};
  };
  RequestSeries& SeriesFor(const std::string& model, const std::string& device);
  void RecordTorchServe(const std::string& model, const InferenceResult* result, uint64_t total_us);
  prometheus::Counter& Cached(prometheus::Family<prometheus::Counter>& family, const prometheus::Labels& labels);

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<prometheus::Collectable> device_collector_;
  std::unique_ptr<HttpServer> http_;
  int port_ = 0;

  prometheus::Family<prometheus::Counter>* requests_ = nullptr;
  prometheus::Family<prometheus::Histogram>* request_seconds_ = nullptr;
  prometheus::Family<prometheus::Histogram>* queue_seconds_ = nullptr;
  prometheus::Family<prometheus::Histogram>* compute_seconds_ = nullptr;
  prometheus::Family<prometheus::Histogram>* batch_size_ = nullptr;
  prometheus::Family<prometheus::Histogram>* handler_input_seconds_ = nullptr;
  SharedMutex handler_mu_;
  std::map<std::string, prometheus::Histogram*> handler_input_ ABSL_GUARDED_BY(handler_mu_);
  prometheus::Family<prometheus::Counter>* cache_hits_ = nullptr;
  prometheus::Family<prometheus::Counter>* cache_misses_ = nullptr;
  prometheus::Family<prometheus::Counter>* loads_ = nullptr;
  prometheus::Family<prometheus::Histogram>* load_seconds_ = nullptr;
  prometheus::Family<prometheus::Counter>* transfer_seconds_ = nullptr;
  prometheus::Family<prometheus::Counter>* transfer_bytes_ = nullptr;
  prometheus::Family<prometheus::Counter>* waited_for_load_ = nullptr;
  prometheus::Family<prometheus::Counter>* moves_ = nullptr;
  prometheus::Family<prometheus::Counter>* evictions_ = nullptr;
  prometheus::Family<prometheus::Counter>* updates_ = nullptr;
  prometheus::Family<prometheus::Counter>* fallbacks_ = nullptr;
  prometheus::Family<prometheus::Counter>* ready_paths_ = nullptr;
  prometheus::Family<prometheus::Counter>* regrets_ = nullptr;
  prometheus::Family<prometheus::Counter>* unestimated_ = nullptr;
  prometheus::Family<prometheus::Counter>* rejections_ = nullptr;
  prometheus::Family<prometheus::Counter>* precision_checks_ = nullptr;
  prometheus::Family<prometheus::Gauge>* precision_error_ = nullptr;  // Add/Set are thread-safe; rare calls
  // TorchServe's names (ExportTorchServeNames); null when not exported.
  prometheus::Family<prometheus::Counter>* ts_requests_ = nullptr;
  prometheus::Family<prometheus::Counter>* ts_latency_us_ = nullptr;
  prometheus::Family<prometheus::Counter>* ts_queue_us_ = nullptr;
  const TorchServeCatalog* ts_catalog_ = nullptr;

  SharedMutex series_mu_;
  std::map<std::pair<std::string, std::string>, std::unique_ptr<RequestSeries>> series_ ABSL_GUARDED_BY(series_mu_);
  SharedMutex counters_mu_;
  std::map<std::pair<void*, prometheus::Labels>, prometheus::Counter*> counters_ ABSL_GUARDED_BY(counters_mu_);
};

}  // namespace infergate
