# outbox_add_plugin(<target> SOURCES <files...> [OUTPUT_NAME <name>])
#
# Builds an outboxd handler plugin as a MODULE library. Installed with the SDK so that a
# team outside this tree gets the same flags: hidden visibility (only the manifest and the
# factory are exported), no undefined symbols at link time (a missing symbol fails the
# build, not the host at load time), and -fno-gnu-unique so the library can really unload.
function(outbox_add_plugin target)
  cmake_parse_arguments(ARG "" "OUTPUT_NAME" "SOURCES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "outbox_add_plugin(${target}): SOURCES is required")
  endif()
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE OutboxSdk::sdk)
  target_compile_features(${target} PRIVATE cxx_std_20)
  set_target_properties(${target} PROPERTIES
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    PREFIX "lib")
  if(ARG_OUTPUT_NAME)
    set_target_properties(${target} PROPERTIES OUTPUT_NAME ${ARG_OUTPUT_NAME})
  endif()
  target_compile_options(${target} PRIVATE -fno-gnu-unique)
  target_link_options(${target} PRIVATE -Wl,--no-undefined)
  if(COMMAND outbox_target_options)
    outbox_target_options(${target})
  endif()
endfunction()
