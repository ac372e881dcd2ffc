# maskd_proto: C++ messages and gRPC stubs for maskd.v1 (and the client half of
# grpc.health.v1, which Debian's gRPC does not ship), generated into the build tree.
set(MASKD_PROTO_OUT ${CMAKE_BINARY_DIR}/proto_gen)
set(MASKD_PROTOS maskd/v1/maskd.proto maskd/v1/shm.proto grpc/health/v1/health.proto)
file(MAKE_DIRECTORY ${MASKD_PROTO_OUT})
if(TARGET gRPC::grpc_cpp_plugin)
  set(MASKD_GRPC_PLUGIN $<TARGET_FILE:gRPC::grpc_cpp_plugin>)
else()
  find_program(MASKD_GRPC_PLUGIN grpc_cpp_plugin REQUIRED)
endif()
if(TARGET protobuf::protoc)
  set(MASKD_PROTOC $<TARGET_FILE:protobuf::protoc>)
else()
  find_program(MASKD_PROTOC protoc REQUIRED)
endif()

set(MASKD_PROTO_SRCS)
set(MASKD_PROTO_HDRS)
foreach(p ${MASKD_PROTOS})
  string(REGEX REPLACE "\\.proto$" "" stem ${p})
  set(outs ${MASKD_PROTO_OUT}/${stem}.pb.cc ${MASKD_PROTO_OUT}/${stem}.pb.h
           ${MASKD_PROTO_OUT}/${stem}.grpc.pb.cc ${MASKD_PROTO_OUT}/${stem}.grpc.pb.h)
  add_custom_command(
    OUTPUT ${outs}
    COMMAND ${MASKD_PROTOC} --proto_path=${CMAKE_CURRENT_SOURCE_DIR}
            --cpp_out=${MASKD_PROTO_OUT} --grpc_out=${MASKD_PROTO_OUT}
            --plugin=protoc-gen-grpc=${MASKD_GRPC_PLUGIN}
            ${CMAKE_CURRENT_SOURCE_DIR}/${p}
    DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${p}
    COMMENT "protoc ${p}"
    VERBATIM)
  list(APPEND MASKD_PROTO_SRCS ${MASKD_PROTO_OUT}/${stem}.pb.cc ${MASKD_PROTO_OUT}/${stem}.grpc.pb.cc)
  list(APPEND MASKD_PROTO_HDRS ${MASKD_PROTO_OUT}/${stem}.pb.h ${MASKD_PROTO_OUT}/${stem}.grpc.pb.h)
endforeach()

add_library(maskd_proto STATIC ${MASKD_PROTO_SRCS} ${MASKD_PROTO_HDRS})
set_target_properties(maskd_proto PROPERTIES EXPORT_NAME proto)
target_include_directories(maskd_proto PUBLIC
  $<BUILD_INTERFACE:${MASKD_PROTO_OUT}>
  $<INSTALL_INTERFACE:include/maskd>)
target_link_libraries(maskd_proto PUBLIC protobuf::libprotobuf gRPC::grpc++)
add_library(maskd::proto ALIAS maskd_proto)
# Headers for the installed client package (see client/client.cmake).
set(MASKD_PROTO_HDRS ${MASKD_PROTO_HDRS} CACHE INTERNAL "generated proto headers")
set(MASKD_PROTO_OUT ${MASKD_PROTO_OUT} CACHE INTERNAL "generated proto folder")
# For other folders that generate test-only stubs (tests/service).
set(MASKD_PROTOC_EXE "${MASKD_PROTOC}" CACHE INTERNAL "protoc")
set(MASKD_GRPC_PLUGIN_EXE "${MASKD_GRPC_PLUGIN}" CACHE INTERNAL "grpc_cpp_plugin")
