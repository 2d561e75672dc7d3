# Included from tests/CMakeLists.txt when D2K_WITH_STORE_AND_HTTP is on: the model registry and providers,
# tested against a scripted fake model server on loopback (unit/provider_fake_server.hpp).
add_executable(d2k_provider_tests
  ${CMAKE_CURRENT_LIST_DIR}/unit/provider_registry_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/unit/provider_retry_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/unit/provider_openai_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/unit/provider_anthropic_test.cpp
)
target_include_directories(d2k_provider_tests PRIVATE "${CMAKE_CURRENT_LIST_DIR}")
target_link_libraries(d2k_provider_tests PRIVATE d2k_providers GTest::gtest GTest::gtest_main)
target_compile_definitions(d2k_provider_tests PRIVATE D2K_TEST_FIXTURES="${CMAKE_CURRENT_LIST_DIR}/fixtures")
include(GoogleTest)
gtest_discover_tests(d2k_provider_tests DISCOVERY_TIMEOUT 60)
