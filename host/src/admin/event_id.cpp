#include "admin/event_id.hpp"

#include <cctype>

#include "admin/error_mapping.hpp"
#include "core/identifiers.hpp"

namespace outbox::admin {

bool normalize_uuid(std::string& id) {
    if (!core::is_uuid(id)) return false;
    for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return true;
}

bool normalize_event_id(HttpResponse& res, std::string& id) {
    if (normalize_uuid(id)) return true;
    send_error(res, 400, "INVALID_EVENT_ID", "the event id must be a UUID");
    return false;
}

void send_not_accessible(HttpResponse& res) {
    send_error(res, 403, "EVENT_NOT_ACCESSIBLE", "no event with this id is accessible to your company");
}

}  // namespace outbox::admin
