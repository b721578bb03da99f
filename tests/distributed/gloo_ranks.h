// Data-parallel test helpers: a free loopback port, and ranks run as threads of this process,
// each with its own Gloo process group, exactly as separate processes would talk.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "train/distributed/distributed.h"

namespace monoflow::train::testing {

// A port no other process listens on now: the kernel's pick for a socket bound to port 0.
// (Ports made from the pid collided when ctest ran two such tests at once: neighbouring pids
// plus different offsets gave the same port.)
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t size = sizeof address;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(fd);
  return port;
}

// Runs body(rank, group) on `world` threads, each rank with its own Gloo group on a free
// port, and fails the test (fatally) with any rank's exception.
template <class Body>
void run_gloo_ranks(int world, Body body) {
  const int port = free_port();
  std::vector<std::string> failures(world);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        DistributedOptions o;
        o.rank = rank;
        o.world_size = world;
        o.master_port = port;
        o.backend = "gloo";
        Distributed group(o, torch::kCPU);
        body(rank, group);
      } catch (const std::exception& e) {
        failures[rank] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) ASSERT_EQ(failures[r], "") << "rank " << r;
}

}  // namespace monoflow::train::testing
