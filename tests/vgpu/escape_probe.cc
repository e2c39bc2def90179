// A library linked into driver_app between libvgpu and the fake libcuda.so.1 (load order: the
// program, libvgpu.so, this, libcuda.so.1): dlsym(RTLD_NEXT, ...) from here reaches the driver
// itself, the way an attacker's helper library would.
#include <dlfcn.h>

extern "C" void* escape_lookup_next(const char* name) {
  void* found = dlsym(RTLD_NEXT, name);
  // Keeps the call a real call: as a tail call, dlsym would see our caller's return address.
  __asm__ volatile("" ::: "memory");
  return found;
}
