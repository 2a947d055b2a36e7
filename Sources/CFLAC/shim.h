#ifndef PARTYCAST_CFLAC_SHIM_H
#define PARTYCAST_CFLAC_SHIM_H
#include <FLAC/stream_decoder.h>
#endif
