#pragma once
// The standard gRPC health service (grpc.health.v1.Health: Check and
// Watch) as methods of the completion-queue front end (grpc_method.h), so
// that a probe's message is read and paid for like any other: gRPC's
// built-in service reads and parses its requests before any check.
//
// A status is set per service name ("" is the server as a whole); Check
// answers it (NOT_FOUND for a name never set, as gRPC's own does), and
// Watch sends it at once (SERVICE_UNKNOWN for a name never set) and again
// each time it changes, until the client leaves or the server stops.
// Neither needs a token (probes have none).
//
// Threading: SetServingStatus may be called from any thread; watchers are
// written to outside the service's lock. Ownership: the service must
// outlive the methods it registers and every call of them (the server
// stops its calls first).

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "service/grpc/grpc_method.h"

namespace infergate {

class HealthService {
 public:
  // Sets `service`'s status and tells its watchers.
  void SetServingStatus(const std::string& service, bool serving);
  // Every service's status set so far, at once (the drain).
  void SetAll(bool serving);

  // Adds Check and Watch to `methods`.
  void Register(GrpcMethods& methods);

 private:
  struct Watcher;
  void Check(GrpcServerCall& call);
  void Watch(GrpcServerCall& call);
  // Writes `service`'s current status to its watchers (outside the lock).
  void Notify(const std::vector<std::string>& services);

  Mutex mu_;
  std::map<std::string, bool> serving_ ABSL_GUARDED_BY(mu_);
  std::multimap<std::string, std::shared_ptr<Watcher>> watchers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace infergate
