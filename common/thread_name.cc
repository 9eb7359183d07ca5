#include "common/thread_name.h"

#include <pthread.h>

namespace infergate {

void NameThisThread(absl::string_view name) {
  const std::string cut(name.substr(0, kMaxThreadNameBytes));
  pthread_setname_np(pthread_self(), cut.c_str());
}

std::string ThisThreadName() {
  char name[kMaxThreadNameBytes + 1] = {};
  if (pthread_getname_np(pthread_self(), name, sizeof(name)) != 0) return "";
  return name;
}

}  // namespace infergate
