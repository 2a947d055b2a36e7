// What partycast-netem needs from C that Swift cannot call: ioctl and prctl are variadic, and the
// signal-set macros are easier here. Header-only (static inline), so no library to build.
#ifndef PARTYCAST_CTUN_SHIM_H
#define PARTYCAST_CTUN_SHIM_H

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

/// Opens /dev/net/tun and attaches a TUN device NAME (IP packets, no packet-info header) in the
/// calling thread's network namespace; non-blocking and close-on-exec. The device exists as long as
/// the descriptor is open. Returns the descriptor, or -errno.
static inline int pcnetem_tun_open(const char *name) {
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct ifreq request;
    memset(&request, 0, sizeof request);
    request.ifr_flags = IFF_TUN | IFF_NO_PI;
    strncpy(request.ifr_name, name, IFNAMSIZ - 1);
    if (ioctl(fd, TUNSETIFF, &request) < 0) {
        int error = errno;
        close(fd);
        return -error;
    }
    return fd;
}

/// Blocks SIGINT and SIGTERM and returns a non-blocking signalfd that reads them (or -errno), so the
/// poll loop sees a stop request as one more readable descriptor: no handler, no shared flag.
static inline int pcnetem_stop_signals_fd(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0) return -errno;
    int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

// setns(2) and ppoll(2) are declared by glibc only under _GNU_SOURCE, which this header cannot turn on for a
// module already imported; these declarations are glibc's own, the flag stable kernel ABI.
extern int setns(int fd, int nstype);
#define PCNETEM_CLONE_NEWNET 0x40000000

extern int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout, const sigset_t *sigmask);

/// poll(2) with a timeout in nanoseconds (poll's is in milliseconds: too coarse for hold times).
static inline int pcnetem_poll_ns(struct pollfd *fds, unsigned long count, long long timeout_ns) {
    struct timespec timeout = { .tv_sec = timeout_ns / 1000000000LL, .tv_nsec = timeout_ns % 1000000000LL };
    return ppoll(fds, (nfds_t)count, &timeout, NULL) < 0 ? -errno : 0;
}

/// Moves the calling thread into the network namespace FD refers to; 0, or -errno.
static inline int pcnetem_enter_netns(int fd) { return setns(fd, PCNETEM_CLONE_NEWNET) < 0 ? -errno : 0; }

/// 1 µs timer slack for this thread (default 50 µs): packet hold times are meant to the microsecond.
static inline int pcnetem_tight_timer_slack(void) { return prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL); }

#endif
