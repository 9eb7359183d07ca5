#pragma once
// The span processor between finished spans and the OTLP exporter: spans
// wait in a bounded queue and one background thread exports them in
// batches. A request's thread only appends under a short lock; when the
// queue is full (the collector is slow or gone) the span is dropped and
// counted, never waited for, so tracing can neither block nor fail a
// request, nor hold more than `max_queue_size` spans.
//
// Unlike the SDK's BatchSpanProcessor it counts what it drops and what
// failed to export, for the server's metrics.
//
// Threading: OnEnd, the counters and ForceFlush may be called from any
// thread; the exporter is called only from the export thread. Shutdown (or
// the destructor) stops the thread after one last export.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"
#include "opentelemetry/sdk/trace/exporter.h"
#include "opentelemetry/sdk/trace/processor.h"

namespace infergate {

class SpanExportQueue final : public opentelemetry::sdk::trace::SpanProcessor {
 public:
  struct Options {
    size_t max_queue_size = 2048;
    size_t max_export_batch_size = 512;
    std::chrono::milliseconds schedule_delay{5000};  // how long a partial batch waits
  };
  SpanExportQueue(std::unique_ptr<opentelemetry::sdk::trace::SpanExporter> exporter, Options options);
  ~SpanExportQueue() override;

  std::unique_ptr<opentelemetry::sdk::trace::Recordable> MakeRecordable() noexcept override;
  void OnStart(opentelemetry::sdk::trace::Recordable& span,
               const opentelemetry::trace::SpanContext& parent_context) noexcept override;
  void OnEnd(std::unique_ptr<opentelemetry::sdk::trace::Recordable>&& span) noexcept override;
  // Exports what is queued now; false if that did not finish in `timeout`.
  bool ForceFlush(std::chrono::microseconds timeout = (std::chrono::microseconds::max)()) noexcept override;
  // Stops taking spans, exports what is queued and stops the thread. False
  // when that took longer than `timeout` (an export stuck on a collector
  // that does not answer): the thread is then left to finish on its own,
  // and this object must outlive it (the process is ending; see Tracing).
  bool Shutdown(std::chrono::microseconds timeout = (std::chrono::microseconds::max)()) noexcept override;

  uint64_t exported() const { return exported_.load(std::memory_order_relaxed); }
  // Spans dropped because the queue was full.
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  // Spans the exporter could not deliver.
  uint64_t failed() const { return failed_.load(std::memory_order_relaxed); }

 private:
  void ExportLoop();

  const std::unique_ptr<opentelemetry::sdk::trace::SpanExporter> exporter_;
  const Options options_;
  Mutex mu_;
  std::condition_variable wake_;  // the export thread: a batch is due, a flush asked, or stop
  std::condition_variable done_;  // flushers: an export round finished
  std::deque<std::unique_ptr<opentelemetry::sdk::trace::Recordable>> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t settled_ ABSL_GUARDED_BY(mu_) = 0;   // of those, spans whose export finished
  uint64_t enqueued_ ABSL_GUARDED_BY(mu_) = 0;  // spans ever queued
  bool flush_asked_ ABSL_GUARDED_BY(mu_) = false;
  bool thread_done_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> exported_{0};
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> failed_{0};
  std::atomic<bool> shut_down_{false};
  std::thread thread_;
};

}  // namespace infergate
