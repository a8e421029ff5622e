#include "db/role_rights.hpp"

namespace outbox::db {
namespace {

// One row per candidate owner (none when there are no tables yet), worst finding first.
constexpr const char* kExcessRightsSql = R"SQL(
WITH owner AS (
    SELECT DISTINCT o FROM unnest(ARRAY[
        (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = pg_catalog.to_regclass('event_publication')),
        CASE WHEN $2 THEN (SELECT u.oid FROM pg_catalog.pg_roles u WHERE u.rolname = current_user) END
    ]::oid[]) AS o
    WHERE o IS NOT NULL
)
SELECT r.rolname, r.rolsuper, coalesce(pg_catalog.pg_get_userbyid(owner.o), ''),
       coalesce(r.oid = owner.o, false), coalesce(pg_catalog.pg_has_role(r.oid, owner.o, 'MEMBER'), false)
FROM pg_catalog.pg_roles r LEFT JOIN owner ON true
WHERE r.rolname = coalesce(nullif($1, ''), current_user)
ORDER BY 2 DESC, 4 DESC, 5 DESC
LIMIT 1
)SQL";

}  // namespace

std::string ExcessRights::describe() const {
    switch (kind) {
        case Kind::Superuser:
            return "role '" + role + "' is a superuser";
        case Kind::Owner:
            return "role '" + role + "' owns the outbox tables";
        case Kind::MemberOfOwner:
            return "role '" + role + "' is a member of '" + owner + "', which owns the outbox tables";
    }
    return {};
}

std::optional<ExcessRights> excess_rights(pqxx::transaction_base& tx, const std::string& role,
                                          bool owner_is_current_user) {
    const pqxx::result r = tx.exec_params(kExcessRightsSql, role, owner_is_current_user);
    if (r.empty()) return std::nullopt;
    ExcessRights rights;
    rights.role = r[0][0].as<std::string>();
    rights.owner = r[0][2].as<std::string>();
    if (r[0][1].as<bool>()) {
        rights.kind = ExcessRights::Kind::Superuser;
    } else if (r[0][3].as<bool>()) {
        rights.kind = ExcessRights::Kind::Owner;
    } else if (r[0][4].as<bool>()) {
        rights.kind = ExcessRights::Kind::MemberOfOwner;
    } else {
        return std::nullopt;
    }
    return rights;
}

}  // namespace outbox::db
