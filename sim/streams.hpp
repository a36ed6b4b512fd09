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

  OpId compute(int rank, SimTime duration, std::string label, std::span<const OpId> deps = {},
               SimTime not_before = SimTime{});
  // A comm-stream op of known duration on one rank (e.g. a measured collective on that rank).
  OpId comm_delay(int rank, SimTime duration, std::string label, std::span<const OpId> deps = {},
                  SimTime not_before = SimTime{});
  // A collective over all ranks, simulated as flows on the network (exact path).
  OpId collective(const CollectiveSpec& spec, std::string label, std::span<const OpId> deps = {},
                  SimTime not_before = SimTime{});
  // An all-to-all with per-pair sizes (bytes[src * ranks + dst]) over all ranks, as flows.
  OpId alltoallv(std::vector<double> bytes, std::string label, std::span<const OpId> deps = {},
                 SimTime not_before = SimTime{});
  // A collective over all ranks lasting `duration` (no flows on the network).
  OpId collective_timed(SimTime duration, double bytes, std::string label, std::span<const OpId> deps = {},
                        SimTime not_before = SimTime{});
  // One message src -> dst on src's comm stream, delivered over the network.
  OpId send(int src, int dst, double bytes, std::string label, std::span<const OpId> deps = {},
            SimTime not_before = SimTime{});

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
  SimTime collective_busy_;                   // collectives occupy every comm stream
};

}  // namespace dionsim::sim
