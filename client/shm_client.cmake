# maskd_shm_client: typed client of the SharedMemory RPCs (client/shm_client.h)
# plus the POSIX-segment and CUDA-IPC-export helpers of maskd_shm. Build tree
# only: it is NOT in the installed maskd package (maskdTargets), because it
# links maskd_shm (and cudart in CUDA builds), which are not installed.
add_library(maskd_shm_client STATIC ${CMAKE_CURRENT_SOURCE_DIR}/shm_client.cc)
target_compile_options(maskd_shm_client PRIVATE ${MASKD_WARNINGS})
target_link_libraries(maskd_shm_client PUBLIC maskd_client maskd_shm maskd_proto
                      absl::status absl::statusor absl::time)
