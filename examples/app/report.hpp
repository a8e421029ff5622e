#pragma once

#include <string>

namespace outbox::examples::app {

struct ReportOptions {
    std::string database_url;
    std::string admin_url;       ///< the stats admin server, e.g. http://127.0.0.1:8082; empty: skip
    std::string classifier_url;  ///< the AI classifier, e.g. http://127.0.0.1:8081; empty: skip
    std::string tag;             ///< only websites and users of this run tag; empty: everything
    bool final = false;          ///< also print the consistency verdict
};

/// Prints the state of the outbox and of both remote services: events by type and status,
/// websites classified, and the admin server's per-user counts against the missions whose
/// events completed. Returns false only for a final report whose counts disagree.
bool print_report(const ReportOptions& options);

}  // namespace outbox::examples::app
