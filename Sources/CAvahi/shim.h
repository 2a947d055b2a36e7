#ifndef PARTYCAST_CAVAHI_SHIM_H
#define PARTYCAST_CAVAHI_SHIM_H
#include <avahi-client/client.h>
#include <avahi-client/lookup.h>
#include <avahi-client/publish.h>
#include <avahi-common/error.h>
#include <avahi-common/malloc.h>
#include <avahi-common/strlst.h>
#include <avahi-common/thread-watch.h>
#include <avahi-common/alternative.h>
#include <avahi-common/timeval.h>
#include <stddef.h>

/* AvahiPoll's timeouts are function pointers taking an absolute time; these take a delay in
   milliseconds instead (a negative delay disarms the timeout). */
static inline struct timeval *partycast_avahi_delay(struct timeval *tv, int msec) {
    return msec < 0 ? NULL : avahi_elapse_time(tv, (unsigned) msec, 0);
}

static inline AvahiTimeout *partycast_avahi_timeout_new(const AvahiPoll *api, int msec, AvahiTimeoutCallback callback, void *userdata) {
    struct timeval tv;
    return api->timeout_new(api, partycast_avahi_delay(&tv, msec), callback, userdata);
}

static inline void partycast_avahi_timeout_update(const AvahiPoll *api, AvahiTimeout *timeout, int msec) {
    struct timeval tv;
    api->timeout_update(timeout, partycast_avahi_delay(&tv, msec));
}

static inline void partycast_avahi_timeout_free(const AvahiPoll *api, AvahiTimeout *timeout) {
    api->timeout_free(timeout);
}
#endif
