// The TCP sockets of this process, found through /proc/self/fd, for tests that check an option of a connection
// that the code under test opened itself (a server's accepted socket, a pooled client connection), where the
// code gives no handle to it.
// Thread safety: reentrant functions; a socket found may be closed by its owner at any time after.
#pragma once

#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace datavo::test {

// The local port of a bound IPv4 or IPv6 socket, 0 when it has none.
inline std::uint16_t port_of(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(address).sin_port);
  if (address.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(address).sin6_port);
  return 0;
}

// The descriptors of this process's connected TCP sockets whose local port is `local_port` and whose peer's port
// is `peer_port`.
inline std::vector<int> tcp_sockets(std::uint16_t local_port, std::uint16_t peer_port) {
  std::vector<int> found;
  DIR* fds = ::opendir("/proc/self/fd");
  if (fds == nullptr) return found;
  while (const dirent* entry = ::readdir(fds)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == ::dirfd(fds)) continue;
    struct stat st {};
    if (::fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t local_size = sizeof local, peer_size = sizeof peer;
    if (::getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &local_size) != 0 ||
        ::getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &peer_size) != 0)
      continue;
    if (port_of(local) == local_port && port_of(peer) == peer_port) found.push_back(static_cast<int>(fd));
  }
  ::closedir(fds);
  return found;
}

// Whether TCP_NODELAY is set on `fd`.
inline bool tcp_nodelay(int fd) {
  int value = 0;
  socklen_t size = sizeof value;
  return ::getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &value, &size) == 0 && value != 0;
}

}  // namespace datavo::test
