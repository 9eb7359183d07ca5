#pragma once
// The macOS major version (bf16 on MPS needs 14+); 0 on other systems.

namespace infergate {
int MacosMajorVersion();
}  // namespace infergate
