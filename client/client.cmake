# maskd_client: the C++ client library (client/client.h), and the CMake package
# that lets another project do find_package(maskd) and link maskd::client.
#   cmake --install <build> --component maskd_client --prefix <prefix>
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

add_library(maskd_client STATIC ${CMAKE_CURRENT_SOURCE_DIR}/client.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/client_id.cc ${CMAKE_CURRENT_SOURCE_DIR}/resumable_session.cc)
set_target_properties(maskd_client PROPERTIES EXPORT_NAME client)
target_compile_options(maskd_client PRIVATE ${MASKD_WARNINGS})
target_include_directories(maskd_client PUBLIC
  $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/maskd>)
target_link_libraries(maskd_client PUBLIC maskd_proto absl::status absl::statusor absl::span absl::time
  absl::strings)
add_library(maskd::client ALIAS maskd_client)

set(MASKD_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/maskd)
install(TARGETS maskd_client maskd_proto EXPORT maskdTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT maskd_client
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT maskd_client)
install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/client.h ${CMAKE_CURRENT_SOURCE_DIR}/resumable_session.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/maskd/client COMPONENT maskd_client)
install(FILES ${MASKD_PROTO_OUT}/maskd/v1/maskd.pb.h ${MASKD_PROTO_OUT}/maskd/v1/maskd.grpc.pb.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/maskd/maskd/v1 COMPONENT maskd_client)
install(FILES ${MASKD_PROTO_OUT}/grpc/health/v1/health.pb.h
              ${MASKD_PROTO_OUT}/grpc/health/v1/health.grpc.pb.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/maskd/grpc/health/v1 COMPONENT maskd_client)
install(FILES ${CMAKE_SOURCE_DIR}/proto/maskd/v1/maskd.proto
        DESTINATION ${CMAKE_INSTALL_DATADIR}/maskd/proto/maskd/v1 COMPONENT maskd_client)
install(EXPORT maskdTargets NAMESPACE maskd:: DESTINATION ${MASKD_CMAKE_DIR}
        COMPONENT maskd_client)
configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/maskdConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/maskdConfig.cmake INSTALL_DESTINATION ${MASKD_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/maskdConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/maskdConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/maskdConfigVersion.cmake
        DESTINATION ${MASKD_CMAKE_DIR} COMPONENT maskd_client)
# SharedMemory client (build tree only): see shm_client.cmake.
include(${CMAKE_CURRENT_SOURCE_DIR}/shm_client.cmake)
