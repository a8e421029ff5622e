#pragma once

#include <optional>
#include <string>
#include <vector>

namespace outbox::db {

/// A PostgreSQL array literal ('{"a","b"}') for binding a whole list as one parameter,
/// so a batch is one statement with a fixed text (prepared once) whatever its size.
std::string pg_array(const std::vector<std::string>& values);
/// The same with SQL NULL elements.
std::string pg_array(const std::vector<std::optional<std::string>>& values);
/// An integer array literal ('{1,2}').
std::string pg_array(const std::vector<int>& values);

}  // namespace outbox::db
