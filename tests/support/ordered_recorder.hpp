#pragma once
// The ordered-recorder fixture: a handler that appends "<aggregate key> <event id> <attempt>"
// to a file at each start, so tests can read the start order per aggregate.

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/test_host.hpp"

namespace outbox::test {

/// A started host running only the ordered-recorder fixture, recording into `record`;
/// `fail_percent` of its calls fail (retryably).
inline std::unique_ptr<TestHost> start_ordered_recorder(const dispatch::RuntimeOptions& options, const std::filesystem::path& record,
                                                        int fail_percent = 0) {
    const plugin::HandlerConfigs configs{
        {"ordered-recorder", nlohmann::json{{"file", record.string()}, {"fail_percent", fail_percent}}.dump()}};
    auto host = std::make_unique<TestHost>(options, std::vector<std::string>{OUTBOX_FIXTURE_ORDERED_RECORDER}, configs);
    host->start();
    return host;
}

/// Handler starts per aggregate key ("" for unkeyed events), in start order.
inline std::map<std::string, std::vector<std::string>> ordered_starts(const std::filesystem::path& record) {
    std::map<std::string, std::vector<std::string>> by_key;
    std::ifstream in(record);
    std::string line;
    while (std::getline(in, line)) {
        // An unkeyed event's line starts with the space.
        const auto space = line.find(' ');
        const auto id_end = line.find(' ', space + 1);
        by_key[line.substr(0, space)].push_back(line.substr(space + 1, id_end - space - 1));
    }
    return by_key;
}

}  // namespace outbox::test
