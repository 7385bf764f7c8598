// The in-process Communicator (engine/parallel/communicator.h): N ranks as std::threads.
// Each test runs a body on every rank with a deadline, so a deadlock fails the test instead of
// hanging it.
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/core/error.h"
#include "engine/parallel/communicator.h"

namespace lmx {
namespace {

constexpr auto kDeadline = std::chrono::seconds(60);

// Runs body(comm) on one thread per rank of a new group of `ranks`; returns each rank's lmx::Error
// message ("" when the body returned). Fails the test if some rank has not finished by the
// deadline: its threads are then detached (they keep the group alive) so the test run goes on.
std::vector<std::string> run_ranks(int ranks, const std::function<void(Communicator&)>& body) {
  auto comms = std::make_shared<std::vector<std::unique_ptr<Communicator>>>(
      make_local_communicators(ranks));
  std::vector<std::future<std::string>> done;
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    std::packaged_task<std::string()> task([comms, body, r]() -> std::string {
      try {
        body(*(*comms)[size_t(r)]);
        return "";
      } catch (const Error& e) {
        return e.what();
      } catch (const std::exception& e) {
        return std::string("not an lmx::Error: ") + e.what();
      }
    });
    done.push_back(task.get_future());
    threads.emplace_back(std::move(task));
  }
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  bool hung = false;
  for (auto& f : done) hung |= f.wait_until(deadline) != std::future_status::ready;
  std::vector<std::string> errors;
  for (size_t r = 0; r < threads.size(); ++r) {
    if (hung) {
      threads[r].detach();
    } else {
      threads[r].join();
      errors.push_back(done[r].get());
    }
  }
  if (hung) ADD_FAILURE() << "a group of " << ranks << " ranks did not finish in time (deadlock)";
  return errors;
}

// The bodies below write results into vectors indexed by rank, one element per thread.
void expect_no_errors(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  // Mixed magnitudes, so that a different summation order would usually change the bits.
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  std::vector<float> v(n);
  for (float& x : v) x = std::ldexp(mantissa(rng), exponent(rng));
  return v;
}

TEST(Communicator, RankAndSize) {
  for (int ranks = 1; ranks <= 4; ++ranks) {
    const auto comms = make_local_communicators(ranks);
    ASSERT_EQ(comms.size(), size_t(ranks));
    for (int r = 0; r < ranks; ++r) {
      EXPECT_EQ(comms[size_t(r)]->rank(), r);
      EXPECT_EQ(comms[size_t(r)]->size(), ranks);
    }
  }
}

TEST(Communicator, RejectsFewerThanOneRank) {
  for (int ranks : {0, -3}) {
    try {
      make_local_communicators(ranks);
      ADD_FAILURE() << "no error for ranks " << ranks;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(ranks)), std::string::npos) << e.what();
    }
  }
}

TEST(Communicator, AllReduceSumIsRankOrderedAndBitwiseIdentical) {
  constexpr size_t n = 4099;
  for (int ranks = 1; ranks <= 4; ++ranks) {
    std::vector<std::vector<float>> inputs;
    std::vector<std::vector<float>> results(static_cast<size_t>(ranks));
    for (int r = 0; r < ranks; ++r) inputs.push_back(random_floats(n, uint32_t(100 * ranks + r)));
    std::vector<float> expected = inputs[0];
    for (int r = 1; r < ranks; ++r)
      for (size_t i = 0; i < n; ++i) expected[i] += inputs[size_t(r)][i];

    expect_no_errors(run_ranks(ranks, [&](Communicator& c) {
      std::vector<float> data = inputs[size_t(c.rank())];
      c.all_reduce_sum(data.data(), n);
      results[size_t(c.rank())] = std::move(data);
    }));
    for (int r = 0; r < ranks; ++r) {
      ASSERT_EQ(results[size_t(r)].size(), n);
      EXPECT_EQ(std::memcmp(results[size_t(r)].data(), expected.data(), n * sizeof(float)), 0)
          << ranks << " ranks, rank " << r;
    }
  }
}

TEST(Communicator, AllGatherConcatenatesInRankOrder) {
  for (int ranks = 1; ranks <= 4; ++ranks) {
    for (size_t n : {0, 1, 5, 1000}) {
      std::vector<std::vector<float>> results(static_cast<size_t>(ranks));
      expect_no_errors(run_ranks(ranks, [&](Communicator& c) {
        const std::vector<float> in = random_floats(n, uint32_t(c.rank()));
        std::vector<float> out(size_t(c.size()) * n, -1.0f);
        c.all_gather(in.data(), out.data(), n);
        results[size_t(c.rank())] = std::move(out);
      }));
      for (int r = 0; r < ranks; ++r) {
        for (int q = 0; q < ranks; ++q) {
          const std::vector<float> want = random_floats(n, uint32_t(q));
          EXPECT_TRUE(std::equal(want.begin(), want.end(), results[size_t(r)].begin() + q * n))
              << ranks << " ranks, n " << n << ", rank " << r << ", segment " << q;
        }
      }
    }
  }
}

TEST(Communicator, BroadcastCopiesRootToEveryRank) {
  constexpr size_t n = 777;
  for (int ranks = 1; ranks <= 4; ++ranks) {
    for (int root = 0; root < ranks; ++root) {
      std::vector<std::vector<float>> results(static_cast<size_t>(ranks));
      expect_no_errors(run_ranks(ranks, [&](Communicator& c) {
        std::vector<float> data = random_floats(n, uint32_t(c.rank()));
        c.broadcast(data.data(), n, root);
        results[size_t(c.rank())] = std::move(data);
      }));
      const std::vector<float> want = random_floats(n, uint32_t(root));
      for (int r = 0; r < ranks; ++r)
        EXPECT_EQ(results[size_t(r)], want) << ranks << " ranks, root " << root << ", rank " << r;
    }
  }
}

TEST(Communicator, BroadcastBytesCopiesRootToEveryRank) {
  for (int ranks = 1; ranks <= 3; ++ranks) {
    for (int root = 0; root < ranks; ++root) {
      std::vector<std::string> results(static_cast<size_t>(ranks));
      expect_no_errors(run_ranks(ranks, [&](Communicator& c) {
        std::string data = "rank " + std::to_string(c.rank()) + " bytes\x00\xff";
        data.resize(12, '?');
        c.broadcast_bytes(data.data(), data.size(), root);
        results[size_t(c.rank())] = data;
      }));
      std::string want = "rank " + std::to_string(root) + " bytes\x00\xff";
      want.resize(12, '?');
      for (int r = 0; r < ranks; ++r) EXPECT_EQ(results[size_t(r)], want) << ranks << " ranks, rank " << r;
    }
  }
}

// all_ranks_ok: false when any rank says false, on every rank.
TEST(Communicator, AllRanksOkAgreesOnEveryRank) {
  for (int failing = -1; failing < 3; ++failing) {
    std::vector<int> verdicts(3, -1);
    expect_no_errors(run_ranks(3, [&](Communicator& c) {
      verdicts[size_t(c.rank())] = all_ranks_ok(c, c.rank() != failing);
    }));
    for (int v : verdicts) EXPECT_EQ(v, failing < 0 ? 1 : 0) << "failing rank " << failing;
  }
}

// Back-to-back collectives of varying kinds and sizes (n = 0 and 1 included) on reused buffers:
// a rank that overwrote its buffer or slot while another still read it would show up as a wrong
// value. Values are small integers, so every sum is exact.
TEST(Communicator, ManyConsecutiveCollectives) {
  constexpr int kSteps = 1000;
  constexpr size_t kSizes[] = {0, 1, 2, 3, 17, 64, 1, 0, 255, 1000};
  auto value = [](int step, int rank, size_t i) { return float((step * 7 + rank * 13 + int(i)) % 101); };
  for (int ranks = 1; ranks <= 4; ++ranks) {
    std::vector<int> wrong(static_cast<size_t>(ranks), 0);
    expect_no_errors(run_ranks(ranks, [&](Communicator& c) {
      const int me = c.rank(), p = c.size();
      std::vector<float> data, out;
      for (int step = 0; step < kSteps; ++step) {
        const size_t n = kSizes[size_t(step) % std::size(kSizes)];
        data.resize(n);
        for (size_t i = 0; i < n; ++i) data[i] = value(step, me, i);
        switch (step % 3) {
          case 0:
            c.all_reduce_sum(data.data(), n);
            for (size_t i = 0; i < n; ++i) {
              float want = 0;
              for (int r = 0; r < p; ++r) want += value(step, r, i);
              wrong[size_t(me)] += data[i] != want;
            }
            break;
          case 1:
            out.assign(size_t(p) * n, -1.0f);
            c.all_gather(data.data(), out.data(), n);
            for (int r = 0; r < p; ++r)
              for (size_t i = 0; i < n; ++i) wrong[size_t(me)] += out[size_t(r) * n + i] != value(step, r, i);
            break;
          case 2: {
            const int root = step % p;
            c.broadcast(data.data(), n, root);
            for (size_t i = 0; i < n; ++i) wrong[size_t(me)] += data[i] != value(step, root, i);
            break;
          }
        }
      }
    }));
    for (int r = 0; r < ranks; ++r) EXPECT_EQ(wrong[size_t(r)], 0) << ranks << " ranks, rank " << r;
  }
}

// Every rank gets the same error, nobody hangs, and the group works afterwards.
void expect_same_error_then_usable(int ranks, const std::function<void(Communicator&)>& bad,
                                   const std::string& needle) {
  std::vector<float> after(static_cast<size_t>(ranks), -1.0f);
  const std::vector<std::string> errors = run_ranks(ranks, [&](Communicator& c) {
    try {
      bad(c);
    } catch (const Error&) {
      float one = 1.0f;
      c.all_reduce_sum(&one, 1);
      after[size_t(c.rank())] = one;
      throw;
    }
  });
  ASSERT_EQ(errors.size(), size_t(ranks));
  for (int r = 0; r < ranks; ++r) {
    EXPECT_NE(errors[size_t(r)].find(needle), std::string::npos)
        << "rank " << r << ": \"" << errors[size_t(r)] << "\"";
    EXPECT_EQ(errors[size_t(r)], errors[0]) << "rank " << r;
    EXPECT_EQ(after[size_t(r)], float(ranks)) << "rank " << r;
  }
}

TEST(Communicator, MismatchedSizesThrowOnEveryRank) {
  for (int ranks = 2; ranks <= 4; ++ranks) {
    for (int odd = 0; odd < ranks; ++odd) {
      SCOPED_TRACE(testing::Message() << ranks << " ranks, rank " << odd << " differs");
      const size_t n_odd = odd == 0 ? 3 : 7;  // the other ranks pass 5
      auto n_of = [&](const Communicator& c) { return c.rank() == odd ? n_odd : size_t(5); };
      expect_same_error_then_usable(
          ranks, [&](Communicator& c) {
            std::vector<float> data(8, 1.0f);
            c.all_reduce_sum(data.data(), n_of(c));
          },
          "all_reduce_sum(n=");
      expect_same_error_then_usable(
          ranks, [&](Communicator& c) {
            std::vector<float> in(8, 1.0f), out(8 * size_t(c.size()));
            c.all_gather(in.data(), out.data(), n_of(c));
          },
          "all_gather(n=");
      expect_same_error_then_usable(
          ranks, [&](Communicator& c) {
            std::vector<float> data(8, 1.0f);
            c.broadcast(data.data(), n_of(c), 0);
          },
          "broadcast(n=");
    }
  }
}

TEST(Communicator, MismatchedCollectiveOrRootThrowsOnEveryRank) {
  for (int ranks = 2; ranks <= 4; ++ranks) {
    SCOPED_TRACE(testing::Message() << ranks << " ranks");
    expect_same_error_then_usable(
        ranks, [](Communicator& c) {
          std::vector<float> data(4, 1.0f), out(4 * size_t(c.size()));
          if (c.rank() == c.size() - 1) {
            c.all_gather(data.data(), out.data(), 4);
          } else {
            c.all_reduce_sum(data.data(), 4);
          }
        },
        "rank " + std::to_string(ranks - 1) + " called all_gather(n=4) but rank 0 called "
            "all_reduce_sum(n=4)");
    expect_same_error_then_usable(
        ranks, [](Communicator& c) {
          std::vector<float> data(4, 1.0f);
          c.broadcast(data.data(), 4, c.rank() == 1 ? 1 : 0);
        },
        "rank 1 called broadcast(n=4, root=1) but rank 0 called broadcast(n=4, root=0)");
  }
}

TEST(Communicator, BroadcastRootOutsideGroupThrows) {
  for (int ranks = 1; ranks <= 4; ++ranks) {
    for (int root : {-1, ranks}) {
      SCOPED_TRACE(testing::Message() << ranks << " ranks, root " << root);
      expect_same_error_then_usable(
          ranks, [root](Communicator& c) {
            std::vector<float> data(4, 1.0f);
            c.broadcast(data.data(), 4, root);
          },
          "broadcast root " + std::to_string(root) + " is not a rank");
    }
  }
}

}  // namespace
}  // namespace lmx
