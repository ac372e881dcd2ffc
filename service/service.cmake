# maskd_service: the gRPC-free core of the sidecar (tokenizer registry, index
# cache, session table, metrics) plus the thin gRPC service class; `maskd`: the
# server binary (build/bin/maskd).
add_library(maskd_service STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/checked_request.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/client_identity.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/client_label.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/client_shares.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/constraint_request.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/fd_headroom.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/index_cache.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/listener.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/log.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/maskd_service.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/metrics.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/peer_credentials.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/relay.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/session_table.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/step_batch.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/step_stream.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/this_thread.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer_registry.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/work_pool.cc)
target_compile_options(maskd_service PRIVATE ${MASKD_WARNINGS})
target_link_libraries(maskd_service
  PUBLIC maskd_constraint maskd_index maskd_proto prometheus-cpp::core absl::flat_hash_map absl::synchronization
         absl::status absl::statusor absl::time absl::function_ref absl::span
  PRIVATE OpenSSL::Crypto)

# maskd's start-up pieces besides main.cc: its flags read into ServerConfig,
# and the transport (listeners, relay, gRPC's private TLS socket).
add_library(maskd_server STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/server_config.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/server_transport.cc)
target_compile_options(maskd_server PRIVATE ${MASKD_WARNINGS})
target_compile_definitions(maskd_server PRIVATE
  MASKD_VERSION="${PROJECT_VERSION}"
  MASKD_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
target_link_libraries(maskd_server PUBLIC maskd_service
  absl::flags absl::flags_parse absl::flags_usage absl::str_format)

add_executable(maskd ${CMAKE_CURRENT_SOURCE_DIR}/main.cc)
target_compile_options(maskd PRIVATE ${MASKD_WARNINGS})
target_compile_definitions(maskd PRIVATE MASKD_VERSION="${PROJECT_VERSION}")
target_link_libraries(maskd PRIVATE maskd_server prometheus-cpp::pull gRPC::grpc++_reflection)

include(GNUInstallDirs)
install(TARGETS maskd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT maskd_server)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/data/tokenizers
        DESTINATION ${CMAKE_INSTALL_DATADIR}/maskd COMPONENT maskd_server)

# Shared-memory service (SharedMemory RPCs): see shm_service.cmake.
include(${CMAKE_CURRENT_SOURCE_DIR}/shm_service.cmake)
