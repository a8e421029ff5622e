#include "routing/handler_set.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <optional>

namespace outbox::routing {

HandlerSettings resolve(const config::HandlerSettings& written) {
    return HandlerSettings{.max_concurrency = written.max_concurrency,
                           .rate_limit_per_second = written.rate_limit_per_second,
                           .timeout = written.timeout.value_or(config::Config::Outbox{}.handler_timeout),
                           .config_json = written.config_json,
                           .circuit_breaker = written.circuit_breaker,
                           .commit_group = written.commit_group};
}

HandlerSet::HandlerSet(std::vector<HandlerEntry> entries) : entries_(std::move(entries)) {
    for (std::size_t i = 0; i < entries_.size(); ++i) {
        for (const auto& type : entries_[i].event_types) {
            auto& indexes = by_type_[type];
            if (indexes.empty() || indexes.back() != i) indexes.push_back(i);
        }
    }
    for (const auto& [type, indexes] : by_type_) {
        event_types_.push_back(type);
        std::optional<int> budget;
        for (const auto index : indexes) {
            const auto& settings = entries_[index].settings;
            int handler_budget = INT32_MAX;
            if (settings.max_concurrency) handler_budget = std::min(handler_budget, *settings.max_concurrency);
            if (settings.rate_limit_per_second) {
                handler_budget =
                    std::min(handler_budget, static_cast<int>(std::ceil(*settings.rate_limit_per_second)));
            }
            if (handler_budget != INT32_MAX) budget = std::min(budget.value_or(INT32_MAX), std::max(handler_budget, 1));
        }
        if (budget) {
            throttled_[type] = *budget;
        } else {
            unthrottled_.push_back(type);
        }
    }
}

std::vector<const HandlerEntry*> HandlerSet::for_type(const std::string& event_type) const {
    std::vector<const HandlerEntry*> result;
    const auto found = by_type_.find(event_type);
    if (found == by_type_.end()) return result;
    for (const auto index : found->second) result.push_back(&entries_[index]);
    return result;
}

}  // namespace outbox::routing
