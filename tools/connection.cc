#include "tools/connection.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/status_macros.h"

namespace infergate::tools {

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const Connection& c, int lane) {
  grpc::ChannelArguments args;
  if (lane > 0) args.SetInt("infergate.lane", lane);  // distinct args: a connection of its own
  if (!c.lb.empty()) args.SetLoadBalancingPolicyName(c.lb);
  if (!c.tls_server_name.empty()) args.SetSslTargetNameOverride(c.tls_server_name);
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (!c.tls_ca.empty()) {
    grpc::SslCredentialsOptions ssl;
    ASSIGN_OR_RETURN(std::string ca, ReadFile(c.tls_ca, "--tls-ca"));
    ssl.pem_root_certs = ca;
    if (!c.tls_cert.empty()) {
      ASSIGN_OR_RETURN(std::string cert, ReadFile(c.tls_cert, "--tls-cert"));
      ASSIGN_OR_RETURN(std::string key, ReadFile(c.tls_key, "--tls-key"));
      ssl.pem_cert_chain = cert;
      ssl.pem_private_key = key;
    }
    creds = grpc::SslCredentials(ssl);
  }
  return grpc::CreateCustomChannel(c.address, creds, args);
}

void Authorize(grpc::ClientContext& ctx, const Connection& c) {
  if (!c.token.empty()) ctx.AddMetadata("authorization", "Bearer " + c.token);
}

absl::StatusOr<std::vector<std::shared_ptr<grpc::Channel>>> MakeChannels(const Connection& c, int count) {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < std::max(1, count); ++i) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = MakeChannel(c, i + 1);
    if (!channel.ok()) return channel.status();
    channels.push_back(*std::move(channel));
  }
  return channels;
}

}  // namespace infergate::tools
