# hami_add_vendor_scheduler_test(SOURCE <file.cc>)
# A vendor's test that runs the real hami-scheduler on the chart's device-config.yaml through
# tests/support/vendor_scheduler.h. Every vendor's such file goes into one binary,
# device_vendor_scheduler_test, compiled as one unity source: the fixture's headers (JSON, YAML,
# HTTP, gtest, the sim API server) are parsed and their templates instantiated once instead of
# once per vendor (issue 31 item 1). tests/device/CMakeLists.txt makes the target
# (hami_vendor_scheduler_test_target) after the vendor folders.
function(hami_add_vendor_scheduler_test)
  cmake_parse_arguments(ARG "" "SOURCE" "" ${ARGN})
  set_property(GLOBAL APPEND PROPERTY HAMI_VENDOR_SCHEDULER_SOURCES
    ${CMAKE_CURRENT_SOURCE_DIR}/${ARG_SOURCE})
endfunction()

# Built only where the scheduler and the sim API server are.
function(hami_vendor_scheduler_test_target)
  get_property(sources GLOBAL PROPERTY HAMI_VENDOR_SCHEDULER_SOURCES)
  if(NOT sources OR NOT (TARGET hami-scheduler AND TARGET hami_sim_apiserver))
    return()
  endif()
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
  set(name device_vendor_scheduler_test)
  add_executable(${name} ${sources})
  # The vendors' files define nothing at namespace scope outside their own namespaces.
  set_target_properties(${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 0
    RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests HAMI_UNIT_TEST ON)
  target_link_libraries(${name} PRIVATE hami_scheduler hami_sim_apiserver yaml-cpp
    PkgConfig::HTTPLIB GTest::gtest_main)
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/tests
    ${CMAKE_SOURCE_DIR}/tests/scheduler)
  hami_test_paths(${name}
    "HAMI_SCHEDULER_BIN=$<TARGET_FILE:hami-scheduler>"
    "HAMI_HELM_BIN=${CMAKE_SOURCE_DIR}/.tools/bin/helm"
    "HAMI_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
  add_dependencies(${name} hami-scheduler)
  gtest_discover_tests(${name} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
    PROPERTIES LABELS unit DISCOVERY_TIMEOUT 60)
endfunction()
