#include "outbox_examples/faulty_http_service.hpp"

#include <algorithm>
#include <stdexcept>

namespace outbox::examples {
namespace {

using Clock = std::chrono::steady_clock;
using Kind = ScriptedResponse::Kind;

// Stalled requests hold a server thread each; the pool must outlast a burst of them.
constexpr std::size_t kServerThreads = 96;

void check_rate(double rate, const char* name) {
    if (!(rate >= 0.0 && rate <= 1.0)) throw std::invalid_argument(std::string(name) + " must be between 0 and 1");
}

}  // namespace

void FaultConfig::validate() const {
    if (latency_min.count() < 0 || latency_max < latency_min) {
        throw std::invalid_argument("latency: need 0 <= latency_min <= latency_max");
    }
    check_rate(rate_409, "rate_409");
    check_rate(rate_429, "rate_429");
    check_rate(rate_500, "rate_500");
    check_rate(rate_503, "rate_503");
    check_rate(rate_timeout, "rate_timeout");
    check_rate(rate_lost_drop, "rate_lost_drop");
    check_rate(rate_lost_late, "rate_lost_late");
    const double sum =
        rate_409 + rate_429 + rate_500 + rate_503 + rate_timeout + rate_lost_drop + rate_lost_late;
    if (sum > 1.0 + 1e-9) throw std::invalid_argument("fault rates add up to more than 1");
    if (stall.count() < 0) throw std::invalid_argument("stall must not be negative");
    if (retry_after_seconds < 0) throw std::invalid_argument("retry_after_seconds must not be negative");
    if (rate_limit_per_second < 0) throw std::invalid_argument("rate_limit_per_second must not be negative");
}

FaultyHttpService::FaultyHttpService(std::string name, FaultConfig faults)
    : name_(std::move(name)), faults_(faults), random_(faults.seed) {
    faults_.validate();
    server_.new_task_queue = [] { return new httplib::ThreadPool(kServerThreads); };
    server_.set_keep_alive_timeout(1);
}

FaultyHttpService::~FaultyHttpService() { stop(); }

void FaultyHttpService::start(int port) {
    if (thread_.joinable()) throw std::logic_error(name_ + ": already started");
    if (port == 0) {
        port_ = server_.bind_to_any_port("127.0.0.1");
    } else {
        port_ = server_.bind_to_port("127.0.0.1", port) ? port : -1;
    }
    if (port_ <= 0) {
        throw std::runtime_error(name_ + ": cannot listen on 127.0.0.1:" + std::to_string(port) +
                                 " (is the port in use?)");
    }
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() only takes effect on a running server: a stop() racing ahead of the listen
    // loop would leave it listening forever and the join hanging.
    const auto deadline = Clock::now() + std::chrono::seconds{10};
    while (!server_.is_running()) {
        if (Clock::now() > deadline) throw std::runtime_error(name_ + ": the server thread did not start");
        std::this_thread::sleep_for(std::chrono::milliseconds{1});
    }
}

void FaultyHttpService::stop() {
    {
        const std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    stop_cv_.notify_all();
    server_.stop();
    if (thread_.joinable()) thread_.join();
}

void FaultyHttpService::script(std::vector<ScriptedResponse> responses) {
    const std::lock_guard lock(mutex_);
    for (auto& response : responses) script_.push_back(std::move(response));
}

void FaultyHttpService::set_faults(const FaultConfig& faults) {
    faults.validate();
    const std::lock_guard lock(mutex_);
    faults_ = faults;
}

std::vector<CallRecord> FaultyHttpService::calls() const {
    const std::lock_guard lock(mutex_);
    return calls_;
}

std::size_t FaultyHttpService::call_count() const {
    const std::lock_guard lock(mutex_);
    return calls_.size();
}

std::map<int, std::size_t> FaultyHttpService::responses_by_status() const {
    const std::lock_guard lock(mutex_);
    return by_status_;
}

std::map<std::string, std::size_t> FaultyHttpService::calls_by_outcome() const {
    const std::lock_guard lock(mutex_);
    std::map<std::string, std::size_t> counts;
    for (const auto& call : calls_) ++counts[call.outcome];
    return counts;
}

std::size_t FaultyHttpService::max_calls_in_window(std::chrono::milliseconds window) const {
    std::vector<Clock::time_point> arrivals;
    {
        const std::lock_guard lock(mutex_);
        for (const auto& call : calls_) arrivals.push_back(call.arrived);
    }
    std::sort(arrivals.begin(), arrivals.end());
    std::size_t best = 0;
    std::size_t first = 0;
    for (std::size_t last = 0; last < arrivals.size(); ++last) {
        while (arrivals[last] - arrivals[first] >= window) ++first;
        best = std::max(best, last - first + 1);
    }
    return best;
}

void FaultyHttpService::post_route(const std::string& path, Processor processor) {
    server_.Post(path, [this, processor = std::move(processor)](const httplib::Request& request,
                                                                httplib::Response& response) {
        serve(request, response, processor);
    });
}

FaultyHttpService::Decision FaultyHttpService::decide(Clock::time_point now) {
    const std::lock_guard lock(mutex_);
    Decision decision;
    decision.stall = faults_.stall;
    const std::string retry_after = std::to_string(faults_.retry_after_seconds);

    while (!recent_.empty() && now - recent_.front() >= std::chrono::seconds{1}) recent_.pop_front();
    const bool limited =
        faults_.rate_limit_per_second > 0 && recent_.size() >= static_cast<std::size_t>(faults_.rate_limit_per_second);
    recent_.push_back(now);
    if (limited) {
        decision.kind = Kind::Status;
        decision.status = 429;
        decision.retry_after = retry_after;
        decision.body = R"({"error":"rate limit exceeded"})";
        decision.outcome = "rate_limited";
        return decision;
    }

    std::uniform_int_distribution<long long> latency(faults_.latency_min.count(), faults_.latency_max.count());
    decision.latency = std::chrono::milliseconds{latency(random_)};

    if (!script_.empty()) {
        ScriptedResponse next = std::move(script_.front());
        script_.pop_front();
        decision.kind = next.kind;
        decision.status = next.status;
        decision.retry_after = next.retry_after;
        decision.body = next.body;
        if (next.delay) decision.latency = *next.delay;
        switch (next.kind) {
            case Kind::Status: decision.outcome = "scripted"; break;
            case Kind::Timeout: decision.outcome = "timeout"; break;
            case Kind::LostDrop: decision.outcome = "lost_drop"; break;
            case Kind::LostLate: decision.outcome = "lost_late"; break;
            case Kind::Normal: decision.outcome = "ok"; break;
        }
        return decision;
    }

    const double draw = std::uniform_real_distribution<double>(0.0, 1.0)(random_);
    double threshold = 0.0;
    const auto hit = [&](double rate) {
        threshold += rate;
        return draw < threshold;
    };
    const auto status = [&](int code, bool with_retry_after) {
        decision.kind = Kind::Status;
        decision.status = code;
        if (with_retry_after) decision.retry_after = retry_after;
        decision.body = R"({"error":"injected fault"})";
        decision.outcome = "http_" + std::to_string(code);
    };
    if (hit(faults_.rate_409)) {
        status(409, false);
    } else if (hit(faults_.rate_429)) {
        status(429, true);
    } else if (hit(faults_.rate_500)) {
        status(500, false);
    } else if (hit(faults_.rate_503)) {
        status(503, true);
    } else if (hit(faults_.rate_timeout)) {
        decision.kind = Kind::Timeout;
        decision.outcome = "timeout";
    } else if (hit(faults_.rate_lost_drop)) {
        decision.kind = Kind::LostDrop;
        decision.outcome = "lost_drop";
    } else if (hit(faults_.rate_lost_late)) {
        decision.kind = Kind::LostLate;
        decision.outcome = "lost_late";
    }
    return decision;
}

bool FaultyHttpService::pause(std::chrono::milliseconds duration) {
    if (duration.count() <= 0) return true;
    std::unique_lock lock(mutex_);
    return !stop_cv_.wait_for(lock, duration, [this] { return stopping_; });
}

void FaultyHttpService::serve(const httplib::Request& request, httplib::Response& response,
                              const Processor& processor) {
    CallRecord record;
    record.arrived = Clock::now();
    record.arrived_wall = std::chrono::system_clock::now();
    record.idempotency_key = request.get_header_value("Idempotency-Key");
    record.authorization = request.get_header_value("Authorization");
    record.body = request.body;

    const Decision decision = decide(record.arrived);
    record.outcome = decision.outcome;
    // Recorded on arrival, so tests see a call that is still stalled.
    std::size_t index = 0;
    {
        const std::lock_guard lock(mutex_);
        index = calls_.size();
        calls_.push_back(record);
    }
    bool written = true;
    switch (decision.kind) {
        case Kind::Status:
            pause(decision.latency);
            response.status = decision.status;
            if (decision.retry_after) response.set_header("Retry-After", *decision.retry_after);
            response.set_content(decision.body, "application/json");
            record.status = decision.status;
            break;
        case Kind::Timeout:
            // Nobody is listening by the time this is written: the client gave up.
            pause(decision.stall);
            response.status = 504;
            response.set_content(R"({"error":"stalled"})", "application/json");
            written = false;
            break;
        case Kind::Normal:
        case Kind::LostDrop:
        case Kind::LostLate: {
            // A late answer is slow work: the key stays in progress until the stall is over.
            const auto work_time = decision.kind == Kind::LostLate ? decision.stall : decision.latency;
            const Reply reply = processor(request, [&] { pause(work_time); });
            record.status = reply.status;
            if (decision.kind == Kind::Normal && reply.status >= 400) record.outcome = "rejected";
            response.status = reply.status;
            if (decision.kind == Kind::LostDrop) {
                // The headers go out, then the provider refuses to produce the body and the
                // server closes the connection: the work is done, the answer is lost.
                response.set_chunked_content_provider("application/json",
                                                      [](std::size_t, httplib::DataSink&) { return false; });
                written = false;
            } else {
                written = decision.kind != Kind::LostLate;
                response.set_content(reply.body, "application/json");
            }
            break;
        }
    }
    record.answered_wall = std::chrono::system_clock::now();
    const std::lock_guard lock(mutex_);
    if (written) ++by_status_[record.status];
    calls_[index] = std::move(record);
}

}  // namespace outbox::examples
