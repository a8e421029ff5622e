# Installs this build into a scratch prefix, builds tests/sdk_package/plugin and
# tests/sdk_package/http_plugin (component http, OutboxSdk::http) against the installed
# OutboxSdk package alone, and checks both load in the installed outboxd. Then checks the
# installed sample plugins without a config file (OK: needing config is not an error), and
# writes a plugin with `outboxd new-plugin`, builds it and runs its GoogleTest against the
# installed SDK, and loads it in the installed outboxd.
# Arguments: -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=...
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "failed (${code}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()
run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
foreach(required bin/outboxd include/outbox/sdk.hpp include/outbox/sdk/http.hpp include/outbox/sdk/testing.hpp
                 include/outbox/publisher.hpp
                 lib/cmake/OutboxSdk/OutboxSdkConfig.cmake share/outboxd/migrations/V1__outbox_schema.sql)
  if(NOT EXISTS "${WORK_DIR}/prefix/${required}")
    message(FATAL_ERROR "cmake --install did not install ${required}")
  endif()
endforeach()
run(${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/sdk_package/plugin" -B "${WORK_DIR}/build"
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
file(MAKE_DIRECTORY "${WORK_DIR}/plugins")
file(COPY "${WORK_DIR}/build/liboutside_team.so" DESTINATION "${WORK_DIR}/plugins")
run(${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/sdk_package/http_plugin" -B "${WORK_DIR}/build-http"
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build-http")
file(COPY "${WORK_DIR}/build-http/liboutside_http.so" DESTINATION "${WORK_DIR}/plugins")
run("${WORK_DIR}/prefix/bin/outboxd" plugins check "${WORK_DIR}/plugins")
if(NOT last_output MATCHES "outside-team" OR NOT last_output MATCHES "outside-http" OR NOT last_output MATCHES "OK")
  message(FATAL_ERROR "the installed outboxd did not accept the plugin:\n${last_output}")
endif()
message(STATUS "plugin built against the installed SDK loads:\n${last_output}")

run("${WORK_DIR}/prefix/bin/outboxd" plugins check "${WORK_DIR}/prefix/lib/outboxd/plugins")
foreach(handler category-classification mission-log-forwarding nats-relay)
  if(NOT last_output MATCHES "${handler}")
    message(FATAL_ERROR "plugins check without a config file does not report ${handler}:\n${last_output}")
  endif()
endforeach()
message(STATUS "installed sample plugins without a config file:\n${last_output}")

execute_process(COMMAND "${WORK_DIR}/prefix/bin/outboxd" new-plugin "Not A Name" --dir "${WORK_DIR}/bad"
                RESULT_VARIABLE code ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT code EQUAL 2 OR NOT err MATCHES "invalid plugin NAME 'Not A Name'" OR EXISTS "${WORK_DIR}/bad")
  message(FATAL_ERROR "new-plugin accepted an invalid NAME (exit ${code}): ${err}")
endif()
run("${WORK_DIR}/prefix/bin/outboxd" new-plugin acme-mailer --dir "${WORK_DIR}/acme-mailer")
run(${CMAKE_COMMAND} -S "${WORK_DIR}/acme-mailer" -B "${WORK_DIR}/acme-mailer/build"
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build "${WORK_DIR}/acme-mailer/build")
run(${CTEST} --test-dir "${WORK_DIR}/acme-mailer/build" --output-on-failure)
if(NOT last_output MATCHES "100% tests passed")
  message(FATAL_ERROR "the template's test did not pass:\n${last_output}")
endif()
file(MAKE_DIRECTORY "${WORK_DIR}/template-plugins")
file(COPY "${WORK_DIR}/acme-mailer/build/libacme-mailer.so" DESTINATION "${WORK_DIR}/template-plugins")
run("${WORK_DIR}/prefix/bin/outboxd" plugins check "${WORK_DIR}/template-plugins")
if(NOT last_output MATCHES "acme-mailer +AcmeMailerRequested +[0-9]+\\.[0-9]+ \\(sdk[^\n]* OK")
  message(FATAL_ERROR "the installed outboxd did not accept the template's plugin:\n${last_output}")
endif()
message(STATUS "the new-plugin template builds, passes its test and loads:\n${last_output}")
file(REMOVE_RECURSE "${WORK_DIR}")
