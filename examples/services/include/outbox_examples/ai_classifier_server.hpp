#pragma once
// A stand-in for the AI classification API that category-classification calls.
//
//   POST /v1/classify   {"domain": "example.com"}, Authorization: Bearer <key>,
//                       Idempotency-Key: <id>  ->  200 {"category": "..."}
//                       401 wrong or missing key, 400 no domain, 422 not a host name
//   GET  /v1/stats      calls, responses by status, busiest second
//
// The category is a pure function of the domain (category_for), so a test can predict it
// and a repeated call gives the same answer.

#include <string>
#include <string_view>

#include "outbox_examples/faulty_http_service.hpp"

namespace outbox::examples {

class AiClassifierServer : public FaultyHttpService {
public:
    /// `api_key`: the Bearer token callers must present (empty: any token is refused).
    AiClassifierServer(std::string api_key, FaultConfig faults = {});
    /// Stops serving before the members the request handlers use are destroyed.
    ~AiClassifierServer() override { stop(); }
    AiClassifierServer(const AiClassifierServer&) = delete;
    AiClassifierServer& operator=(const AiClassifierServer&) = delete;

    /// The category this classifier gives `domain`.
    [[nodiscard]] static std::string category_for(std::string_view domain);

private:
    Reply classify(const httplib::Request& request, const std::function<void()>& work) const;

    const std::string api_key_;
};

}  // namespace outbox::examples
