#include "scheduler/model/host_copy_store.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace infergate {
namespace {

class Weights final : public HostWeights {
 public:
  explicit Weights(uint64_t bytes) : bytes_(bytes) {}
  uint64_t bytes() const override { return bytes_; }

 private:
  uint64_t bytes_;
};

HostCopyKey CopyKey(const std::string& model, const std::string& content = "1") {
  return HostCopyKey{model, "/models/" + model + "/1/model.pt", content};
}

// A CPU budget as the model cache would lend it: `room` bytes, what is
// lent now, and every call seen.
struct Budget {
  uint64_t room = 1000;
  uint64_t lent = 0;
  uint64_t limit = 0;
  std::vector<std::string> calls;

  HostCopyStore Store() {
    return HostCopyStore(
        [this](uint64_t bytes) {
          calls.push_back("reserve " + std::to_string(bytes));
          if (lent + bytes > room) return absl::ResourceExhaustedError("no room");
          lent += bytes;
          return absl::OkStatus();
        },
        [this](uint64_t bytes) {
          calls.push_back("give back " + std::to_string(bytes));
          lent -= bytes;
        },
        [this] { return limit; });
  }
};

TEST(HostCopyStore, AKeptCopyIsFoundByItsFileAndChargedToTheBudget) {
  Budget budget;
  HostCopyStore store = budget.Store();
  EXPECT_EQ(store.Find(CopyKey("a")), nullptr);
  ASSERT_TRUE(store.Keep(CopyKey("a"), std::make_shared<Weights>(300)));
  EXPECT_EQ(budget.lent, 300u);
  ASSERT_NE(store.Find(CopyKey("a")), nullptr);
  EXPECT_EQ(store.Find(CopyKey("a"))->bytes(), 300u);
  EXPECT_EQ(store.hits(), 2u);
  // The same model's file replaced on disk is another file (requirement 1).
  EXPECT_EQ(store.Find(CopyKey("a", "2")), nullptr);
  // A second copy of the same file is not kept, nor charged.
  EXPECT_FALSE(store.Keep(CopyKey("a"), std::make_shared<Weights>(300)));
  EXPECT_EQ(budget.lent, 300u);
  EXPECT_EQ(store.count(), 1u);
  EXPECT_EQ(store.bytes(), 300u);
}

TEST(HostCopyStore, ACopyTheBudgetCannotHoldIsNotKept) {
  Budget budget;
  budget.room = 500;
  HostCopyStore store = budget.Store();
  ASSERT_TRUE(store.Keep(CopyKey("a"), std::make_shared<Weights>(400)));
  EXPECT_FALSE(store.Keep(CopyKey("b"), std::make_shared<Weights>(200)));
  EXPECT_EQ(store.Find(CopyKey("b")), nullptr);
  EXPECT_EQ(budget.lent, 400u);
  EXPECT_EQ(store.bytes(), 400u);
}

TEST(HostCopyStore, UnderItsShareTheLeastRecentlyUsedCopiesGoFirst) {
  Budget budget;
  budget.limit = 500;
  HostCopyStore store = budget.Store();
  ASSERT_TRUE(store.Keep(CopyKey("a"), std::make_shared<Weights>(200)));
  ASSERT_TRUE(store.Keep(CopyKey("b"), std::make_shared<Weights>(200)));
  ASSERT_NE(store.Find(CopyKey("a")), nullptr);  // b is now the least recently used
  ASSERT_TRUE(store.Keep(CopyKey("c"), std::make_shared<Weights>(200)));
  EXPECT_NE(store.Find(CopyKey("a")), nullptr);
  EXPECT_EQ(store.Find(CopyKey("b")), nullptr);
  EXPECT_NE(store.Find(CopyKey("c")), nullptr);
  EXPECT_EQ(budget.lent, 400u);
  // Larger than the whole share: not kept, and nothing dropped for it.
  EXPECT_FALSE(store.Keep(CopyKey("d"), std::make_shared<Weights>(600)));
  EXPECT_EQ(store.count(), 2u);
  EXPECT_EQ(budget.lent, 400u);
}

TEST(HostCopyStore, DroppedCopiesGiveTheirBytesBack) {
  Budget budget;
  {
    HostCopyStore store = budget.Store();
    ASSERT_TRUE(store.Keep(CopyKey("a"), std::make_shared<Weights>(100)));
    ASSERT_TRUE(store.Keep(CopyKey("a", "2"), std::make_shared<Weights>(100)));
    ASSERT_TRUE(store.Keep(CopyKey("b"), std::make_shared<Weights>(100)));
    EXPECT_EQ(store.DropIf([](const HostCopyKey& k) { return k.model == "a"; }), 2u);
    EXPECT_EQ(budget.lent, 100u);
    EXPECT_EQ(store.Find(CopyKey("a")), nullptr);
    EXPECT_NE(store.Find(CopyKey("b")), nullptr);
  }
  // The store's end gives back the rest.
  EXPECT_EQ(budget.lent, 0u);
}

}  // namespace
}  // namespace infergate
