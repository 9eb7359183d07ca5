// otlp-sink: an OTLP trace receiver that only counts spans, for the
// benchmark's tracing rows (a collector that keeps up, on this machine).
// Prints "otlp-sink listening on HOST:PORT"; on SIGTERM or SIGINT, prints
// "otlp-sink received N spans in M exports" and exits.

#include <signal.h>

#include <cstdio>

#include "tests/service/tracing/otlp_receiver.h"

int main() {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // before gRPC's threads start, so they inherit it
  infergate::testing::OtlpReceiver sink(/*keep_spans=*/false);
  std::printf("otlp-sink listening on %s\n", sink.address().c_str());
  std::fflush(stdout);
  int signal = 0;
  sigwait(&stop, &signal);
  sink.Stop();
  std::printf("otlp-sink received %llu spans in %llu exports\n", static_cast<unsigned long long>(sink.spans_received()),
              static_cast<unsigned long long>(sink.exports()));
  return 0;
}
