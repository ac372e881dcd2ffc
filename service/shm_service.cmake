# maskd_shm_service: the SharedMemory gRPC service (service/shm_service.*,
# proto/maskd/v1/shm.proto), linked into the maskd binary. Included from
# service.cmake after the maskd target.
add_library(maskd_shm_service STATIC ${CMAKE_CURRENT_SOURCE_DIR}/shm_service.cc)
target_compile_options(maskd_shm_service PRIVATE ${MASKD_WARNINGS})
target_link_libraries(maskd_shm_service
  PUBLIC maskd_service maskd_shm maskd_kernels maskd_shm_cuda maskd_proto absl::status
         absl::statusor absl::span
  PRIVATE absl::strings)
target_link_libraries(maskd PRIVATE maskd_shm_service)
