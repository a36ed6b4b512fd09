// The global_capped deferral engine on ranking keys only (spec §8 TV1, TV2, TV3, TV5, TV6, §4.11
// invariants, §5.3's direct-call tests). A small norm-level world moves real chunk bytes between
// simulated ranks; the payload rows carry a (rank, matrix, row) tag so routing is checked exactly.
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "optimizer/capped.hpp"
#include "optimizer/plan.hpp"

using namespace dionsim::opt;

namespace {

using Keys = std::vector<std::vector<std::vector<float>>>;  // [rank][matrix][local row]

struct World {
  std::int64_t w = 0, N = 0, S = 0, C = 0, pl = 0, pr = 0, B = 0, k_tot = 0, kw = 0;
  CappedWinners winners;
  std::vector<CappedPack> packs;                          // per rank
  std::vector<CappedAssembly> assemblies;                 // per owner
  std::vector<std::vector<std::vector<std::int64_t>>> ns_rows;  // [owner][j] global rows in the NS buffer (-1 zero)
  std::vector<std::vector<std::int32_t>> headers;         // [sender*w + dest] counts
  std::vector<std::set<std::pair<std::int64_t, std::int64_t>>> returned;  // per rank (matrix, global row)
};

// Tag of a row as bf16 words: word 0 = rank+1, 1 = matrix+1, 2 = row+1 (never zero).
void tag_row(std::int64_t r, std::int64_t m, std::int64_t row, std::uint16_t* out) {
  out[0] = static_cast<std::uint16_t>(r + 1);
  out[1] = static_cast<std::uint16_t>(m + 1);
  out[2] = static_cast<std::uint16_t>(row + 1);
}

World run(const Keys& keys, std::int64_t S, std::int64_t C, double f, std::optional<double> cf) {
  World x;
  x.w = static_cast<std::int64_t>(keys.size());
  x.N = static_cast<std::int64_t>(keys[0].size());
  x.S = S;
  x.C = C;
  PlanConfig cfg;
  cfg.world = x.w;
  cfg.scope = Scope::global_capped;
  cfg.fraction = f;
  cfg.capacity_factor = cf;
  const GroupPlan g = plan_group(S, C, x.N, cfg);
  x.pl = g.pl;
  x.pr = g.pr;
  x.B = g.B;
  x.k_tot = g.k_tot;
  x.kw = g.kw;
  // all-gather of padded norms
  std::vector<float> gathered;
  std::vector<std::vector<float>> flat(static_cast<std::size_t>(x.w));
  for (std::int64_t r = 0; r < x.w; ++r) {
    const std::int64_t L = shard_rows(S, x.w, r);
    for (const auto& m : keys[static_cast<std::size_t>(r)]) {
      REQUIRE(static_cast<std::int64_t>(m.size()) == L);
      flat[static_cast<std::size_t>(r)].insert(flat[static_cast<std::size_t>(r)].end(), m.begin(), m.end());
    }
    const auto padded = pad_norms(flat[static_cast<std::size_t>(r)], x.N, L, x.pl);
    gathered.insert(gathered.end(), padded.begin(), padded.end());
  }
  x.winners = select_capped_winners(gathered, x.w, x.N, x.pl, x.k_tot);
  // pack and forward a2a
  const std::size_t fwd = static_cast<std::size_t>((1 + x.B) * C);
  const std::size_t rev = static_cast<std::size_t>(x.B * C);
  std::vector<std::vector<std::uint16_t>> send(static_cast<std::size_t>(x.w * x.w), std::vector<std::uint16_t>(fwd));
  for (std::int64_t r = 0; r < x.w; ++r) {
    x.packs.push_back(pack_capped(flat[static_cast<std::size_t>(r)], x.winners, r, shard_rows(S, x.w, r), x.pr, x.B));
    for (std::int64_t d = 0; d < x.w; ++d) {
      auto& chunk = send[static_cast<std::size_t>(r * x.w + d)];
      write_capped_chunk(x.packs.back(), d, C, chunk,
                         [&](std::int64_t m, std::int64_t row, std::uint16_t* out) { tag_row(r, m, row, out); });
      x.headers.push_back(decode_header(std::span<const std::uint16_t>(chunk).subspan(0, static_cast<std::size_t>(C)), x.pr));
    }
  }
  // owners: assemble, identity NS, repack
  std::vector<std::vector<std::uint16_t>> back(static_cast<std::size_t>(x.w * x.w), std::vector<std::uint16_t>(rev));
  for (std::int64_t d = 0; d < x.w; ++d) {
    std::vector<std::span<const std::uint16_t>> in;
    for (std::int64_t s = 0; s < x.w; ++s) in.emplace_back(send[static_cast<std::size_t>(s * x.w + d)]);
    std::vector<std::uint16_t> buf(static_cast<std::size_t>(x.pr * x.kw * C));
    x.assemblies.push_back(assemble_capped(in, x.pr, x.B, C, x.kw, buf));
    std::vector<std::vector<std::int64_t>> rows(static_cast<std::size_t>(x.pr));
    for (std::int64_t j = 0; j < x.pr; ++j) {
      for (std::int64_t i = 0; i < x.kw; ++i) {
        const std::uint16_t* row = buf.data() + (j * x.kw + i) * C;
        if (row[0] == 0) {
          rows[static_cast<std::size_t>(j)].push_back(-1);
          continue;
        }
        CHECK(row[1] - 1 == d * x.pr + j);  // a row lands in its own matrix's buffer
        rows[static_cast<std::size_t>(j)].push_back(shard_begin(S, x.w, row[0] - 1) + row[2] - 1);
      }
    }
    x.ns_rows.push_back(rows);
    std::vector<std::span<std::uint16_t>> out;
    for (std::int64_t s = 0; s < x.w; ++s) out.emplace_back(back[static_cast<std::size_t>(d * x.w + s)]);
    repack_capped(x.assemblies.back(), buf, x.B, C, out);
  }
  // reverse a2a and unpack
  x.returned.resize(static_cast<std::size_t>(x.w));
  for (std::int64_t r = 0; r < x.w; ++r) {
    std::vector<std::span<const std::uint16_t>> in;
    for (std::int64_t d = 0; d < x.w; ++d) in.emplace_back(back[static_cast<std::size_t>(d * x.w + r)]);
    unpack_capped(x.packs[static_cast<std::size_t>(r)], in, C,
                  [&](std::int64_t m, std::int64_t row, std::span<const std::uint16_t> words) {
                    // round trip is bit-exact (§4.11.6): the row that comes back is the row sent
                    CHECK(words[0] == r + 1);
                    CHECK(words[1] == m + 1);
                    CHECK(words[2] == row + 1);
                    x.returned[static_cast<std::size_t>(r)].insert({m, shard_begin(S, x.w, r) + row});
                  });
  }
  return x;
}

std::set<std::int64_t> applied_global(const World& x, std::int64_t m) {
  std::set<std::int64_t> out;
  for (const auto& rs : x.returned) {
    for (const auto& [mm, row] : rs) {
      if (mm == m) out.insert(row);
    }
  }
  return out;
}

std::set<std::int64_t> winners_global(const World& x, std::int64_t m) {
  std::set<std::int64_t> out;
  for (std::int64_t r = 0; r < x.w; ++r) {
    for (std::int64_t row = 0; row < shard_rows(x.S, x.w, r); ++row) {
      if (x.winners.is_winner(r, m, row)) out.insert(shard_begin(x.S, x.w, r) + row);
    }
  }
  return out;
}

// §4.11 invariants 1-4 on any world.
void check_invariants(const World& x) {
  for (std::int64_t m = 0; m < x.N; ++m) {
    const auto win = winners_global(x, m);
    CHECK(static_cast<std::int64_t>(win.size()) == x.k_tot);  // 1
    for (std::int64_t row : applied_global(x, m)) CHECK(win.count(row) == 1);  // 4: applied => winner
  }
  for (std::int64_t r = 0; r < x.w; ++r) {
    const auto& p = x.packs[static_cast<std::size_t>(r)];
    const std::int64_t L = shard_rows(x.S, x.w, r);
    std::int64_t kept = 0;
    for (std::int64_t d = 0; d < x.w; ++d) {
      std::int64_t sum = 0;
      for (auto c : p.counts[static_cast<std::size_t>(d)]) sum += c;
      CHECK(sum <= std::min(x.B, x.pr * L));  // 2
      kept += sum;
    }
    CHECK(kept + p.deferred_rows == p.winner_rows);  // 4: every winner applied or deferred
    CHECK(static_cast<std::int64_t>(x.returned[static_cast<std::size_t>(r)].size()) == kept);
  }
  for (const auto& a : x.assemblies) {
    CHECK(a.clipped == 0);  // 3
    for (auto n : a.arrivals) CHECK(n <= x.k_tot);
  }
}

}  // namespace

TEST_CASE("TV1: stable tie-break, short shard, pinned capacity", "[capped]") {
  const Keys keys{{{5, 3, 3, 1}}, {{3, 5, 2}}};
  const World x = run(keys, 7, 8, 0.5, 1.0);
  REQUIRE(x.B == 2);
  CHECK(x.winners.thresh[0] == 3.0f);
  CHECK(winners_global(x, 0) == std::set<std::int64_t>{0, 1, 2, 5});  // rank 1 row 0 (key 3 == thresh) loses
  CHECK(applied_global(x, 0) == std::set<std::int64_t>{0, 1, 5});
  REQUIRE(x.packs[0].deferred.size() == 1);
  CHECK(x.packs[0].deferred[0].row == 2);
  CHECK(x.headers[0] == std::vector<std::int32_t>{2});  // rank 0 -> dest 0
  CHECK(x.headers[1] == std::vector<std::int32_t>{0});
  CHECK(x.headers[2] == std::vector<std::int32_t>{1});
  CHECK(x.headers[3] == std::vector<std::int32_t>{0});
  CHECK(x.ns_rows[0][0] == std::vector<std::int64_t>{0, 1, 5, -1});
  CHECK(x.packs[0].winner_rows == 3);
  CHECK(x.packs[0].deferred_rows == 1);
  CHECK(x.packs[1].winner_rows == 1);
  CHECK(x.packs[1].deferred_rows == 0);
  check_invariants(x);
  // auto capacity routes this group to global (B + 1 = 5 >= pr*pl = 4)
  PlanConfig cfg;
  cfg.world = 2;
  cfg.scope = Scope::global_capped;
  cfg.fraction = 0.5;
  CHECK(plan_group(7, 8, 1, cfg).routed);
}

TEST_CASE("TV2: pooled budget with scale-normalized eviction", "[capped]") {
  const Keys keys{{{100, 90, 1, 1}, {2.0f, 0.1f, 0.1f, 0.1f}, {1, 2, 3, 4}, {4, 4, 4, 4}},
                  {{1, 1, 1, 1}, {1.5f, 0.1f, 0.1f, 0.1f}, {5, 6, 7, 8}, {4, 4, 4, 4}}};
  const World x = run(keys, 8, 8, 0.25, 1.0);
  REQUIRE(x.B == 2);
  CHECK(x.winners.thresh == std::vector<float>{90, 1.5f, 7, 4});
  CHECK(winners_global(x, 3) == std::set<std::int64_t>{0, 1});
  CHECK(x.headers[0] == std::vector<std::int32_t>{1, 1});
  CHECK(x.headers[1] == std::vector<std::int32_t>{0, 2});
  CHECK(x.headers[2] == std::vector<std::int32_t>{0, 1});
  CHECK(x.headers[3] == std::vector<std::int32_t>{2, 0});
  // slots in ascending row order, not priority order
  REQUIRE(x.packs[1].slots[1].size() == 2);
  CHECK(x.packs[1].slots[1][0].row == 2);
  CHECK(x.packs[1].slots[1][1].row == 3);
  CHECK(x.ns_rows[0][0] == std::vector<std::int64_t>{0, -1});
  CHECK(x.ns_rows[0][1] == std::vector<std::int64_t>{0, 4});
  CHECK(x.ns_rows[1][0] == std::vector<std::int64_t>{6, 7});
  CHECK(x.ns_rows[1][1] == std::vector<std::int64_t>{0, 1});
  CHECK(applied_global(x, 0) == std::set<std::int64_t>{0});
  CHECK(applied_global(x, 1) == std::set<std::int64_t>{0, 4});
  CHECK(applied_global(x, 2) == std::set<std::int64_t>{6, 7});
  CHECK(applied_global(x, 3) == std::set<std::int64_t>{0, 1});
  CHECK(x.packs[0].winner_rows == 5);
  CHECK(x.packs[0].deferred_rows == 1);
  CHECK(x.packs[1].winner_rows == 3);
  CHECK(x.packs[1].deferred_rows == 0);
  check_invariants(x);
  PlanConfig cfg;
  cfg.world = 2;
  cfg.scope = Scope::global_capped;
  cfg.capacity_factor = 1.0;
  const GroupPlan g = plan_group(8, 8, 4, cfg);
  CHECK(g.phases[1].collective.bytes_per_peer == 48);
  CHECK(g.phases[2].collective.bytes_per_peer == 32);
}

TEST_CASE("TV3: deferral across steps with error feedback", "[capped]") {
  // Keys are L1 norms; with zero gradient the only change is EF decay (0.5, exact in fp32) of the
  // applied rows.
  Keys keys{{std::vector<float>(8, 0.1f)}, {std::vector<float>(8, 0.1f)}};
  keys[0][0][0] = 3.0f;
  keys[0][0][1] = 2.9f;
  keys[0][0][2] = 2.8f;
  keys[0][0][3] = 2.7f;
  const std::set<std::int64_t> expect_applied[] = {{0, 1}, {2, 3}, {0, 1}, {2, 3}};
  const float expect_thresh[] = {2.7f, 1.45f, 1.35f, 0.725f};
  for (int step = 0; step < 4; ++step) {
    CAPTURE(step);
    const World x = run(keys, 16, 32, 0.25, 1.0);
    REQUIRE(x.B == 2);
    CHECK(winners_global(x, 0) == std::set<std::int64_t>{0, 1, 2, 3});
    CHECK(x.winners.thresh[0] == expect_thresh[step]);
    const auto applied = applied_global(x, 0);
    CHECK(applied == expect_applied[step]);
    CHECK(x.packs[0].deferred_rows == 2);
    CHECK(x.packs[1].winner_rows == 0);  // rank 1 never changes
    check_invariants(x);
    for (std::int64_t row : applied) keys[0][0][static_cast<std::size_t>(row)] *= 0.5f;
  }
}

TEST_CASE("TV5: the three scopes on one uneven matrix", "[capped]") {
  const Keys keys{{{9, 1, 8, 2, 7}}, {{3, 6, 5, 4, 0}}, {{0.2f, 0.9f, 0.3f, 0.8f, 0.1f}}, {{0.5f, 0.4f}}};
  SECTION("local: per-rank top-k = 2, rank 3 selects both rows") {
    const std::vector<std::vector<std::int64_t>> expect{{0, 2}, {1, 2}, {1, 3}, {0, 1}};
    for (std::size_t r = 0; r < 4; ++r) {
      CHECK(top_k_rows(keys[r][0], 2) == expect[r]);
    }
  }
  SECTION("global: top-6 of the assembled (zero-padded) matrix") {
    std::vector<float> assembled(20, 0.0f);
    for (std::size_t r = 0; r < 4; ++r) {
      std::copy(keys[r][0].begin(), keys[r][0].end(), assembled.begin() + static_cast<std::ptrdiff_t>(5 * r));
    }
    CHECK(top_k_rows(assembled, 6) == std::vector<std::int64_t>{0, 2, 4, 6, 7, 8});
  }
  SECTION("global_capped with c = 1") {
    const World x = run(keys, 17, 32, 0.35, 1.0);
    CHECK(x.B == 2);
    CHECK(x.k_tot == 6);
    CHECK(x.winners.thresh[0] == 4.0f);
    CHECK(winners_global(x, 0) == std::set<std::int64_t>{0, 2, 4, 6, 7, 8});
    CHECK(applied_global(x, 0) == std::set<std::int64_t>{0, 2, 6, 7});
    CHECK(x.headers[0 * 4 + 0] == std::vector<std::int32_t>{2});
    CHECK(x.headers[1 * 4 + 0] == std::vector<std::int32_t>{2});
    CHECK(x.headers[2 * 4 + 0] == std::vector<std::int32_t>{0});
    for (int s = 0; s < 4; ++s) {
      for (int d = 1; d < 4; ++d) CHECK(x.headers[static_cast<std::size_t>(s * 4 + d)] == std::vector<std::int32_t>{0});
    }
    CHECK(x.ns_rows[0][0] == std::vector<std::int64_t>{0, 2, 6, 7, -1, -1, -1, -1});
    check_invariants(x);
  }
  SECTION("other local counts") {
    // S = 3, w = 4, f = 0.5: L = [1,1,1,0], k = 1 -> 1, 1, 1, 0 rows
    for (std::int64_t r = 0; r < 4; ++r) {
      CHECK(static_cast<std::int64_t>(top_k_rows(std::vector<float>(static_cast<std::size_t>(shard_rows(3, 4, r)), 1.0f), 1).size()) ==
            (r < 3 ? 1 : 0));
    }
  }
}

TEST_CASE("TV6: header bit-cast round trip", "[capped]") {
  const std::vector<std::vector<std::int32_t>> counts{{320, 4097, 0}, {70000, 1, 1048576}};
  const std::vector<std::vector<std::uint16_t>> words{{0x0140, 0x0000, 0x1001, 0x0000, 0x0000, 0x0000},
                                                     {0x1170, 0x0001, 0x0001, 0x0000, 0x0000, 0x0010}};
  for (std::size_t d = 0; d < 2; ++d) {
    std::vector<std::uint16_t> row(8, 0xFFFF);
    encode_header(counts[d], row);
    CHECK(std::vector<std::uint16_t>(row.begin(), row.begin() + 6) == words[d]);
    CHECK(row[6] == 0);
    CHECK(row[7] == 0);
    CHECK(decode_header(row, 3) == counts[d]);
  }
  std::vector<std::uint16_t> small(5);
  CHECK_THROWS(encode_header(counts[0], small));
}

TEST_CASE("§5.3: direct-call capped tests", "[capped]") {
  SECTION("select is rank-consistent: w=2, N=2, pl=4, S=7, f=0.5, rank 1 short") {
    const Keys keys{{{0.3f, 0.9f, 0.1f, 0.7f}, {2, 2, 1, 3}}, {{0.8f, 0.2f, 0.6f}, {2, 5, 0}}};
    const World x = run(keys, 7, 8, 0.5, 1.0);
    CHECK(x.k_tot == 4);
    CHECK(winners_global(x, 0).size() + winners_global(x, 1).size() == 2 * 4);
    CHECK(x.winners.thresh[1] == 2.0f);
  }
  SECTION("a shard longer than pl raises before any collective") {
    CHECK_THROWS_WITH(pad_norms(std::vector<float>(5, 1.0f), 1, 5, 3), Catch::Contains("exceeds padded size"));
  }
  SECTION("pack round trip: blackout matrix, deferred r0 = 1, r1 = 0") {
    // w=2, pr=2, N=4, L=4, B=3, kw=4, thresh 1; winners r0: m0{0,1,2}, m1{1}, m2{0,1}; r1: m0{0},
    // m1{2}; m3 has none. The winner mask is given directly (pack does not re-derive it).
    CappedWinners win;
    win.world = 2;
    win.N = 4;
    win.pl = 4;
    win.thresh = {1, 1, 1, 1};
    win.mask.assign(2 * 4 * 4, 0);
    auto set = [&](int r, int m, int row) { win.mask[static_cast<std::size_t>((r * 4 + m) * 4 + row)] = 1; };
    set(0, 0, 0), set(0, 0, 1), set(0, 0, 2), set(0, 1, 1), set(0, 2, 0), set(0, 2, 1);
    set(1, 0, 0), set(1, 1, 2);
    const std::vector<float> norms(16, 1.0f);
    const CappedPack p0 = pack_capped(norms, win, 0, 4, 2, 3);
    const CappedPack p1 = pack_capped(norms, win, 1, 4, 2, 3);
    CHECK(p0.deferred_rows == 1);
    CHECK(p1.deferred_rows == 0);
    CHECK(p0.counts[1] == std::vector<std::int32_t>{2, 0});  // m3 blackout
    // equal priorities: the smaller flat index wins -> m1 row 1 (q = 5) is the one deferred
    REQUIRE(p0.deferred.size() == 1);
    CHECK(p0.deferred[0].matrix == 1);
    CHECK(p0.deferred[0].row == 1);
  }
  SECTION("pooled slots absorb cross-matrix skew (c = 1, pr = 2, B = 4)") {
    // 4 matrices (16, 32) on w = 2: m0 boosts rows 0-3 = 300/290/280/275 (rank 0); m1 row 0 = 3.0 (rank 0),
    // rows 8, 9, 10 = 2.9/2.8/2.7 (rank 1); noise 0.01 elsewhere.
    Keys keys(2, std::vector<std::vector<float>>(4, std::vector<float>(8, 0.01f)));
    keys[0][0][0] = 300, keys[0][0][1] = 290, keys[0][0][2] = 280, keys[0][0][3] = 275;
    keys[0][1][0] = 3.0f, keys[1][1][0] = 2.9f, keys[1][1][1] = 2.8f, keys[1][1][2] = 2.7f;
    for (int m = 2; m < 4; ++m) {
      for (int r = 0; r < 2; ++r) {
        for (int row = 0; row < 8; ++row) keys[static_cast<std::size_t>(r)][static_cast<std::size_t>(m)][static_cast<std::size_t>(row)] = 0.01f * static_cast<float>(1 + row + 8 * r);
      }
    }
    const World x = run(keys, 16, 32, 0.25, 1.0);
    REQUIRE(x.B == 4);
    CHECK(applied_global(x, 0) == std::set<std::int64_t>{0, 1, 2});
    CHECK(applied_global(x, 1) == std::set<std::int64_t>{0, 8, 9, 10});
    check_invariants(x);
  }
}

TEST_CASE("§4.11.5: with no overflow the applied set equals global's top-k on the same keys", "[capped]") {
  // Random keys on an uneven world with auto capacity at a size where nothing overflows.
  std::uint32_t state = 12345;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) / 16777216.0f;
  };
  const std::int64_t S = 61, w = 4, N = 6;
  Keys keys(w);
  for (std::int64_t r = 0; r < w; ++r) {
    for (std::int64_t m = 0; m < N; ++m) {
      std::vector<float> v(static_cast<std::size_t>(shard_rows(S, w, r)));
      for (auto& e : v) e = next();
      keys[static_cast<std::size_t>(r)].push_back(v);
    }
  }
  const World x = run(keys, S, 64, 0.25, 3.0);
  check_invariants(x);
  for (std::int64_t m = 0; m < N; ++m) {
    std::vector<float> all;
    for (std::int64_t r = 0; r < w; ++r) all.insert(all.end(), keys[static_cast<std::size_t>(r)][static_cast<std::size_t>(m)].begin(), keys[static_cast<std::size_t>(r)][static_cast<std::size_t>(m)].end());
    const auto top = top_k_rows(all, x.k_tot);
    CHECK(applied_global(x, m) == std::set<std::int64_t>(top.begin(), top.end()));
  }
}
