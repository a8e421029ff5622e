#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "dispatch/handler_runner.hpp"
#include "dispatch/host_context.hpp"
#include "dispatch/work_queue.hpp"

namespace outbox::dispatch {

/// One event of a commit group and where it stands.
struct GroupMember {
    enum class State {
        Waiting,    // its call has not started
        Pending,    // its call succeeded and its fence ran: it completes when the group commits
        Finished,   // its outcome is stored or handed on, its queue slot freed
        Abandoned,  // its call overran; the host's abandoned-call path owns it
    };
    Work work;
    State state = State::Waiting;
    HandlerRun run;       // of its call, once it ran
    bool called = false;  // its handler was called (and returned)
};

/// Events of one handler (handlers.<name>.commit_group) run one after another on one worker,
/// their ctx.db() work in savepoints of one transaction (docs/design.md, "Commit groups").
/// Shared with the abandon hook of the member whose call runs, so the host can commit the
/// group without that member from its deadline watch.
struct CommitGroup {
    CommitGroup(std::vector<Work> works, const routing::HandlerEntry& handler) : entry(handler) {
        members.reserve(works.size());
        for (auto& work : works) members.push_back(GroupMember{std::move(work), GroupMember::State::Waiting, {}, false});
    }
    const routing::HandlerEntry& entry;  // kept alive by the members' HandlerSet
    std::mutex mutex;                    // guards the members' states and `closed`; taken before tx.mutex
    std::vector<GroupMember> members;
    GroupTx tx;
    bool closed = false;
};

}  // namespace outbox::dispatch
