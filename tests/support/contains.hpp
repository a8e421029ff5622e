#pragma once

#include <string>

namespace outbox::test {

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace outbox::test
