# monoflow_distributed: c10d process groups (NCCL with CUDA, Gloo on CPU).
# LibTorch ships Gloo's compiled code but not its headers; Debian's libgloo-dev supplies them.
find_path(GLOO_INCLUDE_DIR gloo/algorithm.h)
find_path(NCCL_INCLUDE_DIR nccl.h
          HINTS ${CUDAToolkit_INCLUDE_DIRS} "${MONOFLOW_TORCH_PREFIX}/../../../nvidia/nccl/include")
add_library(monoflow_distributed STATIC ${CMAKE_CURRENT_LIST_DIR}/distributed.cpp
            ${CMAKE_CURRENT_LIST_DIR}/gradient_reducer.cpp)
target_include_directories(monoflow_distributed PUBLIC ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(monoflow_distributed PUBLIC monoflow_common ${TORCH_LIBRARIES})
if(GLOO_INCLUDE_DIR)
  target_include_directories(monoflow_distributed SYSTEM PRIVATE ${GLOO_INCLUDE_DIR})
  target_compile_definitions(monoflow_distributed PRIVATE MONOFLOW_HAS_GLOO USE_C10D_GLOO)
endif()
if(MONOFLOW_CUDA_ENABLED AND NCCL_INCLUDE_DIR)
  target_include_directories(monoflow_distributed SYSTEM PRIVATE ${NCCL_INCLUDE_DIR})
  target_compile_definitions(monoflow_distributed PRIVATE MONOFLOW_HAS_NCCL USE_C10D_NCCL)
endif()
message(STATUS "monoflow: distributed gloo=${GLOO_INCLUDE_DIR} nccl=${NCCL_INCLUDE_DIR}")
