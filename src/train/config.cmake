# monoflow_config: the run configuration (YAML <-> typed structs). No LibTorch: compiles fast.
add_library(monoflow_config STATIC
  ${CMAKE_CURRENT_LIST_DIR}/config_schema.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config_io.cpp)
target_include_directories(monoflow_config PUBLIC ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(monoflow_config PUBLIC monoflow_common ${MONOFLOW_YAML_TARGET})
