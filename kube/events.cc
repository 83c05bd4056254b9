#include "kube/events.h"

#include <cstdio>
#include <random>

namespace nvl72::kube {
namespace {

constexpr size_t kMaxNote = 1024;
constexpr auto kSeriesWindow = std::chrono::minutes(10);

// Cuts to at most `max` bytes without splitting a UTF-8 sequence.
std::string TruncateUtf8(std::string s, size_t max) {
  if (s.size() <= max) return s;
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  s.resize(cut);
  return s;
}

}  // namespace

EventRecorder::EventRecorder(Client* client, Clock* clock, EventRecorderOptions options)
    : client_(client), clock_(clock), options_(std::move(options)) {
  thread_ = std::jthread([this](std::stop_token stop) { Loop(stop); });
}

EventRecorder::~EventRecorder() {
  Flush(std::chrono::seconds(1));
  thread_.request_stop();
  { std::lock_guard<std::mutex> l(mu_); }
  cv_.notify_all();
  thread_.join();
}

void EventRecorder::Record(const Json& regarding, EventType type, std::string reason,
                           std::string action, std::string note) {
  Json ref = ObjectReferenceFor(regarding);
  std::string ns = Namespace(regarding);
  if (ns.empty()) ns = "default";
  std::string type_name = type == EventType::kWarning ? "Warning" : "Normal";
  note = TruncateUtf8(std::move(note), kMaxNote);
  std::string series_key = ns + "\x1f" + ref.value("kind", "") + "\x1f" + Name(regarding) + "\x1f" +
                           reason + "\x1f" + action + "\x1f" + type_name + "\x1f" + note;
  static thread_local std::mt19937_64 rng(std::random_device{}());
  char suffix[17];
  std::snprintf(suffix, sizeof(suffix), "%016llx", static_cast<unsigned long long>(rng()));
  std::string name = Name(regarding);
  if (name.empty()) name = "unknown";
  Json event = {
      {"apiVersion", kEvents.ApiVersion()},
      {"kind", "Event"},
      {"metadata", {{"name", name + "." + suffix}, {"namespace", ns}}},
      {"eventTime", FormatMicroTime(clock_->WallNow())},
      {"reportingController", options_.reporting_controller},
      {"reportingInstance", options_.reporting_instance},
      {"action", action},
      {"reason", reason},
      {"type", type_name},
      {"note", note},
      {"regarding", ref},
  };
  std::lock_guard<std::mutex> l(mu_);
  if (queue_.size() >= options_.max_queue) {
    ++stats_.dropped;
    return;
  }
  ++stats_.recorded;
  queue_.push_back(Pending{std::move(event), std::move(series_key)});
  cv_.notify_one();
}

bool EventRecorder::Flush(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> l(mu_);
  return idle_cv_.wait_for(l, timeout, [&] { return queue_.empty() && !busy_; });
}

EventRecorderStats EventRecorder::Stats() const {
  std::lock_guard<std::mutex> l(mu_);
  return stats_;
}

void EventRecorder::Write(Pending& p) {
  Clock::TimePoint now = clock_->Now();
  // Drop series entries that are out of the window.
  for (auto it = series_.begin(); it != series_.end();) {
    it = now - it->second.first > kSeriesWindow ? series_.erase(it) : std::next(it);
  }
  bool ok;
  auto it = series_.find(p.series_key);
  if (it != series_.end()) {
    Series& s = it->second;
    ++s.count;
    Json patch = {{"series", {{"count", s.count}, {"lastObservedTime", p.event["eventTime"]}}}};
    auto r = client_->Patch(kEvents, s.ns, s.name, PatchType::kMerge, patch);
    ok = r.ok();
    if (!ok && IsNotFound(r.status())) series_.erase(it);
  } else {
    std::string ns = p.event["metadata"]["namespace"];
    auto r = client_->Create(kEvents, ns, p.event);
    ok = r.ok();
    if (ok) series_[p.series_key] = Series{ns, Name(*r), 1, now};
  }
  std::lock_guard<std::mutex> l(mu_);
  if (ok)
    ++stats_.written;
  else
    ++stats_.failed;
}

void EventRecorder::Loop(std::stop_token stop) {
  while (true) {
    Pending p;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return stop.stop_requested() || !queue_.empty(); });
      if (queue_.empty()) return;  // stopped
      if (stop.stop_requested()) {
        stats_.dropped += static_cast<int64_t>(queue_.size());
        queue_.clear();
        idle_cv_.notify_all();
        return;
      }
      p = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    Write(p);
    {
      std::lock_guard<std::mutex> l(mu_);
      busy_ = false;
    }
    idle_cv_.notify_all();
  }
}

}  // namespace nvl72::kube
