#include "service/auth.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace infergate {
namespace {

std::string TempFile(const std::string& text) {
  std::string path = ::testing::TempDir() + "/tokens_" + std::to_string(std::rand());
  std::ofstream(path) << text;
  return path;
}

TEST(Auth, ConstantTimeEquals) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

TEST(Auth, RolesAndCodes) {
  auto auth = TokenAuth::FromFiles(TempFile("# comment\n\ninference-token-000000\n"),
                                   TempFile("admin-token-00000000000\n"), false);
  ASSERT_TRUE(auth.ok()) << auth.status();
  using R = TokenAuth::Role;
  EXPECT_EQ(auth->Check("", R::kInference).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(auth->Check("Basic abc", R::kInference).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(auth->Check("Bearer nope-nope-nope-nope", R::kInference).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(auth->Check("Bearer inference-token-000000", R::kInference).ok());
  EXPECT_TRUE(auth->Check("Bearer admin-token-00000000000", R::kInference).ok());
  EXPECT_EQ(auth->Check("Bearer inference-token-000000", R::kAdmin).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(auth->Check("Bearer admin-token-00000000000", R::kAdmin).ok());
}

TEST(Auth, OpenByDefaultAndAdminCanBeDisabled) {
  TokenAuth open;
  EXPECT_TRUE(open.Check("", TokenAuth::Role::kAdmin).ok());
  auto closed = TokenAuth::FromFiles("", "", true);
  ASSERT_TRUE(closed.ok());
  EXPECT_TRUE(closed->Check("", TokenAuth::Role::kInference).ok());
  EXPECT_EQ(closed->Check("", TokenAuth::Role::kAdmin).code(), absl::StatusCode::kPermissionDenied);
}

TEST(Auth, BadTokenFilesNameTheFlag) {
  EXPECT_NE(TokenAuth::FromFiles("/nonexistent/tokens", "", false).status().message().find("--auth-token-file"),
            absl::string_view::npos);
  EXPECT_EQ(TokenAuth::FromFiles(TempFile("short\n"), "", false).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TokenAuth::FromFiles("", TempFile("# only a comment\n"), false).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Auth, InferenceTokensAloneCloseTheAdminRpcs) {
  auto auth = TokenAuth::FromFiles(TempFile("inference-token-000000\n"), "", false);
  ASSERT_TRUE(auth.ok()) << auth.status();
  using R = TokenAuth::Role;
  EXPECT_TRUE(auth->Check("Bearer inference-token-000000", R::kInference).ok());
  for (const char* header : {"", "Bearer inference-token-000000", "Bearer anything-at-all-0000"}) {
    absl::Status s = auth->Check(header, R::kAdmin);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << header;
    EXPECT_NE(s.message().find("--admin-token-file"), absl::string_view::npos) << s;
  }
}

}  // namespace
}  // namespace infergate
