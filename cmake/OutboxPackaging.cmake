# Install layout of the service's own files, and the Debian packages (cpack -G DEB, see
# scripts/package.sh) as three components:
#   server  -> outboxd                 the binary, its configuration, the systemd unit, the
#                                      migrations and the observability kit
#   sdk     -> outboxd-sdk-dev         headers, CMake package OutboxSdk, outbox_add_plugin
#   plugins -> outboxd-sample-plugins  the sample handler plugins
# Every install() rule takes its component from CMAKE_INSTALL_DEFAULT_COMPONENT_NAME, set
# per source folder in the top-level CMakeLists.txt.
#
# OUTBOX_SYSTEM_PACKAGE (scripts/package.sh sets it, with CMAKE_INSTALL_PREFIX=/usr and
# CMAKE_INSTALL_LIBDIR=lib) installs system files to their absolute places (/etc/outboxd,
# /etc/default, /lib/systemd/system) and the Debian documentation files. Off, everything
# stays under the install prefix (cmake --install --prefix DIR), the unit and the default
# environment file under share/outboxd/systemd.
option(OUTBOX_SYSTEM_PACKAGE "Install system files (/etc, /lib/systemd) for a distribution package" OFF)
set(OUTBOX_PACKAGE_MAINTAINER "outboxd maintainers <outboxd@example.org>" CACHE STRING
    "Maintainer of the Debian packages (control file and changelog.Debian)")
set(OUTBOX_PACKAGE_RELEASE 1 CACHE STRING "Debian revision of the packages: the N of <version>-N")

set(outbox_share ${CMAKE_INSTALL_DATADIR}/outboxd)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/migrations/ DESTINATION ${outbox_share}/migrations COMPONENT server
        FILES_MATCHING PATTERN "V*.sql")
install(FILES ${PROJECT_SOURCE_DIR}/config/outboxd.yaml DESTINATION ${outbox_share} COMPONENT server)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/grafana/outboxd.json DESTINATION ${outbox_share}/grafana COMPONENT server)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/prometheus/outboxd-rules.yaml DESTINATION ${outbox_share}/prometheus
        COMPONENT server)
# The plugin directory exists (root-owned, 0755) even without plugins: the service watches it.
install(DIRECTORY DESTINATION ${CMAKE_INSTALL_LIBDIR}/outboxd/plugins COMPONENT server
        DIRECTORY_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)

if(NOT OUTBOX_SYSTEM_PACKAGE)
  install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/outboxd.service ${PROJECT_SOURCE_DIR}/deploy/systemd/outboxd.default
          DESTINATION ${outbox_share}/systemd COMPONENT server)
  return()
endif()

install(FILES ${PROJECT_SOURCE_DIR}/config/outboxd.yaml DESTINATION /etc/outboxd COMPONENT server)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/outboxd.default DESTINATION /etc/default RENAME outboxd
        COMPONENT server)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/outboxd.service DESTINATION /lib/systemd/system COMPONENT server)

# CPack indents the description's lines after the synopsis itself.
# Per package: copyright and changelog.Debian.gz (gzip -9n: no name or time stamp inside).
set(outbox_deb_dir ${PROJECT_BINARY_DIR}/debian)
set(outbox_deb_version ${PROJECT_VERSION}-${OUTBOX_PACKAGE_RELEASE})
string(TIMESTAMP outbox_deb_date "%a, %d %b %Y %H:%M:%S +0000" UTC)
find_program(OUTBOX_GZIP gzip REQUIRED)
function(outbox_gzip input output)
  execute_process(COMMAND ${OUTBOX_GZIP} -9n -c ${input} OUTPUT_FILE ${output} COMMAND_ERROR_IS_FATAL ANY)
endfunction()
foreach(entry "outboxd:server" "outboxd-sdk-dev:sdk" "outboxd-sample-plugins:plugins")
  string(REPLACE ":" ";" entry ${entry})
  list(GET entry 0 package)
  list(GET entry 1 component)
  file(READ ${PROJECT_SOURCE_DIR}/deploy/debian/changelog.in changelog)
  string(REPLACE "@PKG@" ${package} changelog "${changelog}")
  string(REPLACE "@VERSION@" ${outbox_deb_version} changelog "${changelog}")
  string(REPLACE "@DATE@" "${outbox_deb_date}" changelog "${changelog}")
  string(REPLACE "@MAINTAINER@" "${OUTBOX_PACKAGE_MAINTAINER}" changelog "${changelog}")
  file(WRITE ${outbox_deb_dir}/${package}/changelog.Debian "${changelog}")
  outbox_gzip(${outbox_deb_dir}/${package}/changelog.Debian ${outbox_deb_dir}/${package}/changelog.Debian.gz)
  install(FILES ${PROJECT_SOURCE_DIR}/deploy/debian/copyright ${outbox_deb_dir}/${package}/changelog.Debian.gz
          DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${package} COMPONENT ${component})
endforeach()
outbox_gzip(${PROJECT_SOURCE_DIR}/deploy/debian/outboxd.1 ${outbox_deb_dir}/outboxd.1.gz)
install(FILES ${outbox_deb_dir}/outboxd.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT server)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME outboxd)
set(CPACK_PACKAGE_VENDOR outboxd)
set(CPACK_PACKAGE_CONTACT ${OUTBOX_PACKAGE_MAINTAINER})
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL server sdk plugins)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${OUTBOX_PACKAGE_RELEASE})
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://example.invalid/outboxd")

set(CPACK_DEBIAN_SERVER_PACKAGE_NAME outboxd)
set(CPACK_DEBIAN_SERVER_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_SERVER_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_SERVER_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/deploy/debian/postinst ${PROJECT_SOURCE_DIR}/deploy/debian/prerm
    ${PROJECT_SOURCE_DIR}/deploy/debian/postrm ${PROJECT_SOURCE_DIR}/deploy/debian/conffiles)
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
set(CPACK_COMPONENT_SERVER_DESCRIPTION "transactional-outbox worker runtime on PostgreSQL
outboxd claims events that applications publish into an outbox table in
their own PostgreSQL transaction and runs handler plugins (shared
libraries dropped into /usr/lib/outboxd/plugins) for them, with leases,
retries and a review queue. This package holds the service, its systemd
unit, configuration, SQL migrations and a Grafana dashboard and
Prometheus alerting rules.")

set(CPACK_DEBIAN_SDK_PACKAGE_NAME outboxd-sdk-dev)
set(CPACK_DEBIAN_SDK_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_SDK_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_SDK_PACKAGE_DEPENDS "nlohmann-json3-dev (>= 3.10), libcpp-httplib-dev, pkg-config")
set(CPACK_COMPONENT_SDK_DESCRIPTION "SDK for outboxd handler plugins
Headers (outbox/sdk.hpp and the optional HTTP helper), the CMake package
OutboxSdk (find_package(OutboxSdk), targets OutboxSdk::sdk and
OutboxSdk::http) and the outbox_add_plugin() function that builds a
plugin with the flags outboxd expects.")

set(CPACK_DEBIAN_PLUGINS_PACKAGE_NAME outboxd-sample-plugins)
set(CPACK_DEBIAN_PLUGINS_PACKAGE_SECTION admin)
# dpkg-shlibdeps adds the libraries the plugins link, libnats3.4 (nats-relay) among them;
# building needs libnats-dev (scripts/install-deps.sh).
set(CPACK_DEBIAN_PLUGINS_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PLUGINS_PACKAGE_DEPENDS "outboxd (= ${outbox_deb_version})")
set(CPACK_COMPONENT_PLUGINS_DESCRIPTION "sample handler plugins for outboxd
category-classification (calls an AI classifier for WebsiteRegistered
events), mission-log-forwarding (forwards MissionCompleted events to a
stats service) and nats-relay (relays events to a NATS JetStream stream,
exactly once within its duplicate window), installed into
/usr/lib/outboxd/plugins. Each needs its section in
/etc/outboxd/outboxd.yaml.")

include(CPack)
