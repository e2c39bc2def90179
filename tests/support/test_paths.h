// Run-time paths of the test binaries (cmake/HamiHelpers.cmake, hami_test_paths): each is a
// char array defined in one generated file per target, so that the compile line of every other
// file of the target is the same in every checkout and ccache hits in a fresh clone. A test
// names them through the macros its target defines (HAMI_SIM_BIN -> hami_test_path_HAMI_SIM_BIN)
// and uses them as const char*. This file is force-included (-include) in those targets.
#ifndef HAMI_TESTS_SUPPORT_TEST_PATHS_H_
#define HAMI_TESTS_SUPPORT_TEST_PATHS_H_

#ifdef __cplusplus
extern "C" {
#endif
extern const char hami_test_path_HAMI_SIM_BIN[];
extern const char hami_test_path_HAMI_SCHEDULER_BIN[];
extern const char hami_test_path_HAMI_DEVICE_PLUGIN_BIN[];
extern const char hami_test_path_HAMI_DRA_PLUGIN_BIN[];
extern const char hami_test_path_HAMI_VGPU_MONITOR_BIN[];
extern const char hami_test_path_HAMI_FAKE_NVML_PATH[];
extern const char hami_test_path_HAMI_FAKE_NVML_DIR[];
extern const char hami_test_path_HAMI_EXAMPLES_DIR[];
extern const char hami_test_path_HAMI_DASHBOARD_JSON[];
extern const char hami_test_path_HAMI_HELM_BIN[];
extern const char hami_test_path_HAMI_SOURCE_DIR[];
extern const char hami_test_path_VGPU_LIB_FILE[];
extern const char hami_test_path_VGPU_APP_FILE[];
extern const char hami_test_path_VGPU_MEM_APP_FILE[];
extern const char hami_test_path_VGPU_DATA_DIR[];
extern const char hami_test_path_VGPU_FAKES_DIR_DEFAULT[];
extern const char hami_test_path_VGPU_FAKES_DIR[];
#ifdef __cplusplus
}
#endif

#endif  // HAMI_TESTS_SUPPORT_TEST_PATHS_H_
