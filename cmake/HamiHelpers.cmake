# Helpers shared by every module's CMakeLists.txt.

# hami_add_module_tests(NAME <module> LIBS <libs...> [LABEL <label>])
# Builds every *_test.cc in the current directory into one test binary `<module>_test`, and
# registers each GoogleTest case with ctest under the label LABEL (default "unit").
function(hami_add_module_tests)
  cmake_parse_arguments(ARG "" "NAME;LABEL" "LIBS" ${ARGN})
  if(NOT ARG_LABEL)
    set(ARG_LABEL unit)
  endif()
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*_test.cc)
  if(NOT sources)
    return()
  endif()
  add_executable(${ARG_NAME}_test ${sources})
  target_link_libraries(${ARG_NAME}_test PRIVATE ${ARG_LIBS} GTest::gtest_main GTest::gmock)
  # Shared test support: #include "support/<name>.h" (tests/support/).
  target_include_directories(${ARG_NAME}_test PRIVATE ${CMAKE_SOURCE_DIR}/tests)
  set_target_properties(${ARG_NAME}_test PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                                                    ${CMAKE_BINARY_DIR}/tests)
  gtest_discover_tests(${ARG_NAME}_test
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
    PROPERTIES LABELS ${ARG_LABEL}
    DISCOVERY_TIMEOUT 60)
endfunction()

# hami_add_fuzzers(LIBS <libs...>)
# Each *_fuzz.cc in the current directory becomes a libFuzzer binary and a ctest test (label
# "fuzz") that runs it for $HAMI_FUZZ_SECONDS (default 8) seconds and fails on any finding.
function(hami_add_fuzzers)
  cmake_parse_arguments(ARG "" "" "LIBS" ${ARGN})
  if(NOT HAMI_FUZZ)
    return()
  endif()
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*_fuzz.cc)
  foreach(src ${sources})
    get_filename_component(name ${src} NAME_WE)
    add_executable(${name} ${src})
    target_link_libraries(${name} PRIVATE ${ARG_LIBS})
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
    set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz)
    set(corpus ${CMAKE_CURRENT_SOURCE_DIR}/corpus/${name})
    add_test(NAME fuzz.${name}
      COMMAND ${CMAKE_SOURCE_DIR}/scripts/run-fuzzer $<TARGET_FILE:${name}> ${corpus}
              ${CMAKE_BINARY_DIR}/fuzz-work/${name})
    set_tests_properties(fuzz.${name} PROPERTIES LABELS fuzz TIMEOUT 300)
  endforeach()
endfunction()
