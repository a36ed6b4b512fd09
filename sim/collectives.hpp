#pragma once
// Collectives as flows on the engine. Sizes follow nccl-tests: `bytes` is the per-rank buffer
// S (all-to-all: what each rank sends in total, S/w to each rank, itself included; all-gather:
// the gathered output, S/w contributed per rank; reduce-scatter: the input, S/w kept per rank;
// all-reduce: the buffer, a ring of 2(w-1) steps of S/w; send/recv: the message). Every message pays its route's latency; a rank's chunk to itself is
// a local copy and takes no network time.
//
// Two ways to run one:
//  * FabricNetwork::launch: exact, one engine flow per message, on an engine that mirrors a
//    topology, alongside whatever else runs on that engine (the step program's building block);
//  * simulate_collective: the collective alone on the fabric, returning its duration. In
//    Mode::fast it uses symmetry where flows are provably identical (uniform direct collectives
//    on a symmetric fabric: one solver variable per class of flows with equal route kinds, see
//    docs/simulator.md), and falls back to the exact path otherwise.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sim/engine.hpp"
#include "topologies/topology.hpp"

namespace dionsim::sim {

enum class CollectiveOp { alltoall, allgather, reducescatter, sendrecv, allreduce };
enum class Algorithm { direct, ring };
enum class Mode { fast, exact };

[[nodiscard]] const char* to_string(CollectiveOp op);
[[nodiscard]] const char* to_string(Algorithm algorithm);
// busbw / algbw as in nccl-tests: (n-1)/n for all-to-all, all-gather, reduce-scatter; 2(n-1)/n
// for all-reduce; 1 for p2p.
[[nodiscard]] double bus_factor(CollectiveOp op, int ranks);
// nccl-tests' sendrecv sends from every rank r to r + 1 (mod ranks); its pairs are of at most two
// kinds on a fabric of `domain`-rank NVLink domains: inside a domain (0 -> 1; rank 0 to itself on
// one rank) and across domains (the last rank of the first domain -> the first of the next). One
// pair of each kind, in that order.
[[nodiscard]] std::vector<std::pair<int, int>> nccl_tests_sendrecv_pairs(int ranks, int domain);

struct CollectiveSpec {
  CollectiveOp op = CollectiveOp::alltoall;
  Algorithm algorithm = Algorithm::direct;  // all-to-all is always direct; p2p ignores it
  std::int64_t bytes = 0;                   // S, >= 0
  int src = 0;                              // send/recv only
  int dst = 1;                              // send/recv only
  // PXN (NCCL's default on rail-optimized fabrics): a message to a GPU of another node on
  // another rail first crosses NVLink to the local GPU of the destination's rail, then that
  // GPU's NIC, so it never leaves its rail's leaf. Direct collectives and p2p only.
  bool pxn = false;
};

struct CollectiveResult {
  SimTime time;               // from launch to the last delivery
  bool used_symmetry = false;
  std::uint64_t solver_flows = 0;  // flows the solver handled (classes in the fast path)
  std::uint64_t messages = 0;      // network messages the collective consists of
};

// An engine's view of a topology: one engine link per topology link.
class FabricNetwork {
 public:
  FabricNetwork(Engine& engine, const topo::Topology& topology);

  [[nodiscard]] Engine& engine() { return engine_; }
  [[nodiscard]] const topo::Topology& topology() const { return topology_; }

  // Starts one message now; `on_delivered` runs when its last byte arrived plus latency.
  void send(int src, int dst, double bytes, Engine::Callback on_delivered);
  // The same with PXN routing when `pxn` (CollectiveSpec::pxn).
  void send(int src, int dst, double bytes, bool pxn, Engine::Callback on_delivered);

  // Starts the collective over all ranks now, exactly (one flow per message); `on_done` runs
  // when its last message is delivered. Returns the number of messages. Throws
  // std::invalid_argument for a malformed spec (validate_spec first for a user-facing error).
  std::uint64_t launch(const CollectiveSpec& spec, Engine::Callback on_done);

  // All-to-all with per-pair sizes (alltoallv): bytes[src * w + dst]; the diagonal is a local
  // copy and zero entries send nothing. Exact. Returns the number of messages.
  std::uint64_t launch_alltoallv(std::span<const double> bytes, Engine::Callback on_done);

 private:
  Engine& engine_;
  const topo::Topology& topology_;
  std::vector<LinkId> link_;  // topology link -> engine link
  std::vector<LinkUse> scratch_;
};

// nccl-tests' -b/-e/-f sweep: min, min*factor, ... <= max. UsageError for min > max ("invalid
// sizes for 'minbytes' and 'maxbytes': 8 > 4"), min = 0, or factor < 2.
[[nodiscard]] std::vector<std::int64_t> sweep_sizes(std::int64_t min_bytes, std::int64_t max_bytes,
                                                    std::int64_t factor);

// Checks a spec against a topology; throws UsageError naming the flag.
void validate_spec(const CollectiveSpec& spec, const topo::Topology& topology);

// Runs the collective alone on a fresh engine.
[[nodiscard]] CollectiveResult simulate_collective(const topo::Topology& topology, const CollectiveSpec& spec,
                                                   Mode mode);

}  // namespace dionsim::sim
