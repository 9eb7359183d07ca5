#pragma once
// What a client may read of the server's own text. Error messages and
// model states reach anyone who may call inference (statuses, REST error
// bodies, RepositoryIndex and ModelReady reasons), and some of that text
// comes from LibTorch and the file system: a c10::Error's message carries
// the native back-trace with code addresses ("frame #3: ... 0x7f..."),
// and a failed file names its absolute path. ForClients cuts a back-trace
// off, writes code addresses as "0x?", and writes paths under the
// server's private folders (the model repository, its working folders) as
// relative to them. The edges apply it to everything they send.
//
// Threading: RegisterPrivateFolder and ForClients may run on any thread.

#include <string>

#include "absl/strings/string_view.h"

namespace infergate {

// Text under `folder` (an absolute path) is written relative to it from
// now on ("/srv/models/mlp/1/model.pt" -> "mlp/1/model.pt").
void RegisterPrivateFolder(const std::string& folder);

// `message` as a client may read it (see above).
std::string ForClients(absl::string_view message);

}  // namespace infergate
