#pragma once
// Per-rank streams as resources: a program of ops (compute kernels, collectives, messages) run
// on an Engine. It is the layer the training-step model (issue 5) is built on, and knows
// nothing of optimizers.
//
// Semantics (those of CUDA streams with events):
//  * every rank has a compute stream and a communication stream;
//  * an op occupies one stream of one rank (compute, comm_delay, send), or the comm stream of
//    every rank (collective, collective_timed);
//  * a stream runs its ops in the order they were added (stream order), one at a time;
//  * an op also waits for its `deps` (cross-stream waits, on any rank) and its `not_before`
//    time; it starts at the moment all of that holds;
//  * a compute/comm_delay op lasts its duration; a collective lasts until its last flow is
//    delivered on the shared fabric (contending with every other flow in flight), or, timed,
//    a duration computed elsewhere (e.g. simulate_collective's fast path); a send lasts until
//    its message is delivered.
//
// Contention (rate-modulated ops). An op of known duration (compute, comm_delay,
// collective_timed) is *work*: its duration at full speed, progressing at rate 1/slowdown. Its
// slowdown follows from what runs beside it on its rank (struct Contention): whenever an op
// starts or ends on a rank, the program re-derives the slowdown of every op running there,
// settles their progress at the old rate and reschedules their completion (a stale completion
// is dropped by a version number) — the same mechanism as a flow whose link changed capacity in
// the max-min network (sim/engine.hpp), with the rank's compute and comm engines as the
// resources. Time stays integer: a completion rounds up to the next picosecond, so an op with
// slowdown 1 throughout ends exactly `duration` after its start.
//
// Where this goes next (docs/simulator.md "Streams"): collectives as flows that share the fabric
// concurrently. `collective`/`alltoallv`/`send` already run as flows beside every other flow in
// flight, and they count as "a collective in flight" for the compute ops of their ranks; FSDP/HSDP
// traffic beside the optimizer's all-to-all needs a second comm stream per rank (a communicator
// of its own) and per-layer prefetch is a dependency pattern on it. A contention effect on a
// flow collective (NCCL's copy kernels starved of HBM by a memory-bound kernel) becomes a
// capacity change of the rank's links at the same op starts and ends, re-solved by the
// engine like any arrival (MaxMinSolver::set_capacity).
// A bound on work in flight (spec §1.7: at most three megabatches) is a dependency: the first op
// of megabatch k+3 depends on the last op of megabatch k.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sim/collectives.hpp"
#include "sim/engine.hpp"

namespace dionsim::sim {

enum class Stream : std::uint8_t { compute = 0, comm = 1 };
[[nodiscard]] const char* to_string(Stream stream);

using OpId = std::uint32_t;

// How an op's speed depends on what runs beside it on its rank (all factors >= 1; 1 = none).
struct Contention {
  // compute op: this many times slower while an op is in flight on its rank's comm stream
  // (NCCL kernels take SMs and HBM bandwidth)
  double slowdown_beside_comm = 1.0;
  // compute op: HBM-bound (no GEMM FLOPs): slows the comm ops beside it
  bool memory_bound = false;
  // comm_delay / collective_timed: this many times slower while a memory-bound compute op runs
  // on its rank; a collective over every rank goes at the pace of its slowest rank
  double slowdown_beside_memory_bound = 1.0;
  [[nodiscard]] bool none() const {
    return slowdown_beside_comm == 1.0 && !memory_bound && slowdown_beside_memory_bound == 1.0;
  }
};

struct OpRecord {
  std::string label;
  int rank = 0;           // -1: a collective over every rank's comm stream
  Stream stream = Stream::compute;
  double bytes = 0;       // network bytes (collective S, message size), 0 for compute
  SimTime start;          // valid once started
  SimTime end;            // valid once done
  bool started = false;
  bool done = false;
};

class StreamProgram {
 public:
  // `network` may be null for programs without flows (collective/send then throw).
  StreamProgram(Engine& engine, int ranks, FabricNetwork* network = nullptr);

  // `duration` is the op's time at full speed; `contention` may stretch it (above). Factors
  // below 1 or not finite throw std::invalid_argument.
  OpId compute(int rank, SimTime duration, std::string label, std::span<const OpId> deps = {},
               SimTime not_before = SimTime{}, const Contention& contention = {});
  // A comm-stream op of known duration on one rank (e.g. a measured collective on that rank).
  OpId comm_delay(int rank, SimTime duration, std::string label, std::span<const OpId> deps = {},
                  SimTime not_before = SimTime{}, const Contention& contention = {});
  // A collective over all ranks, simulated as flows on the network (exact path).
  OpId collective(const CollectiveSpec& spec, std::string label, std::span<const OpId> deps = {},
                  SimTime not_before = SimTime{});
  // An all-to-all with per-pair sizes (bytes[src * ranks + dst]) over all ranks, as flows.
  OpId alltoallv(std::vector<double> bytes, std::string label, std::span<const OpId> deps = {},
                 SimTime not_before = SimTime{});
  // A collective over all ranks lasting `duration` at full speed (no flows on the network).
  OpId collective_timed(SimTime duration, double bytes, std::string label, std::span<const OpId> deps = {},
                        SimTime not_before = SimTime{}, const Contention& contention = {});
  // One message src -> dst on src's comm stream, delivered over the network.
  OpId send(int src, int dst, double bytes, std::string label, std::span<const OpId> deps = {},
            SimTime not_before = SimTime{});

  // Room for `ops` ops in all (saves regrowth in programs built in one go).
  void reserve(std::size_t ops) { ops_.reserve(ops); }

  // Runs the engine until it is idle; throws std::logic_error if an op never ran (a cycle).
  void run();

  [[nodiscard]] const OpRecord& op(OpId id) const { return ops_[id].record; }
  [[nodiscard]] std::size_t op_count() const { return ops_.size(); }
  // Time `rank`'s stream spent running ops (collectives count on every rank's comm stream).
  [[nodiscard]] SimTime busy(int rank, Stream stream) const;
  // Latest end of any op.
  [[nodiscard]] SimTime makespan() const;

 private:
  enum class Kind : std::uint8_t { delay, collective, alltoallv, send };
  struct Op {
    OpRecord record;
    Kind kind = Kind::delay;
    SimTime duration;
    Contention contention;
    // a running delay op: work left (ps at full speed) as of `settled`, at 1/slowdown
    double remaining_ps = 0;
    double slowdown = 1.0;
    SimTime settled;
    std::uint32_t version = 0;  // its pending completion; bumped when rescheduled
    CollectiveSpec spec;
    std::vector<double> matrix;  // alltoallv sizes
    int dst = 0;
    SimTime not_before;
    std::uint32_t waiting = 0;           // unfinished predecessors
    std::vector<OpId> successors;
  };

  OpId add(Op op, std::span<const OpId> deps, std::span<const std::size_t> streams);
  void depend(OpId op, OpId on);
  void ready(OpId id);
  void begin(OpId id);
  void finish(OpId id);
  void occupy(OpId id, std::int64_t value);
  [[nodiscard]] double slowdown_now(const Op& op) const;
  void recontend(int rank);  // rank -1: every rank
  void reschedule(OpId id, double slowdown);
  [[nodiscard]] static Contention checked(const Contention& c);
  void check_rank(int rank, const char* what) const;
  [[nodiscard]] std::size_t stream_index(int rank, Stream s) const {
    return static_cast<std::size_t>(rank) * 2 + static_cast<std::size_t>(s);
  }

  Engine& engine_;
  int ranks_;
  FabricNetwork* network_;
  std::vector<Op> ops_;
  std::vector<std::int64_t> last_on_stream_;  // OpId or -1, by stream_index
  std::vector<SimTime> busy_;                 // by stream_index
  std::vector<std::int64_t> running_;         // OpId or -1, by stream_index
  std::vector<std::size_t> all_comm_;         // every rank's comm stream (collectives)
  bool contended_ = false;                    // some op has a Contention other than none()
  SimTime collective_busy_;                   // collectives occupy every comm stream
};

}  // namespace dionsim::sim
