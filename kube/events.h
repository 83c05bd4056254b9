// EventRecorder: writes events.k8s.io/v1 Events about objects, best-effort and non-blocking.
//
// Record() only enqueues; a background thread creates the Events. When the queue is full the event
// is dropped and counted; a failed write is counted and not retried (events are diagnostics, never
// load-bearing). Identical (regarding, reason, action, type, note) events within 10 minutes are
// collapsed into one Event whose `series` count is patched instead of creating new objects.
//
// Fields written: eventTime (MicroTime), reportingController, reportingInstance, action, reason,
// type Normal|Warning, note (truncated to 1024 bytes), regarding (ObjectReference),
// metadata.name "<regarding name>.<16 hex>", namespace of the regarding object ("default" for
// cluster-scoped objects).
//
// Thread-safety: Record() and Stats() from any thread. The destructor flushes what it can within
// ~1 s and stops the thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "kube/client.h"
#include "kube/clock.h"

namespace nvl72::kube {

enum class EventType { kNormal, kWarning };

struct EventRecorderOptions {
  std::string reporting_controller{};  // e.g. "nvl72.dev/operator"
  std::string reporting_instance{};    // e.g. pod name
  size_t max_queue = 1000;
};

struct EventRecorderStats {
  int64_t recorded = 0;  // Record() calls accepted
  int64_t written = 0;   // Events created or series-updated
  int64_t dropped = 0;   // queue full
  int64_t failed = 0;    // API errors
};

class EventRecorder {
 public:
  // `client` and `clock` must outlive the recorder.
  EventRecorder(Client* client, Clock* clock, EventRecorderOptions options);
  ~EventRecorder();

  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  // `regarding` is the object the event is about (only its apiVersion/kind/metadata are read).
  void Record(const Json& regarding, EventType type, std::string reason, std::string action,
              std::string note);

  // Blocks until the queue is empty or `timeout` of real time elapses; true if empty. For tests.
  bool Flush(std::chrono::milliseconds timeout);

  EventRecorderStats Stats() const;

 private:
  struct Pending {
    Json event;
    std::string series_key;
  };
  struct Series {
    std::string ns, name;
    int64_t count = 1;
    Clock::TimePoint first;
  };
  void Loop(std::stop_token stop);
  void Write(Pending& p);

  Client* client_;
  Clock* clock_;
  EventRecorderOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::deque<Pending> queue_;
  bool busy_ = false;
  EventRecorderStats stats_;
  std::map<std::string, Series> series_;  // guarded by writer thread only
  std::jthread thread_;
};

}  // namespace nvl72::kube
