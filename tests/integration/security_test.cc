// TLS, mutual TLS and bearer tokens on the gRPC port.

#include <filesystem>

#include "tests/common/scratch_dir.h"
#include "tests/integration/server_fixture.h"

namespace infergate::testing {
namespace {

struct Pki {
  std::string dir;
  static const Pki& Get() {
    static const Pki pki = [] {
      Pki p;
      p.dir = ProcessScratchDir().path() + "/pki";
      std::filesystem::create_directory(p.dir);
      std::string script =
          "set -e; cd " + p.dir +
          "; "
          "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=test-ca -keyout ca.key -out ca.pem 2>/dev/null; "
          "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=stranger -keyout other.key -out other.pem "
          "2>/dev/null; "
          "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > san.ext; "
          "openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout server.key -out server.csr 2>/dev/null; "
          "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 -extfile san.ext "
          "-out server.pem 2>/dev/null; "
          "openssl req -newkey rsa:2048 -nodes -subj /CN=client -keyout client.key -out client.csr 2>/dev/null; "
          "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 -out client.pem "
          "2>/dev/null; "
          "openssl req -newkey rsa:2048 -nodes -subj /CN=intruder -keyout bad.key -out bad.csr 2>/dev/null; "
          "openssl x509 -req -in bad.csr -CA other.pem -CAkey other.key -CAcreateserial -days 1 -out bad.pem "
          "2>/dev/null; "
          "openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout server-b.key -out server-b.csr 2>/dev/null; "
          "openssl x509 -req -in server-b.csr -CA other.pem -CAkey other.key -CAcreateserial -days 1 -extfile san.ext "
          "-out server-b.pem 2>/dev/null; "
          "printf '# inference tokens\ninference-token-0123456789\n' > tokens; "
          "printf 'admin-token-0123456789abcdef\n' > admin-tokens";
      std::string out;
      EXPECT_EQ(RunCommand({"/bin/sh", "-c", script}, &out), 0) << out;
      return p;
    }();
    return pki;
  }
  std::string Read(const std::string& name) const {
    std::ifstream in(dir + "/" + name);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::string Path(const std::string& name) const { return dir + "/" + name; }
};

std::unique_ptr<v1::InferenceService::Stub> TlsStub(const std::string& address, const std::string& cert = "",
                                                    const std::string& key = "", const std::string& ca = "ca.pem") {
  const Pki& pki = Pki::Get();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = pki.Read(ca);
  if (!cert.empty()) {
    ssl.pem_cert_chain = pki.Read(cert);
    ssl.pem_private_key = pki.Read(key);
  }
  return v1::InferenceService::NewStub(grpc::CreateChannel(address, grpc::SslCredentials(ssl)));
}

grpc::Status ListDevicesWith(v1::InferenceService::Stub& stub, const std::string& token = "") {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  v1::ListDevicesResponse resp;
  return stub.ListDevices(&ctx, v1::ListDevicesRequest(), &resp);
}

TEST(Security, TlsPortRefusesPlaintextAndServesTls) {
  const Pki& pki = Pki::Get();
  auto server = ServerProcess::Start({"--model-repository=" + DemoRepository(), "--tls-cert=" + pki.Path("server.pem"),
                                      "--tls-key=" + pki.Path("server.key")},
                                     std::chrono::seconds(120), /*tls_ca=*/pki.Path("ca.pem"));
  ASSERT_NE(server, nullptr);
  auto plain =
      v1::InferenceService::NewStub(grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  EXPECT_FALSE(ListDevicesWith(*plain).ok());
  auto tls = TlsStub(server->address());
  EXPECT_TRUE(ListDevicesWith(*tls).ok());
  tls.reset();
  plain.reset();
  EXPECT_EQ(server->Stop(), 0);
}

TEST(Security, MutualTlsRefusesClientsWithoutACertificateFromTheCa) {
  const Pki& pki = Pki::Get();
  auto server = ServerProcess::Start({"--model-repository=" + DemoRepository(), "--tls-cert=" + pki.Path("server.pem"),
                                      "--tls-key=" + pki.Path("server.key"), "--tls-client-ca=" + pki.Path("ca.pem")},
                                     std::chrono::seconds(120), pki.Path("ca.pem"), pki.Path("client.pem"),
                                     pki.Path("client.key"));
  ASSERT_NE(server, nullptr);
  EXPECT_FALSE(ListDevicesWith(*TlsStub(server->address())).ok()) << "no client certificate";
  EXPECT_FALSE(ListDevicesWith(*TlsStub(server->address(), "bad.pem", "bad.key")).ok()) << "stranger's certificate";
  EXPECT_TRUE(ListDevicesWith(*TlsStub(server->address(), "client.pem", "client.key")).ok());
  EXPECT_EQ(server->Stop(), 0);
}

// A renewed certificate (cert-manager rewriting the Secret) is served to new
// connections without a restart.
TEST(Security, ARotatedCertificateIsServedWithoutARestart) {
  const Pki& pki = Pki::Get();
  std::string dir = pki.Path("rotation");
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(pki.Path("server.pem"), dir + "/tls.crt",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(pki.Path("server.key"), dir + "/tls.key",
                             std::filesystem::copy_options::overwrite_existing);
  auto server = ServerProcess::Start(
      {"--model-repository=" + DemoRepository(), "--tls-cert=" + dir + "/tls.crt", "--tls-key=" + dir + "/tls.key"},
      std::chrono::seconds(120), /*tls_ca=*/pki.Path("ca.pem"));
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(ListDevicesWith(*TlsStub(server->address())).ok());
  // The new pair, from another CA, replaces the old one file by file.
  std::filesystem::copy_file(pki.Path("server-b.key"), dir + "/tls.key.next");
  std::filesystem::copy_file(pki.Path("server-b.pem"), dir + "/tls.crt.next");
  std::filesystem::rename(dir + "/tls.key.next", dir + "/tls.key");
  std::filesystem::rename(dir + "/tls.crt.next", dir + "/tls.crt");
  bool rotated = false;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       !rotated && std::chrono::steady_clock::now() < deadline;) {
    rotated = ListDevicesWith(*TlsStub(server->address(), "", "", "other.pem")).ok();
    if (!rotated) std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  EXPECT_TRUE(rotated) << "new connections never got the renewed certificate\n" << server->Log();
  EXPECT_FALSE(ListDevicesWith(*TlsStub(server->address())).ok()) << "the old certificate is still served";
  EXPECT_EQ(server->Stop(), 0);
}

// A rotated token file takes effect without a restart.
TEST(Security, ARotatedTokenFileTakesEffectWithoutARestart) {
  const Pki& pki = Pki::Get();
  std::string tokens = pki.Path("rotating-tokens");
  std::ofstream(tokens) << "before-rotation-token-0123\n";
  auto server = ServerProcess::Start({"--model-repository=" + DemoRepository(), "--auth-token-file=" + tokens});
  ASSERT_NE(server, nullptr);
  auto stub = v1::InferenceService::NewStub(grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  EXPECT_TRUE(ListDevicesWith(*stub, "before-rotation-token-0123").ok());
  std::ofstream(tokens + ".next") << "after-rotation-token-01234\n";
  std::filesystem::rename(tokens + ".next", tokens);
  bool rotated = false;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       !rotated && std::chrono::steady_clock::now() < deadline;) {
    rotated = ListDevicesWith(*stub, "after-rotation-token-01234").ok();
    if (!rotated) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(rotated) << server->Log();
  EXPECT_EQ(ListDevicesWith(*stub, "before-rotation-token-0123").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  stub.reset();
  EXPECT_EQ(server->Stop(), 0);
}

TEST(Security, TokensGuardInferenceAndAdminRpcsButNotHealth) {
  const Pki& pki = Pki::Get();
  auto server =
      ServerProcess::Start({"--model-repository=" + DemoRepository(), "--auth-token-file=" + pki.Path("tokens"),
                            "--admin-token-file=" + pki.Path("admin-tokens")});
  ASSERT_NE(server, nullptr);  // health answered without a token
  auto stub = v1::InferenceService::NewStub(grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  const std::string inference = "inference-token-0123456789", admin = "admin-token-0123456789abcdef";
  EXPECT_EQ(ListDevicesWith(*stub).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(ListDevicesWith(*stub, "inference-token-0123456780").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(ListDevicesWith(*stub, inference).ok());
  EXPECT_TRUE(ListDevicesWith(*stub, admin).ok());

  v1::InferRequest req;
  req.set_model("mlp");
  *req.add_inputs() = ToWire(at::randn({1, 256}), "x");
  for (auto [token, code] : std::vector<std::pair<std::string, grpc::StatusCode>>{
           {"", grpc::StatusCode::UNAUTHENTICATED},
           {"wrong-token-000000000000", grpc::StatusCode::UNAUTHENTICATED},
           {inference, grpc::StatusCode::OK}}) {
    grpc::ClientContext ctx;
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
    v1::InferResponse resp;
    EXPECT_EQ(stub->Infer(&ctx, req, &resp).error_code(), code) << token;
  }
  v1::LoadModelRequest load;
  load.set_model("embed");
  load.set_device("cpu");
  for (auto [token, code] :
       std::vector<std::pair<std::string, grpc::StatusCode>>{{"", grpc::StatusCode::UNAUTHENTICATED},
                                                             {inference, grpc::StatusCode::PERMISSION_DENIED},
                                                             {admin, grpc::StatusCode::OK}}) {
    grpc::ClientContext ctx;
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
    v1::LoadModelResponse resp;
    EXPECT_EQ(stub->LoadModel(&ctx, load, &resp).error_code(), code) << token;
  }
  stub.reset();
  EXPECT_EQ(server->Stop(), 0);
}

// Only inference tokens configured: model management is refused to
// everyone, tokens or not, instead of being left open.
// Without an admin token file the admin RPCs are closed to everyone (a load
// can run native code), naming the two ways to open them; inference stays
// open.
TEST(Security, TheAdminRpcsAreClosedByDefault) {
  auto server = ServerProcess::Start({"--model-repository=" + DemoRepository(), "--open-admin-api=false"});
  ASSERT_NE(server, nullptr);
  auto stub = v1::InferenceService::NewStub(grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext load_ctx;
  v1::LoadModelRequest load;
  load.set_model("embed");
  v1::LoadModelResponse loaded;
  const grpc::Status s = stub->LoadModel(&load_ctx, load, &loaded);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(s.error_message().find("--admin-token-file"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("--open-admin-api"), std::string::npos) << s.error_message();
  grpc::ClientContext list_ctx;
  v1::ListDevicesResponse devices;
  EXPECT_TRUE(stub->ListDevices(&list_ctx, v1::ListDevicesRequest(), &devices).ok());
  stub.reset();
  EXPECT_EQ(server->Stop(), 0);
}

TEST(Security, InferenceTokensAloneCloseTheAdminRpcs) {
  const Pki& pki = Pki::Get();
  auto server = ServerProcess::Start(
      {"--model-repository=" + DemoRepository(), "--auth-token-file=" + pki.Path("tokens"), "--open-admin-api=false"});
  ASSERT_NE(server, nullptr);
  auto stub = v1::InferenceService::NewStub(grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  for (const std::string token : {"", "inference-token-0123456789"}) {
    grpc::ClientContext load_ctx, unload_ctx;
    if (!token.empty()) {
      load_ctx.AddMetadata("authorization", "Bearer " + token);
      unload_ctx.AddMetadata("authorization", "Bearer " + token);
    }
    v1::LoadModelRequest load;
    load.set_model("embed");
    v1::LoadModelResponse loaded;
    grpc::Status s = stub->LoadModel(&load_ctx, load, &loaded);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << token;
    EXPECT_NE(s.error_message().find("--admin-token-file"), std::string::npos) << s.error_message();
    v1::UnloadModelRequest unload;
    unload.set_model("mlp");
    v1::UnloadModelResponse unloaded;
    EXPECT_EQ(stub->UnloadModel(&unload_ctx, unload, &unloaded).error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << token;
  }
  EXPECT_TRUE(ListDevicesWith(*stub, "inference-token-0123456789").ok());
  stub.reset();
  EXPECT_EQ(server->Stop(), 0);
}

// Reflection answers without a token, so with tokens configured it is off
// unless asked for: a client without a token learns nothing of the API.
// --reflection=off turns it off without tokens too.
TEST(Security, TokensTurnReflectionOffUnlessAskedFor) {
  const Pki& pki = Pki::Get();
  auto list_services = [](const std::string& address) {
    auto reflection = grpc::reflection::v1alpha::ServerReflection::NewStub(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    auto stream = reflection->ServerReflectionInfo(&ctx);
    grpc::reflection::v1alpha::ServerReflectionRequest req;
    req.set_list_services("");
    stream->Write(req);
    grpc::reflection::v1alpha::ServerReflectionResponse resp;
    bool answered = stream->Read(&resp) && resp.list_services_response().service_size() > 0;
    stream->WritesDone();
    grpc::Status s = stream->Finish();
    return std::make_pair(answered, s.error_code());
  };
  struct Case {
    bool tokens;
    std::string flag;  // "" leaves --reflection at its default, auto
    bool served;
  };
  // (Without tokens and flag reflection is on: ReflectionListsAndDescribesTheService.)
  for (const Case& c :
       {Case{true, "", false}, Case{true, "--reflection=on", true}, Case{false, "--reflection=off", false}}) {
    std::vector<std::string> args = {"--model-repository=" + DemoRepository()};
    if (c.tokens) args.push_back("--auth-token-file=" + pki.Path("tokens"));
    if (!c.flag.empty()) args.push_back(c.flag);
    auto server = ServerProcess::Start(args);
    ASSERT_NE(server, nullptr);
    auto [answered, code] = list_services(server->address());
    EXPECT_EQ(answered, c.served) << c.tokens << " " << c.flag;
    EXPECT_EQ(code, c.served ? grpc::StatusCode::OK : grpc::StatusCode::UNIMPLEMENTED) << c.tokens << " " << c.flag;
    EXPECT_EQ(server->Stop(), 0);
  }
}

TEST(Security, AdminRpcsCanBeDisabled) {
  auto server = ServerProcess::Start({"--model-repository=" + DemoRepository(), "--disable-admin"});
  ASSERT_NE(server, nullptr);
  auto stub = v1::InferenceService::NewStub(grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  v1::UnloadModelRequest unload;
  unload.set_model("mlp");
  v1::UnloadModelResponse resp;
  EXPECT_EQ(stub->UnloadModel(&ctx, unload, &resp).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  grpc::ClientContext load_ctx;
  v1::LoadModelRequest load;
  load.set_model("embed");
  v1::LoadModelResponse loaded;
  grpc::Status s = stub->LoadModel(&load_ctx, load, &loaded);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(s.error_message().find("disable"), std::string::npos) << s.error_message();
  EXPECT_TRUE(ListDevicesWith(*stub).ok());
  stub.reset();
  EXPECT_EQ(server->Stop(), 0);
}

// Faults in the model repository: a corrupt file fails alone and a fixed
// file then loads; a model deleted while loaded keeps serving from memory.

}  // namespace
}  // namespace infergate::testing
