#include "service/tracing/span_export_queue.h"

#include <utility>
#include <vector>

#include "common/thread_name.h"
#include "opentelemetry/nostd/span.h"
#include "opentelemetry/sdk/common/exporter_utils.h"

namespace infergate {

namespace sdktrace = opentelemetry::sdk::trace;

namespace {

// Waits on `cv` until `done` holds, for at most `timeout` (max(): no
// bound); whether it held.
template <typename Done>
bool WaitAtMost(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, std::chrono::microseconds timeout,
                Done done) {
  if (timeout == std::chrono::microseconds::max()) {
    cv.wait(lock, done);
    return true;
  }
  return cv.wait_for(lock, timeout, done);
}

}  // namespace

SpanExportQueue::SpanExportQueue(std::unique_ptr<sdktrace::SpanExporter> exporter, Options options)
    : exporter_(std::move(exporter)), options_(options) {
  thread_ = std::thread([this] {
    NameThisThread("span export");
    ExportLoop();
  });
}

SpanExportQueue::~SpanExportQueue() { Shutdown(); }  // no timeout: nothing may outlive it

std::unique_ptr<sdktrace::Recordable> SpanExportQueue::MakeRecordable() noexcept { return exporter_->MakeRecordable(); }

void SpanExportQueue::OnStart(sdktrace::Recordable&, const opentelemetry::trace::SpanContext&) noexcept {}

void SpanExportQueue::OnEnd(std::unique_ptr<sdktrace::Recordable>&& span) noexcept {
  bool wake = false;
  {
    MutexLock lock(mu_);
    if (stopping_ || queue_.size() >= options_.max_queue_size) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    queue_.push_back(std::move(span));
    ++enqueued_;
    wake = queue_.size() == options_.max_export_batch_size;
  }
  if (wake) wake_.notify_one();
}

bool SpanExportQueue::ForceFlush(std::chrono::microseconds timeout) noexcept {
  UniqueMutexLock lock(mu_);
  if (!thread_.joinable()) return queue_.empty();
  const uint64_t target = enqueued_;
  flush_asked_ = true;
  wake_.notify_one();
  return WaitAtMost(done_, lock.native(), timeout, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return settled_ >= target; });
}

bool SpanExportQueue::Shutdown(std::chrono::microseconds timeout) noexcept {
  if (shut_down_.exchange(true)) return true;
  bool finished = false;
  {
    UniqueMutexLock lock(mu_);
    stopping_ = true;
    wake_.notify_one();
    // The thread exports what is queued (one round per batch, each bounded
    // by the exporter's timeout) and ends.
    finished = WaitAtMost(done_, lock.native(), timeout, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return thread_done_; });
  }
  if (!finished) {
    thread_.detach();
    return false;
  }
  thread_.join();
  return exporter_->Shutdown(timeout == std::chrono::microseconds::max() ? timeout : std::chrono::microseconds(0));
}

void SpanExportQueue::ExportLoop() {
  UniqueMutexLock lock(mu_);
  while (true) {
    const auto due = std::chrono::steady_clock::now() + options_.schedule_delay;
    wake_.wait_until(lock.native(), due, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return stopping_ || flush_asked_ || queue_.size() >= options_.max_export_batch_size;
    });
    if (queue_.empty()) {
      flush_asked_ = false;
      done_.notify_all();
      if (stopping_) {
        thread_done_ = true;
        done_.notify_all();
        return;
      }
      continue;
    }
    std::vector<std::unique_ptr<sdktrace::Recordable>> batch;
    const size_t n = std::min(queue_.size(), options_.max_export_batch_size);
    batch.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    lock.Unlock();
    const opentelemetry::sdk::common::ExportResult result = exporter_->Export(
        opentelemetry::nostd::span<std::unique_ptr<sdktrace::Recordable>>(batch.data(), batch.size()));
    (result == opentelemetry::sdk::common::ExportResult::kSuccess ? exported_ : failed_)
        .fetch_add(n, std::memory_order_relaxed);
    batch.clear();
    lock.Lock();
    settled_ += n;
    done_.notify_all();
  }
}

}  // namespace infergate
