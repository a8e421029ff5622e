# Writes OUTPUT: a C++ source defining outbox::admin::console_files() from every file in
# CONSOLE_DIR (the operator console's HTML, CSS and JavaScript) as byte arrays, so the
# binary serves the console with no files to deploy and nothing fetched at run time.
file(GLOB files RELATIVE "${CONSOLE_DIR}" "${CONSOLE_DIR}/*")
list(SORT files)
set(arrays "")
set(entries "")
set(index 0)
foreach(file IN LISTS files)
  if(IS_DIRECTORY "${CONSOLE_DIR}/${file}")
    message(FATAL_ERROR "host/console/${file}: the console is one flat folder")
  endif()
  file(READ "${CONSOLE_DIR}/${file}" hex HEX)
  string(LENGTH "${hex}" hex_length)
  math(EXPR size "${hex_length} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
  string(APPEND arrays "const char file_${index}[] = {${bytes}'\\0'};\n")
  string(APPEND entries "        {\"${file}\", std::string_view(file_${index}, ${size})},\n")
  math(EXPR index "${index} + 1")
endforeach()
file(WRITE "${OUTPUT}.tmp" "// Generated from host/console by cmake/EmbedConsole.cmake; do not edit.
#include \"admin/console_files.hpp\"

namespace outbox::admin {
namespace {

${arrays}
}  // namespace

const std::vector<ConsoleFile>& console_files() {
    static const std::vector<ConsoleFile> files{
${entries}    };
    return files;
}

}  // namespace outbox::admin
")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
