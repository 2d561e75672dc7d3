# Included from src/CMakeLists.txt when D2K_WITH_STORE_AND_HTTP is on: the model registry and providers.
add_library(d2k_providers STATIC
  ${CMAKE_CURRENT_LIST_DIR}/model_registry.cpp
  ${CMAKE_CURRENT_LIST_DIR}/conversation.cpp
  ${CMAKE_CURRENT_LIST_DIR}/curl_http_client.cpp
  ${CMAKE_CURRENT_LIST_DIR}/wire_common.cpp
  ${CMAKE_CURRENT_LIST_DIR}/provider.cpp
  ${CMAKE_CURRENT_LIST_DIR}/openai_provider.cpp
  ${CMAKE_CURRENT_LIST_DIR}/anthropic_provider.cpp
)
target_include_directories(d2k_providers PUBLIC "${PROJECT_SOURCE_DIR}/src")
target_link_libraries(d2k_providers PUBLIC d2k_core CURL::libcurl Threads::Threads)
