#ifndef PARTYCAST_SOCKET_H
#define PARTYCAST_SOCKET_H

#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

// Control messages are walked with the C library's own macros (CMSG_FIRSTHDR, CMSG_NXTHDR,
// CMSG_DATA) and SO_TIMESTAMPNS taken from its headers: Swift imports neither the macros nor the
// __TIMESIZE conditional that defines the option.

/// Asks the kernel to stamp each datagram's arrival (SO_TIMESTAMPNS, CLOCK_REALTIME). setsockopt's result.
int partycast_enable_receive_timestamps(int fd);

/// Reads one datagram without blocking, MSG_TRUNC: a longer one comes back cut, with its whole
/// length as the result. Its sender goes to *from and *from_length, its kernel arrival time to
/// *arrival ({0, 0} when none came with it). recvmsg's result, -1 with errno set on failure.
ssize_t partycast_receive_stamped(int fd, void *buffer, size_t capacity, struct sockaddr_storage *from,
                                  socklen_t *from_length, struct timespec *arrival);

#endif
