#ifndef PARTYCAST_CMPDCLIENT_SHIM_H
#define PARTYCAST_CMPDCLIENT_SHIM_H
#include <mpd/client.h>
#endif
