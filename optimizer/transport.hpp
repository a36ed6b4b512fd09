#pragma once
// In-process transport between simulated ranks: collectives copy real bytes from every rank's
// send buffers into every rank's receive buffers and record the bytes each rank sent, so the
// counts can be checked against the plan (spec §3.5: self-chunk included; all-gather = input).
#include <cstdint>
#include <string>
#include <vector>

#include "optimizer/plan.hpp"

namespace dionsim::opt {

struct CollectiveRecord {
  std::string name;                     // as in the plan: norms_allgather, a2a_fwd, a2a_rev, ddp_allgather
  CollectiveKind kind = CollectiveKind::none;
  std::int64_t group = -1;              // shape group index
  std::vector<std::int64_t> bytes_sent; // per rank
  std::int64_t bytes_per_peer = 0;      // one message (uniform; all ranks send equal chunks)
};

class SimTransport {
 public:
  explicit SimTransport(std::int64_t world) : world_(world) {}

  // send[s][d] -> returned recv[d][s]. Every chunk must have the same size (fixed-size a2a);
  // throws std::logic_error otherwise.
  template <class T>
  std::vector<std::vector<std::vector<T>>> all_to_all(const std::string& name, std::int64_t group,
                                                      const std::vector<std::vector<std::vector<T>>>& send);
  // inputs[r] (equal sizes) -> the rank-major concatenation every rank receives (one copy returned).
  template <class T>
  std::vector<T> all_gather(const std::string& name, std::int64_t group, const std::vector<std::vector<T>>& inputs);

  [[nodiscard]] const std::vector<CollectiveRecord>& records() const { return records_; }
  void clear() { records_.clear(); }
  [[nodiscard]] std::int64_t world() const { return world_; }

 private:
  std::int64_t world_;
  std::vector<CollectiveRecord> records_;
};

}  // namespace dionsim::opt

#include "optimizer/transport_impl.hpp"
