#include "support/temp_dir.hpp"

#include <stdexcept>
#include <string>
#include <system_error>

#include <stdlib.h>
#include <sys/stat.h>

namespace outbox::test {
namespace {
// outboxd refuses plugin files and directories that group or others may write, so tests
// create theirs as a deployment would, whatever umask the test runner inherited.
[[maybe_unused]] const mode_t kPreviousUmask = ::umask(022);
}  // namespace

TempDir::TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "outboxd-test-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
}

TempDir::~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
}

}  // namespace outbox::test
