#ifndef PARTYCAST_CFLAC_SHIM_H
#define PARTYCAST_CFLAC_SHIM_H
#include <FLAC/stream_decoder.h>
#include "../CLazyLibrary/lazy_library.h"

/* The libFLAC functions PartyCast calls, resolved at their first use rather than at start-up:
   only a FLAC file maps libFLAC. */
#define PARTYCAST_FLAC_FUNCTIONS(F) \
    F(FLAC__stream_decoder_new) \
    F(FLAC__stream_decoder_delete) \
    F(FLAC__stream_decoder_set_metadata_respond) \
    F(FLAC__stream_decoder_set_md5_checking) \
    F(FLAC__stream_decoder_init_stream) \
    F(FLAC__stream_decoder_process_until_end_of_metadata) \
    F(FLAC__stream_decoder_get_state) \
    F(FLAC__stream_decoder_process_single) \
    F(FLAC__stream_decoder_seek_absolute) \
    F(FLAC__stream_decoder_flush) \
    F(FLAC__stream_decoder_get_resolved_state_string)

PARTYCAST_LAZY_LIBRARY(PartyCastFLACFunctions, partycast_flac_open, "libFLAC.so.12", PARTYCAST_FLAC_FUNCTIONS)

#endif
