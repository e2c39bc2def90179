// Table-driven checks that device-config.yaml texts are refused with exactly the expected message
// (the YAML path of the field and the value), shared by the scheduler-section tests and each
// vendor's section tests.
#ifndef HAMI_TESTS_SUPPORT_CONFIG_ERRORS_H_
#define HAMI_TESTS_SUPPORT_CONFIG_ERRORS_H_

#include <initializer_list>

#include <gtest/gtest.h>

#include "device/config.h"

namespace hami::device::testing {

struct ConfigErrorCase {
  const char* yaml;
  const char* want;
};

inline void ExpectConfigErrors(std::initializer_list<ConfigErrorCase> cases) {
  for (const ConfigErrorCase& c : cases) {
    auto r = LoadDeviceConfig(c.yaml);
    if (r) {
      ADD_FAILURE() << "accepted: " << c.yaml;
      continue;
    }
    EXPECT_EQ(r.error(), c.want) << c.yaml;
  }
}

}  // namespace hami::device::testing

#endif  // HAMI_TESTS_SUPPORT_CONFIG_ERRORS_H_
