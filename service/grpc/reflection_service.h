#pragma once
// gRPC server reflection (grpc.reflection.v1alpha.ServerReflection, what
// grpcurl and other tools ask) as a method of the completion-queue front
// end (grpc_method.h), so that its requests are read and paid for like any
// other: gRPC's own reflection service reads and parses each request of its
// stream before any check. It answers from the descriptors compiled into
// the server: the services that have a method in the table, and any file,
// symbol or extension of theirs with the files it imports.
//
// Served without a token, where the server serves reflection at all
// (--reflection: off by default once tokens are configured).
//
// Threading: stateless; the descriptor pool is read-only.

#include "service/grpc/grpc_method.h"

namespace infergate {

class ReflectionService {
 public:
  // `methods` names the services listed; it must outlive this, and this
  // the methods it registers.
  explicit ReflectionService(const GrpcMethods& methods) : methods_(methods) {}

  // Adds ServerReflectionInfo to `methods`.
  void Register(GrpcMethods& methods);

 private:
  void Answer(GrpcServerCall& call) const;

  const GrpcMethods& methods_;
};

}  // namespace infergate
