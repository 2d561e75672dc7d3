# Included from src/CMakeLists.txt: the built-in agent loop (turns, budgets, condensing, trajectories, resume),
# the submission records and final-submission policy, and external agent commands. It drives the model
# providers, so it is built only with libcurl (D2K_WITH_STORE_AND_HTTP); `d2k agent` says so otherwise.
if(D2K_WITH_STORE_AND_HTTP)
  add_library(d2k_agent_loop STATIC
    ${CMAKE_CURRENT_LIST_DIR}/trajectory.cpp
    ${CMAKE_CURRENT_LIST_DIR}/submissions.cpp
    ${CMAKE_CURRENT_LIST_DIR}/condense.cpp
    ${CMAKE_CURRENT_LIST_DIR}/agent_loop.cpp
    ${CMAKE_CURRENT_LIST_DIR}/external_agent.cpp
  )
  target_include_directories(d2k_agent_loop PUBLIC "${PROJECT_SOURCE_DIR}/src")
  target_link_libraries(d2k_agent_loop PUBLIC d2k_providers d2k_tools)
  target_link_libraries(d2k_cli PUBLIC d2k_agent_loop)
  target_compile_definitions(d2k_cli PRIVATE D2K_WITH_AGENT_LOOP=1)
endif()
