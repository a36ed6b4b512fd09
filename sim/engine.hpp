#pragma once
// The discrete-event engine: one event queue ordered by (time, sequence number) so that ties
// run in the order they were scheduled, and one flow network (a MaxMinSolver) whose flows
// progress at their max-min fair rates between events. No global state: tests make many.
//
// Flow semantics: a flow of `bytes` enters the network when started, shares every link of its
// route max-min fairly with the other active flows, and is delivered `latency` after its last
// byte left (the message's latency is paid once, at the end). Rates are recomputed lazily: all
// events of one instant run first, then the touched components are re-solved once, so that a
// collective starting a thousand flows at the same time costs one solve.
#include <cstdint>
#include <functional>
#include <queue>
#include <span>
#include <vector>

#include "sim/maxmin.hpp"
#include "sim/time.hpp"

namespace dionsim::sim {

class Engine {
 public:
  using Callback = std::function<void()>;

  struct Stats {
    std::uint64_t events = 0;          // callbacks and flow completions processed
    std::uint64_t flows_started = 0;   // network flows (a class of identical flows counts once)
    std::uint64_t solves = 0;          // re-solves of the flow network
    std::uint64_t peak_active_flows = 0;
  };

  [[nodiscard]] SimTime now() const { return now_; }

  // Runs `cb` at time `t` (>= now(); earlier throws std::logic_error).
  void at(SimTime t, Callback cb);
  void after(SimTime delay, Callback cb) { at(now_ + delay, std::move(cb)); }

  // Network links (capacity in bytes/s, > 0).
  LinkId add_link(double capacity_Bps) { return solver_.add_link(capacity_Bps); }
  // Changes a link's capacity now: the flows crossing it are settled at their old rates and go
  // on at the re-solved ones (lazily, once all events of this instant have run).
  void set_link_capacity(LinkId link, double capacity_Bps) { solver_.set_capacity(link, capacity_Bps); }

  // Starts a flow of `bytes` (>= 0) along `route` now; `on_delivered` runs at completion +
  // latency. A zero-byte flow (or an empty route, i.e. a local copy) is delivered after latency.
  void start_flow(std::span<const LinkUse> route, double bytes, SimTime latency, Callback on_delivered);

  // Processes events until none is left.
  void run();
  // Processes events with time <= `t`, then sets now() to t (flows keep their progress).
  void run_until(SimTime t);

  [[nodiscard]] const MaxMinSolver& network() const { return solver_; }
  [[nodiscard]] const Stats& stats() const { return stats_; }
  [[nodiscard]] bool idle() const { return queue_.empty() && solver_.active_flows() == 0; }

 private:
  struct Event {
    SimTime time;
    std::uint64_t seq;
    std::uint32_t callback;  // slot in callbacks_, or kFlowCompletion
    std::uint32_t flow;      // for completions: solver FlowId
    std::uint32_t version;   // for completions: must match FlowState::version
    friend bool operator>(const Event& a, const Event& b) {
      return a.time != b.time ? a.time > b.time : a.seq > b.seq;
    }
  };
  struct FlowState {
    double remaining_bytes = 0;
    double rate_Bps = 0;
    SimTime last_update;
    SimTime latency;
    std::uint32_t version = 0;
    std::uint32_t callback = 0;
  };
  static constexpr std::uint32_t kFlowCompletion = 0xffffffffu;

  std::uint32_t store(Callback cb);
  void push(SimTime t, std::uint32_t callback, std::uint32_t flow = 0, std::uint32_t version = 0);
  void resolve();
  bool step(SimTime limit);

  SimTime now_;
  std::uint64_t seq_ = 0;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> queue_;
  std::vector<Callback> callbacks_;
  std::vector<std::uint32_t> free_callbacks_;
  MaxMinSolver solver_;
  std::vector<FlowState> flows_;  // indexed by solver FlowId
  Stats stats_;
};

}  // namespace dionsim::sim
