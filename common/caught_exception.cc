#include "common/caught_exception.h"

#include <atomic>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace infergate {
namespace {

std::atomic<uint64_t> caught{0};

}  // namespace

absl::Status StatusOfCaughtException(absl::string_view where) {
  caught.fetch_add(1, std::memory_order_relaxed);
  // Making the message allocates; where even that fails, a fixed status.
  try {
    std::string what;
    try {
      throw;
    } catch (const std::bad_alloc&) {
      what = "out of memory (std::bad_alloc)";
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
      what = "an exception of unknown type";
    }
    absl::Status status = absl::InternalError(absl::StrCat(where, " failed: ", what));
    LOG_ERROR << status.message() << " (caught; the server goes on serving)";
    return status;
  } catch (...) {
    return absl::InternalError("out of memory while reporting an exception");
  }
}

uint64_t CaughtExceptionCount() { return caught.load(std::memory_order_relaxed); }

}  // namespace infergate
