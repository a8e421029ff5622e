#pragma once

#include <optional>
#include <string>

#include <pqxx/pqxx>

namespace outbox::db {

/// A role that can do more than a host or a publisher needs: it could change the schema,
/// disable the append-only triggers and rewrite the audit.
struct ExcessRights {
    enum class Kind { Superuser, Owner, MemberOfOwner };
    Kind kind = Kind::Superuser;
    std::string role;
    std::string owner;  // the outbox tables' owner (empty when there are none yet)

    /// "role 'app' is a superuser" / "... owns the outbox tables" / "... is a member of
    /// 'outbox_owner', which owns the outbox tables".
    std::string describe() const;
};

/// Whether `role` (empty: the connection's current_user) is a superuser, owns the outbox
/// tables (event_publication as the search_path finds it) or is a member of their owner.
/// With `owner_is_current_user`, the connection's current_user counts as the owner too
/// (migrate, before or while it creates the tables). Reads only the catalogue.
std::optional<ExcessRights> excess_rights(pqxx::transaction_base& tx, const std::string& role,
                                          bool owner_is_current_user);

}  // namespace outbox::db
