# maskd_shm_service: the SharedMemory gRPC service (service/shm_service.*,
# proto/maskd/v1/shm.proto), linked into the maskd binary. Included from
# service.cmake after the maskd target.
set(MASKD_SHM_SERVICE_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/shm_service.cc)
if(MASKD_HAVE_CUDA AND TARGET maskd_kernels_cuda)
  list(APPEND MASKD_SHM_SERVICE_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/shm_cuda.cc)
else()
  list(APPEND MASKD_SHM_SERVICE_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/shm_cuda_stub.cc)
endif()
add_library(maskd_shm_service STATIC ${MASKD_SHM_SERVICE_SOURCES})
target_compile_options(maskd_shm_service PRIVATE ${MASKD_WARNINGS})
target_link_libraries(maskd_shm_service
  PUBLIC maskd_service maskd_shm maskd_kernels maskd_proto absl::status absl::statusor absl::span
  PRIVATE absl::strings)
if(MASKD_HAVE_CUDA AND TARGET maskd_kernels_cuda)
  target_link_libraries(maskd_shm_service PRIVATE maskd_kernels_cuda CUDA::cudart)
endif()
target_link_libraries(maskd PRIVATE maskd_shm_service)
