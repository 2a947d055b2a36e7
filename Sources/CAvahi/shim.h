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
#endif
