#ifndef PARTYCAST_CVORBISFILE_SHIM_H
#define PARTYCAST_CVORBISFILE_SHIM_H
// The header's static stdio callback tables would be unused copies in every importer.
#define OV_EXCLUDE_STATIC_CALLBACKS
#include <vorbis/vorbisfile.h>
#include "../CLazyLibrary/lazy_library.h"

/* The libvorbisfile functions PartyCast calls, resolved at their first use rather than at start-up:
   only an Ogg Vorbis stream maps libvorbisfile, libvorbis and libogg. */
#define PARTYCAST_VORBISFILE_FUNCTIONS(F) \
    F(ov_clear) \
    F(ov_open_callbacks) \
    F(ov_info) \
    F(ov_seekable) \
    F(ov_pcm_total) \
    F(ov_comment) \
    F(ov_read_float) \
    F(ov_pcm_seek)

PARTYCAST_LAZY_LIBRARY(PartyCastVorbisFileFunctions, partycast_vorbisfile_open, "libvorbisfile.so.3", PARTYCAST_VORBISFILE_FUNCTIONS)

#endif
