# Included from src/CMakeLists.txt: scores (pure), reports, and — with SQLite — the campaign store; the verbs
# `d2k score`, `d2k report` and `d2k store`; and the score/report benchmark (bench/score_report.cpp).
add_library(d2k_score STATIC
  ${CMAKE_CURRENT_LIST_DIR}/../score/score.cpp
  ${CMAKE_CURRENT_LIST_DIR}/../report/report.cpp
)
target_include_directories(d2k_score PUBLIC "${PROJECT_SOURCE_DIR}/src")
target_link_libraries(d2k_score PUBLIC nlohmann_json::nlohmann_json fmt::fmt)

target_sources(d2k_cli PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/../cli/verbs/score.cpp
  ${CMAKE_CURRENT_LIST_DIR}/../cli/verbs/report.cpp
  ${CMAKE_CURRENT_LIST_DIR}/../cli/verbs/store.cpp
)
if(D2K_WITH_STORE_AND_HTTP)
  add_library(d2k_store STATIC
    ${CMAKE_CURRENT_LIST_DIR}/store.cpp
    ${CMAKE_CURRENT_LIST_DIR}/synth.cpp
  )
  target_include_directories(d2k_store PUBLIC "${PROJECT_SOURCE_DIR}/src")
  target_link_libraries(d2k_store PUBLIC d2k_score SQLite::SQLite3)
  target_link_libraries(d2k_cli PUBLIC d2k_store)
  target_compile_definitions(d2k_cli PRIVATE D2K_HAVE_STORE=1)

  add_executable(d2k_bench_score_report ${PROJECT_SOURCE_DIR}/bench/score_report.cpp)
  target_link_libraries(d2k_bench_score_report PRIVATE d2k_store)
  set_target_properties(d2k_bench_score_report PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/bench")
else()
  target_link_libraries(d2k_cli PUBLIC d2k_score)
endif()
