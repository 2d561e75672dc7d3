# Included from src/CMakeLists.txt: campaigns (`d2k campaign run|merge|status`, docs/CAMPAIGNS.md): the campaign
# file, the runner of agent runs as child processes, the GPU lock for shared GPUs, and merging shard stores. It
# needs the store (SQLite) and the agent loop, so it is built only with D2K_WITH_STORE_AND_HTTP; the verb says so
# otherwise.
target_sources(d2k_cli PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../cli/verbs/campaign.cpp)
if(D2K_WITH_STORE_AND_HTTP)
  add_library(d2k_campaign STATIC
    ${CMAKE_CURRENT_LIST_DIR}/config.cpp
    ${CMAKE_CURRENT_LIST_DIR}/gpu_lock.cpp
    ${CMAKE_CURRENT_LIST_DIR}/runner.cpp
    ${CMAKE_CURRENT_LIST_DIR}/merge.cpp
  )
  target_include_directories(d2k_campaign PUBLIC "${PROJECT_SOURCE_DIR}/src")
  target_link_libraries(d2k_campaign PUBLIC d2k_agent_loop d2k_store d2k_core)
  target_link_libraries(d2k_cli PUBLIC d2k_campaign)
  target_compile_definitions(d2k_cli PRIVATE D2K_WITH_CAMPAIGN=1)
endif()
