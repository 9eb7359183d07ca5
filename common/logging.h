#pragma once
// Minimal leveled logging to stderr, shared by every layer of the server.
// absl/log is not in Debian bookworm's absl, hence this.

#include <atomic>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

namespace infergate {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

void SetMinLogLevel(LogLevel level);
LogLevel MinLogLevel();
void EmitLog(LogLevel level, std::string_view file, int line, std::string_view msg);

// Lets at most `per_second` lines through each second, so a storm of
// similar events cannot flood the log; reports how many it held back.
class LogRateLimiter {
 public:
  explicit LogRateLimiter(int per_second) : per_second_(per_second) {}
  // True if a line may be written now; `*suppressed` is how many were held
  // back since the last line that was let through.
  bool Allow(uint64_t* suppressed);

 private:
  const int per_second_;
  std::atomic<int64_t> window_{0};
  std::atomic<int> used_{0};
  std::atomic<uint64_t> suppressed_{0};
};

// " (N similar lines suppressed)" for the count Allow reported; "" for 0.
std::string SuppressedNote(uint64_t suppressed);

namespace internal {
class LogLine {
 public:
  LogLine(LogLevel level, const char* file, int line) : level_(level), file_(file), line_(line) {}
  ~LogLine() { EmitLog(level_, file_, line_, stream_.str()); }
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  const char* file_;
  int line_;
  std::ostringstream stream_;
};
// Turns the streamed expression into void so it fits the ternary below.
struct Voidify {
  void operator&(std::ostream&) {}
};
}  // namespace internal

}  // namespace infergate

#define IG_LOG(level)                                         \
  (::infergate::LogLevel::level < ::infergate::MinLogLevel()) \
      ? (void)0                                               \
      : ::infergate::internal::Voidify() &                    \
            ::infergate::internal::LogLine(::infergate::LogLevel::level, __FILE__, __LINE__).stream()

#define LOG_INFO IG_LOG(kInfo)
#define LOG_WARNING IG_LOG(kWarning)
#define LOG_ERROR IG_LOG(kError)
#define LOG_DEBUG IG_LOG(kDebug)
