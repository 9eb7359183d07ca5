#include "common/thread_name.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace infergate {
namespace {

std::string NameSeenBy(const std::string& name) {
  std::string seen;
  std::thread t([&] {
    NameThisThread(name);
    seen = ThisThreadName();
  });
  t.join();
  return seen;
}

TEST(ThreadName, AShortNameIsKept) { EXPECT_EQ(NameSeenBy("cpu worker 0"), "cpu worker 0"); }

TEST(ThreadName, ALongNameIsCutToWhatLinuxKeeps) {
  EXPECT_EQ(NameSeenBy("cuda:12 worker 31"), "cuda:12 worker ");
  EXPECT_EQ(NameSeenBy("cuda:12 worker 31").size(), kMaxThreadNameBytes);
}

}  // namespace
}  // namespace infergate
