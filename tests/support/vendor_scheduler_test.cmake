# hami_add_vendor_scheduler_test(NAME <target> SOURCE <file.cc>)
# A test binary that runs the real hami-scheduler on the chart's device-config.yaml through
# tests/support/vendor_scheduler.h; built only where the scheduler and the sim API server are.
function(hami_add_vendor_scheduler_test)
  cmake_parse_arguments(ARG "" "NAME;SOURCE" "" ${ARGN})
  if(NOT (TARGET hami-scheduler AND TARGET hami_sim_apiserver))
    return()
  endif()
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
  add_executable(${ARG_NAME} ${ARG_SOURCE})
  target_link_libraries(${ARG_NAME} PRIVATE hami_scheduler hami_sim_apiserver yaml-cpp
    PkgConfig::HTTPLIB GTest::gtest_main)
  target_include_directories(${ARG_NAME} PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/tests
    ${CMAKE_SOURCE_DIR}/tests/scheduler)
  hami_test_paths(${ARG_NAME}
    "HAMI_SCHEDULER_BIN=$<TARGET_FILE:hami-scheduler>"
    "HAMI_HELM_BIN=${CMAKE_SOURCE_DIR}/.tools/bin/helm"
    "HAMI_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
  add_dependencies(${ARG_NAME} hami-scheduler)
  set_target_properties(${ARG_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  gtest_discover_tests(${ARG_NAME} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
    PROPERTIES LABELS unit DISCOVERY_TIMEOUT 60)
endfunction()
