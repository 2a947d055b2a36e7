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
#include "../CLazyLibrary/lazy_library.h"

/* The avahi functions PartyCast calls. They are resolved when mDNS is first used, not at start-up:
   a listener told its broadcaster's address never maps avahi's, D-Bus's and systemd's libraries
   (1 MB of its resident set). */
#define PARTYCAST_AVAHI_FUNCTIONS(F) \
    F(avahi_address_snprint) \
    F(avahi_alternative_service_name) \
    F(avahi_client_errno) \
    F(avahi_client_free) \
    F(avahi_client_new) \
    F(avahi_elapse_time) \
    F(avahi_entry_group_add_service_strlst) \
    F(avahi_entry_group_commit) \
    F(avahi_entry_group_free) \
    F(avahi_entry_group_is_empty) \
    F(avahi_entry_group_new) \
    F(avahi_entry_group_reset) \
    F(avahi_entry_group_update_service_txt_strlst) \
    F(avahi_free) \
    F(avahi_service_browser_free) \
    F(avahi_service_browser_get_client) \
    F(avahi_service_browser_new) \
    F(avahi_service_resolver_free) \
    F(avahi_service_resolver_new) \
    F(avahi_strerror) \
    F(avahi_string_list_add_pair) \
    F(avahi_string_list_free) \
    F(avahi_string_list_get_next) \
    F(avahi_string_list_get_pair) \
    F(avahi_threaded_poll_free) \
    F(avahi_threaded_poll_get) \
    F(avahi_threaded_poll_lock) \
    F(avahi_threaded_poll_new) \
    F(avahi_threaded_poll_start) \
    F(avahi_threaded_poll_stop) \
    F(avahi_threaded_poll_unlock)

PARTYCAST_LAZY_LIBRARY(PartyCastAvahiFunctions, partycast_avahi_open, "libavahi-client.so.3", PARTYCAST_AVAHI_FUNCTIONS)

/* AvahiPoll's timeouts are function pointers taking an absolute time; these take a delay in
   milliseconds instead (a negative delay disarms the timeout). */
static inline struct timeval *partycast_avahi_delay(const PartyCastAvahiFunctions *avahi, struct timeval *tv, int msec) {
    return msec < 0 ? NULL : avahi->avahi_elapse_time(tv, (unsigned) msec, 0);
}

static inline AvahiTimeout *partycast_avahi_timeout_new(const PartyCastAvahiFunctions *avahi, const AvahiPoll *api, int msec, AvahiTimeoutCallback callback, void *userdata) {
    struct timeval tv;
    return api->timeout_new(api, partycast_avahi_delay(avahi, &tv, msec), callback, userdata);
}

static inline void partycast_avahi_timeout_update(const PartyCastAvahiFunctions *avahi, const AvahiPoll *api, AvahiTimeout *timeout, int msec) {
    struct timeval tv;
    api->timeout_update(timeout, partycast_avahi_delay(avahi, &tv, msec));
}

static inline void partycast_avahi_timeout_free(const AvahiPoll *api, AvahiTimeout *timeout) {
    api->timeout_free(timeout);
}
#endif
