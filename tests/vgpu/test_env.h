// Paths of the artefacts the vgpu tests drive (from the ctest environment, with build-time
// defaults so the test binary also runs by hand).
#ifndef HAMI_TESTS_VGPU_TEST_ENV_H_
#define HAMI_TESTS_VGPU_TEST_ENV_H_

#include <cstdlib>
#include <string>

namespace hami::vgpu::testing {

inline std::string LibPath() { return VGPU_LIB_FILE; }
inline std::string AppPath() { return VGPU_APP_FILE; }
inline std::string FakesDir() {
  const char* dir = std::getenv("VGPU_FAKES_DIR");
  return dir ? dir : VGPU_FAKES_DIR_DEFAULT;
}

}  // namespace hami::vgpu::testing

#endif  // HAMI_TESTS_VGPU_TEST_ENV_H_
