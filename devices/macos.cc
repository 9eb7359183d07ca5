#include "devices/macos.h"

#if defined(__APPLE__)
#include <sys/sysctl.h>

#include <cstdlib>
#endif

namespace infergate {

int MacosMajorVersion() {
#if defined(__APPLE__)
  char buf[32] = {0};
  size_t len = sizeof(buf) - 1;
  if (sysctlbyname("kern.osproductversion", buf, &len, nullptr, 0) == 0) return std::atoi(buf);
#endif
  return 0;
}

}  // namespace infergate
