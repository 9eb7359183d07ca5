// A stand-in for libnvidia-ml.so with two GPUs, so the NVML loader's
// "library present" path runs on machines without NVIDIA hardware.
#include <cstring>

extern "C" {
struct nvmlDevice_st {
  int index;
};
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
static nvmlDevice_st g_devices[2] = {{0}, {1}};
static int g_inits = 0;
static unsigned long long g_used[2] = {1ull << 30, 2ull << 30};

// For the tests: how many times nvmlInit_v2 ran, and device i's memory in
// use from now on.
int fake_nvml_inits() { return g_inits; }
void fake_nvml_set_used(unsigned int i, unsigned long long used) { g_used[i % 2] = used; }

int nvmlInit_v2() { return ++g_inits > 0 ? 0 : 1; }
int nvmlShutdown() { return 0; }
int nvmlDeviceGetCount_v2(unsigned int* n) {
  *n = 2;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_st** d) {
  if (i >= 2) return 2;
  *d = &g_devices[i];
  return 0;
}
int nvmlDeviceGetName(nvmlDevice_st* d, char* buf, unsigned int len) {
  const char* name = d->index == 0 ? "Fake A100-SXM4-40GB" : "Fake Tesla T4";
  std::strncpy(buf, name, len);
  return 0;
}
int nvmlDeviceGetMemoryInfo(nvmlDevice_st* d, nvmlMemory_t* m) {
  m->total = d->index == 0 ? 40ull << 30 : 16ull << 30;
  m->used = g_used[d->index];
  m->free = m->total - m->used;
  return 0;
}
int nvmlDeviceGetCudaComputeCapability(nvmlDevice_st* d, int* major, int* minor) {
  *major = d->index == 0 ? 8 : 7;
  *minor = d->index == 0 ? 0 : 5;
  return 0;
}
}
