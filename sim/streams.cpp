#include "sim/streams.hpp"

#include <algorithm>
#include <cmath>
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
  running_.assign(static_cast<std::size_t>(ranks) * 2, -1);
  for (int r = 0; r < ranks; ++r) all_comm_.push_back(stream_index(r, Stream::comm));
}

Contention StreamProgram::checked(const Contention& c) {
  const auto factor = [](double f) { return f >= 1.0 && std::isfinite(f); };
  if (!factor(c.slowdown_beside_comm) || !factor(c.slowdown_beside_memory_bound)) {
    throw std::invalid_argument("StreamProgram: contention slowdowns must be finite factors >= 1");
  }
  return c;
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

// Marks the streams an op occupies as running it (value = id) or free (value = -1).
void StreamProgram::occupy(OpId id, std::int64_t value) {
  const Op& op = ops_[id];
  if (op.record.rank >= 0) {
    running_[stream_index(op.record.rank, op.record.stream)] = value;
    return;
  }
  for (int r = 0; r < ranks_; ++r) running_[stream_index(r, Stream::comm)] = value;
}

// The slowdown a delay op has with what runs beside it now (flows: 1, the network sets their pace).
double StreamProgram::slowdown_now(const Op& op) const {
  if (op.kind != Kind::delay) return 1.0;
  if (op.record.stream == Stream::compute) {
    const bool comm_in_flight = running_[stream_index(op.record.rank, Stream::comm)] >= 0;
    return comm_in_flight ? op.contention.slowdown_beside_comm : 1.0;
  }
  if (op.contention.slowdown_beside_memory_bound == 1.0) return 1.0;
  const auto beside_memory_bound = [&](int r) {
    const std::int64_t c = running_[stream_index(r, Stream::compute)];
    return c >= 0 && ops_[static_cast<std::size_t>(c)].contention.memory_bound;
  };
  bool slowed = false;
  if (op.record.rank >= 0) {
    slowed = beside_memory_bound(op.record.rank);
  } else {
    for (int r = 0; r < ranks_ && !slowed; ++r) slowed = beside_memory_bound(r);
  }
  return slowed ? op.contention.slowdown_beside_memory_bound : 1.0;
}

// Settles a running delay op's progress at its old rate up to now and schedules its completion
// at the new one (rounded up to the next picosecond); the previous completion goes stale.
void StreamProgram::reschedule(OpId id, double slowdown) {
  Op& op = ops_[id];
  const auto elapsed_ps = static_cast<double>((engine_.now() - op.settled).count_ps());
  op.remaining_ps = std::max(0.0, op.remaining_ps - elapsed_ps / op.slowdown);
  op.settled = engine_.now();
  op.slowdown = slowdown;
  const std::uint32_t version = ++op.version;
  const auto left = SimTime::ps(static_cast<std::int64_t>(std::ceil(op.remaining_ps * slowdown - 1e-6)));
  engine_.at(engine_.now() + std::max(left, SimTime{}), [this, id, version] {
    if (ops_[id].version == version) finish(id);
  });
}

// Re-derives the slowdown of the delay ops running on `rank` (-1: every rank) after an op
// started or ended there.
void StreamProgram::recontend(int rank) {
  const auto update = [this](std::int64_t running) {
    if (running < 0) return;
    const auto id = static_cast<OpId>(running);
    const Op& op = ops_[id];
    if (op.kind != Kind::delay) return;
    const double s = slowdown_now(op);
    if (s != op.slowdown) reschedule(id, s);
  };
  const int first = rank >= 0 ? rank : 0;
  const int last = rank >= 0 ? rank : ranks_ - 1;
  for (int r = first; r <= last; ++r) {
    update(running_[stream_index(r, Stream::compute)]);
    update(running_[stream_index(r, Stream::comm)]);
  }
}

void StreamProgram::begin(OpId id) {
  Op& op = ops_[id];
  op.record.started = true;
  op.record.start = engine_.now();
  occupy(id, id);
  switch (op.kind) {
    case Kind::delay:
      op.remaining_ps = static_cast<double>(op.duration.count_ps());
      op.settled = engine_.now();
      op.slowdown = 1.0;
      reschedule(id, contended_ ? slowdown_now(op) : 1.0);
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
  if (contended_) recontend(ops_[id].record.rank);
}

void StreamProgram::finish(OpId id) {
  Op& op = ops_[id];
  op.record.done = true;
  op.record.end = engine_.now();
  occupy(id, -1);
  const SimTime took = op.record.end - op.record.start;
  const int rank = op.record.rank;
  if (rank < 0) {
    collective_busy_ += took;
  } else {
    busy_[stream_index(rank, op.record.stream)] += took;
  }
  // Copy: a successor's ready() may add ops (and grow ops_) from inside the engine later, not
  // here, but keep the loop independent of `op` anyway.
  const std::vector<OpId> next = op.successors;
  if (contended_) recontend(rank);
  for (const OpId s : next) {
    if (--ops_[s].waiting == 0) ready(s);
  }
}

OpId StreamProgram::compute(int rank, SimTime duration, std::string label, std::span<const OpId> deps,
                            SimTime not_before, const Contention& contention) {
  check_rank(rank, "compute");
  Op op;
  op.contention = checked(contention);
  contended_ = contended_ || !contention.none();
  op.record = OpRecord{std::move(label), rank, Stream::compute, 0, {}, {}, false, false};
  op.duration = duration;
  op.not_before = not_before;
  const std::size_t s[] = {stream_index(rank, Stream::compute)};
  return add(std::move(op), deps, s);
}

OpId StreamProgram::comm_delay(int rank, SimTime duration, std::string label, std::span<const OpId> deps,
                               SimTime not_before, const Contention& contention) {
  check_rank(rank, "comm_delay");
  Op op;
  op.contention = checked(contention);
  contended_ = contended_ || !contention.none();
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
  return add(std::move(op), deps, all_comm_);
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
  return add(std::move(op), deps, all_comm_);
}

OpId StreamProgram::collective_timed(SimTime duration, double bytes, std::string label, std::span<const OpId> deps,
                                     SimTime not_before, const Contention& contention) {
  Op op;
  op.contention = checked(contention);
  contended_ = contended_ || !contention.none();
  op.record = OpRecord{std::move(label), -1, Stream::comm, bytes, {}, {}, false, false};
  op.duration = duration;
  op.not_before = not_before;
  return add(std::move(op), deps, all_comm_);
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
