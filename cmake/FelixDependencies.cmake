# Every third-party dependency comes from a Debian package (scripts/setup installs them).
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(tl-expected REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(CLI11 REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(ZLIB REQUIRED)
pkg_check_modules(SODIUM REQUIRED IMPORTED_TARGET libsodium)
pkg_check_modules(ISAL REQUIRED IMPORTED_TARGET libisal)
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
# gRPC C++ and protobuf for the etcd v3 client (Debian libgrpc++-dev, libprotobuf-dev); the code
# generators come from protobuf-compiler and protobuf-compiler-grpc.
pkg_check_modules(GRPC REQUIRED IMPORTED_TARGET grpc++>=1.51 protobuf>=3.21)
find_program(FELIX_PROTOC protoc REQUIRED)
find_program(FELIX_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)
# libngtcp2_crypto_gnutls.pc has no Requires:, so all three modules are listed.
pkg_check_modules(QUIC REQUIRED IMPORTED_TARGET
  libngtcp2>=0.12 libngtcp2_crypto_gnutls>=0.12 gnutls>=3.7.5)
if(FELIX_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(FELIX_BUILD_BENCH AND NOT FELIX_FUZZ)
  find_package(benchmark REQUIRED)
endif()
