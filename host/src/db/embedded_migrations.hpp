#pragma once

#include <string_view>
#include <vector>

namespace outbox::db {

struct EmbeddedMigration {
    std::string_view file_name;  // "V1__outbox_schema.sql"
    std::string_view sql;
};

/// The migrations compiled into this binary, in file-name order (V1, V2, ... V10).
const std::vector<EmbeddedMigration>& embedded_migrations();

}  // namespace outbox::db
