#pragma once
// What a batch costs on a device, learned from the batches that ran, and the
// batch size that gets the most rows through per second.
//
// Bigger is not always faster: OpenBLAS, for one, multiplies one or two rows
// with a small-matrix kernel but packs the whole weight matrix for three or
// more, so a Linear layer runs 2 rows in 28 us and 3 rows in 170 us. The
// batcher therefore takes, of the jobs it has collected (in arrival order),
// the prefix whose size has the best measured rows per second, and leaves
// the rest queued for the next batch.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/mutex.h"

namespace infergate {

class BatchCostModel {
 public:
  // Sizes above this are tracked as this size.
  static constexpr int64_t kMaxTrackedRows = 1024;
  // One decision in this many explores a size other than the best known,
  // so estimates follow the device as load and caches change.
  static constexpr uint64_t kExploreEvery = 16;

  // Records that a batch of `rows` rows with key `key` computed in `us`.
  void Record(const std::string& key, int64_t rows, uint64_t us);

  // Given the row counts of the collected jobs in order, returns how many
  // jobs (a prefix, at least 1) to run now. When the model's config lists
  // preferred batch sizes, the largest prefix of such a size wins. Else a
  // size never measured twice is tried before any measured one (its first
  // run may include one-time warm-up), then the best measured rows/s wins,
  // larger on a tie.
  size_t Choose(const std::string& key, const std::vector<int64_t>& job_rows,
                const std::vector<int64_t>& preferred = {});

  // Whether waiting for companions may pay off for a batch now holding
  // `rows` rows (of at most `max_rows`): true unless `rows` is measured and
  // no measured size up to `max_rows` beats its rows per second by
  // kWorthWaitingGain. A size never measured larger than `rows` counts as
  // worth trying. Asked only for accelerators (a CPU worker never waits,
  // see DeviceExecutor::TakeBatch): where batching does not pay, a worker
  // runs what it has as soon as the device is free.
  bool WorthWaiting(const std::string& key, int64_t rows, int64_t max_rows) const;
  static constexpr double kWorthWaitingGain = 1.25;

  // Whether `rows` rows finish clearly sooner split among workers, each
  // running at most `share` rows, than all on one worker: true when `share`
  // rows, run in batches of the measured size up to `share` that takes them
  // through fastest, take under 1/kSplitGain of the measured time of one
  // batch of `rows`. False while either is unmeasured. It weighs finishing
  // times, not rows per second: a Linear layer measured at 70 us for 2 rows
  // and 210 us for 8 runs 8 rows in 140 us on two workers (2+2 each), though
  // 8 rows at once use less CPU per row. A fixed cost per batch (100 us +
  // 5 us per row) keeps the batch whole.
  bool SplitFinishesSooner(const std::string& key, int64_t rows, int64_t share) const;
  static constexpr double kSplitGain = 1.25;

  // Measured microseconds per batch of `rows`, or -1 when unknown.
  double CostUs(const std::string& key, int64_t rows) const;

 private:
  struct Size {
    double us = 0;
    uint64_t samples = 0;
  };
  struct Curve {
    std::vector<Size> sizes;  // index = rows
    uint64_t decisions = 0;
  };
  mutable Mutex mu_;
  std::map<std::string, Curve, std::less<>> curves_ ABSL_GUARDED_BY(mu_);
};

}  // namespace infergate
