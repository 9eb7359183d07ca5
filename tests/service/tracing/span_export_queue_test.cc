#include "service/tracing/span_export_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "opentelemetry/sdk/trace/span_data.h"

namespace infergate {
namespace {

namespace sdktrace = opentelemetry::sdk::trace;

// An exporter that counts what it gets and can be held, like a collector
// that does not answer.
struct ExporterState {
  std::mutex mu;
  std::condition_variable cv;
  bool held = false;
  bool in_export = false;
  uint64_t spans = 0;
  int exports = 0;
  bool fail = false;
};

class FakeExporter final : public sdktrace::SpanExporter {
 public:
  explicit FakeExporter(std::shared_ptr<ExporterState> state) : state_(std::move(state)) {}
  std::unique_ptr<sdktrace::Recordable> MakeRecordable() noexcept override {
    return std::make_unique<sdktrace::SpanData>();
  }
  opentelemetry::sdk::common::ExportResult Export(
      const opentelemetry::nostd::span<std::unique_ptr<sdktrace::Recordable>>& spans) noexcept override {
    std::unique_lock<std::mutex> lock(state_->mu);
    state_->in_export = true;
    state_->cv.notify_all();
    state_->cv.wait(lock, [&] { return !state_->held; });
    state_->in_export = false;
    state_->exports++;
    state_->spans += spans.size();
    return state_->fail ? opentelemetry::sdk::common::ExportResult::kFailure
                        : opentelemetry::sdk::common::ExportResult::kSuccess;
  }
  bool ForceFlush(std::chrono::microseconds) noexcept override { return true; }
  bool Shutdown(std::chrono::microseconds) noexcept override { return true; }

 private:
  std::shared_ptr<ExporterState> state_;
};

void EndSpans(SpanExportQueue& queue, int n) {
  for (int i = 0; i < n; ++i) queue.OnEnd(queue.MakeRecordable());
}

void Hold(ExporterState& state, bool held) {
  std::lock_guard<std::mutex> lock(state.mu);
  state.held = held;
  state.cv.notify_all();
}

void WaitInExport(ExporterState& state) {
  std::unique_lock<std::mutex> lock(state.mu);
  state.cv.wait(lock, [&] { return state.in_export; });
}

TEST(SpanExportQueue, ExportsInBatchesAndFlushes) {
  auto state = std::make_shared<ExporterState>();
  SpanExportQueue queue(std::make_unique<FakeExporter>(state),
                        {.max_queue_size = 100, .max_export_batch_size = 10, .schedule_delay = std::chrono::hours(1)});
  EndSpans(queue, 25);
  EXPECT_TRUE(queue.ForceFlush(std::chrono::seconds(30)));
  EXPECT_EQ(queue.exported(), 25u);
  EXPECT_EQ(queue.dropped(), 0u);
  std::lock_guard<std::mutex> lock(state->mu);
  EXPECT_EQ(state->spans, 25u);
  EXPECT_GE(state->exports, 3) << "batches of at most 10";
}

TEST(SpanExportQueue, APartialBatchGoesOutAfterTheDelay) {
  auto state = std::make_shared<ExporterState>();
  SpanExportQueue queue(
      std::make_unique<FakeExporter>(state),
      {.max_queue_size = 100, .max_export_batch_size = 50, .schedule_delay = std::chrono::milliseconds(20)});
  EndSpans(queue, 3);
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       queue.exported() < 3 && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(queue.exported(), 3u);
}

// A held exporter: spans beyond the queue's bound are dropped and counted,
// and OnEnd never waits.
TEST(SpanExportQueue, AStuckExporterCostsOnlyDroppedSpans) {
  auto state = std::make_shared<ExporterState>();
  Hold(*state, true);
  SpanExportQueue queue(
      std::make_unique<FakeExporter>(state),
      {.max_queue_size = 8, .max_export_batch_size = 4, .schedule_delay = std::chrono::milliseconds(1)});
  EndSpans(queue, 4);
  WaitInExport(*state);  // the first batch of 4 is out, and stuck
  EndSpans(queue, 20);   // 8 fit the queue
  EXPECT_EQ(queue.dropped(), 12u);
  EXPECT_FALSE(queue.ForceFlush(std::chrono::milliseconds(50)));
  Hold(*state, false);
  EXPECT_TRUE(queue.ForceFlush(std::chrono::seconds(30)));
  EXPECT_EQ(queue.exported(), 12u);
}

TEST(SpanExportQueue, FailedExportsAreCounted) {
  auto state = std::make_shared<ExporterState>();
  state->fail = true;
  SpanExportQueue queue(std::make_unique<FakeExporter>(state),
                        {.max_queue_size = 100, .max_export_batch_size = 10, .schedule_delay = std::chrono::hours(1)});
  EndSpans(queue, 5);
  EXPECT_TRUE(queue.ForceFlush(std::chrono::seconds(30)));
  EXPECT_EQ(queue.failed(), 5u);
  EXPECT_EQ(queue.exported(), 0u);
}

TEST(SpanExportQueue, ShutdownExportsWhatIsLeftThenRefusesMore) {
  auto state = std::make_shared<ExporterState>();
  SpanExportQueue queue(std::make_unique<FakeExporter>(state),
                        {.max_queue_size = 100, .max_export_batch_size = 10, .schedule_delay = std::chrono::hours(1)});
  EndSpans(queue, 15);
  EXPECT_TRUE(queue.Shutdown(std::chrono::seconds(30)));
  EXPECT_EQ(queue.exported(), 15u);
  EndSpans(queue, 2);
  EXPECT_EQ(queue.dropped(), 2u);
}

// A collector that never answers cannot hold the shutdown past its bound.
TEST(SpanExportQueue, ShutdownGivesUpOnAStuckExport) {
  auto state = std::make_shared<ExporterState>();
  Hold(*state, true);
  // Abandoned on purpose, as Tracing does: its thread is still in Export.
  static SpanExportQueue* abandoned = nullptr;
  abandoned = new SpanExportQueue(
      std::make_unique<FakeExporter>(state),
      {.max_queue_size = 8, .max_export_batch_size = 4, .schedule_delay = std::chrono::milliseconds(1)});
  EndSpans(*abandoned, 4);
  WaitInExport(*state);
  EXPECT_FALSE(abandoned->Shutdown(std::chrono::milliseconds(100)));
  {
    // It gave up with the export still held: it did not wait for it (no
    // wall-clock bound needed; a shutdown that waits never returns here).
    std::lock_guard<std::mutex> lock(state->mu);
    EXPECT_TRUE(state->in_export);
    EXPECT_EQ(state->exports, 0);
  }
  Hold(*state, false);  // the abandoned thread finishes on its own
}

}  // namespace
}  // namespace infergate
