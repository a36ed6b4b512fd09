#include "sim/streams.hpp"

#include <algorithm>
#include <stdexcept>

namespace dionsim::sim {

const char* to_string(Stream stream) { return stream == Stream::compute ? "compute" : "comm"; }

StreamProgram::StreamProgram(Engine& engine, int ranks, FabricNetwork* network)
    : engine_(engine), ranks_(ranks), network_(network) {
  if (ranks < 1) throw std::invalid_argument("StreamProgram: ranks must be >= 1");
  if (network != nullptr && network->topology().ranks() != ranks) {
    throw std::invalid_argument("StreamProgram: ranks differ from the network's topology");
  }
  last_on_stream_.assign(static_cast<std::size_t>(ranks) * 2, -1);
  busy_.assign(static_cast<std::size_t>(ranks) * 2, SimTime{});
}

void StreamProgram::check_rank(int rank, const char* what) const {
  if (rank < 0 || rank >= ranks_) throw std::invalid_argument(std::string("StreamProgram::") + what + ": bad rank");
}

void StreamProgram::depend(OpId op, OpId on) {
  if (on >= ops_.size() || on == op) throw std::invalid_argument("StreamProgram: unknown dependency");
  if (ops_[on].record.done) return;
  ++ops_[op].waiting;
  ops_[on].successors.push_back(op);
}

// Adds an op after the last op of each of its streams and after its deps; it becomes ready now
// if nothing is pending (ops may be added while the engine runs, e.g. from a callback).
OpId StreamProgram::add(Op op, std::span<const OpId> deps, std::span<const std::size_t> streams) {
  const auto id = static_cast<OpId>(ops_.size());
  ops_.push_back(std::move(op));
  for (const std::size_t s : streams) {
    if (last_on_stream_[s] >= 0) depend(id, static_cast<OpId>(last_on_stream_[s]));
    last_on_stream_[s] = id;
  }
  for (const OpId d : deps) depend(id, d);
  if (ops_[id].waiting == 0) ready(id);
  return id;
}

void StreamProgram::ready(OpId id) {
  const SimTime t = std::max(engine_.now(), ops_[id].not_before);
  engine_.at(t, [this, id] { begin(id); });
}

void StreamProgram::begin(OpId id) {
  Op& op = ops_[id];
  op.record.started = true;
  op.record.start = engine_.now();
  switch (op.kind) {
    case Kind::delay:
      engine_.after(op.duration, [this, id] { finish(id); });
      break;
    case Kind::collective:
      network_->launch(op.spec, [this, id] { finish(id); });
      break;
    case Kind::alltoallv:
      network_->launch_alltoallv(op.matrix, [this, id] { finish(id); });
      break;
    case Kind::send:
      network_->send(op.record.rank, op.dst, op.record.bytes, [this, id] { finish(id); });
      break;
  }
}

void StreamProgram::finish(OpId id) {
  Op& op = ops_[id];
  op.record.done = true;
  op.record.end = engine_.now();
  const SimTime took = op.record.end - op.record.start;
  if (op.record.rank < 0) {
    collective_busy_ += took;
  } else {
    busy_[stream_index(op.record.rank, op.record.stream)] += took;
  }
  // Copy: a successor's ready() may add ops (and grow ops_) from inside the engine later, not
  // here, but keep the loop independent of `op` anyway.
  const std::vector<OpId> next = op.successors;
  for (const OpId s : next) {
    if (--ops_[s].waiting == 0) ready(s);
  }
}

OpId StreamProgram::compute(int rank, SimTime duration, std::string label, std::span<const OpId> deps,
                            SimTime not_before) {
  check_rank(rank, "compute");
  Op op;
  op.record = OpRecord{std::move(label), rank, Stream::compute, 0, {}, {}, false, false};
  op.duration = duration;
  op.not_before = not_before;
  const std::size_t s[] = {stream_index(rank, Stream::compute)};
  return add(std::move(op), deps, s);
}

OpId StreamProgram::comm_delay(int rank, SimTime duration, std::string label, std::span<const OpId> deps,
                               SimTime not_before) {
  check_rank(rank, "comm_delay");
  Op op;
  op.record = OpRecord{std::move(label), rank, Stream::comm, 0, {}, {}, false, false};
  op.duration = duration;
  op.not_before = not_before;
  const std::size_t s[] = {stream_index(rank, Stream::comm)};
  return add(std::move(op), deps, s);
}

OpId StreamProgram::collective(const CollectiveSpec& spec, std::string label, std::span<const OpId> deps,
                               SimTime not_before) {
  if (network_ == nullptr) throw std::logic_error("StreamProgram::collective: no network");
  Op op;
  op.record = OpRecord{std::move(label), -1, Stream::comm, static_cast<double>(spec.bytes), {}, {}, false, false};
  op.kind = Kind::collective;
  op.spec = spec;
  op.not_before = not_before;
  std::vector<std::size_t> streams;
  for (int r = 0; r < ranks_; ++r) streams.push_back(stream_index(r, Stream::comm));
  return add(std::move(op), deps, streams);
}

OpId StreamProgram::alltoallv(std::vector<double> bytes, std::string label, std::span<const OpId> deps,
                              SimTime not_before) {
  if (network_ == nullptr) throw std::logic_error("StreamProgram::alltoallv: no network");
  if (bytes.size() != static_cast<std::size_t>(ranks_) * static_cast<std::size_t>(ranks_)) {
    throw std::invalid_argument("StreamProgram::alltoallv: need ranks x ranks sizes");
  }
  double total = 0;
  for (const double b : bytes) total += b;
  Op op;
  op.record = OpRecord{std::move(label), -1, Stream::comm, total, {}, {}, false, false};
  op.kind = Kind::alltoallv;
  op.matrix = std::move(bytes);
  op.not_before = not_before;
  std::vector<std::size_t> streams;
  for (int r = 0; r < ranks_; ++r) streams.push_back(stream_index(r, Stream::comm));
  return add(std::move(op), deps, streams);
}

OpId StreamProgram::collective_timed(SimTime duration, double bytes, std::string label, std::span<const OpId> deps,
                                     SimTime not_before) {
  Op op;
  op.record = OpRecord{std::move(label), -1, Stream::comm, bytes, {}, {}, false, false};
  op.duration = duration;
  op.not_before = not_before;
  std::vector<std::size_t> streams;
  for (int r = 0; r < ranks_; ++r) streams.push_back(stream_index(r, Stream::comm));
  return add(std::move(op), deps, streams);
}

OpId StreamProgram::send(int src, int dst, double bytes, std::string label, std::span<const OpId> deps,
                         SimTime not_before) {
  if (network_ == nullptr) throw std::logic_error("StreamProgram::send: no network");
  check_rank(src, "send");
  check_rank(dst, "send");
  Op op;
  op.record = OpRecord{std::move(label), src, Stream::comm, bytes, {}, {}, false, false};
  op.kind = Kind::send;
  op.dst = dst;
  op.not_before = not_before;
  const std::size_t s[] = {stream_index(src, Stream::comm)};
  return add(std::move(op), deps, s);
}

void StreamProgram::run() {
  engine_.run();
  for (const Op& op : ops_) {
    if (!op.record.done) throw std::logic_error("StreamProgram::run: op '" + op.record.label + "' never ran (cycle?)");
  }
}

SimTime StreamProgram::busy(int rank, Stream stream) const {
  check_rank(rank, "busy");
  SimTime t = busy_[stream_index(rank, stream)];
  if (stream == Stream::comm) t += collective_busy_;
  return t;
}

SimTime StreamProgram::makespan() const {
  SimTime t;
  for (const Op& op : ops_) t = std::max(t, op.record.end);
  return t;
}

}  // namespace dionsim::sim
