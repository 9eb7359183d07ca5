#include "service/metrics/metrics.h"

#include <prometheus/client_metric.h>
#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <mutex>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/caught_exception.h"
#include "common/process_allocator.h"
#include "common/status_macros.h"
#include "devices/caching_cpu_allocator.h"
#include "scheduler/repository/repository_scan.h"
#include "service/tracing/tracing.h"

namespace infergate {
namespace {

prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

prometheus::ClientMetric Sample(std::vector<std::pair<std::string, std::string>> labels, double value, bool counter) {
  prometheus::ClientMetric m;
  for (auto& [k, v] : labels) m.label.push_back({k, v});
  if (counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  return m;
}

prometheus::MetricFamily Family(const std::string& name, const std::string& help, prometheus::MetricType type) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  return f;
}

// Per-device figures read when Prometheus scrapes, so they are always current.
class DeviceCollector : public prometheus::Collectable {
 public:
  DeviceCollector(const InferenceCore& core, const InflightBudget* budget, const Tracing* tracing)
      : core_(core), budget_(budget), tracing_(tracing) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    using prometheus::MetricType;
    auto up = Family("infergate_device_up", "1 when the device is available for work.", MetricType::Gauge);
    auto depth = Family("infergate_device_queue_depth", "Requests waiting in the device's queue.", MetricType::Gauge);
    auto held_for_load =
        Family("infergate_device_held_for_load",
               "Requests held while their model loads onto the device on their arrival (--load-on-arrival), "
               "queued there once it has loaded; not in the queue depth.",
               MetricType::Gauge);
    auto reserved_for_load =
        Family("infergate_device_reserved_for_load",
               "Threads of the device reserved for requests held for their loads, for when each load is expected "
               "to be done (--load-and-run-reserves): work queued after a reservation waits where it would take "
               "that thread then.",
               MetricType::Gauge);
    auto model_depth = Family("infergate_model_queue_depth",
                              "Requests of a model version waiting in the device's queue (only versions with any).",
                              MetricType::Gauge);
    auto oldest = Family("infergate_device_oldest_running_batch_seconds",
                         "How long the oldest batch now running on the device has run; 0 when idle. A stuck model "
                         "shows here, and fails liveness past --stuck-batch-timeout.",
                         MetricType::Gauge);
    auto in_flight = Family("infergate_device_in_flight", "Requests running on the device.", MetricType::Gauge);
    auto busy = Family("infergate_device_busy_seconds_total",
                       "Worker time spent running models; rate() over workers gives utilisation.", MetricType::Counter);
    auto workers = Family("infergate_device_workers", "Worker threads serving the device.", MetricType::Gauge);
    auto capacity = Family("infergate_device_queue_capacity", "Requests the device's queue holds before refusing.",
                           MetricType::Gauge);
    auto mem_total = Family("infergate_device_memory_total_bytes", "Device memory.", MetricType::Gauge);
    auto mem_used = Family("infergate_device_memory_used_bytes", "Device memory in use.", MetricType::Gauge);
    auto resident = Family("infergate_model_cache_resident_bytes", "Parameter bytes of models resident on the device.",
                           MetricType::Gauge);
    auto resident_models =
        Family("infergate_model_cache_resident_models", "Models resident on the device.", MetricType::Gauge);
    auto budget =
        Family("infergate_model_cache_budget_bytes", "Model cache budget of the device (0: none).", MetricType::Gauge);
    auto host_copies = Family("infergate_host_copies",
                              "Models whose weights, as read from their file, are kept in host memory so that "
                              "their next load starts from there (--host-copy-share).",
                              MetricType::Gauge);
    auto host_copy_bytes =
        Family("infergate_host_copy_bytes",
               "Bytes the host copies of weights hold, counted in the device's cache budget.", MetricType::Gauge);
    auto host_copy_loads =
        Family("infergate_model_loads_from_host_copy_total",
               "Model loads that started from a host copy of the weights instead of the file.", MetricType::Counter);
    for (const DeviceStatus& status : core_.Devices()) {
      const DeviceInfo& d = status.info;
      std::string id = d.id.ToString();
      up.metric.push_back(Sample({{"device", id},
                                  {"kind", std::string(DeviceKindName(d.id.kind))},
                                  {"simulated", d.simulated ? "true" : "false"}},
                                 d.available ? 1 : 0, false));
      depth.metric.push_back(Sample({{"device", id}}, static_cast<double>(status.queue_depth), false));
      held_for_load.metric.push_back(Sample({{"device", id}}, static_cast<double>(status.held_for_load), false));
      reserved_for_load.metric.push_back(
          Sample({{"device", id}}, static_cast<double>(status.reserved_for_load), false));
      for (const ModelQueueDepth& q : status.model_queues) {
        model_depth.metric.push_back(
            Sample({{"device", id}, {"model", q.model}, {"version", std::to_string(q.version)}},
                   static_cast<double>(q.depth), false));
      }
      in_flight.metric.push_back(Sample({{"device", id}}, static_cast<double>(status.in_flight), false));
      oldest.metric.push_back(
          Sample({{"device", id}}, std::chrono::duration<double>(status.oldest_running).count(), false));
      busy.metric.push_back(Sample({{"device", id}}, static_cast<double>(status.busy_us) / 1e6, true));
      workers.metric.push_back(Sample({{"device", id}}, status.workers, false));
      capacity.metric.push_back(Sample({{"device", id}}, static_cast<double>(status.queue_capacity), false));
      mem_total.metric.push_back(Sample({{"device", id}}, static_cast<double>(d.memory_total_bytes), false));
      mem_used.metric.push_back(Sample({{"device", id}}, static_cast<double>(d.memory_used_bytes), false));
      double bytes = 0, count = 0;
      for (const ResidentModel& r : status.resident) {
        bytes += static_cast<double>(r.bytes);
        count += 1;
      }
      resident.metric.push_back(Sample({{"device", id}}, bytes, false));
      resident_models.metric.push_back(Sample({{"device", id}}, count, false));
      budget.metric.push_back(Sample({{"device", id}}, static_cast<double>(status.cache_budget_bytes), false));
      if (d.id == kCpuDevice) {
        host_copies.metric.push_back(Sample({{"device", id}}, static_cast<double>(status.host_copies), false));
        host_copy_bytes.metric.push_back(Sample({{"device", id}}, static_cast<double>(status.host_copy_bytes), false));
        host_copy_loads.metric.push_back(
            Sample({{"device", id}}, static_cast<double>(status.loads_from_host_copy), true));
      }
    }
    auto versions = Family("infergate_model_versions",
                           "Versions of each model by lifecycle state (LOADING, READY, UNAVAILABLE, UNLOADING).",
                           MetricType::Gauge);
    auto version_info = Family("infergate_model_version_info",
                               "1 for each model version on disk; format is its model file's: torchscript (model.pt) "
                               "or aoti (an AOTInductor package, model.pt2).",
                               MetricType::Gauge);
    if (absl::StatusOr<std::vector<ModelStatus>> models = core_.Models(); models.ok()) {
      for (const ModelStatus& m : *models) {
        for (const VersionStatus& v : m.states) {
          const FileStamp& file = v.stamp.exists() ? v.stamp : v.tried;
          if (!file.exists()) continue;
          version_info.metric.push_back(Sample({{"model", m.name},
                                                {"version", std::to_string(v.version)},
                                                {"format", std::string(ModelFileFormatName(file))}},
                                               1, false));
        }
        for (VersionState state :
             {VersionState::kLoading, VersionState::kReady, VersionState::kUnavailable, VersionState::kUnloading}) {
          double n = static_cast<double>(std::count_if(m.states.begin(), m.states.end(),
                                                       [&](const VersionStatus& v) { return v.state == state; }));
          versions.metric.push_back(
              Sample({{"model", m.name}, {"state", std::string(VersionStateName(state))}}, n, false));
        }
      }
    }
    std::vector<prometheus::MetricFamily> families = {
        up,     depth,    held_for_load, reserved_for_load, model_depth,     capacity,       in_flight,
        oldest, busy,     workers,       mem_total,         mem_used,        resident,       resident_models,
        budget, versions, version_info,  host_copies,       host_copy_bytes, host_copy_loads};
    auto caught = Family("infergate_caught_exceptions_total",
                         "Exceptions that escaped a handler, a worker's answer or a pool's task and were caught: "
                         "the client got INTERNAL (or a 500) and the server went on. Any is a bug to report.",
                         MetricType::Counter);
    caught.metric.push_back(Sample({}, static_cast<double>(CaughtExceptionCount()), true));
    families.push_back(caught);
    if (budget_) {
      auto inflight = Family("infergate_inflight_request_bytes",
                             "Bytes of inference requests held now (queued or running), against "
                             "--max-inflight-bytes.",
                             MetricType::Gauge);
      auto limit =
          Family("infergate_inflight_request_bytes_limit", "--max-inflight-bytes (0: no limit).", MetricType::Gauge);
      inflight.metric.push_back(Sample({}, static_cast<double>(budget_->in_use()), false));
      limit.metric.push_back(Sample({}, static_cast<double>(budget_->limit()), false));
      families.insert(families.end(), {inflight, limit});
    }
    if (const CachingCpuAllocator* allocator = CachingCpuAllocator::ForProcess()) {
      const CachingCpuAllocator::Stats stats = allocator->stats();
      auto held = Family("infergate_cpu_tensor_cache_bytes",
                         "Freed CPU tensor blocks held for reuse (at most --cpu-tensor-cache).", MetricType::Gauge);
      auto hits = Family("infergate_cpu_tensor_cache_hits_total",
                         "CPU tensors of 64 KiB and more served from a held block.", MetricType::Counter);
      auto misses = Family("infergate_cpu_tensor_cache_misses_total",
                           "CPU tensors of 64 KiB and more allocated from the C library.", MetricType::Counter);
      held.metric.push_back(Sample({}, static_cast<double>(stats.cached_bytes), false));
      hits.metric.push_back(Sample({}, static_cast<double>(stats.hits), true));
      misses.metric.push_back(Sample({}, static_cast<double>(stats.misses), true));
      families.insert(families.end(), {held, hits, misses});
    }
    if (tracing_) {
      auto exported = Family("infergate_trace_spans_exported_total", "Trace spans the OTLP collector accepted.",
                             MetricType::Counter);
      auto dropped = Family("infergate_trace_spans_dropped_total",
                            "Trace spans lost: the export queue was full (queue_full; a slow or absent collector), or "
                            "the collector refused them or could not be reached (export_failed).",
                            MetricType::Counter);
      exported.metric.push_back(Sample({}, static_cast<double>(tracing_->spans_exported()), true));
      dropped.metric.push_back(
          Sample({{"reason", "queue_full"}}, static_cast<double>(tracing_->spans_dropped()), true));
      dropped.metric.push_back(
          Sample({{"reason", "export_failed"}}, static_cast<double>(tracing_->spans_failed_export()), true));
      families.insert(families.end(), {exported, dropped});
    }
    return families;
  }

 private:
  const InferenceCore& core_;
  const InflightBudget* budget_;
  const Tracing* tracing_;
};

// GET /metrics in Prometheus' text format; / links to it.
HttpResponse ServeMetricsPath(const HttpRequest& request,
                              const std::vector<std::weak_ptr<prometheus::Collectable>>& collectables) {
  HttpResponse r;
  r.content_type = "text/plain; charset=utf-8";
  if (request.method != "GET") {
    r.status = 405;
    r.headers.emplace_back("Allow", "GET");
    r.body = "only GET is served\n";
  } else if (request.path == "/metrics") {
    std::vector<prometheus::MetricFamily> families;
    for (const auto& weak : collectables) {
      if (auto c = weak.lock()) {
        std::vector<prometheus::MetricFamily> more = c->Collect();
        families.insert(families.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
      }
    }
    std::ostringstream out;
    prometheus::TextSerializer().Serialize(out, families);
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = out.str();
  } else if (request.path == "/") {
    r.content_type = "text/html";
    r.body = "<html><body><a href=\"/metrics\">/metrics</a></body></html>\n";
  } else {
    r.status = 404;
    r.body = "not found; try /metrics\n";
  }
  return r;
}

}  // namespace

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {}

Metrics::~Metrics() { http_.reset(); }

absl::StatusOr<std::unique_ptr<Metrics>> Metrics::Start(const std::string& address, const InferenceCore& core,
                                                        const BuildVersions& versions, const InflightBudget* budget,
                                                        const Tracing* tracing) {
  std::unique_ptr<Metrics> m(new Metrics());
  m->RegisterRequestFamilies(versions);
  m->RegisterModelFamilies();
  m->AddExpectedSeries(core);
  m->device_collector_ = std::make_shared<DeviceCollector>(core, budget, tracing);
  RETURN_IF_ERROR(m->Serve(address));
  return m;
}

void Metrics::RegisterRequestFamilies(const BuildVersions& versions) {
  prometheus::Registry& r = *registry_;
  requests_ = &prometheus::BuildCounter()
                   .Name("infergate_requests_total")
                   .Help("Infer calls by model, device and gRPC status code.")
                   .Register(r);
  request_seconds_ = &prometheus::BuildHistogram()
                          .Name("infergate_request_duration_seconds")
                          .Help("Time from a decoded request to its reply.")
                          .Register(r);
  queue_seconds_ = &prometheus::BuildHistogram()
                        .Name("infergate_queue_duration_seconds")
                        .Help("Time requests wait in a device queue.")
                        .Register(r);
  compute_seconds_ = &prometheus::BuildHistogram()
                          .Name("infergate_compute_duration_seconds")
                          .Help("Time running the model for a request's batch.")
                          .Register(r);
  batch_size_ = &prometheus::BuildHistogram()
                     .Name("infergate_batch_size")
                     .Help("Rows in the batch each request ran in.")
                     .Register(r);
  handler_input_seconds_ = &prometheus::BuildHistogram()
                                .Name("infergate_handler_input_duration_seconds")
                                .Help(
                                    "Time a built-in TorchServe handler took to turn one instance into the "
                                    "model's input (image decoding and preprocessing; JSON lists to tensors).")
                                .Register(r);
  fallbacks_ = &prometheus::BuildCounter()
                    .Name("infergate_fallbacks_total")
                    .Help("Requests moved off the device they were meant for, by from, to and reason.")
                    .Register(r);
  ready_paths_ = &prometheus::BuildCounter()
                      .Name("infergate_ready_path_requests_total")
                      .Help(
                          "Requests auto sent down the fastest path ready when they arrived (background moves on), "
                          "by path (ideal, resident, load_and_run, cold_start) and the device that answered.")
                      .Register(r);
  regrets_ = &prometheus::BuildCounter()
                  .Name("infergate_regret_total")
                  .Help(
                      "Of those, the requests that finished more than 20% after their path's estimate, by path "
                      "and device.")
                  .Register(r);
  unestimated_ = &prometheus::BuildCounter()
                      .Name("infergate_ready_path_unestimated_total")
                      .Help(
                          "Of those, the requests whose path had no estimate (the model's latency measured neither "
                          "on that device nor on another to guess it from), which the regret does not judge, by path "
                          "and device.")
                      .Register(r);
  rejections_ =
      &prometheus::BuildCounter()
           .Name("infergate_rejections_total")
           .Help(
               "Requests answered without running, by model (\"\" before it is known) and reason (queue_full, "
               "model_queue_full, queue_timeout, deadline, cancelled, draining, inflight_bytes).")
           .Register(r);
  precision_checks_ = &prometheus::BuildCounter()
                           .Name("infergate_precision_checks_total")
                           .Help(
                               "Accuracy checks of a model in a reduced dtype on a device against FP32 on the "
                               "cpu, by kind (check: before the dtype serves; running: a served request "
                               "re-run) and result: passed, failed, skipped (could not run), dropped (a "
                               "running check while the cpu was busy).")
                           .Register(r);
  precision_error_ = &prometheus::BuildGauge()
                          .Name("infergate_precision_check_relative_error")
                          .Help(
                              "Largest error an accuracy check measured, relative to the largest magnitude of "
                              "the FP32 output, by model, device and dtype.")
                          .Register(r);
  prometheus::BuildGauge()
      .Name("infergate_build_info")
      .Help("Versions infergate was built with, and the allocator serving its memory.")
      .Register(r)
      .Add({{"version", versions.infergate},
            {"libtorch", versions.libtorch},
            {"grpc", versions.grpc},
            {"allocator", CurrentProcessAllocator().name}})
      .Set(1);
}

void Metrics::RegisterModelFamilies() {
  prometheus::Registry& r = *registry_;
  cache_hits_ = &prometheus::BuildCounter()
                     .Name("infergate_model_cache_hits_total")
                     .Help("Requests that found their model resident.")
                     .Register(r);
  cache_misses_ = &prometheus::BuildCounter()
                       .Name("infergate_model_cache_misses_total")
                       .Help("Requests that had to load their model.")
                       .Register(r);
  loads_ = &prometheus::BuildCounter()
                .Name("infergate_model_loads_total")
                .Help("Model loads by model, device and result (ok, error).")
                .Register(r);
  load_seconds_ = &prometheus::BuildHistogram()
                       .Name("infergate_model_load_duration_seconds")
                       .Help("Time to load and prepare a model.")
                       .Register(r);
  transfer_seconds_ = &prometheus::BuildCounter()
                           .Name("infergate_model_transfer_seconds_total")
                           .Help(
                               "Time model loads spent moving weights onto an accelerator, by device (measured; "
                               "a simulated device's charged cost).")
                           .Register(r);
  transfer_bytes_ = &prometheus::BuildCounter()
                         .Name("infergate_model_transfer_bytes_total")
                         .Help("Bytes of weights model loads moved onto an accelerator, by device.")
                         .Register(r);
  waited_for_load_ = &prometheus::BuildCounter()
                          .Name("infergate_requests_waited_for_load_total")
                          .Help("Requests that waited for their model to load on their device before they ran.")
                          .Register(r);
  moves_ = &prometheus::BuildCounter()
                .Name("infergate_model_moves_total")
                .Help(
                    "Models moved by the placement controller, off the request path, by model, device and "
                    "reason (promoted: loaded there, its demand gaining more than the move costs; demoted: "
                    "evicted from there to make room, answering from a CPU copy meanwhile).")
                .Register(r);
  updates_ = &prometheus::BuildCounter()
                  .Name("infergate_model_updates_total")
                  .Help(
                      "Changes the repository poller (or LoadModel) acted on, by model and result: loaded (a new "
                      "version or file answers), failed (refused; the last good one still answers), removed, unloaded "
                      "(an explicit unload).")
                  .Register(r);
  evictions_ = &prometheus::BuildCounter()
                    .Name("infergate_model_evictions_total")
                    .Help("Models dropped from a device's cache, by reason (budget, oom, unload).")
                    .Register(r);
}

void Metrics::AddExpectedSeries(const InferenceCore& core) {
  // Pre-create the series dashboards and alerts expect, so they exist at 0.
  for (RejectionReason reason : kRejectionReasons) {
    rejections_->Add({{"model", ""}, {"reason", std::string(RejectionReasonName(reason))}});
  }
  for (const DeviceStatus& d : core.Devices()) {
    std::string id = d.info.id.ToString();
    cache_hits_->Add({{"device", id}});
    cache_misses_->Add({{"device", id}});
    for (EvictionReason why : kEvictionReasons) {
      evictions_->Add({{"device", id}, {"reason", std::string(EvictionReasonName(why))}});
    }
  }
}

absl::Status Metrics::Serve(const std::string& address) {
  HttpServerOptions http;
  http.address = address;
  http.flag_name = "--metrics-address";
  http.threads = 1;
  http.max_body_bytes = 64 << 10;
  http.request_timeout = std::chrono::seconds(10);
  http.max_connections = 256;
  std::vector<std::weak_ptr<prometheus::Collectable>> collectables = {registry_, device_collector_};
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start(std::move(http), [collectables](std::shared_ptr<HttpRequest> request, HttpResponder respond) {
        respond(ServeMetricsPath(*request, collectables));
      });
  if (!server.ok()) return server.status();
  http_ = *std::move(server);
  port_ = http_->port();
  return absl::OkStatus();
}

Metrics::RequestSeries& Metrics::SeriesFor(const std::string& model, const std::string& device) {
  std::pair<std::string, std::string> key(model, device);
  {
    ReaderLock lock(series_mu_);
    auto it = series_.find(key);
    if (it != series_.end()) return *it->second;
  }
  WriterLock lock(series_mu_);
  auto& slot = series_[key];
  if (!slot) {
    slot = std::make_unique<RequestSeries>();
    prometheus::Labels labels{{"model", model}, {"device", device}};
    slot->request = &request_seconds_->Add(labels, LatencyBuckets());
    slot->queue = &queue_seconds_->Add(labels, LatencyBuckets());
    slot->compute = &compute_seconds_->Add(labels, LatencyBuckets());
    slot->batch = &batch_size_->Add(labels, prometheus::Histogram::BucketBoundaries{1, 2, 4, 8, 16, 32, 64, 128, 256});
  }
  return *slot;
}

prometheus::Counter& Metrics::Cached(prometheus::Family<prometheus::Counter>& family,
                                     const prometheus::Labels& labels) {
  std::pair<void*, prometheus::Labels> key(&family, labels);
  {
    ReaderLock lock(counters_mu_);
    auto it = counters_.find(key);
    if (it != counters_.end()) return *it->second;
  }
  WriterLock lock(counters_mu_);
  prometheus::Counter*& c = counters_[key];
  if (!c) c = &family.Add(labels);
  return *c;
}

void Metrics::RecordRequest(const std::string& model, const std::string& device, int grpc_code, double total_s,
                            double queue_s, double compute_s, uint32_t batch_size, bool ran) {
  RequestSeries& s = SeriesFor(model, device);
  int code = grpc_code >= 0 && grpc_code < 17 ? grpc_code : 2;
  prometheus::Counter* counter = s.by_code[code].load(std::memory_order_acquire);
  if (!counter) {
    counter = &requests_->Add({{"model", model},
                               {"device", device},
                               {"code", absl::StatusCodeToString(static_cast<absl::StatusCode>(code))}});
    s.by_code[code].store(counter, std::memory_order_release);
  }
  counter->Increment();
  s.request->Observe(total_s);
  if (ran) {
    s.queue->Observe(queue_s);
    s.compute->Observe(compute_s);
    s.batch->Observe(batch_size);
  }
}

void Metrics::RecordInfer(const RequestLabels& labels, const absl::Status& status, const InferenceResult* result,
                          uint64_t total_us) {
  RecordRequest(labels.model, result ? result->placement.device : labels.device, static_cast<int>(status.code()),
                static_cast<double>(total_us) / 1e6, result ? static_cast<double>(result->timing.queue_us) / 1e6 : 0,
                result ? static_cast<double>(result->timing.compute_us) / 1e6 : 0,
                result ? result->placement.batch_size : 0, result != nullptr);
  RecordTorchServe(labels.model, result, total_us);
}

void Metrics::ExportTorchServeNames(const TorchServeCatalog* catalog) {
  prometheus::Registry& r = *registry_;
  ts_catalog_ = catalog;
  ts_requests_ = &prometheus::BuildCounter()
                      .Name("ts_inference_requests_total")
                      .Help("TorchServe's name: inference requests received, by model and version.")
                      .Register(r);
  ts_latency_us_ = &prometheus::BuildCounter()
                        .Name("ts_inference_latency_microseconds")
                        .Help("TorchServe's name: total time answering inference requests, in microseconds.")
                        .Register(r);
  ts_queue_us_ = &prometheus::BuildCounter()
                      .Name("ts_queue_latency_microseconds")
                      .Help("TorchServe's name: total time inference requests waited in queues, in microseconds.")
                      .Register(r);
}

void Metrics::RecordTorchServe(const std::string& model, const InferenceResult* result, uint64_t total_us) {
  if (ts_requests_ == nullptr || model.empty()) return;
  // The version as TorchServe names it: the archive's name for a store's model.
  std::string version = result ? absl::StrCat(result->placement.model_version) : "";
  if (ts_catalog_ != nullptr && result != nullptr) {
    if (auto it = ts_catalog_->models.find(model); it != ts_catalog_->models.end()) {
      for (const auto& [name, number] : it->second.versions) {
        if (number == result->placement.model_version) version = name;
      }
    }
  }
  const prometheus::Labels labels{{"model_name", model}, {"model_version", version}};
  Cached(*ts_requests_, labels).Increment();
  // Every answered call's time, as infergate_request_duration_seconds
  // counts it (failed calls too); queue time only for calls that queued.
  Cached(*ts_latency_us_, labels).Increment(static_cast<double>(total_us));
  if (result == nullptr) return;
  Cached(*ts_queue_us_, labels).Increment(static_cast<double>(result->timing.queue_us));
}

void Metrics::OnHandlerInput(const std::string& model, double seconds) {
  prometheus::Histogram* h = nullptr;
  {
    ReaderLock lock(handler_mu_);
    if (auto it = handler_input_.find(model); it != handler_input_.end()) h = it->second;
  }
  if (h == nullptr) {
    WriterLock lock(handler_mu_);
    prometheus::Histogram*& slot = handler_input_[model];
    if (slot == nullptr) slot = &handler_input_seconds_->Add({{"model", model}}, LatencyBuckets());
    h = slot;
  }
  h->Observe(seconds);
}

void Metrics::OnCacheLookup(const DeviceId& device, bool hit) {
  Cached(hit ? *cache_hits_ : *cache_misses_, {{"device", device.ToString()}}).Increment();
}

void Metrics::OnModelUpdate(const std::string& model, ModelUpdateResult result) {
  Cached(*updates_, {{"model", model}, {"result", std::string(ModelUpdateResultName(result))}}).Increment();
}

void Metrics::OnModelLoad(const std::string& model, const DeviceId& device, double seconds, bool ok) {
  Cached(*loads_, {{"model", model}, {"device", device.ToString()}, {"result", ok ? "ok" : "error"}}).Increment();
  if (ok) {
    WriterLock lock(series_mu_);  // Family::Add for a rare event
    load_seconds_->Add({{"device", device.ToString()}}, LatencyBuckets()).Observe(seconds);
  }
}

void Metrics::OnModelTransfer(const std::string& /*model*/, const DeviceId& device, uint64_t bytes, double seconds) {
  Cached(*transfer_seconds_, {{"device", device.ToString()}}).Increment(seconds);
  Cached(*transfer_bytes_, {{"device", device.ToString()}}).Increment(static_cast<double>(bytes));
}

void Metrics::OnWaitedForLoad(const DeviceId& device, size_t requests) {
  Cached(*waited_for_load_, {{"device", device.ToString()}}).Increment(static_cast<double>(requests));
}

void Metrics::OnModelMove(const std::string& model, const DeviceId& device, const std::string& reason) {
  Cached(*moves_, {{"model", model}, {"device", device.ToString()}, {"reason", reason}}).Increment();
}

void Metrics::OnEviction(const DeviceId& device, EvictionReason why) {
  Cached(*evictions_, {{"device", device.ToString()}, {"reason", std::string(EvictionReasonName(why))}}).Increment();
}

void Metrics::OnFallback(const std::string& from, const std::string& to, const std::string& reason) {
  Cached(*fallbacks_, {{"from", from}, {"to", to}, {"reason", reason}}).Increment();
}

void Metrics::OnReadyPathAnswered(const std::string& path, const std::string& device, bool estimated, bool regret) {
  Cached(*ready_paths_, {{"path", path}, {"device", device}}).Increment();
  if (!estimated) Cached(*unestimated_, {{"path", path}, {"device", device}}).Increment();
  if (regret) Cached(*regrets_, {{"path", path}, {"device", device}}).Increment();
}

void Metrics::OnPrecisionCheck(const std::string& model, const std::string& device, const std::string& dtype,
                               PrecisionCheckKind kind, PrecisionCheckResult result) {
  Cached(*precision_checks_, {{"model", model},
                              {"device", device},
                              {"dtype", dtype},
                              {"kind", std::string(PrecisionCheckKindName(kind))},
                              {"result", std::string(PrecisionCheckResultName(result))}})
      .Increment();
}

void Metrics::OnPrecisionError(const std::string& model, const std::string& device, const std::string& dtype,
                               double relative_error) {
  precision_error_->Add({{"model", model}, {"device", device}, {"dtype", dtype}}).Set(relative_error);
}

void Metrics::OnRejected(const DeviceId& device, const std::string& model, RejectionReason reason) {
  (void)device;  // rejections are counted by model and reason: the device is in the request metrics
  Cached(*rejections_, {{"model", model}, {"reason", std::string(RejectionReasonName(reason))}}).Increment();
}

void Metrics::OnAdmissionRejection(RejectionReason reason) {
  Cached(*rejections_, {{"model", ""}, {"reason", std::string(RejectionReasonName(reason))}}).Increment();
}

}  // namespace infergate
