#include "common/logging.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

#include "common/mutex.h"

namespace infergate {
namespace {
std::atomic<int> g_min_level{static_cast<int>(LogLevel::kInfo)};
Mutex g_write_mu;  // one line at a time on stderr; guards no state of its own

char LevelLetter(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return 'D';
    case LogLevel::kInfo: return 'I';
    case LogLevel::kWarning: return 'W';
    case LogLevel::kError: return 'E';
  }
  return '?';
}
}  // namespace

bool LogRateLimiter::Allow(uint64_t* suppressed) {
  int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  int64_t window = window_.load(std::memory_order_relaxed);
  if (now != window && window_.compare_exchange_strong(window, now)) used_.store(0);
  if (used_.fetch_add(1) >= per_second_) {
    suppressed_.fetch_add(1);
    return false;
  }
  *suppressed = suppressed_.exchange(0);
  return true;
}

std::string SuppressedNote(uint64_t suppressed) {
  return suppressed ? " (" + std::to_string(suppressed) + " similar lines suppressed)" : std::string();
}

void SetMinLogLevel(LogLevel level) { g_min_level.store(static_cast<int>(level)); }
LogLevel MinLogLevel() { return static_cast<LogLevel>(g_min_level.load(std::memory_order_relaxed)); }

void EmitLog(LogLevel level, std::string_view file, int line, std::string_view msg) {
  auto now = std::chrono::system_clock::now();
  std::time_t secs = std::chrono::system_clock::to_time_t(now);
  auto micros = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
  if (auto slash = file.rfind('/'); slash != std::string_view::npos) file.remove_prefix(slash + 1);
  std::string out;
  out.reserve(msg.size() + 64);
  out += LevelLetter(level);
  out += ' ';
  out += stamp;
  char frac[16];
  std::snprintf(frac, sizeof(frac), ".%06lldZ ", static_cast<long long>(micros));
  out += frac;
  out += file;
  out += ':';
  out += std::to_string(line);
  out += "] ";
  out += msg;
  out += '\n';
  MutexLock lock(g_write_mu);
  std::fwrite(out.data(), 1, out.size(), stderr);
}

}  // namespace infergate
