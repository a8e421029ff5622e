#pragma once

#include "admin/admin_context.hpp"
#include "admin/router.hpp"

namespace outbox::admin {

// One function per endpoint group; each adds its routes. The context outlives the router.

/// GET /healthz, GET /readyz, GET /metrics (no authentication; Lane::Probe for the probes).
void add_probe_endpoints(Router& router, AdminContext& context);
/// GET /api/v1/admin/outbox-events and GET /api/v1/admin/outbox-events/{id}.
void add_event_read_endpoints(Router& router, AdminContext& context);
/// POST /api/v1/admin/outbox-events/{id}/retry.
void add_retry_endpoints(Router& router, AdminContext& context);
/// POST /api/v1/admin/outbox-events/retry (bulk re-drive) and
/// POST /api/v1/admin/handlers/{name}/pause|resume.
void add_operator_endpoints(Router& router, AdminContext& context);
/// POST /api/v1/admin/outbox-events/{id}/discard and .../{id}/cancel (the same request and
/// answers as the retry).
void add_discard_endpoints(Router& router, AdminContext& context);
/// POST /api/v1/admin/operations, GET /api/v1/admin/operations/{id} and
/// POST /api/v1/admin/operations/{id}/cancel (operator jobs).
void add_operation_endpoints(Router& router, AdminContext& context);
/// GET /api/v1/admin/fleet.
void add_fleet_endpoints(Router& router, AdminContext& context);
/// GET /api/v1/admin/me (any authenticated caller: who the token says it is).
void add_identity_endpoints(Router& router, AdminContext& context);
/// GET /api/v1/admin/overview and GET /api/v1/admin/review-groups (the caller's company).
void add_overview_endpoints(Router& router, AdminContext& context);
/// GET /api/v1/admin/outbox-events/{id}/history.
void add_history_endpoints(Router& router, AdminContext& context);
/// GET /console (redirect), /console/, /console/{file} (the embedded operator console) and
/// /console/session (the token a reverse proxy put in admin.console_token_header).
void add_console_endpoints(Router& router, AdminContext& context);

}  // namespace outbox::admin
