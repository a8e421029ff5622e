#pragma once

#include <string>

#include "admin/http_message.hpp"

namespace outbox::admin {

/// Lower-cases `id` and returns true when it is a UUID (8-4-4-4-12 hex digits).
bool normalize_uuid(std::string& id);

/// Lower-cases `id` when it is a UUID; otherwise answers 400 INVALID_EVENT_ID.
bool normalize_event_id(HttpResponse& res, std::string& id);

/// One answer whether the event is missing or another company's (403
/// EVENT_NOT_ACCESSIBLE), so the API never tells a caller which event ids exist outside
/// its company.
void send_not_accessible(HttpResponse& res);

}  // namespace outbox::admin
