#include "support/temp_dir.hpp"

#include <stdexcept>
#include <string>
#include <system_error>

#include <stdlib.h>

namespace outbox::test {

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
