#include "partycast_socket.h"

#include <string.h>
#include <sys/uio.h>

int partycast_enable_receive_timestamps(int fd) {
    int on = 1;
    return setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on);
}

ssize_t partycast_receive_stamped(int fd, void *buffer, size_t capacity, struct sockaddr_storage *from,
                                  socklen_t *from_length, struct timespec *arrival) {
    union {
        struct cmsghdr align;
        char bytes[CMSG_SPACE(sizeof(struct timespec))];
    } control;
    struct iovec vector = { .iov_base = buffer, .iov_len = capacity };
    struct msghdr message = {
        .msg_name = from, .msg_namelen = sizeof *from,
        .msg_iov = &vector, .msg_iovlen = 1,
        .msg_control = control.bytes, .msg_controllen = sizeof control.bytes,
    };
    ssize_t count = recvmsg(fd, &message, MSG_DONTWAIT | MSG_TRUNC);
    if (count < 0) return count;
    *from_length = message.msg_namelen;
    arrival->tv_sec = 0;
    arrival->tv_nsec = 0;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header != NULL; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level == SOL_SOCKET && header->cmsg_type == SCM_TIMESTAMPNS
            && header->cmsg_len >= CMSG_LEN(sizeof(struct timespec))) {
            memcpy(arrival, CMSG_DATA(header), sizeof *arrival);
        }
    }
    return count;
}
