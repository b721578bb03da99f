# Read by ctest (not cmake) after a test binary's discovered tests: MONOFLOW_TESTS lists them.
# What each property is for: tests/CMakeLists.txt.
foreach(test IN LISTS MONOFLOW_TESTS)
  set_tests_properties("${test}" PROPERTIES
                       ENVIRONMENT "MONOFLOW_SOURCE_DIR=${MONOFLOW_SOURCE_DIR};OMP_NUM_THREADS=2")
  if(test MATCHES "^[^.]*Nccl[./]")
    set_tests_properties("${test}" PROPERTIES RUN_SERIAL TRUE)
  elseif(test MATCHES "^[^.]*(Cuda|Gpu)[./]")
    set_tests_properties("${test}" PROPERTIES RESOURCE_LOCK gpu)
  endif()
endforeach()
