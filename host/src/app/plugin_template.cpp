#include "app/plugin_template.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <system_error>
#include <utility>

namespace outbox::app {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kMaxNameChars = 63;

std::string replaced(std::string text, const std::string& from, const std::string& to) {
    for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
        text.replace(at, from.size(), to);
    }
    return text;
}

/// "acme-mailer" -> "AcmeMailer"
std::string camel_case(const std::string& name) {
    std::string out;
    bool upper = true;
    for (const char c : name) {
        if (c == '-') {
            upper = true;
            continue;
        }
        out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
        upper = false;
    }
    return out;
}

}  // namespace

std::string plugin_name_problem(const std::string& name) {
    const bool valid = !name.empty() && name.size() <= kMaxNameChars && name.front() >= 'a' && name.front() <= 'z' &&
                       name.back() != '-' && name.find("--") == std::string::npos &&
                       std::all_of(name.begin(), name.end(), [](char c) {
                           return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
                       });
    if (valid) return {};
    std::string shown;
    for (const char c : name.substr(0, 80)) shown += (c >= 0x20 && c < 0x7f) ? c : '?';
    return "invalid plugin NAME '" + shown +
           "': use 1-63 characters a-z, 0-9 and single '-', starting with a letter and not ending with '-' (it "
           "becomes the handler name and the file lib<NAME>.so)";
}

int new_plugin_command(const std::string& name, const fs::path& dir, std::ostream& out, std::ostream& err) {
    if (const std::string problem = plugin_name_problem(name); !problem.empty()) {
        err << "outboxd: new-plugin: " << problem << "\n";
        return 2;
    }
    std::error_code ec;
    if (fs::exists(dir, ec) && !(fs::is_directory(dir, ec) && fs::is_empty(dir, ec))) {
        err << "outboxd: new-plugin: --dir " << dir.string()
            << " exists and is not an empty directory; choose a new directory\n";
        return 2;
    }
    const std::string target = replaced(name, "-", "_");
    std::string upper = target;
    std::transform(upper.begin(), upper.end(), upper.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    const std::string class_name = camel_case(name) + "Handler";
    const std::string event_type = camel_case(name) + "Requested";

    for (const TemplateFile& file : plugin_template_files()) {
        std::string text = file.text;
        for (const auto& [from, to] : {std::pair<std::string, std::string>{"@NAME@", name}, {"@TARGET@", target},
                                       {"@UPPER@", upper}, {"@CLASS@", class_name}, {"@EVENT@", event_type}}) {
            text = replaced(std::move(text), from, to);
        }
        const fs::path path = dir / file.path;
        fs::create_directories(path.parent_path(), ec);
        if (ec) {
            err << "outboxd: new-plugin: cannot create " << path.parent_path().string() << ": " << ec.message() << "\n";
            return 1;
        }
        std::ofstream stream(path, std::ios::binary | std::ios::trunc);
        stream << text;
        stream.close();
        if (!stream) {
            err << "outboxd: new-plugin: cannot write " << path.string() << "\n";
            return 1;
        }
        out << "wrote " << path.string() << "\n";
    }
    out << "handler " << name << " for " << event_type << ": build it with\n"
        << "  cmake -S " << dir.string() << " -B " << (dir / "build").string() << " && cmake --build "
        << (dir / "build").string() << " && ctest --test-dir " << (dir / "build").string() << "\n";
    return 0;
}

}  // namespace outbox::app
