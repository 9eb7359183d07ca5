#include "service/grpc/grpc_method.h"

#include "absl/strings/str_cat.h"
#include "service/grpc/message_bytes.h"

namespace infergate {

void GrpcServerCall::Answer(const absl::Status& status, const google::protobuf::Message& response) {
  if (!status.ok()) return Finish(status);
  Write(response);
  Finish(absl::OkStatus());
}

void GrpcMethods::Add(absl::string_view service, absl::string_view name, GrpcMethod method) {
  methods_.insert_or_assign(absl::StrCat("/", service, "/", name), std::move(method));
}

const GrpcMethod* GrpcMethods::Find(absl::string_view full_name) const {
  auto it = methods_.find(full_name);
  return it == methods_.end() ? nullptr : &it->second;
}

std::vector<std::string> GrpcMethods::Services() const {
  std::vector<std::string> services;
  for (const auto& [name, method] : methods_) {
    const size_t slash = name.find('/', 1);
    std::string service = name.substr(1, slash - 1);
    if (services.empty() || services.back() != service) services.push_back(std::move(service));
  }
  return services;
}

}  // namespace infergate
