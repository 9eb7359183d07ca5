#include "service/call/auth.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tests/common/scratch_dir.h"

namespace infergate {
namespace {

// A new file holding `text`, removed when the test process exits; unique
// even when CTest runs tests in parallel.
std::string TempFile(const std::string& text) { return testing::ProcessScratchDir().File("tokens_", text); }

// Replaces `path`'s content the way an operator or a CI job would: a new
// file renamed over the old one.
void Rewrite(const std::string& path, const std::string& text) {
  std::string next = path + ".next";
  std::ofstream(next) << text;
  ASSERT_EQ(std::rename(next.c_str(), path.c_str()), 0);
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
                                   TempFile("admin-token-00000000000\n"), TokenAuth::AdminAccess::kTokenOnly);
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

// Inference is open without token files; model management is not (a load
// can run native code) unless the operator opens it.
TEST(Auth, InferenceOpenByDefaultAdminOnlyWhenOpened) {
  TokenAuth plain;
  EXPECT_TRUE(plain.Check("", TokenAuth::Role::kInference).ok());
  const absl::Status refused = plain.Check("", TokenAuth::Role::kAdmin);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(refused.message().find("--open-admin-api"), std::string::npos) << refused;
  EXPECT_NE(refused.message().find("--admin-token-file"), std::string::npos) << refused;
  EXPECT_FALSE(plain.admin_open_to_anyone());

  auto opened = TokenAuth::FromFiles("", "", TokenAuth::AdminAccess::kOpen);
  ASSERT_TRUE(opened.ok());
  EXPECT_TRUE(opened->Check("", TokenAuth::Role::kAdmin).ok());
  EXPECT_TRUE(opened->admin_open_to_anyone());
  // An admin token file closes it again: the token is what counts then.
  auto with_token = TokenAuth::FromFiles("", TempFile("admin-token-00000000000\n"), TokenAuth::AdminAccess::kOpen);
  ASSERT_TRUE(with_token.ok());
  EXPECT_EQ(with_token->Check("", TokenAuth::Role::kAdmin).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(with_token->Check("Bearer admin-token-00000000000", TokenAuth::Role::kAdmin).ok());
  EXPECT_FALSE(with_token->admin_open_to_anyone());

  auto closed = TokenAuth::FromFiles("", "", TokenAuth::AdminAccess::kDisabled);
  ASSERT_TRUE(closed.ok());
  EXPECT_TRUE(closed->Check("", TokenAuth::Role::kInference).ok());
  EXPECT_EQ(closed->Check("", TokenAuth::Role::kAdmin).code(), absl::StatusCode::kPermissionDenied);
}

TEST(Auth, TheHeaderIsReadOnlyWhenARoleNeedsAToken) {
  int reads = 0;
  auto header = [&reads](absl::string_view value) {
    return [&reads, value] {
      ++reads;
      return value;
    };
  };
  TokenAuth open = *TokenAuth::FromFiles("", "", TokenAuth::AdminAccess::kOpen);
  EXPECT_TRUE(open.Check(header(""), TokenAuth::Role::kInference).ok());
  EXPECT_TRUE(open.Check(header(""), TokenAuth::Role::kAdmin).ok());
  EXPECT_EQ(reads, 0);

  auto guarded = TokenAuth::FromFiles(TempFile("inference-token-0123456789\n"), "", TokenAuth::AdminAccess::kTokenOnly);
  ASSERT_TRUE(guarded.ok());
  EXPECT_TRUE(guarded->Check(header("Bearer inference-token-0123456789"), TokenAuth::Role::kInference).ok());
  EXPECT_EQ(reads, 1);
  EXPECT_EQ(guarded->Check(header(""), TokenAuth::Role::kInference).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(reads, 2);
  // Closed by default: refused before any header is looked at.
  EXPECT_EQ(guarded->Check(header("Bearer inference-token-0123456789"), TokenAuth::Role::kAdmin).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(reads, 2);
}

TEST(Auth, BadTokenFilesNameTheFlag) {
  EXPECT_NE(TokenAuth::FromFiles("/nonexistent/tokens", "", TokenAuth::AdminAccess::kTokenOnly)
                .status()
                .message()
                .find("--auth-token-file"),
            absl::string_view::npos);
  EXPECT_EQ(TokenAuth::FromFiles(TempFile("short\n"), "", TokenAuth::AdminAccess::kTokenOnly).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      TokenAuth::FromFiles("", TempFile("# only a comment\n"), TokenAuth::AdminAccess::kTokenOnly).status().code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(Auth, InferenceTokensAloneCloseTheAdminRpcs) {
  auto auth = TokenAuth::FromFiles(TempFile("inference-token-000000\n"), "", TokenAuth::AdminAccess::kTokenOnly);
  ASSERT_TRUE(auth.ok()) << auth.status();
  using R = TokenAuth::Role;
  EXPECT_TRUE(auth->Check("Bearer inference-token-000000", R::kInference).ok());
  for (const char* header : {"", "Bearer inference-token-000000", "Bearer anything-at-all-0000"}) {
    absl::Status s = auth->Check(header, R::kAdmin);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << header;
    EXPECT_NE(s.message().find("--admin-token-file"), absl::string_view::npos) << s;
  }
}

// Rotating a token file takes effect without a restart, in every copy of
// the authenticator (each front end holds one).
TEST(Auth, ARotatedTokenFileTakesEffectWithoutARestart) {
  std::string file = TempFile("first-token-0000000000\n");
  auto auth = TokenAuth::FromFiles(file, "", TokenAuth::AdminAccess::kTokenOnly, std::chrono::milliseconds(0));
  ASSERT_TRUE(auth.ok()) << auth.status();
  TokenAuth copy = *auth;
  using R = TokenAuth::Role;
  EXPECT_TRUE(auth->Check("Bearer first-token-0000000000", R::kInference).ok());
  Rewrite(file, "second-token-000000000\n");
  EXPECT_EQ(auth->Check("Bearer first-token-0000000000", R::kInference).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(auth->Check("Bearer second-token-000000000", R::kInference).ok());
  EXPECT_TRUE(copy.Check("Bearer second-token-000000000", R::kInference).ok());
}

// A Kubernetes Secret volume updates by swapping the `..data` symlink the
// file's own symlink goes through.
TEST(Auth, ASecretVolumeSymlinkSwapIsSeen) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(TempFile("")).string() + ".secret";
  fs::create_directories(dir / "v1");
  fs::create_directories(dir / "v2");
  std::ofstream(dir / "v1" / "token") << "old-secret-token-000000\n";
  std::ofstream(dir / "v2" / "token") << "new-secret-token-000000\n";
  fs::create_directory_symlink("v1", dir / "..data");
  fs::create_symlink("..data/token", dir / "token");
  auto auth = TokenAuth::FromFiles((dir / "token").string(), "", TokenAuth::AdminAccess::kTokenOnly,
                                   std::chrono::milliseconds(0));
  ASSERT_TRUE(auth.ok()) << auth.status();
  using R = TokenAuth::Role;
  EXPECT_TRUE(auth->Check("Bearer old-secret-token-000000", R::kInference).ok());
  fs::create_directory_symlink("v2", dir / "..data_tmp");
  fs::rename(dir / "..data_tmp", dir / "..data");
  EXPECT_TRUE(auth->Check("Bearer new-secret-token-000000", R::kInference).ok());
  EXPECT_FALSE(auth->Check("Bearer old-secret-token-000000", R::kInference).ok());
  fs::remove_all(dir);
}

// The file is the truth: emptied or deleted, it revokes every token it held
// (the role stays closed, never opens); a line too short to be a token is
// skipped, and the file's other tokens still work.
TEST(Auth, AnEmptiedOrDeletedFileRevokesItsTokensAndBadLinesAreSkipped) {
  std::string file = TempFile("steady-token-0000000000\n");
  auto auth = TokenAuth::FromFiles(file, "", TokenAuth::AdminAccess::kTokenOnly, std::chrono::milliseconds(0));
  ASSERT_TRUE(auth.ok()) << auth.status();
  using R = TokenAuth::Role;
  EXPECT_TRUE(auth->Check("Bearer steady-token-0000000000", R::kInference).ok());
  Rewrite(file, "# nothing here now\n");
  absl::Status s = auth->Check("Bearer steady-token-0000000000", R::kInference);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(s.message().find("--auth-token-file holds none"), absl::string_view::npos) << s;
  EXPECT_EQ(auth->Check("", R::kInference).code(), absl::StatusCode::kUnauthenticated) << "revoked is not open";
  Rewrite(file, "short\nsecond-token-000000000\n");
  EXPECT_TRUE(auth->Check("Bearer second-token-000000000", R::kInference).ok()) << "one bad line spoils nothing";
  std::filesystem::remove(file);
  EXPECT_EQ(auth->Check("Bearer second-token-000000000", R::kInference).code(), absl::StatusCode::kUnauthenticated);
  Rewrite(file, "fixed-token-00000000000\n");
  EXPECT_TRUE(auth->Check("Bearer fixed-token-00000000000", R::kInference).ok());
}

// The scheme is matched without regard to case (RFC 7235); the token is not.
TEST(Auth, TheBearerSchemeIsCaseInsensitive) {
  auto auth = TokenAuth::FromFiles(TempFile("Case-Sensitive-Token-00\n"), "", TokenAuth::AdminAccess::kTokenOnly);
  ASSERT_TRUE(auth.ok()) << auth.status();
  using R = TokenAuth::Role;
  for (const char* header : {"Bearer Case-Sensitive-Token-00", "bearer Case-Sensitive-Token-00",
                             "BEARER Case-Sensitive-Token-00", "bEaReR Case-Sensitive-Token-00"}) {
    EXPECT_TRUE(auth->Check(header, R::kInference).ok()) << header;
  }
  EXPECT_FALSE(auth->Check("Bearer case-sensitive-token-00", R::kInference).ok());
  EXPECT_FALSE(auth->Check("Basic Case-Sensitive-Token-00", R::kInference).ok());
}

// What the start-up warning names as open to anyone.
TEST(Auth, WhatIsOpenToAnyoneIsNamed) {
  const std::string token = TempFile("some-token-000000000000\n");
  EXPECT_EQ(TokenAuth::FromFiles("", "", TokenAuth::AdminAccess::kOpen)->OpenToAnyone(),
            "inference and model management (load, unload, uploads)");
  EXPECT_EQ(TokenAuth::FromFiles("", "", TokenAuth::AdminAccess::kTokenOnly)->OpenToAnyone(), "inference");
  EXPECT_EQ(TokenAuth::FromFiles(token, "", TokenAuth::AdminAccess::kOpen)->OpenToAnyone(),
            "model management (load, unload, uploads)");
  EXPECT_EQ(TokenAuth::FromFiles("", "", TokenAuth::AdminAccess::kDisabled)->OpenToAnyone(), "inference");
  EXPECT_EQ(TokenAuth::FromFiles("", token, TokenAuth::AdminAccess::kTokenOnly)->OpenToAnyone(), "inference")
      << "only an admin token";
  EXPECT_EQ(TokenAuth::FromFiles(token, "", TokenAuth::AdminAccess::kTokenOnly)->OpenToAnyone(), "");
  EXPECT_EQ(TokenAuth::FromFiles(token, token, TokenAuth::AdminAccess::kTokenOnly)->OpenToAnyone(), "");
}

// Files are looked at no more often than the interval.
TEST(Auth, FilesAreCheckedAtMostOncePerInterval) {
  std::string file = TempFile("first-token-0000000000\n");
  auto auth = TokenAuth::FromFiles(file, "", TokenAuth::AdminAccess::kTokenOnly, std::chrono::hours(1));
  ASSERT_TRUE(auth.ok()) << auth.status();
  Rewrite(file, "second-token-000000000\n");
  EXPECT_TRUE(auth->Check("Bearer first-token-0000000000", TokenAuth::Role::kInference).ok());
}

}  // namespace
}  // namespace infergate
