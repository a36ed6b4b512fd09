#include "sim/engine.hpp"

#include <algorithm>
#include <stdexcept>

namespace dionsim::sim {

std::uint32_t Engine::store(Callback cb) {
  if (!free_callbacks_.empty()) {
    const std::uint32_t slot = free_callbacks_.back();
    free_callbacks_.pop_back();
    callbacks_[slot] = std::move(cb);
    return slot;
  }
  callbacks_.push_back(std::move(cb));
  return static_cast<std::uint32_t>(callbacks_.size() - 1);
}

void Engine::push(SimTime t, std::uint32_t callback, std::uint32_t flow, std::uint32_t version) {
  queue_.push(Event{t, seq_++, callback, flow, version});
}

void Engine::at(SimTime t, Callback cb) {
  if (t < now_) throw std::logic_error("Engine::at: time is in the past");
  push(t, store(std::move(cb)));
}

void Engine::start_flow(std::span<const LinkUse> route, double bytes, SimTime latency, Callback on_delivered) {
  if (!(bytes >= 0)) throw std::invalid_argument("Engine::start_flow: bytes must be >= 0");
  if (latency < SimTime{}) throw std::invalid_argument("Engine::start_flow: latency must be >= 0");
  if (bytes == 0 || route.empty()) {
    at(now_ + latency, std::move(on_delivered));
    return;
  }
  const FlowId id = solver_.add_flow(route);
  if (flows_.size() <= id) flows_.resize(id + 1);
  FlowState& f = flows_[id];
  f.remaining_bytes = bytes;
  f.rate_Bps = 0;
  f.last_update = now_;
  f.latency = latency;
  ++f.version;  // invalidates any completion left over from a previous flow with this id
  f.callback = store(std::move(on_delivered));
  ++stats_.flows_started;
  stats_.peak_active_flows = std::max<std::uint64_t>(stats_.peak_active_flows, solver_.active_flows());
}

// Re-solves touched components; flows whose rate changed are settled at the old rate up to now
// and get a new completion event (the old one becomes stale through the version number).
void Engine::resolve() {
  ++stats_.solves;
  for (const FlowId id : solver_.solve()) {
    FlowState& f = flows_[id];
    const double elapsed_s = (now_ - f.last_update).to_s();
    f.remaining_bytes = std::max(0.0, f.remaining_bytes - f.rate_Bps * elapsed_s);
    f.last_update = now_;
    f.rate_Bps = solver_.rate_Bps(id);
    ++f.version;
    push(now_ + SimTime::transfer(f.remaining_bytes, f.rate_Bps), kFlowCompletion, id, f.version);
  }
}

// One event (or one re-solve) if the next event is at or before `limit`; false when done.
bool Engine::step(SimTime limit) {
  if (queue_.empty() || queue_.top().time > now_) {
    if (solver_.dirty()) {
      resolve();
      return true;
    }
  }
  if (queue_.empty() || queue_.top().time > limit) return false;
  const Event e = queue_.top();
  queue_.pop();
  now_ = e.time;
  if (e.callback == kFlowCompletion) {
    FlowState& f = flows_[e.flow];
    if (f.version != e.version) return true;  // superseded by a rate change
    ++stats_.events;
    solver_.remove_flow(e.flow);
    ++f.version;
    push(now_ + f.latency, f.callback);
    return true;
  }
  ++stats_.events;
  Callback cb = std::move(callbacks_[e.callback]);
  callbacks_[e.callback] = nullptr;
  free_callbacks_.push_back(e.callback);
  if (cb) cb();
  return true;
}

void Engine::run() {
  while (step(SimTime::max())) {
  }
}

void Engine::run_until(SimTime t) {
  while (step(t)) {
  }
  if (t > now_) now_ = t;
}

}  // namespace dionsim::sim
