# SharedMemory service tests (included from tests/service/CMakeLists.txt):
# integration tests against the real maskd binary, one binary per topic
# (regions, StepInRegion, faults, ownership; fixture in shm_test_util.h), and
# a GPU round trip through the server (label "gpu", CUDA builds only; skips
# without a GPU).
foreach(name shm_regions_test shm_step_test shm_faults_test shm_ownership_test)
  maskd_add_test(${name}
    SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/${name}.cc
            ${CMAKE_CURRENT_SOURCE_DIR}/server_harness.cc
    LIBS maskd_shm_client maskd_kernels nlohmann_json::nlohmann_json absl::strings TIMEOUT 300)
  add_dependencies(${name} maskd)
endforeach()
add_dependencies(shm_step_test maskctl)  # maskctl shm-demo
add_dependencies(shm_ownership_test shm_peer_child)
# One SharedMemory call as another uid (the test forks, setuid, execs it).
add_executable(shm_peer_child ${CMAKE_CURRENT_SOURCE_DIR}/shm_peer_child.cc)
target_compile_options(shm_peer_child PRIVATE ${MASKD_WARNINGS})
target_link_libraries(shm_peer_child PRIVATE maskd_shm_client)
if(MASKD_HAVE_CUDA)
  maskd_add_test(shm_service_gpu_test
    SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/shm_service_gpu_test.cc
            ${CMAKE_CURRENT_SOURCE_DIR}/server_harness.cc
    LIBS maskd_shm_client maskd_kernels CUDA::cudart absl::strings LABELS gpu TIMEOUT 300)
  add_dependencies(shm_service_gpu_test maskd)
  set_tests_properties(shm_service_gpu_test PROPERTIES SKIP_REGULAR_EXPRESSION "no CUDA GPU visible")
endif()
