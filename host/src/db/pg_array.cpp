#include "db/pg_array.hpp"

namespace outbox::db {
namespace {
void append_quoted(std::string& out, const std::string& value) {
    out.push_back('"');
    for (const char c : value) {
        if (c == '"' || c == '\\') out.push_back('\\');
        out.push_back(c);
    }
    out.push_back('"');
}
}  // namespace

std::string pg_array(const std::vector<std::string>& values) {
    std::string out = "{";
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (i > 0) out.push_back(',');
        append_quoted(out, values[i]);
    }
    out.push_back('}');
    return out;
}

std::string pg_array(const std::vector<std::optional<std::string>>& values) {
    std::string out = "{";
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (i > 0) out.push_back(',');
        if (values[i]) {
            append_quoted(out, *values[i]);
        } else {
            out += "NULL";
        }
    }
    out.push_back('}');
    return out;
}

std::string pg_array(const std::vector<int>& values) {
    std::string text = "{";
    for (std::size_t i = 0; i < values.size(); ++i) text += (i == 0 ? "" : ",") + std::to_string(values[i]);
    return text + "}";
}

}  // namespace outbox::db
