# `felix log` (storage): kept out of CMakeLists.txt so each command group adds one line there.
target_sources(felix PRIVATE ${CMAKE_CURRENT_LIST_DIR}/log_command.cc)
target_link_libraries(felix PRIVATE felix_storage)
